import os
import selectors
import unittest
from typing import Any, cast

from forkbox_guest import procs
from forkbox_guest.execs import Exec
from forkbox_guest.exits import exit_message
from forkbox_guest.ioloop import IOLoop
from forkbox_guest.wire import T_JSON, T_STDERR, T_STDOUT

from .fakes import InlineLoop, PipeWire, fake_guest


class OutputLogTest(unittest.TestCase):
    def test_offsets_count_both_streams(self) -> None:
        log = procs.OutputLog(cap=100)
        log.append(T_STDOUT, b"abc")
        log.append(T_STDERR, b"de")
        self.assertEqual((log.start, log.end), (0, 5))
        self.assertEqual(log.since(0), [(T_STDOUT, b"abc"), (T_STDERR, b"de")])
        self.assertEqual(log.since(2), [(T_STDOUT, b"c"), (T_STDERR, b"de")])
        self.assertEqual(log.since(5), [])

    def test_the_ring_drops_whole_old_chunks_past_its_cap(self) -> None:
        log = procs.OutputLog(cap=10)
        for _ in range(4):
            log.append(T_STDOUT, b"1234")
        # 16 bytes written, at most 10 kept: the first two chunks went
        self.assertEqual((log.start, log.end), (8, 16))
        self.assertEqual(log.since(0), [(T_STDOUT, b"1234"), (T_STDOUT, b"1234")])

    def test_the_last_chunk_stays_even_over_the_cap(self) -> None:
        log = procs.OutputLog(cap=4)
        log.append(T_STDOUT, b"0123456789")
        self.assertEqual((log.start, log.end), (0, 10))

    def test_default_cap(self) -> None:
        self.assertEqual(procs.OutputLog().cap, 4 * 1024 * 1024)


def background(channel: int = 5) -> Exec:
    wire = PipeWire()
    g = fake_guest(wire)
    ex = Exec(g, channel, {"op": "exec", "cmd": "x", "background": True})
    ex.pid = 42
    g.procs[42] = ex
    return ex


class FeedTest(unittest.TestCase):
    def wire(self, ex: Exec) -> PipeWire:
        wire = cast(PipeWire, ex.guest.wire)
        self.addCleanup(wire.close)
        return wire

    def test_a_reader_behind_the_log_start_gets_a_gap_then_what_is_left(self) -> None:
        ex = background()
        wire = self.wire(ex)
        log = ex.ensure_log()
        log.cap = 6
        for chunk in (b"aaaa", b"bbbb", b"cccc"):
            log.append(T_STDOUT, chunk)
        sub = procs.Subscriber(9, 0, 1 << 20, True)
        procs.feed(ex.guest, ex, log, sub)
        self.assertEqual(wire.frames(), [(T_JSON, 9, {"type": "gap", "bytes": 8}), (T_STDOUT, 9, b"cccc")])
        self.assertEqual(sub.offset, 12)

    def test_the_window_holds_output_back_until_acked(self) -> None:
        ex = background()
        wire = self.wire(ex)
        g = ex.guest
        procs.op_proc_attach(g, 9, {"op": "proc_attach", "pid": 42, "window": 3})
        procs.proc_output(g, ex, T_STDOUT, b"hello")
        self.assertEqual(
            wire.frames(),
            [(T_JSON, 9, {"type": "attached", "pid": 42, "start": 0, "end": 0}), (T_STDOUT, 9, b"hel")],
        )
        procs.op_proc_ack(g, 9, {"op": "proc_ack", "bytes": 3})
        self.assertEqual(wire.frames(), [(T_STDOUT, 9, b"lo")])

    def test_the_exit_follows_the_last_byte_with_its_offset(self) -> None:
        ex = background()
        wire = self.wire(ex)
        g = ex.guest
        procs.proc_output(g, ex, T_STDOUT, b"done")
        ex.finished = True
        ex.exit_msg = exit_message(0, False, False, 0.5)
        procs.op_proc_attach(g, 9, {"op": "proc_attach", "pid": 42, "output": False})
        frames = wire.frames()
        self.assertEqual(frames[0], (T_JSON, 9, {"type": "attached", "pid": 42, "start": 0, "end": 4}))
        self.assertEqual(frames[1][2], {**ex.exit_msg, "offset": 4})
        self.assertNotIn(9, g.subs)

    def test_an_unknown_pid_is_answered(self) -> None:
        ex = background()
        wire = self.wire(ex)
        procs.op_proc_attach(ex.guest, 9, {"op": "proc_attach", "pid": 7})
        self.assertEqual(wire.frames()[0][2]["code"], "PROCESS_NOT_FOUND")

    def test_describe(self) -> None:
        ex = background()
        self.wire(ex)
        ex.describe_cmd = "sleep 1"
        info: dict[str, Any] = dict(procs.describe_proc(ex))
        self.assertEqual(info["pid"], 42)
        self.assertTrue(info["running"])
        self.assertEqual(info["outputBytes"], 0)


