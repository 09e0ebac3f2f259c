import unittest

from forkbox_guest.wire import HEADER, MAX_FRAME, T_FILE, T_JSON, T_STDOUT, decode_header, encode_frame

from .fakes import PipeWire


class FramingTest(unittest.TestCase):
    def test_header_is_length_type_channel_big_endian(self) -> None:
        frame = encode_frame(T_STDOUT, 0x01020304, b"hey")
        self.assertEqual(HEADER.size, 9)
        self.assertEqual(frame[:9], b"\x00\x00\x00\x03\x02\x01\x02\x03\x04")
        self.assertEqual(decode_header(frame), (3, T_STDOUT, 0x01020304))
        self.assertEqual(frame[9:], b"hey")

    def test_empty_frame_ends_a_stream(self) -> None:
        self.assertEqual(decode_header(encode_frame(T_FILE, 7)), (0, T_FILE, 7))

    def test_max_frame_fits_the_header_and_matches_the_agent(self) -> None:
        self.assertEqual(MAX_FRAME, 16 * 1024 * 1024)
        length, _, _ = decode_header(HEADER.pack(MAX_FRAME + 1, T_JSON, 1))
        self.assertGreater(length, MAX_FRAME)

    def test_wire_sends_whole_json_frames(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        wire.send_json(3, {"type": "started", "pid": 9})
        wire.send_error(4, "FILE_NOT_FOUND", "gone")
        wire.send(T_STDOUT, 3, b"out")
        self.assertEqual(
            wire.frames(),
            [
                (T_JSON, 3, {"type": "started", "pid": 9}),
                (T_JSON, 4, {"type": "error", "code": "FILE_NOT_FOUND", "message": "gone"}),
                (T_STDOUT, 3, b"out"),
            ],
        )


if __name__ == "__main__":
    unittest.main()
