"""The daemon's side of the kernel zygote: new Python code contexts forked warm, not started cold.

A Python kernel is handed one end of a socket (as fd ZYGOTE_FD); once its preload is done, and
before any cell, it forks a pristine copy of itself, the zygote (forkbox_kernel.start_zygote). A
new context's kernel is then a fork of the zygote: its pipes, cwd and env are sent over the socket,
and it starts with everything imported (create + first cell ~190 ms, instead of the seconds the
imports take). Under gVisor a write after fork copies far more than a page, so the zygote and each
kernel it forks hold most of their memory of their own: the zygote is made only where contexts are
wanted (kernels.ZYGOTE_MODE; docs/design-notes.md).

The zygote lives in the users' PID namespace (it is the spawner's grandchild there), so the kernels
it forks are the users' processes like any other: a filesystem-only pause ends them all. It reports
their exits with their pid as the namespace sees it; each kernel's hello comes with SCM_CREDENTIALS,
which the kernel translates to the pid this daemon sees (the one it signals).

What a fork cannot change is what the interpreter and the preloaded libraries read at start: a
context whose env differs from the zygote's in that (PYTHON*, HOME, locale, ...) or which runs as
another user starts cold, as does every context while there is no zygote.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys

from .spawn import widen
from .users import CREDS_SPACE, peer_credentials

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from collections.abc import Callable

    from .spawn import Fds
    from .state import Guest

    # (pid, fds) of a forked kernel, or the reason there is none and whether a cold start may do instead
    Forked = Callable[[int | None, Fds | None, str | None, bool], None]

# the fd a kernel gets its end of the socket at, and the env var that says so
ZYGOTE_FD = 4
ZYGOTE_ENV = "FORKBOX_KERNEL_ZYGOTE"
# env a fork cannot change after the fact: what Python and the preloaded libraries read at start
IMPORT_TIME_ENV = ("PYTHON", "HOME", "LANG", "LC_", "MPL", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "TZ")
MSG_BYTES = 65536
PID_MAX = 4 * 1024 * 1024  # Linux's highest pid_max


def bounded(value: object, hi: int) -> int:
    """`value` as an int in 0..hi (the zygote's process runs as the users' uid: what it sends is theirs)."""
    if type(value) is not int or not 0 <= value <= hi:
        raise ValueError(f"not an int in 0..{hi}: {value!r}")
    return value


def close_all(fds: "Fds | list[int]") -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV)}


class Zygote:
    """On the loop thread: one zygote, from the moment its kernel is spawned until it is gone."""

    def __init__(self, guest: "Guest", uid: int, env: dict[str, str]) -> None:
        self.guest = guest
        self.uid = uid
        self.env = import_time_env(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        ours.setblocking(False)
        self.sock = ours
        self.theirs: socket.socket | None = theirs  # the kernel's end, until it is spawned
        self.dead = False
        self._seq = 0
        # fork requests waiting for their kernel's hello: our ends of its pipes, and whom to tell
        self.waiting: dict[int, tuple[Fds, Forked]] = {}
        # the kernels it forked and that live: their pid in the namespace -> the pid we see
        self.kernels: dict[int, int] = {}
        guest.loop.sel.register(ours.fileno(), selectors.EVENT_READ, self)

    def fits(self, uid: int, env: dict[str, str]) -> bool:
        return not self.dead and uid == self.uid and import_time_env(env) == self.env

    def handed_over(self) -> None:
        """The kernel got its end (or its spawn failed): ours is the only one left here."""
        if self.theirs is not None:
            self.theirs.close()
            self.theirs = None

    def fork(self, env: dict[str, str], cwd: str, forked: "Forked") -> None:
        """Asks for a kernel with these env and cwd; `forked` is called once it said hello."""
        if self.dead:
            return forked(None, None, "no zygote", True)
        pipes = [os.pipe() for _ in range(4)]  # requests, stdout, stderr, messages
        for r, _ in pipes[1:3]:
            widen(r)
        req_r, req_w = pipes[0]
        theirs = [req_r] + [w for _, w in pipes[1:]]
        ours: Fds = (req_w, *(r for r, _ in pipes[1:]))
        self._seq += 1
        msg = json.dumps({"id": self._seq, "cwd": cwd, "env": env}).encode()
        try:
            socket.send_fds(self.sock, [msg], theirs)
        except OSError as e:
            close_all(ours)
            forked(None, None, f"the zygote took no request: {e}", True)
        else:
            self.waiting[self._seq] = (ours, forked)
        finally:
            close_all(theirs)

    def on_readable(self) -> None:
        while not self.dead:
            try:
                data, anc, _, _ = self.sock.recvmsg(MSG_BYTES, CREDS_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return self.on_gone()
            if not data:
                return self.on_gone()
            creds = peer_credentials(anc)
            pid = creds[0] if creds else None
            try:
                msg = json.loads(data)
                if isinstance(msg, dict):
                    self.on_message(msg, pid)  # pyright: ignore[reportUnknownArgumentType]
            except (ValueError, TypeError, KeyError, OverflowError) as e:
                # it is users' code that runs in there: a garbled message ends this zygote, not the daemon
                print(f"forkbox-guest: a bad message from the kernel zygote: {e!r}", file=sys.stderr)
                return self.on_gone()

    def on_message(self, msg: dict[str, object], pid: int | None) -> None:
        if "exit" in msg:
            theirs, status = bounded(msg["exit"], PID_MAX), bounded(msg["status"], 0xFFFF)
            ours = self.kernels.pop(theirs, None)
            if ours is not None:
                self.guest.loop.child_exited(ours, status)
            return
        entry = self.waiting.pop(bounded(msg["id"], 2**53), None)
        if entry is None:
            return
        fds, forked = entry
        error = msg.get("error")
        if error is not None or pid is None:
            close_all(fds)
            if error is not None:
                return forked(None, None, str(error), False)
            return forked(None, None, "the kernel's hello came without credentials", True)
        self.kernels[bounded(msg["pid"], PID_MAX)] = pid
        forked(pid, fds, None, False)

    def on_gone(self) -> None:
        """The zygote ended (a filesystem-only pause, root in the sandbox, the OOM killer): what it
        forked is ended too, as its exits can no longer be reported; waiting contexts start cold."""
        if self.dead:
            return
        self.dead = True
        self.handed_over()
        self.guest.loop.sel.unregister(self.sock.fileno())
        self.sock.close()
        if self.guest.zygote is self:
            self.guest.zygote = None
        for ours in self.kernels.values():
            try:
                os.killpg(ours, signal.SIGKILL)
            except OSError:
                pass
            self.guest.loop.child_exited(ours, signal.SIGKILL)
        self.kernels.clear()
        waiting, self.waiting = self.waiting, {}
        for fds, forked in waiting.values():
            close_all(fds)
            forked(None, None, "the zygote is gone", True)
