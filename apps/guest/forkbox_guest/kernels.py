"""Code kernels: one long-lived interpreter per code context, running its cells one at a time.

A code context is a long-lived interpreter (forkbox_kernel.py, forkbox_kernel.cjs) started on
first use; its cells run one at a time in arrival order. All context state lives on the loop thread.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from collections.abc import Callable

from .exits import signal_name
from .ioloop import cap_output
from .spawn import killpg
from .users import DEFAULT_CWD, DEFAULT_PATH
from .wire import T_STDERR, T_STDOUT
from .zygote import ZYGOTE_ENV, ZYGOTE_FD, Zygote

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any, Union

    from .errors import Request
    from .ioloop import PipeTag, Stream
    from .messages import CellError, ContextInfo
    from .spawn import Fds
    from .state import Guest

    # what a context's kernel works on: a cell, or a configure request of its own
    Item = Union["Cell", dict[str, Any]]

# the kernels sit beside this package
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL_SCRIPT = os.path.join(_HERE, "forkbox_kernel.py")
KERNEL_JS = os.path.join(_HERE, "forkbox_kernel.cjs")
NODE = "/usr/bin/node"
PYTHON = "/usr/bin/python3"
LANGUAGES = ("python", "bash", "javascript", "typescript")
# the languages the Node.js kernel runs (TypeScript: transpiled by the image's `typescript` module)
NODE_LANGUAGES = ("javascript", "typescript")
# how new Python contexts get a zygote to be forked from (the template's `kernel.zygote`): the
# first one a user creates brings it (lazy), the default kernel does at bake (baked), or none (off)
ZYGOTE_MODE = os.environ.get("FORKBOX_CONTEXT_ZYGOTE") or "lazy"
# how long an interrupted cell may take to unwind before its kernel is killed
INTERRUPT_GRACE_SECONDS = 3.0


class Timer:
    def __init__(self, fn: Callable[[float], object]) -> None:
        self._fn = fn

    def on_timer(self, now: float) -> None:
        self._fn(now)


class Cell:
    def __init__(self, guest: "Guest", channel: int, req: Request) -> None:
        self.guest = guest
        # None once its caller is gone: it runs on, unheard
        self.channel: int | None = channel
        self.req = req
        self.timeout_s: float = (req.get("timeoutMs") or 0) / 1000.0
        self.max_output: int | None = int(req.get("maxOutputBytes") or 0) or None
        self.sent: dict[Stream, int] = {T_STDOUT: 0, T_STDERR: 0}
        self.truncated = False
        self.timed_out = False
        self.interrupted = False
        self.started: float | None = None

    def output(self, ftype: Stream, data: bytes) -> None:
        if self.channel is None:
            return
        capped = cap_output(self, ftype, data)
        if capped is not None:
            assert isinstance(ftype, int)
            self.guest.wire.send(ftype, self.channel, capped)

    def finish(self, count: int | None, error: CellError | None) -> None:
        if self.channel is None:
            return
        if self.timed_out:
            trace = (error or {}).get("traceback", "")
            error = {
                "name": "TimeoutError",
                "value": f"the cell ran longer than its {self.timeout_s:g}s timeout and was interrupted",
                "traceback": trace,
            }
        self.guest.wire.send_json(
            self.channel,
            {
                "type": "result",
                "value": {
                    "executionCount": count,
                    "error": error,
                    "timedOut": self.timed_out,
                    "truncated": self.truncated,
                    "durationMs": round((time.monotonic() - (self.started or time.monotonic())) * 1000, 3),
                },
            },
        )


def cell_error(error: object) -> CellError | None:
    """A cell's error as the kernel reported it, reduced to {name, value, traceback} strings."""
    if not isinstance(error, dict):
        return None
    get: Callable[[str], object] = error.get  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return {"name": str(get("name") or ""), "value": str(get("value") or ""), "traceback": str(get("traceback") or "")}


