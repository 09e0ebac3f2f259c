import os
import signal
import unittest
from typing import Any, cast

from forkbox_guest import kernels
from forkbox_guest.kernels import Cell, Context, KernelProcess
from forkbox_guest.wire import T_JSON, T_STDOUT

from .fakes import PipeWire, fake_guest


class PipeLoop:
    """The loop's view of a kernel's pipes: one stdout pipe the loop has not read yet."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.execs: dict[int, object] = {}

    def pipes_of(self, owner: object) -> list[tuple[int, Any]]:
        return [] if self.r < 0 else [(self.r, T_STDOUT)]

    def close_pipe(self, owner: object, fd: int) -> None:
        os.close(fd)
        self.r = -1

    def add_timer(self, deadline: float, ex: object) -> None:
        pass

    def close(self) -> None:
        if self.r >= 0:
            os.close(self.r)
        os.close(self.w)


class CellEndTest(unittest.TestCase):
    """A cell's last output can still sit in the kernel's pipe when its end arrives on the message
    pipe (bash's `echo` goes to the shell's stdout, its status to another fd): it belongs to the cell."""

    def setUp(self) -> None:
        self.wire = PipeWire()
        self.loop = PipeLoop()
        self.addCleanup(self.wire.close)
        self.addCleanup(self.loop.close)
        guest = fake_guest(self.wire, loop=cast(Any, self.loop))
        self.ctx = Context(guest, "bash", "bash", None, "user", {})
        self.proc = KernelProcess(self.ctx)
        self.proc.pid = 99
        self.proc.ready = True
        self.ctx.proc = self.proc
        self.ctx.cell = Cell(guest, 7, {"op": "run", "code": "echo from bash"})
        os.write(self.loop.w, b"from bash\n")

    def test_done_sends_the_unread_output_before_the_result(self) -> None:
        self.ctx.on_message(self.proc, {"t": "done", "count": 1})
        frames = self.wire.frames()
        self.assertEqual([f[:2] for f in frames], [(T_STDOUT, 7), (T_JSON, 7)])
        self.assertEqual(frames[0][2], b"from bash\n")
        self.assertEqual(frames[1][2]["value"]["executionCount"], 1)
        self.assertIsNone(self.ctx.cell)

    def test_a_dead_kernel_s_last_words_reach_the_cell_before_its_error(self) -> None:
        killed: list[tuple[int | None, int]] = []
        original = kernels.killpg
        kernels.killpg = lambda pid, sig: killed.append((pid, sig))  # type: ignore[assignment]
        self.addCleanup(setattr, kernels, "killpg", original)
        self.proc.on_exit(signal.SIGKILL)  # a wait status: killed by SIGKILL
        frames = self.wire.frames()
        self.assertEqual([f[:2] for f in frames], [(T_STDOUT, 7), (T_JSON, 7)])
        self.assertEqual(frames[0][2], b"from bash\n")
        self.assertEqual(frames[1][2]["value"]["error"]["name"], "KernelDiedError")
        self.assertEqual(killed, [(99, signal.SIGKILL)])


if __name__ == "__main__":
    unittest.main()
