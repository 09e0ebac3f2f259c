"""The spawner process: starts every command, terminal and kernel in the users' namespaces.

Run as its own program (`python3 -S spawner.py REQ_FD EV_FD`) by the daemon, which also imports
its message helpers. Standard library only, and import-light: it is a fresh interpreter in new
namespaces, and every MB it holds is copied on each restore.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # run as a script, its own directory leads sys.path: nothing of the package may shadow stdlib
    del sys.path[0]

# Code in the sandbox, root included, must not reach this daemon: its stdin and stdout are the wire
# to the agent (a frame written to /proc/1/fd/1 would fake results) and SIGUSR2 makes it resync.
# So it starts nothing users run itself. A helper process, the *spawner* (this module, run as its
# own program), lives in a user namespace of its own (ids mapped 1:1) and unshares a PID
# and a mount namespace for its children. In there PID 1 is the "user init" (it mounts the
# namespace's own /proc, then only reaps orphans); neither this daemon nor the spawner has a pid.
# Every command, terminal and code kernel is posix_spawned by the spawner on this daemon's
# behalf, its pipes passed over a unix socket (SCM_RIGHTS); exits come back on a second socket.
# Users keep the capability bounding set the sandbox gave them.
#
# Why a separate process: gVisor (20240729) has no setns() for PID or user namespaces, and
# unshare(CLONE_NEWPID) needs a single-threaded caller, so this threaded daemon cannot put its own
# children in there; it also lacks CAP_SYS_ADMIN, which the user namespace grants the spawner.
# Under gVisor a Python process holds ~4 MB however idle (a fork too), compiling this whole file
# ~7 MB more, and every MB is copied on each restore: so the spawner is a fresh interpreter that
# runs only this module, with no imports beyond its own, and the user init is a shell loop where
# there is a shell.
#
# Pids: the API reports (and signals) a process by its pid as this daemon sees it, in the
# sandbox's root PID namespace. Inside the sandbox the same process has another, smaller pid
# (`$$`, `ps`); PID 1 there is the user init, not this daemon.

import array
import ctypes
import errno
import json
import os
import selectors
import signal
import socket
import struct
import time
from collections.abc import Sequence

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any, NoReturn

_SYSCALLS = {
    "x86_64": {"capset": 126, "setgroups": 116, "setresuid": 117, "setresgid": 119},
    "aarch64": {"capset": 91, "setgroups": 159, "setresuid": 147, "setresgid": 149},
}[os.uname().machine]
CLONE_NEWNS = 0x20000
CLONE_NEWUTS = 0x4000000
MS_BIND = 0x1000
# The sandbox's boot id as its users see it: bound over /proc/sys/kernel/random/boot_id in their
# mount namespace (gVisor's own is the same in every sandbox restored from one snapshot); the
# daemon writes it (identity.py)
BOOT_ID_FILE = "/run/forkbox/boot_id"
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
PR_SET_DUMPABLE, PR_CAPBSET_READ, PR_CAPBSET_DROP = 4, 23, 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# (pid, wait status) of a child that exited; pid 0 announces a new user init (status: its pid)
EXIT_RECORD = struct.Struct(">ii")
MSG_LEN = struct.Struct(">I")
MAX_SPAWN_MESSAGE = 64 * 1024 * 1024
MAX_SPAWN_FDS = 8
SPAWN_SIGDEF = (signal.SIGCHLD, signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)
SPAWNER_SETUP_TIMEOUT_SECONDS = 30


def libc_handle() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def bounding_set(libc: ctypes.CDLL) -> list[int]:
    return [c for c in range(64) if libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1]


def send_msg(sock: socket.socket, obj: object, fds: Sequence[int] = ()) -> None:
    """A length-prefixed JSON message on a stream socket, `fds` riding on its first byte."""
    data = json.dumps(obj, separators=(",", ":")).encode()
    data = MSG_LEN.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the spawner channel closed")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    """One message of send_msg and the fds that came with it (close-on-exec)."""
    fds: list[int] = []
    head = b""
    try:
        while len(head) < MSG_LEN.size:
            if max_fds:
                data, anc, flags, _ = sock.recvmsg(MSG_LEN.size - len(head), socket.CMSG_SPACE(max_fds * 4), socket.MSG_CMSG_CLOEXEC)
                for level, kind, cdata in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds += array.array("i", cdata[: len(cdata) - len(cdata) % 4])
                if flags & socket.MSG_CTRUNC:
                    raise ValueError("too many fds in one spawn request")
            else:
                data = sock.recv(MSG_LEN.size - len(head))
            if not data:
                raise EOFError("the spawner channel closed")
            head += data
        (n,) = MSG_LEN.unpack(head)
        if n > MAX_SPAWN_MESSAGE:
            raise ValueError(f"oversize spawner message ({n} bytes)")
        return json.loads(_recv_exact(sock, n)), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def spawner_main(req_fd: int, ev_fd: int) -> None:
    """The spawner process (see above): sets up the users' namespaces, then starts what the daemon
    asks for and reports every exit. It ends when the daemon does."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    libc = libc_handle()
    # inherited from the daemon: what we spawn must not inherit them in turn (they could ask for
    # processes, or report exits that never happened)
    for fd in (req_fd, ev_fd):
        os.set_inheritable(fd, False)
    req = socket.socket(fileno=req_fd)
    ev = socket.socket(fileno=ev_fd)
    init_pid: int | None = None
    try:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        # users get no capability the sandbox did not give them (a new user namespace grants all)
        keep = bounding_set(libc)
        _check(libc.unshare(CLONE_NEWUSER), "unshare a user namespace")
        send_msg(req, {"step": "map"})
        recv_msg(req)
        os.setgroups([])
        # a UTS namespace of the users' own, whose hostname this spawner (holding CAP_SYS_ADMIN in
        # the user namespace that owns it) sets to the sandbox's name after every restore
        if libc.unshare(CLONE_NEWUTS) != 0:
            print(f"forkbox-spawner: no UTS namespace: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        init_pid = new_user_namespaces(libc)
        for cap in bounding_set(libc):
            if cap not in keep:
                _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a capability")
    except (OSError, ValueError, EOFError) as e:
        try:
            send_msg(req, {"error": str(e)})
        finally:
            os._exit(1)
    send_msg(req, {"ready": True, "init": init_pid})

    signal.signal(signal.SIGCHLD, lambda *_: None)
    sig_r, sig_w = os.pipe()
    for fd in (sig_r, sig_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(sig_w, warn_on_full_buffer=False)
    sel = selectors.DefaultSelector()
    sel.register(req, selectors.EVENT_READ, "req")
    sel.register(sig_r, selectors.EVENT_READ, "sig")

    def reap() -> None:
        nonlocal init_pid
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == init_pid:
                init_pid = None  # replaced before the next spawn
            else:
                ev.sendall(EXIT_RECORD.pack(pid, status))

    def spawn(msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        nonlocal init_pid
        for attempt in (1, 2):
            reap()
            if init_pid is None:
                # root in the sandbox can kill the user init (gVisor does not shield a namespace's
                # init from its members), which ends every process in its namespace: start anew
                print("forkbox-spawner: the user init died; new namespaces", file=sys.stderr)
                try:
                    init_pid = new_user_namespaces(libc)
                except OSError as e:
                    return {"errno": e.errno or errno.EIO, "strerror": str(e), "filename": None}
                ev.sendall(EXIT_RECORD.pack(0, init_pid))
            answer = spawn_one(msg, fds)
            if answer.get("errno") != errno.ENOMEM or attempt == 2:
                return answer
            # a namespace whose init is dying takes no new process: wait for it to be gone
            for _ in range(50):
                reap()
                if init_pid is None:
                    break
                time.sleep(0.01)
        return answer

    while True:
        for key, _ in sel.select():
            if key.data == "sig":
                try:
                    while os.read(sig_r, 512):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
                reap()
                continue
            try:
                msg, fds = recv_msg(req, MAX_SPAWN_FDS)
            except InterruptedError:
                continue
            except (EOFError, OSError, ValueError):
                os._exit(0)  # the daemon is gone, or talks nonsense: it starts a new spawner
            try:
                answer = set_hostname(msg["hostname"]) if "hostname" in msg else spawn(msg, fds)
            finally:
                for fd in fds:
                    os.close(fd)
            send_msg(req, answer)


def set_hostname(name: object) -> dict[str, Any]:
    """In the spawner process: the users' hostname (their UTS namespace is the spawner's)."""
    if not isinstance(name, str):
        return {"invalid": "hostname must be a string"}
    try:
        socket.sethostname(name)
    except (OSError, ValueError) as e:
        return {"errno": getattr(e, "errno", None) or errno.EINVAL, "strerror": str(e), "filename": None}
    return {"ok": True}


def spawn_one(msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """In the spawner process: one spawn request, answered as {"pid"}, {"errno", ...} or {"invalid"}."""
    try:
        actions: list[tuple[Any, ...]] = []
        for a in msg["actions"]:
            if a[0] == "fd":
                actions.append((os.POSIX_SPAWN_DUP2, fds[a[1]], a[2]))
            elif a[0] == "dup":
                actions.append((os.POSIX_SPAWN_DUP2, a[1], a[2]))
            else:
                actions.append((os.POSIX_SPAWN_OPEN, a[1], a[2], a[3], 0))
        os.chdir(msg["cwd"])
        uid, gid = int(msg["uid"]), int(msg["gid"])
        switch = uid != 0 or gid != 0
        if switch:
            os.setresgid(gid, gid, 0)
            os.setresuid(uid, uid, 0)
        try:
            # execve resets the saved uid, so the child cannot climb back to root
            pid = os.posix_spawn(msg["exe"], msg["argv"], msg["env"], file_actions=actions, setsid=True, setsigdef=SPAWN_SIGDEF)
        finally:
            if switch:
                os.setresuid(0, 0, 0)
                os.setresgid(0, 0, 0)
        return {"pid": pid}
    except OSError as e:
        filename = e.filename if isinstance(e.filename, str) else None
        return {"errno": e.errno or errno.EIO, "strerror": e.strerror or str(e), "filename": filename}
    except Exception as e:  # noqa: BLE001 - bad input (a NUL, an '=' in an env name) is answered, never fatal
        return {"invalid": f"{type(e).__name__}: {e}"}


def new_user_namespaces(libc: ctypes.CDLL) -> int:
    """In the spawner process: fresh PID and mount namespaces for what it spawns from now on, and
    their init. Returns the init's pid."""
    _check(libc.unshare(CLONE_NEWPID | CLONE_NEWNS), "unshare PID and mount namespaces")
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            user_init(libc, ready_w)
        except BaseException as e:  # noqa: BLE001 - reported through the pipe
            try:
                os.write(ready_w, f"{type(e).__name__}: {e}".encode()[:400])
            finally:
                os._exit(1)
    os.close(ready_w)
    try:
        failed = os.read(ready_r, 512)  # nothing: its exec closed the pipe
    finally:
        os.close(ready_r)
    if failed:
        raise OSError(errno.EIO, f"the user init failed: {failed.decode(errors='replace')}")
    return pid


# PID 1 of the users' namespace only reaps orphans: as a shell loop (~0.5 MB), where the image has
# a shell, or else as Python (~4 MB). Orphans of the shell's `wait` are reaped too (waitpid(-1)).
REAPER_SH = 'trap "" HUP INT TERM USR1 USR2 PIPE; while :; do sleep 2147483647 & wait; done'
REAPER_PY = """import os, signal
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    signal.sigtimedwait([signal.SIGCHLD], 3600)
"""
REAPER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def user_init(libc: ctypes.CDLL, ready_w: int) -> NoReturn:
    """The user init, forked by the spawner: mounts the namespace's /proc over the sandbox's (whose
    PID 1 is the daemon; mounts copied into a less privileged user namespace are locked, so users
    cannot unmount it to reveal that one), drops every capability and fd, and becomes a reaper."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    # (not through /proc/self/fd: the /proc here may be a dead namespace's, where we have no pid)
    os.closerange(3, ready_w)
    os.closerange(ready_w + 1, os.sysconf("SC_OPEN_MAX"))
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "make mounts private")
    _check(libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None), "mount /proc")
    if os.path.isfile(BOOT_ID_FILE):
        # (best effort: without it, users read gVisor's boot id)
        libc.mount(BOOT_ID_FILE.encode(), b"/proc/sys/kernel/random/boot_id", None, ctypes.c_ulong(MS_BIND), None)
    for cap in bounding_set(libc):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a capability")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(ctypes.c_long(_SYSCALLS["capset"]), header, data), "drop capabilities")
    env = {"PATH": REAPER_PATH}
    has_sleep = any(os.access(os.path.join(d, "sleep"), os.X_OK) for d in REAPER_PATH.split(":"))
    if has_sleep and os.access("/bin/sh", os.X_OK):
        # busybox (alpine's /bin/sh too) picks its applet by argv[0]: there it must be "sh"
        name = "sh" if os.path.basename(os.path.realpath("/bin/sh")).startswith("busybox") else "forkbox-init"
        try:
            os.execve("/bin/sh", [name, "-c", REAPER_SH], env)
        except OSError:
            pass
    os.execve(sys.executable, [sys.executable, "-S", "-c", REAPER_PY], env)


if __name__ == "__main__":
    spawner_main(int(sys.argv[1]), int(sys.argv[2]))