class SelectorLoop(InlineLoop):
    """A loop with a real selector, for pausing and resuming a process's pipes."""

    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()

    pipes_of = IOLoop.pipes_of


class PaceTest(unittest.TestCase):
    # in small units, so that the frames fit the test's wire (a pipe)
    MB = 16 * 1024

    def setUp(self) -> None:
        hold = procs.HOLD_BYTES
        procs.HOLD_BYTES = 2 * self.MB
        self.addCleanup(setattr, procs, "HOLD_BYTES", hold)
        self.ex = background()
        self.ex.ensure_log().cap = 4 * self.MB
        self.addCleanup(cast(PipeWire, self.ex.guest.wire).close)
        loop = SelectorLoop()
        self.ex.guest.loop = cast(Any, loop)
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        loop.sel.register(r, selectors.EVENT_READ, (self.ex, T_STDOUT))
        self.loop = loop

    def reading(self) -> bool:
        return bool(self.loop.pipes_of(self.ex))

    def output(self, mb: int) -> None:
        for _ in range(mb):
            procs.proc_output(self.ex.guest, self.ex, T_STDOUT, b"x" * self.MB)
            cast(PipeWire, self.ex.guest.wire).frames()

    def test_an_attached_reader_far_behind_holds_the_process_back_until_it_catches_up(self) -> None:
        g = self.ex.guest
        procs.op_proc_attach(g, 9, {"op": "proc_attach", "pid": 42, "window": self.MB})
        self.output(1)
        self.assertTrue(self.reading())
        # one window sent and not acked, two more in the log: the process waits
        self.output(2)
        self.assertFalse(self.reading())
        procs.op_proc_ack(g, 9, {"op": "proc_ack", "bytes": self.MB})
        self.assertFalse(self.reading(), "still a window behind")
        procs.op_proc_ack(g, 9, {"op": "proc_ack", "bytes": self.MB})
        self.assertTrue(self.reading())
        # nothing was dropped: the log kept all it had not sent
        self.assertEqual(self.ex.ensure_log().start, 0)

    def test_a_reader_that_detaches_lets_the_process_go_on(self) -> None:
        g = self.ex.guest
        procs.op_proc_attach(g, 9, {"op": "proc_attach", "pid": 42, "window": self.MB})
        self.output(3)
        self.assertFalse(self.reading())
        procs.op_proc_detach(g, 9, {"op": "proc_detach"})
        self.assertTrue(self.reading())

    def test_with_no_one_attached_the_process_never_waits(self) -> None:
        self.output(10)
        self.assertTrue(self.reading())
        # the log kept its last 4 MiB; a reader from the start is told what it missed
        procs.op_proc_attach(self.ex.guest, 9, {"op": "proc_attach", "pid": 42, "window": self.MB})
        gap = cast(PipeWire, self.ex.guest.wire).frames()[1]
        self.assertEqual(gap, (T_JSON, 9, {"type": "gap", "bytes": 6 * self.MB}))


class ExitMessageTest(unittest.TestCase):
    def test_exit_code_and_signal(self) -> None:
        self.assertEqual(exit_message(3 << 8, False, False, 0.001)["exitCode"], 3)
        killed = exit_message(9, True, False, 1.0)
        self.assertEqual((killed["exitCode"], killed["signal"], killed["timedOut"]), (137, "SIGKILL", True))
        self.assertEqual(killed["durationMs"], 1000.0)


if __name__ == "__main__":
    unittest.main()
