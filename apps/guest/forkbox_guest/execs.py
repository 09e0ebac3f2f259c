"""One `exec` request: a command (or terminal) started, fed, flow-controlled, timed out and reported."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import threading
import time

from . import procs
from .exits import exit_message
from .ioloop import READ_BYTES, cap_output
from .spawn import killpg
from .users import DEFAULT_CWD, DEFAULT_PATH, DEFAULT_USER, check_env, login_shell
from .wire import T_STDERR, T_STDOUT

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .ioloop import PipeTag, Stream
    from .messages import ExitMessage
    from .spawn import Fds
    from .state import Guest

# After a command exits: how long what it left behind in its process group may live (a `setsid`
# needs a fork and an exec to get out, tens of ms under gVisor), and its
# pipes stay open, before both are closed.
DETACH_GRACE_SECONDS = 0.5


class Exec:
    def __init__(self, guest: "Guest", channel: int, req: Request) -> None:
        self.guest = guest
        self.channel = channel
        self.req = req
        self.pid: int | None = None
        self.fds: Fds | None = None
        self.stdin_fd: int | None = None
        # stdin frames can arrive before the process exists; they wait here until it does
        self.stdin_pending: list[bytes] | None = []
        self.stdin_lock = threading.Lock()
        self.timed_out = False
        self.truncated = False
        self.max_output: int | None = int(req.get("maxOutputBytes") or 0) or None
        self.sent: dict[Stream, int] = {T_STDOUT: 0, T_STDERR: 0}
        self.exit_status: int | None = None
        self.open_pipes = 0
        self.finished = False
        self.timeout_s: float = (req.get("timeoutMs") or 0) / 1000.0
        self.started = time.monotonic()
        # flow control (streaming callers): at most `window` bytes sent and not yet acked; past
        # that the command's pipes are not read, so the command itself waits
        self.window: int | None = int(req.get("window") or 0) or None
        self.unacked = 0
        self.paused_fds: dict[int, PipeTag] = {}
        self.drain_close = False
        self.background = bool(req.get("background"))
        self.pty = bool(req.get("pty"))
        self.want_stdin = bool(req.get("stdin")) or self.background or self.pty
        self.argv: list[str] = []
        # a background process's: what it is listed as, its output log and who reads it, its end
        self.describe_cmd = ""
        self.started_at: float | None = None
        self.log: procs.OutputLog | None = None
        self.subscribers: dict[int, procs.Subscriber] = {}
        self.exit_msg: ExitMessage | None = None

    def start(self) -> None:
        """On the spawner thread. Whatever the request holds, it is answered: never a hang."""
        g = self.guest
        try:
            launched = self._launch()
        except Exception as e:  # noqa: BLE001 - reported to the caller, the daemon lives on
            launched = False
            self.fail("GUEST_ERROR", f"cannot start the command: {type(e).__name__}: {e}")
        if not launched:
            return
        assert self.pid is not None and self.fds is not None
        if self.background:
            self.describe_cmd = self.req.get("cmd") or " ".join(self.argv)
            self.started_at = time.time()
            with g.execs_lock:
                g.execs.pop(self.channel, None)
            procs.register(g, self)
            g.wire.send_json(self.channel, {"type": "result", "value": {"pid": self.pid}})
        else:
            g.wire.send_json(self.channel, {"type": "started", "pid": self.pid})
        g.loop.call(lambda: g.loop.add(self))
        with self.stdin_lock:
            self.stdin_fd = self.fds[0] if self.want_stdin else None
            pending, self.stdin_pending = self.stdin_pending, None
        for data in pending or []:
            self.stdin(data)

    def _launch(self) -> bool:
        """Starts the process; False when it failed and the caller was told why."""
        g = self.guest
        req = self.req
        try:
            extra_env = check_env(req.get("env"))
        except ValueError as e:
            self.fail("VALIDATION_FAILED", str(e))
            return False
        user = str(req.get("user") or DEFAULT_USER)
        try:
            pw = g.users.getpw(user)
        except (KeyError, ValueError):
            self.fail("VALIDATION_FAILED", f"unknown user: {user}")
            return False
        env = {"PATH": DEFAULT_PATH, "HOME": pw.pw_dir, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8"}
        env.update(g.default_env)
        env.update(extra_env)
        if req.get("argv"):
            argv = [str(a) for a in req["argv"]]
            # E2B's clients run every command as `/bin/bash -l -c ...`: an image without bash runs it in /bin/sh
            if argv[:2] == ["/bin/bash", "-l"] and not os.access("/bin/bash", os.X_OK):
                argv[0] = login_shell()
        elif self.pty and not req.get("cmd"):
            argv = [login_shell(), "-l"]
        else:
            argv = [login_shell(), "-c", str(req.get("cmd", ""))]
        self.argv = argv
        cwd = str(req.get("cwd") or DEFAULT_CWD or pw.pw_dir)
        exe = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env["PATH"])
        if exe is None:
            self.fail("EXEC_FAILED", f"command not found: {argv[0]}")
            return False
        try:
            if self.pty:
                env.setdefault("TERM", "xterm-256color")
                cols, rows = int(req.get("cols") or 80), int(req.get("rows") or 24)
                self.pid, self.fds = g.spawner.spawn_pty(exe, argv, env, cwd, pw.pw_uid, pw.pw_gid, cols, rows)
            else:
                self.pid, self.fds = g.spawner.spawn(exe, argv, env, cwd, pw.pw_uid, pw.pw_gid, self.want_stdin)
        except OSError as e:
            where = cwd if e.filename == cwd else argv[0]
            self.fail("EXEC_FAILED", f"cannot start {argv[0]}: {e.strerror or e}: {where}")
            return False
        except ValueError as e:
            self.fail("VALIDATION_FAILED", f"cannot start {argv[0]}: {e}")
            return False
        return True

    def fail(self, code: str, message: str) -> None:
        with self.guest.execs_lock:
            self.guest.execs.pop(self.channel, None)
        self.guest.wire.send_error(self.channel, code, message)

    # -- on the loop thread --
    def output(self, ftype: Stream, data: bytes) -> None:
        if self.background:
            return procs.proc_output(self.guest, self, ftype, data)
        capped = cap_output(self, ftype, data)
        if capped is None:
            return
        assert isinstance(ftype, int)
        self.guest.wire.send(ftype, self.channel, capped)
        if self.window:
            self.unacked += len(capped)
            if self.unacked >= self.window:
                self.pause()

    def pause(self) -> None:
        loop = self.guest.loop
        for fd, stream in loop.pipes_of(self):
            loop.sel.unregister(fd)
            self.paused_fds[fd] = (self, stream)

    def on_ack(self, n: int) -> None:
        self.unacked = max(0, self.unacked - n)
        if self.unacked < (self.window or 0) // 2:
            self.resume()

    def resume(self) -> None:
        """Reads the paused pipes again."""
        if not self.paused_fds:
            return
        fds, self.paused_fds = self.paused_fds, {}
        for fd, tag in fds.items():
            self.guest.loop.sel.register(fd, selectors.EVENT_READ, tag)
        if self.drain_close:
            for fd, (_, ftype) in fds.items():
                self.drain_then_close(fd, ftype)

    def drain_then_close(self, fd: int, ftype: Stream) -> None:
        """Past exit and grace: read what is left in a pipe (as the window allows), then close it."""
        while fd not in self.paused_fds:
            try:
                data = os.read(fd, READ_BYTES)
            except BlockingIOError:
                data = b""
            except OSError:
                data = b""
            if not data:
                self.guest.loop.close_pipe(self, fd)
                return
            self.output(ftype, data)

    def on_exit(self, status: int) -> None:
        self.exit_status = status
        # What the command left in its process group is killed soon after it exits: long enough
        # for a deliberate `setsid cmd &` to leave the group, short enough to stop a runaway tree.
        # Pipes a background grandchild holds open are read until then too.
        self.guest.loop.add_timer(time.monotonic() + DETACH_GRACE_SECONDS, self)
        self.maybe_finish()

    def on_timer(self, now: float) -> None:
        if self.exit_status is None:
            self.timed_out = True
            self.kill(signal.SIGKILL)
            return
        self.kill(signal.SIGKILL)
        loop = self.guest.loop
        for fd, _ in loop.pipes_of(self):
            loop.close_pipe(self, fd)
        # pipes held back by flow control are emptied first, as the caller reads
        if self.paused_fds:
            self.drain_close = True

    def maybe_finish(self) -> None:
        if self.finished or self.exit_status is None or self.open_pipes > 0:
            return
        g = self.guest
        self.finished = True
        if self.pid is not None:
            g.loop.execs.pop(self.pid, None)
        msg = exit_message(self.exit_status, self.timed_out, self.truncated, time.monotonic() - self.started)
        with g.execs_lock:
            g.execs.pop(self.channel, None)
        self.close_stdin()
        if self.background:
            self.exit_msg = msg
            log = self.ensure_log()
            for sub in list(self.subscribers.values()):
                procs.feed(g, self, log, sub)
            return
        g.wire.send_json(self.channel, msg)

    def ensure_log(self) -> "procs.OutputLog":
        if self.log is None:
            self.log = procs.OutputLog()
            self.subscribers = {}
        return self.log

    # -- from any thread --
    def kill(self, sig: int) -> None:
        killpg(self.pid, sig)

    def close_stdin(self) -> None:
        with self.stdin_lock:
            fd, self.stdin_fd = self.stdin_fd, None
        if fd is not None:
            os.close(fd)

    def stdin(self, data: bytes) -> None:
        with self.stdin_lock:
            if self.stdin_pending is not None:
                self.stdin_pending.append(data)
                return
            fd = self.stdin_fd
        if fd is None:
            return
        if not data:
            self.close_stdin()
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            self.close_stdin()