class KernelProcess:
    """One interpreter process of a context; a restart makes a new one."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.pid: int | None = None
        self.req_fd: int | None = None
        self.msg_buf = bytearray()
        self.ready = False
        self.dead = False
        self.open_pipes = 0
        self.paused_fds: dict[int, PipeTag] = {}  # never: kernels are not flow-controlled
        self.drain_close = False

    # -- called by the loop --
    def output(self, ftype: Stream, data: bytes) -> None:
        if ftype == "msg":
            self.msg_buf += data
            while True:
                nl = self.msg_buf.find(b"\n")
                if nl < 0:
                    break
                line = bytes(self.msg_buf[:nl])
                del self.msg_buf[: nl + 1]
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                self.ctx.on_message(self, msg)
        elif self.ctx.proc is self and isinstance(self.ctx.cell, Cell):
            self.ctx.cell.output(ftype, data)

    def maybe_finish(self) -> None:
        pass

    def on_exit(self, status: int) -> None:
        loop = self.ctx.guest.loop
        if self.pid is not None:
            loop.execs.pop(self.pid, None)
        self.dead = True
        self.kill(signal.SIGKILL)  # what it left in its process group goes with it
        cell = self.ctx.cell if self.ctx.proc is self else None
        if isinstance(cell, Cell):
            self.drain_output(cell)  # e.g. the traceback it printed before it died
        for fd, _ in loop.pipes_of(self):
            loop.close_pipe(self, fd)
        if self.req_fd is not None:
            os.close(self.req_fd)
            self.req_fd = None
        self.ctx.on_kernel_exit(self, status)

    def drain_output(self, cell: Cell) -> None:
        """Hand `cell` what the kernel and its subprocesses wrote before the cell's end and the loop
        has not read yet: straight to the cell, as the context may have let go of it already."""
        for fd, stream in self.ctx.guest.loop.pipes_of(self):
            if stream == "msg":
                continue
            while True:
                try:
                    data = os.read(fd, 65536)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    data = b""
                if not data:
                    break
                cell.output(stream, data)

    def kill(self, sig: int) -> None:
        killpg(self.pid, sig)

    def write(self, msg: dict[str, Any]) -> None:
        if self.req_fd is None:
            raise OSError(errno.EPIPE, "the kernel is gone")
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.req_fd, view) :]


class Context:
    def __init__(self, guest: "Guest", cid: str, language: str, cwd: str | None, user: str, env: dict[str, str]) -> None:
        self.guest = guest
        self.id = cid
        self.language = language
        self.cwd = cwd
        self.user = user
        self.env = env
        self.proc: KernelProcess | None = None
        self.starting = False
        self.cell: Item | None = None  # the Cell (or configure item) the kernel is working on
        self.queue: list[Item] = []
        self.waiters: list[int] = []  # channels waiting for the kernel to be ready

    def describe(self) -> ContextInfo:
        return {
            "id": self.id,
            "language": self.language,
            "cwd": self.cwd or self.default_cwd(),
            "running": self.proc is not None and self.proc.ready,
        }

    def submit(self, item: Item) -> None:
        self.queue.append(item)
        self.pump()

    def pump(self) -> None:
        if self.cell is not None:
            return
        if self.proc is None:
            if self.queue or self.waiters:
                self.start()
            return
        if not self.proc.ready or not self.queue:
            return
        item = self.queue.pop(0)
        self.cell = item
        if isinstance(item, Cell):
            item.started = time.monotonic()
            req = {
                "op": "run",
                "code": item.req.get("code", ""),
                "env": item.req.get("env") or {},
                "silent": bool(item.req.get("silent")),
            }
            if item.timeout_s:
                self.guest.loop.add_timer(item.started + item.timeout_s, Timer(lambda now, c=item: self.on_timeout(c)))
        else:
            req = item
        try:
            self.proc.write(req)
        except OSError:
            self.proc.kill(signal.SIGKILL)  # its exit reports the cell

    def default_cwd(self) -> str | None:
        """Where a context made without a cwd runs: the image's workdir, else its user's home."""
        if DEFAULT_CWD:
            return DEFAULT_CWD
        try:
            return self.guest.users.getpw(self.user).pw_dir
        except KeyError:
            return None

    def available(self) -> bool:
        """Whether this template's image has the interpreter the context runs on."""
        return os.access(NODE if self.language in NODE_LANGUAGES else PYTHON, os.X_OK)

    def start(self) -> None:
        """Starts its kernel: forked from the zygote when one fits (warm, in milliseconds), else a
        fresh interpreter, which carries a zygote for the next ones when there is none."""
        if self.starting:
            return
        self.starting = True
        proc = KernelProcess(self)
        g = self.guest
        node = self.language in NODE_LANGUAGES
        exe = NODE if node else PYTHON
        if not os.access(exe, os.X_OK):
            # the guest brings its own Python, but code runs on the image's
            needs = "Node.js" if node else "Python 3"
            return self.on_start_failed(f"this template's image has no {needs}: {self.language} code runs on {exe}", "CODE_RUNTIME_MISSING")
        try:
            pw = g.users.getpw(self.user)
        except KeyError as e:
            return self.on_start_failed(f"cannot start the {self.language} kernel: {e}")
        env = {"PATH": DEFAULT_PATH, "HOME": pw.pw_dir, "USER": self.user, "LOGNAME": self.user}
        env.update({"LANG": "C.UTF-8", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"})
        env.update(g.default_env)
        env.update(self.env)
        cwd = self.cwd or DEFAULT_CWD or pw.pw_dir
        zygote = g.zygote if self.language == "python" else None
        if zygote is not None and zygote.fits(pw.pw_uid, env):

            def forked(pid: int | None, fds: Fds | None, error: str | None, cold_ok: bool) -> None:
                if pid is not None and fds is not None:
                    self.on_spawned(proc, pid, fds)
                elif cold_ok:
                    self.spawn(proc, exe, env, cwd, pw.pw_uid, pw.pw_gid)
                else:
                    self.on_start_failed(f"cannot start the {self.language} kernel: {error}")

            return zygote.fork(env, cwd, forked)
        self.spawn(proc, exe, env, cwd, pw.pw_uid, pw.pw_gid)

    def spawn(self, proc: KernelProcess, exe: str, env: dict[str, str], cwd: str, uid: int, gid: int) -> None:
        """On the loop thread: a fresh interpreter for the kernel, started on the spawner thread."""
        g = self.guest
        argv = [exe, KERNEL_JS if exe == NODE else KERNEL_SCRIPT, self.language]
        env = dict(env)
        if self.language == "python" and os.environ.get("FORKBOX_KERNEL_PRELOAD"):
            env["FORKBOX_KERNEL_PRELOAD"] = os.environ["FORKBOX_KERNEL_PRELOAD"]
        zygote = None
        # under gVisor a zygote holds ~55-80 MiB of its own: only where contexts are wanted (lazy)
        carries = ZYGOTE_MODE == "baked" or (ZYGOTE_MODE == "lazy" and self.id not in LANGUAGES)
        if self.language == "python" and carries and (g.zygote is None or g.zygote.dead):
            zygote = g.zygote = Zygote(g, uid, env)
            env[ZYGOTE_ENV] = str(ZYGOTE_FD)

        def run() -> None:
            try:
                extra = (zygote.theirs.fileno(), ZYGOTE_FD) if zygote is not None and zygote.theirs is not None else None
                pid, fds = g.spawner.spawn(exe, argv, env, cwd, uid, gid, True, True, extra)
            except Exception as e:  # noqa: BLE001 - its cells get the error; never a hang
                message = f"cannot start the {self.language} kernel: {e}"
                g.loop.call(lambda: self.on_start_failed(message))
                return
            finally:
                if zygote is not None:
                    g.loop.call(zygote.handed_over)
            g.loop.call(lambda: self.on_spawned(proc, pid, fds))

        g.spawner.submit(run)

    def on_spawned(self, proc: KernelProcess, pid: int, fds: Fds) -> None:
        loop = self.guest.loop
        self.starting = False
        proc.pid = pid
        proc.req_fd = fds[0]
        for fd, tag in ((fds[1], T_STDOUT), (fds[2], T_STDERR), (fds[3], "msg")):
            loop.watch(proc, fd, tag)
        self.proc = proc
        loop.claim(pid, proc)

    def on_start_failed(self, message: str, code: str = "GUEST_ERROR") -> None:
        wire = self.guest.wire
        self.starting = False
        for item in self.queue:
            if isinstance(item, Cell) and item.channel is not None:
                wire.send_error(item.channel, code, message)
        self.queue = []
        for channel in self.waiters:
            wire.send_error(channel, code, message)
        self.waiters = []

    def on_message(self, proc: KernelProcess, msg: object) -> None:
        # the kernel runs user code, which can write anything to its message fd: what the agent gets
        # from here is always well formed (a malformed frame would stop the whole sandbox)
        if proc is not self.proc or not isinstance(msg, dict):
            return
        wire = self.guest.wire
        get: Callable[..., object] = msg.get  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        kind = get("t")
        cell = self.cell if isinstance(self.cell, Cell) else None
        if kind == "ready":
            proc.ready = True
            for channel in self.waiters:
                wire.send_json(channel, {"type": "result", "value": self.describe()})
            self.waiters = []
            self.pump()
        elif kind == "stream" and cell is not None:
            cell.output(T_STDERR if get("name") == "stderr" else T_STDOUT, str(get("text", "")).encode())
        elif kind == "display" and cell is not None and cell.channel is not None:
            data = get("data")
            if isinstance(data, dict):
                wire.send_json(cell.channel, {"type": "display", "main": get("main") is True, "data": data})
        elif kind == "done":
            self.cell = None
            if cell is not None:
                proc.drain_output(cell)
                count = get("count")
                cell.finish(count if type(count) is int else None, cell_error(get("error")))
            self.pump()

    def on_timeout(self, cell: Cell) -> None:
        if self.cell is not cell or self.proc is None:
            return
        if not cell.interrupted:
            cell.interrupted = True
            cell.timed_out = True
            self.proc.kill(signal.SIGINT)
            self.guest.loop.add_timer(time.monotonic() + INTERRUPT_GRACE_SECONDS, Timer(lambda now: self.on_timeout(cell)))
        else:
            self.proc.kill(signal.SIGKILL)

    def interrupt(self, channel: int) -> None:
        """The caller of a cell went away: interrupt it if it runs, drop it if it waits."""
        if isinstance(self.cell, Cell) and self.cell.channel == channel:
            if self.proc is not None and not self.cell.interrupted:
                self.cell.interrupted = True
                self.proc.kill(signal.SIGINT)
            return
        for item in self.queue:
            if isinstance(item, Cell) and item.channel == channel:
                self.queue.remove(item)
                self.guest.wire.send_error(channel, "CANCELLED", "the cell was cancelled before it started")
                return

    def on_kernel_exit(self, proc: KernelProcess, status: int) -> None:
        if proc is not self.proc:
            return
        self.proc = None
        cell, self.cell = self.cell, None
        if isinstance(cell, Cell):
            if os.WIFSIGNALED(status):
                how = f"was killed by {signal_name(os.WTERMSIG(status))}"
                if os.WTERMSIG(status) == signal.SIGKILL and not cell.timed_out:
                    how += " (out of memory?)"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            error: CellError = {
                "name": "KernelDiedError",
                "value": f"the {self.language} kernel {how}; its state is lost and the next cell starts a fresh one",
                "traceback": "",
            }
            if cell.timed_out:
                cell.timed_out = False
                error["name"] = "TimeoutError"
                error["value"] = (
                    f"the cell ran longer than its {cell.timeout_s:g}s timeout and did not stop when interrupted; "
                    "the kernel was restarted and its state is lost"
                )
            cell.finish(None, error)
        # a configure for the dead kernel is moot: a new one starts with the current env
        self.queue = [item for item in self.queue if isinstance(item, Cell)]
        self.pump()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill(signal.SIGKILL)
        cell, self.cell = self.cell, None
        if isinstance(cell, Cell):
            cell.finish(None, {"name": "KernelRestarted", "value": "the context was restarted or removed", "traceback": ""})
        for item in self.queue:
            if isinstance(item, Cell) and item.channel is not None:
                self.guest.wire.send_error(item.channel, "CONTEXT_NOT_FOUND", "the context was removed")
        self.queue = []

