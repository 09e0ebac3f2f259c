import os
import signal
import unittest
from unittest import mock

from forkbox_guest import dispatch
from forkbox_guest.execs import Exec
from forkbox_guest.wire import T_JSON

from .fakes import PipeWire, fake_guest


class ResyncTest(unittest.TestCase):
    def test_it_drops_what_the_old_agent_left_and_names_the_next_channel(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        g = fake_guest(wire)
        dispatch.dispatch(g, T_JSON, 41, b'{"op":"nope"}')
        wire.frames()
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        os.write(w, b"half a frame the old agent left")
        buf = bytearray(b"\x00\x00")
        dispatch.resync(g, buf, r)
        self.assertEqual(buf, b"")
        os.set_blocking(r, False)
        with self.assertRaises(BlockingIOError):
            os.read(r, 10)
        self.assertEqual(wire.frames(), [(T_JSON, 0, {"type": "resynced", "nextChannel": 42, "version": dispatch.VERSION})])

    def test_the_old_agents_commands_are_killed_and_forgotten(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        g = fake_guest(wire)
        old, kept = Exec(g, 3, {"op": "exec"}), Exec(g, 4, {"op": "exec"})
        g.execs.update({3: old, 4: kept})
        with mock.patch.object(Exec, "kill") as kill:
            dispatch.forget_requests(g, keep=4)
        kill.assert_called_once_with(signal.SIGKILL)
        self.assertEqual(list(g.execs), [4])

    def test_a_restored_configure_answers_past_every_channel_seen(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        g = fake_guest(wire)
        dispatch.dispatch(g, T_JSON, 7, b'{"op":"configure","env":{"A":"1"},"restored":true}')
        self.assertEqual(wire.frames(), [(T_JSON, 7, {"type": "result", "value": {"nextChannel": 8}})])
        self.assertEqual(g.default_env, {"A": "1"})

    def test_a_malformed_request_is_answered(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        g = fake_guest(wire)
        dispatch.dispatch(g, T_JSON, 2, b"{nope")
        dispatch.dispatch(g, T_JSON, 3, b'{"op":"configure","env":{"A=":"1"}}')
        codes = [f[2]["code"] for f in wire.frames()]
        self.assertEqual(codes, ["VALIDATION_FAILED", "VALIDATION_FAILED"])


if __name__ == "__main__":
    unittest.main()
