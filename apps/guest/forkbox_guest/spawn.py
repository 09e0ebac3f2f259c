"""The daemon's side of the spawner process (see `spawner`): starts it, asks it, watches it."""

from __future__ import annotations

import errno
import fcntl
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

from .ioloop import run_jobs
from .spawner import EXIT_RECORD, SPAWN_SIGDEF, SPAWNER_SETUP_TIMEOUT_SECONDS, recv_msg, send_msg

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any

    from .state import Guest

    # what a spawned command's fds are: (stdin for input or None, stdout, stderr[, message channel])
    Fds = tuple[Any, ...]

# A command's stdout and stderr pipes hold this much (Linux and gVisor default to 64 KiB): a fast
# writer blocks less often, and the loop reads its output in large pieces (ioloop.READ_BYTES).
PIPE_BYTES = 1024 * 1024


def widen(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size: the default is only slower


SPAWNER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spawner.py")


class SpawnerProcess:
    """The daemon's handle on one spawner process."""

    def __init__(self, pid: int, req: socket.socket, init_pid: int) -> None:
        self.pid = pid
        self.req = req  # requests and their answers; used on the spawner thread only
        self.init_pid = init_pid  # the user init, to end its namespace with it
        self.pids: set[int] = set()  # what it started and has not reported gone
        self.dead = False  # no more requests to it
        self.ended = False  # its processes were reported gone


class ExitFeed:
    """On the loop thread: the exits a spawner process reports."""

    def __init__(self, guest: "Guest", proc: SpawnerProcess, sock: socket.socket) -> None:
        self.guest = guest
        self.proc = proc
        self.sock = sock
        self.buf = bytearray()

    def on_readable(self) -> None:
        loop = self.guest.loop
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            loop.sel.unregister(self.sock.fileno())
            self.sock.close()
            self.guest.spawner.on_exit(self.proc)
            return
        self.buf += data
        while len(self.buf) >= EXIT_RECORD.size:
            pid, status = EXIT_RECORD.unpack_from(self.buf)
            del self.buf[: EXIT_RECORD.size]
            if pid == 0:
                self.proc.init_pid = status
            else:
                self.proc.pids.discard(pid)
                loop.child_exited(pid, status)


class Spawner:
    """This daemon's side of the spawner process: one thread asks it, one request at a time."""

    def __init__(self, guest: "Guest") -> None:
        self.guest = guest
        self._jobs: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self.proc: SpawnerProcess | None = None

    def start(self) -> None:
        threading.Thread(target=self._run, name="spawner", daemon=True).start()

    def _run(self) -> None:
        try:
            self._start()
        except OSError as e:
            print(f"forkbox-guest: {e}", file=sys.stderr)  # each spawn tries again
        run_jobs(self._jobs, "spawner")

    def submit(self, fn: Callable[[], object]) -> None:
        """Run fn on the spawner thread (the only one that talks to the spawner process)."""
        self._jobs.put(fn)

    def _start(self) -> SpawnerProcess:
        """On the spawner thread: start a spawner process and wait until its namespaces are set up."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ev_ours, ev_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = None
        try:
            for s in (theirs, ev_theirs):
                os.set_inheritable(s.fileno(), True)
            argv = [sys.executable, "-S", SPAWNER_SCRIPT, str(theirs.fileno()), str(ev_theirs.fileno())]
            null_io = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)]
            pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=null_io, setsigdef=SPAWN_SIGDEF)
            theirs.close()
            ev_theirs.close()
            ours.settimeout(SPAWNER_SETUP_TIMEOUT_SECONDS)
            msg, _ = recv_msg(ours)
            if msg.get("step") != "map":
                raise OSError(errno.EIO, msg.get("error") or "no user namespace")
            # a spawner in a user namespace cannot map more than its own id: we map all 1:1
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write("0 0 4294967295\n")
            send_msg(ours, {"step": "mapped"})
            msg, _ = recv_msg(ours)
            if not msg.get("ready"):
                raise OSError(errno.EIO, msg.get("error") or "not ready")
            ours.settimeout(None)
        except (OSError, EOFError, ValueError) as e:
            for s in (ours, theirs, ev_ours, ev_theirs):
                s.close()
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            raise OSError(errno.EIO, f"cannot start the process spawner: {e}") from None
        proc = self.proc = SpawnerProcess(pid, ours, msg["init"])
        feed = ExitFeed(self.guest, proc, ev_ours)
        self.guest.loop.call(lambda: self.guest.loop.watch_spawner(feed))
        return proc

    def on_exit(self, proc: SpawnerProcess) -> None:
        """On the loop thread: a spawner process died (it never should). What it started is
        reported killed, and its user namespace ended with it; the next spawn starts a new one."""
        if proc.ended:
            return
        proc.ended = proc.dead = True
        print(f"forkbox-guest: the process spawner {proc.pid} died; starting a new one", file=sys.stderr)
        try:
            os.kill(proc.init_pid, signal.SIGKILL)
        except OSError:
            pass
        for pid in list(proc.pids):
            proc.pids.discard(pid)
            self.guest.loop.child_exited(pid, signal.SIGKILL)

    def end_all(self, timeout: float = 10.0) -> int:
        """On a worker thread: ends every process users run (commands, terminals, kernels, sudo's),
        as a fresh boot would find none: their namespace's init is killed, which kills everything in
        it, and the exits are awaited. The next spawn sets up new namespaces. Returns how many ended."""
        proc = self.proc
        if proc is None or proc.dead:
            return 0
        count = len(proc.pids)
        try:
            os.kill(proc.init_pid, signal.SIGKILL)
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while proc.pids and time.monotonic() < deadline:
            time.sleep(0.02)
        return count - len(proc.pids)

    def set_hostname(self, name: str) -> None:
        """On the spawner thread: the hostname users see (the spawner's UTS namespace)."""
        self._ask({"hostname": name}, [])

    def start_process(
        self, exe: str, argv: list[str], env: dict[str, str], cwd: str, uid: int, gid: int, actions: list[tuple[Any, ...]], fds: list[int]
    ) -> int:
        """On the spawner thread: start argv as uid:gid in a new session, in the users' namespaces.
        `actions` set up its fds: ("fd", i, target) dup2s fds[i], ("dup", fd, target) one of its own,
        ("open", target, path, flags) opens a path. Raises OSError (its filename says which path
        failed) or ValueError (an argument execve cannot take)."""
        msg = {"exe": exe, "argv": argv, "env": env, "cwd": cwd, "uid": uid, "gid": gid, "actions": actions}
        reply = self._ask(msg, fds)
        proc = self.proc
        assert proc is not None
        proc.pids.add(reply["pid"])
        return reply["pid"]

    def _ask(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """On the spawner thread: one request to the spawner process (started anew if it died) and
        its answer; raises OSError or ValueError for an answer that refuses."""
        reply: dict[str, Any] = {}
        for attempt in (1, 2):
            proc = self.proc
            if proc is None or proc.dead:
                proc = self._start()
            try:
                send_msg(proc.req, msg, fds)
                reply, _ = recv_msg(proc.req)
                break
            except (OSError, EOFError, ValueError) as e:
                proc.dead = True
                proc.req.close()
                if attempt == 2:
                    raise OSError(errno.EIO, f"the process spawner failed: {e}") from None
        if "pid" in reply or "ok" in reply:
            return reply
        if "errno" in reply:
            raise OSError(reply["errno"], reply.get("strerror") or "", reply.get("filename"))
        raise ValueError(reply.get("invalid") or "refused")

    def spawn(
        self,
        exe: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        uid: int,
        gid: int,
        want_stdin: bool,
        msg_pipe: bool = False,
        extra: tuple[int, int] | None = None,
    ) -> tuple[int, Fds]:
        """On the spawner thread: start argv as uid:gid in its own session.
        Returns (pid, (stdin_w|None, stdout_r, stderr_r[, msg_r])); with msg_pipe, the child's
        fd 3 is the write end of one more pipe (a kernel's message channel); `extra` (fd, target)
        passes one more fd of ours as the child's `target`."""
        pipes = [os.pipe(), os.pipe()] + ([os.pipe()] if msg_pipe else [])
        for r, _ in pipes[:2]:
            widen(r)
        stdin_pipe = os.pipe() if want_stdin else None
        fds = [w for _, w in pipes] + ([stdin_pipe[0]] if stdin_pipe else [])
        actions: list[tuple[Any, ...]] = [("fd", 0, 1), ("fd", 1, 2)]
        actions.append(("fd", len(pipes), 0) if stdin_pipe else ("open", 0, "/dev/null", os.O_RDONLY))
        if msg_pipe:
            actions.append(("fd", 2, 3))
        if extra is not None:
            fds.append(extra[0])
            actions.append(("fd", len(fds) - 1, extra[1]))
        try:
            pid = self.start_process(exe, argv, env, cwd, uid, gid, actions, fds)
        except BaseException:
            for r, w in pipes + ([stdin_pipe] if stdin_pipe else []):
                os.close(r)
                os.close(w)
            raise
        for _, w in pipes:
            os.close(w)
        if stdin_pipe:
            os.close(stdin_pipe[0])
        return pid, (stdin_pipe[1] if stdin_pipe else None, *(r for r, _ in pipes))

    def spawn_pty(self, exe: str, argv: list[str], env: dict[str, str], cwd: str, uid: int, gid: int, cols: int, rows: int) -> tuple[int, Fds]:
        """On the spawner thread: start argv on a new terminal, as its session leader (opening the
        terminal in the child makes it the controlling one, so ^C and SIGWINCH reach the foreground
        job). Returns (pid, (master for input, master for output, None))."""
        master, slave = os.openpty()
        try:
            set_winsize(master, cols, rows)
            tty = os.ttyname(slave)
            # the program opens its terminal after dropping to its user: make the terminal its own
            os.fchown(slave, uid, gid)
            os.fchmod(slave, 0o620)
            actions: list[tuple[Any, ...]] = [("open", 0, tty, os.O_RDWR), ("dup", 0, 1), ("dup", 0, 2)]
            pid = self.start_process(exe, argv, env, cwd, uid, gid, actions, [])
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        return pid, (os.dup(master), master, None)


def killpg(pid: int | None, sig: int) -> None:
    """Signals the process group a spawned command leads (each runs in its own session)."""
    if pid is None:
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def set_winsize(fd: int, cols: int, rows: int) -> None:
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
