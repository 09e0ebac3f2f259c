"""The wire to the agent: 9-byte frame headers, and the one writer of our stdout.

Both directions: u32 BE payload length | u8 frame type | u32 BE channel, then the payload.
Frame types: 1 JSON message, 2 stdout bytes, 3 stderr bytes, 4 stdin bytes, 5 file bytes.
An empty stdin or file frame means end of that stream. Channel 0 carries daemon-level events.
The agent opens a channel per request; every request ends with exactly one terminal JSON
message on its channel: {"type": "result"|"exit"|"error", ...}.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Mapping

HEADER = struct.Struct(">IBI")
T_JSON, T_STDOUT, T_STDERR, T_STDIN, T_FILE = 1, 2, 3, 4, 5
# what one read of our stdin asks for, and the chunk size of streamed files
CHUNK = 256 * 1024
MAX_FRAME = 16 * 1024 * 1024


def encode_frame(ftype: int, channel: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload), ftype, channel) + payload


def decode_header(buf: bytes | bytearray) -> tuple[int, int, int]:
    """(payload length, frame type, channel) of the header at the start of `buf`."""
    length, ftype, channel = HEADER.unpack_from(buf)
    return length, ftype, channel


def encode_json(msg: Mapping[str, object]) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode()


class Wire:
    """Frames to the agent; safe from any thread (a frame is written whole, never interleaved)."""

    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, ftype: int, channel: int, payload: bytes = b"") -> None:
        frame = encode_frame(ftype, channel, payload)
        with self._lock:
            view = memoryview(frame)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]

    def send_json(self, channel: int, msg: Mapping[str, object]) -> None:
        self.send(T_JSON, channel, encode_json(msg))

    def send_error(self, channel: int, code: str, message: str) -> None:
        self.send_json(channel, {"type": "error", "code": code, "message": message})
