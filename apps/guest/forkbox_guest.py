#!/usr/bin/python3
"""forkbox guest daemon: PID 1 of every sandbox, serving exec/files/ping to the agent over stdin/stdout.

Wire format (both directions): a 9-byte header, then the payload.
  u32 BE payload length | u8 frame type | u32 BE channel
Frame types: 1 JSON message, 2 stdout bytes, 3 stderr bytes, 4 stdin bytes, 5 file bytes.
An empty stdin or file frame means end of that stream. Channel 0 carries daemon-level events.
The agent opens a channel per request; every request ends with exactly one terminal JSON
message on its channel: {"type": "result"|"exit"|"error", ...}.
Only the standard library is used: every template ships python3, and every MB held here is
copied on each restore.
"""

# ---- the spawner process -----------------------------------------------------------------------
# Code in the sandbox, root included, must not reach this daemon: its stdin and stdout are the wire
# to the agent (a frame written to /proc/1/fd/1 would fake results) and SIGUSR2 makes it resync.
# So it starts nothing users run itself. A helper process, the *spawner* (this section of the
# file, run on its own), lives in a user namespace of its own (ids mapped 1:1) and unshares a PID
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
# runs only this section as its source (`spawner_source`), with no imports beyond its own, and the
# user init is a shell loop where there is a shell.
#
# Pids: the API reports (and signals) a process by its pid as this daemon sees it, in the
# sandbox's root PID namespace. Inside the sandbox the same process has another, smaller pid
# (`$$`, `ps`); PID 1 there is the user init, not this daemon.

import array
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

_SYSCALLS = {
    "x86_64": {"capset": 126, "setgroups": 116, "setresuid": 117, "setresgid": 119},
    "aarch64": {"capset": 91, "setgroups": 159, "setresuid": 147, "setresgid": 149},
}[os.uname().machine]
CLONE_NEWNS = 0x20000
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


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _check(ctypes, result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def bounding_set(libc):
    return [c for c in range(64) if libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1]


def send_msg(sock, obj, fds=()):
    """A length-prefixed JSON message on a stream socket, `fds` riding on its first byte."""
    data = json.dumps(obj, separators=(",", ":")).encode()
    data = MSG_LEN.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the spawner channel closed")
        buf += chunk
    return bytes(buf)


def recv_msg(sock, max_fds=0):
    """One message of send_msg and the fds that came with it (close-on-exec)."""
    fds = []
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


def spawner_main(req_fd, ev_fd):
    """The spawner process (see above): sets up the users' namespaces, then starts what the daemon
    asks for and reports every exit. It ends when the daemon does."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    ctypes, libc = _libc()
    # inherited from the daemon: what we spawn must not inherit them in turn (they could ask for
    # processes, or report exits that never happened)
    for fd in (req_fd, ev_fd):
        os.set_inheritable(fd, False)
    req = socket.socket(fileno=req_fd)
    ev = socket.socket(fileno=ev_fd)
    try:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        # users get no capability the sandbox did not give them (a new user namespace grants all)
        keep = bounding_set(libc)
        _check(ctypes, libc.unshare(CLONE_NEWUSER), "unshare a user namespace")
        send_msg(req, {"step": "map"})
        recv_msg(req)
        os.setgroups([])
        init_pid = new_user_namespaces(ctypes, libc)
        for cap in bounding_set(libc):
            if cap not in keep:
                _check(ctypes, libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a capability")
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

    def reap():
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

    def spawn(msg, fds):
        nonlocal init_pid
        for attempt in (1, 2):
            reap()
            if init_pid is None:
                # root in the sandbox can kill the user init (gVisor does not shield a namespace's
                # init from its members), which ends every process in its namespace: start anew
                print("forkbox-spawner: the user init died; new namespaces", file=sys.stderr)
                try:
                    init_pid = new_user_namespaces(ctypes, libc)
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
                answer = spawn(msg, fds)
            finally:
                for fd in fds:
                    os.close(fd)
            send_msg(req, answer)


def spawn_one(msg, fds):
    """In the spawner process: one spawn request, answered as {"pid"}, {"errno", ...} or {"invalid"}."""
    try:
        actions = []
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


def new_user_namespaces(ctypes, libc):
    """In the spawner process: fresh PID and mount namespaces for what it spawns from now on, and
    their init. Returns the init's pid."""
    _check(ctypes, libc.unshare(CLONE_NEWPID | CLONE_NEWNS), "unshare PID and mount namespaces")
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            user_init(ctypes, libc, ready_w)
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


def user_init(ctypes, libc, ready_w):
    """The user init, forked by the spawner: mounts the namespace's /proc over the sandbox's (whose
    PID 1 is the daemon; mounts copied into a less privileged user namespace are locked, so users
    cannot unmount it to reveal that one), drops every capability and fd, and becomes a reaper."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    # (not through /proc/self/fd: the /proc here may be a dead namespace's, where we have no pid)
    os.closerange(3, ready_w)
    os.closerange(ready_w + 1, os.sysconf("SC_OPEN_MAX"))
    _check(ctypes, libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "make mounts private")
    _check(ctypes, libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None), "mount /proc")
    for cap in bounding_set(libc):
        _check(ctypes, libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a capability")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(ctypes, libc.syscall(ctypes.c_long(_SYSCALLS["capset"]), header, data), "drop capabilities")
    env = {"PATH": REAPER_PATH}
    has_sleep = any(os.access(os.path.join(d, "sleep"), os.X_OK) for d in REAPER_PATH.split(":"))
    if has_sleep and os.access("/bin/sh", os.X_OK):
        try:
            os.execve("/bin/sh", ["forkbox-init", "-c", REAPER_SH], env)
        except OSError:
            pass
    os.execve(sys.executable, [sys.executable, "-S", "-c", REAPER_PY], env)


# ---- end of the spawner process ----------------------------------------------------------------

import base64  # noqa: E402
import heapq  # noqa: E402
import pwd  # noqa: E402
import queue  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402

VERSION = "0.1.0"
HEADER = struct.Struct(">IBI")
T_JSON, T_STDOUT, T_STDERR, T_STDIN, T_FILE = 1, 2, 3, 4, 5
CHUNK = 256 * 1024
MAX_FRAME = 16 * 1024 * 1024
DEFAULT_USER = "user"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# After a command exits: how long what it left behind in its process group may live (a `setsid`
# needs a fork and an exec to get out, tens of ms under gVisor), and its
# pipes stay open, before both are closed.
DETACH_GRACE_SECONDS = 0.5

threading.stack_size(512 * 1024)
_out_lock = threading.Lock()
_started = time.monotonic()
_default_env = {}


def send(ftype, channel, payload=b""):
    frame = HEADER.pack(len(payload), ftype, channel) + payload
    with _out_lock:
        view = memoryview(frame)
        while view:
            n = os.write(1, view)
            view = view[n:]


def send_json(channel, msg):
    send(T_JSON, channel, json.dumps(msg, separators=(",", ":")).encode())


def send_error(channel, code, message):
    send_json(channel, {"type": "error", "code": code, "message": message})


ERRNO_CODES = {
    errno.ENOENT: "FILE_NOT_FOUND",
    errno.EEXIST: "FILE_EXISTS",
    errno.ENOTDIR: "NOT_A_DIRECTORY",
    errno.EISDIR: "IS_A_DIRECTORY",
    errno.EACCES: "PERMISSION_DENIED",
    errno.EPERM: "PERMISSION_DENIED",
    errno.ENOSPC: "NO_SPACE",
    errno.EDQUOT: "NO_SPACE",
    errno.ENOTEMPTY: "DIRECTORY_NOT_EMPTY",
    errno.EINVAL: "VALIDATION_FAILED",
    errno.ENAMETOOLONG: "VALIDATION_FAILED",
    errno.EXDEV: "VALIDATION_FAILED",
    errno.EROFS: "PERMISSION_DENIED",
}


def os_error_code(err):
    return ERRNO_CODES.get(err.errno, "GUEST_ERROR")


_pw_cache = {}


def getpw(user):
    """pwd.getpwnam, cached until /etc/passwd changes (parsing it costs ~1 ms under gVisor)."""
    try:
        stamp = os.stat("/etc/passwd").st_mtime_ns
    except OSError:
        stamp = None
    hit = _pw_cache.get(user)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    pw = pwd.getpwnam(user)
    _pw_cache[user] = (stamp, pw)
    return pw


def check_env(env):
    """Environment variables as execve takes them: names non-empty without '=' or NUL, values
    without NUL. Returns them as strings; raises ValueError (the protocol refuses these too)."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise ValueError("env must be an object of names to values")
    out = {}
    for name, value in env.items():
        name, value = str(name), str(value)
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"invalid environment variable name {name!r}: names are non-empty, without '=' or NUL")
        if "\0" in value:
            raise ValueError(f"environment variable {name} has a NUL byte in its value")
        out[name] = value
    return out


# ---- process I/O loop ------------------------------------------------------------------------
# One thread multiplexes every running command: its output pipes, its exit (SIGCHLD reaches us
# through a wakeup fd) and its timeout. A thread per pipe or per command costs ~2.3 ms each to
# start under gVisor, more than the rest of an exec's overhead together.


class IOLoop:
    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.execs = {}  # pid -> Exec
        self.unclaimed = {}  # pid -> status, for children reaped before their Exec was registered
        self.timers = []  # heap of (deadline, seq, exec)
        self._seq = 0
        self._inbox = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sig_r, sig_w = os.pipe()
        os.set_blocking(self._sig_r, False)
        os.set_blocking(sig_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(sig_w, warn_on_full_buffer=False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.sel.register(self._sig_r, selectors.EVENT_READ, "sigchld")
        threading.Thread(target=self._run, name="ioloop", daemon=True).start()

    def call(self, fn):
        """Run fn on the loop thread."""
        self._inbox.put(fn)
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def _drain(self, fd):
        try:
            while os.read(fd, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _reap(self):
        """Our own children: spawner processes (and a dead one's user init)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            proc = spawner.proc if spawner is not None else None
            if proc is not None and pid == proc.pid:
                spawner.on_exit(proc)

    def child_exited(self, pid, status):
        """A command, terminal or kernel ended (the spawner process reports it)."""
        ex = self.execs.get(pid)
        if ex is None:
            self.unclaimed[pid] = status
            if len(self.unclaimed) > 4096:
                self.unclaimed.pop(next(iter(self.unclaimed)))
        else:
            ex.on_exit(status)

    def watch_spawner(self, proc, sock):
        sock.setblocking(False)
        self.sel.register(sock.fileno(), selectors.EVENT_READ, ExitFeed(proc, sock))

    def add(self, ex):
        """On the loop thread: start watching a just-spawned command."""
        self.execs[ex.pid] = ex
        for fd, ftype in ((ex.fds[1], T_STDOUT), (ex.fds[2], T_STDERR)):
            if fd is None:  # a terminal: one fd for both
                continue
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, (ex, ftype))
            ex.open_pipes += 1
        if ex.timeout_s:
            self.add_timer(time.monotonic() + ex.timeout_s, ex)
        status = self.unclaimed.pop(ex.pid, None)
        if status is not None:
            ex.on_exit(status)

    def add_timer(self, deadline, ex):
        self._seq += 1
        heapq.heappush(self.timers, (deadline, self._seq, ex))

    def close_pipe(self, ex, fd):
        try:
            self.sel.unregister(fd)
        except KeyError:
            pass  # paused by flow control
        paused = getattr(ex, "paused_fds", None)
        if paused and fd in paused:
            del paused[fd]
        os.close(fd)
        ex.open_pipes -= 1
        ex.maybe_finish()

    def _run(self):
        while True:
            timeout = None
            if self.timers:
                timeout = max(0.0, self.timers[0][0] - time.monotonic())
            for key, _ in self.sel.select(timeout):
                try:
                    self._dispatch(key)
                except Exception as e:  # noqa: BLE001 - one command's fault must not stop every other
                    print(f"forkbox-guest: loop handler failed: {e!r}", file=sys.stderr)
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, ex = heapq.heappop(self.timers)
                try:
                    ex.on_timer(now)
                except Exception as e:  # noqa: BLE001 - as above
                    print(f"forkbox-guest: timer failed: {e!r}", file=sys.stderr)

    def _dispatch(self, key):
        tag = key.data
        if tag == "wake":
            self._drain(self._wake_r)
            while True:
                try:
                    fn = self._inbox.get_nowait()
                except queue.Empty:
                    break
                try:
                    fn()
                except Exception as e:  # noqa: BLE001 - the next call still runs
                    print(f"forkbox-guest: loop call failed: {e!r}", file=sys.stderr)
        elif tag == "sigchld":
            self._drain(self._sig_r)
            self._reap()
        elif isinstance(tag, ExitFeed):
            tag.on_readable()
        else:
            ex, ftype = tag
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                ex.output(ftype, data)
                # past its exit, a pipe that a short read emptied is done
                if len(data) < 65536 and getattr(ex, "drain_close", False):
                    self.close_pipe(ex, key.fd)
            else:
                self.close_pipe(ex, key.fd)


# ---- spawning ----------------------------------------------------------------------------------
# This daemon's side of the spawner process (see the top of this file).


_spawner_source = None


def spawner_source():
    """The spawner process's program: the section at the top of this file."""
    global _spawner_source
    if _spawner_source is None:
        with open(os.path.abspath(__file__), encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("# ---- the spawner process ---") : text.index("# ---- end of the spawner process ---")]
        _spawner_source = section + "\nspawner_main(int(sys.argv[1]), int(sys.argv[2]))\n"
    return _spawner_source


class SpawnerProcess:
    """The daemon's handle on one spawner process."""

    def __init__(self, pid, req, init_pid):
        self.pid = pid
        self.req = req  # requests and their answers; used on the spawner thread only
        self.init_pid = init_pid  # the user init, to end its namespace with it
        self.pids = set()  # what it started and has not reported gone
        self.dead = False  # no more requests to it
        self.ended = False  # its processes were reported gone


class ExitFeed:
    """On the loop thread: the exits a spawner process reports."""

    def __init__(self, proc, sock):
        self.proc = proc
        self.sock = sock
        self.buf = bytearray()

    def on_readable(self):
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            loop.sel.unregister(self.sock.fileno())
            self.sock.close()
            spawner.on_exit(self.proc)
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


def run_jobs(jobs, what):
    """On a worker thread: runs what is put on `jobs`, in order, forever."""
    while True:
        fn = jobs.get()
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - a job reports its own errors; never die here
            print(f"forkbox-guest: {what} job failed: {e!r}", file=sys.stderr)


class Spawner:
    """This daemon's side of the spawner process: one thread asks it, one request at a time."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self.proc = None
        threading.Thread(target=self._run, name="spawner", daemon=True).start()

    def _run(self):
        try:
            self._start()
        except OSError as e:
            print(f"forkbox-guest: {e}", file=sys.stderr)  # each spawn tries again
        run_jobs(self._jobs, "spawner")

    def submit(self, fn):
        """Run fn on the spawner thread (the only one that talks to the spawner process)."""
        self._jobs.put(fn)

    def _start(self):
        """On the spawner thread: start a spawner process and wait until its namespaces are set up."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ev_ours, ev_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = None
        try:
            for s in (theirs, ev_theirs):
                os.set_inheritable(s.fileno(), True)
            argv = [sys.executable, "-S", "-c", spawner_source(), str(theirs.fileno()), str(ev_theirs.fileno())]
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
        loop.call(lambda: loop.watch_spawner(proc, ev_ours))

    def on_exit(self, proc):
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
            loop.child_exited(pid, signal.SIGKILL)

    def start_process(self, exe, argv, env, cwd, uid, gid, actions, fds):
        """On the spawner thread: start argv as uid:gid in a new session, in the users' namespaces.
        `actions` set up its fds: ("fd", i, target) dup2s fds[i], ("dup", fd, target) one of its own,
        ("open", target, path, flags) opens a path. Raises OSError (its filename says which path
        failed) or ValueError (an argument execve cannot take)."""
        msg = {"exe": exe, "argv": argv, "env": env, "cwd": cwd, "uid": uid, "gid": gid, "actions": actions}
        for attempt in (1, 2):
            proc = self.proc
            if proc is None or proc.dead:
                self._start()
                proc = self.proc
            try:
                send_msg(proc.req, msg, fds)
                reply, _ = recv_msg(proc.req)
                break
            except (OSError, EOFError, ValueError) as e:
                proc.dead = True
                proc.req.close()
                if attempt == 2:
                    raise OSError(errno.EIO, f"the process spawner failed: {e}") from None
        if "pid" in reply:
            proc.pids.add(reply["pid"])
            return reply["pid"]
        if "errno" in reply:
            raise OSError(reply["errno"], reply.get("strerror") or "", reply.get("filename"))
        raise ValueError(reply.get("invalid") or "refused")

    def spawn(self, exe, argv, env, cwd, uid, gid, want_stdin, msg_pipe=False):
        """On the spawner thread: start argv as uid:gid in its own session.
        Returns (pid, (stdin_w|None, stdout_r, stderr_r[, msg_r])); with msg_pipe, the child's
        fd 3 is the write end of one more pipe (a kernel's message channel)."""
        pipes = [os.pipe(), os.pipe()] + ([os.pipe()] if msg_pipe else [])
        stdin_pipe = os.pipe() if want_stdin else None
        fds = [w for _, w in pipes] + ([stdin_pipe[0]] if stdin_pipe else [])
        actions = [("fd", 0, 1), ("fd", 1, 2)]
        actions.append(("fd", len(pipes), 0) if stdin_pipe else ("open", 0, "/dev/null", os.O_RDONLY))
        if msg_pipe:
            actions.append(("fd", 2, 3))
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


# ---- exec ------------------------------------------------------------------------------------


def killpg(pid, sig):
    """Signals the process group a spawned command leads (each runs in its own session)."""
    if pid is None:
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cap_output(owner, ftype, data):
    """What of `data` still fits under `owner.max_output` for its stream (`owner.sent` counts what
    went before); past the cap `owner.truncated` is set. None when nothing fits."""
    if owner.max_output is not None:
        room = owner.max_output - owner.sent[ftype]
        if room <= 0:
            owner.truncated = True
            return None
        if len(data) > room:
            data = data[:room]
            owner.truncated = True
    owner.sent[ftype] += len(data)
    return data


def set_winsize(fd, cols, rows):
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def spawn_pty(exe, argv, env, cwd, uid, gid, cols, rows):
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
        actions = [("open", 0, tty, os.O_RDWR), ("dup", 0, 1), ("dup", 0, 2)]
        pid = spawner.start_process(exe, argv, env, cwd, uid, gid, actions, [])
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    return pid, (os.dup(master), master, None)


class Exec:
    def __init__(self, channel, req):
        self.channel = channel
        self.req = req
        self.pid = None
        self.fds = None
        self.stdin_fd = None
        # stdin frames can arrive before the process exists; they wait here until it does
        self.stdin_pending = []
        self.stdin_lock = threading.Lock()
        self.timed_out = False
        self.truncated = False
        self.max_output = int(req.get("maxOutputBytes") or 0) or None
        self.sent = {T_STDOUT: 0, T_STDERR: 0}
        self.exit_status = None
        self.open_pipes = 0
        self.finished = False
        self.timeout_s = (req.get("timeoutMs") or 0) / 1000.0
        self.started = time.monotonic()
        # flow control (streaming callers): at most `window` bytes sent and not yet acked; past
        # that the command's pipes are not read, so the command itself waits
        self.window = int(req.get("window") or 0) or None
        self.unacked = 0
        self.paused_fds = {}
        self.drain_close = False
        self.background = bool(req.get("background"))
        self.pty = bool(req.get("pty"))
        self.want_stdin = bool(req.get("stdin")) or self.background or self.pty

    def start(self):
        """On the spawner thread. Whatever the request holds, it is answered: never a hang."""
        try:
            launched = self._launch()
        except Exception as e:  # noqa: BLE001 - reported to the caller, the daemon lives on
            launched = False
            self.fail("GUEST_ERROR", f"cannot start the command: {type(e).__name__}: {e}")
        if not launched:
            return
        if self.background:
            self.describe_cmd = self.req.get("cmd") or " ".join(self.argv)
            self.started_at = time.time()
            with _execs_lock:
                _execs.pop(self.channel, None)
            _procs[self.pid] = self
            while len(_procs) > MAX_PROCS:
                old = next((p for p in _procs.values() if p.finished), None)
                if old is None:
                    break
                del _procs[old.pid]
            send_json(self.channel, {"type": "result", "value": {"pid": self.pid}})
        else:
            send_json(self.channel, {"type": "started", "pid": self.pid})
        loop.call(lambda: loop.add(self))
        with self.stdin_lock:
            self.stdin_fd = self.fds[0] if self.want_stdin else None
            pending, self.stdin_pending = self.stdin_pending, None
        for data in pending:
            self.stdin(data)

    def _launch(self):
        """Starts the process; False when it failed and the caller was told why."""
        req = self.req
        try:
            extra_env = check_env(req.get("env"))
        except ValueError as e:
            self.fail("VALIDATION_FAILED", str(e))
            return False
        user = str(req.get("user") or DEFAULT_USER)
        try:
            pw = getpw(user)
        except (KeyError, ValueError):
            self.fail("VALIDATION_FAILED", f"unknown user: {user}")
            return False
        env = {"PATH": DEFAULT_PATH, "HOME": pw.pw_dir, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8"}
        env.update(_default_env)
        env.update(extra_env)
        if req.get("argv"):
            argv = [str(a) for a in req["argv"]]
        elif self.pty and not req.get("cmd"):
            argv = ["/bin/bash", "-l"]
        else:
            argv = ["/bin/bash", "-c", str(req.get("cmd", ""))]
        self.argv = argv
        cwd = str(req.get("cwd") or pw.pw_dir)
        exe = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env["PATH"])
        if exe is None:
            self.fail("EXEC_FAILED", f"command not found: {argv[0]}")
            return False
        try:
            if self.pty:
                env.setdefault("TERM", "xterm-256color")
                cols, rows = int(req.get("cols") or 80), int(req.get("rows") or 24)
                self.pid, self.fds = spawn_pty(exe, argv, env, cwd, pw.pw_uid, pw.pw_gid, cols, rows)
            else:
                self.pid, self.fds = spawner.spawn(exe, argv, env, cwd, pw.pw_uid, pw.pw_gid, self.want_stdin)
        except OSError as e:
            where = cwd if e.filename == cwd else argv[0]
            self.fail("EXEC_FAILED", f"cannot start {argv[0]}: {e.strerror or e}: {where}")
            return False
        except ValueError as e:
            self.fail("VALIDATION_FAILED", f"cannot start {argv[0]}: {e}")
            return False
        return True

    def fail(self, code, message):
        with _execs_lock:
            _execs.pop(self.channel, None)
        send_error(self.channel, code, message)

    # -- on the loop thread --
    def output(self, ftype, data):
        if self.background:
            return proc_output(self, ftype, data)
        data = cap_output(self, ftype, data)
        if data is None:
            return
        send(ftype, self.channel, data)
        if self.window:
            self.unacked += len(data)
            if self.unacked >= self.window:
                self.pause()

    def pause(self):
        for key in list(loop.sel.get_map().values()):
            if isinstance(key.data, tuple) and key.data[0] is self:
                loop.sel.unregister(key.fd)
                self.paused_fds[key.fd] = key.data

    def on_ack(self, n):
        self.unacked = max(0, self.unacked - n)
        if not self.paused_fds or self.unacked >= (self.window or 0) // 2:
            return
        fds, self.paused_fds = self.paused_fds, {}
        for fd, tag in fds.items():
            loop.sel.register(fd, selectors.EVENT_READ, tag)
        if self.drain_close:
            for fd, (_, ftype) in fds.items():
                self.drain_then_close(fd, ftype)

    def drain_then_close(self, fd, ftype):
        """Past exit and grace: read what is left in a pipe (as the window allows), then close it."""
        while fd not in self.paused_fds:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                data = b""
            except OSError:
                data = b""
            if not data:
                loop.close_pipe(self, fd)
                return
            self.output(ftype, data)

    def on_exit(self, status):
        self.exit_status = status
        # What the command left in its process group is killed soon after it exits: long enough
        # for a deliberate `setsid cmd &` to leave the group, short enough to stop a runaway tree.
        # Pipes a background grandchild holds open are read until then too.
        loop.add_timer(time.monotonic() + DETACH_GRACE_SECONDS, self)
        self.maybe_finish()

    def on_timer(self, now):
        if self.exit_status is None:
            self.timed_out = True
            self._killpg(signal.SIGKILL)
            return
        self._killpg(signal.SIGKILL)
        for key in list(loop.sel.get_map().values()):
            if isinstance(key.data, tuple) and key.data[0] is self:
                loop.close_pipe(self, key.fd)
        # pipes held back by flow control are emptied first, as the caller reads
        if self.paused_fds:
            self.drain_close = True

    def maybe_finish(self):
        if self.finished or self.exit_status is None or self.open_pipes > 0:
            return
        self.finished = True
        loop.execs.pop(self.pid, None)
        status = self.exit_status
        msg = {
            "type": "exit",
            "exitCode": None,
            "signal": None,
            "timedOut": self.timed_out,
            "truncated": self.truncated,
            "durationMs": round((time.monotonic() - self.started) * 1000, 3),
        }
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            msg["signal"] = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            msg["exitCode"] = 128 + sig
        else:
            msg["exitCode"] = os.WEXITSTATUS(status)
        with _execs_lock:
            _execs.pop(self.channel, None)
        self.close_stdin()
        if self.background:
            self.exit_msg = msg
            if not hasattr(self, "log"):
                self.log = OutputLog()
                self.subscribers = {}
            for sub in list(self.subscribers.values()):
                feed(self, sub)
            return
        send_json(self.channel, msg)

    # -- from any thread --
    def _killpg(self, sig):
        killpg(self.pid, sig)

    def kill(self, sig):
        killpg(self.pid, sig)

    def close_stdin(self):
        with self.stdin_lock:
            fd, self.stdin_fd = self.stdin_fd, None
        if fd is not None:
            os.close(fd)

    def stdin(self, data):
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


# ---- background processes ---------------------------------------------------------------------
# `exec` with background: the command runs on after its request ends; its output goes to a
# bounded log (offsets count bytes of both streams together) that any number of callers attach to,
# from any offset, each with its own flow-control window. A caller that falls behind the log's
# start gets a {"type": "gap"} marker with the bytes it missed, never a silent drop.

LOG_BYTES = 4 * 1024 * 1024
MAX_PROCS = 256


class OutputLog:
    def __init__(self, cap=LOG_BYTES):
        self.cap = cap
        self.chunks = []  # (offset, ftype, bytes)
        self.start = 0
        self.end = 0

    def append(self, ftype, data):
        self.chunks.append((self.end, ftype, data))
        self.end += len(data)
        while self.end - self.start > self.cap and len(self.chunks) > 1:
            off, _, dropped = self.chunks.pop(0)
            self.start = off + len(dropped)

    def since(self, offset):
        """Chunks from `offset` on, the first one cut to start there."""
        out = []
        for off, ftype, data in self.chunks:
            if off + len(data) <= offset:
                continue
            out.append((ftype, data[max(0, offset - off) :]))
        return out


class Subscriber:
    def __init__(self, channel, offset, window, output):
        self.channel = channel
        self.offset = offset  # the next log byte this caller gets
        self.window = window
        self.output = output
        self.unacked = 0


def proc_output(proc, ftype, data):
    """On the loop thread: a background process wrote `data`."""
    if not hasattr(proc, "log"):
        proc.log = OutputLog()
        proc.subscribers = {}
    proc.log.append(ftype, data)
    for sub in list(proc.subscribers.values()):
        feed(proc, sub)


def feed(proc, sub):
    """Sends `sub` what it has not had yet, as far as its window allows; then the exit, if any."""
    if sub.output:
        if sub.offset < proc.log.start:
            send_json(sub.channel, {"type": "gap", "bytes": proc.log.start - sub.offset})
            sub.offset = proc.log.start
        for ftype, data in proc.log.since(sub.offset):
            room = sub.window - sub.unacked
            if room <= 0:
                return
            piece = data[:room]
            send(ftype, sub.channel, piece)
            sub.offset += len(piece)
            sub.unacked += len(piece)
            if len(piece) < len(data):
                return
    else:
        sub.offset = proc.log.end
    if proc.finished and sub.offset >= proc.log.end:
        proc.subscribers.pop(sub.channel, None)
        _subs.pop(sub.channel, None)
        send_json(sub.channel, dict(proc.exit_msg, offset=proc.log.end))


def describe_proc(proc):
    msg = getattr(proc, "exit_msg", None) or {}
    return {
        "pid": proc.pid,
        "cmd": getattr(proc, "describe_cmd", ""),
        "running": not proc.finished,
        "exitCode": msg.get("exitCode"),
        "signal": msg.get("signal"),
        "startedAt": getattr(proc, "started_at", None),
        "outputBytes": proc.log.end if hasattr(proc, "log") else 0,
    }


def proc_of(channel, req):
    proc = _procs.get(int(req.get("pid") or 0))
    if proc is None:
        send_error(channel, "PROCESS_NOT_FOUND", f"no background process {req.get('pid')}")
    return proc


def op_proc_attach(channel, req):
    """On the loop thread: stream a background process's output (from `offset`) and its exit."""
    proc = proc_of(channel, req)
    if proc is None:
        return
    if not hasattr(proc, "log"):
        proc.log = OutputLog()
        proc.subscribers = {}
    offset = int(req.get("offset") or 0)
    sub = Subscriber(channel, offset, int(req.get("window") or LOG_BYTES), req.get("output", True) is not False)
    proc.subscribers[channel] = sub
    _subs[channel] = proc
    send_json(channel, {"type": "attached", "pid": proc.pid, "start": proc.log.start, "end": proc.log.end})
    feed(proc, sub)


def op_proc_detach(channel, req):
    proc = _subs.pop(channel, None)
    if proc is not None:
        proc.subscribers.pop(channel, None)
        send_json(channel, {"type": "result", "value": {"detached": True}})


def op_proc_ack(channel, req):
    proc = _subs.get(channel)
    if proc is None:
        return
    sub = proc.subscribers.get(channel)
    if sub is not None:
        sub.unacked = max(0, sub.unacked - int(req.get("bytes") or 0))
        feed(proc, sub)


def op_proc_list(channel, req):
    send_json(channel, {"type": "result", "value": [describe_proc(p) for p in _procs.values()]})


def op_proc_stdin(channel, req):
    proc = proc_of(channel, req)
    if proc is None:
        return
    if req.get("eof"):
        proc.close_stdin()
    else:
        proc.stdin(base64.b64decode(req.get("data") or ""))
    send_json(channel, {"type": "result", "value": {}})


def op_proc_signal(channel, req):
    proc = proc_of(channel, req)
    if proc is None:
        return
    sig = getattr(signal, str(req.get("signal", "SIGTERM")), None)
    if not isinstance(sig, signal.Signals):
        return send_error(channel, "VALIDATION_FAILED", f"unknown signal {req.get('signal')}")
    if not proc.finished:
        proc.kill(sig)
    send_json(channel, {"type": "result", "value": describe_proc(proc)})


PROC_OPS = {
    "proc_attach": op_proc_attach,
    "proc_detach": op_proc_detach,
    "proc_ack": op_proc_ack,
    "proc_list": op_proc_list,
    "proc_stdin": op_proc_stdin,
    "proc_signal": op_proc_signal,
}

_execs = {}
_execs_lock = threading.Lock()
_procs = {}  # pid -> background Exec (on the loop thread)
_subs = {}  # attach channel -> background Exec
loop = None
spawner = None


# ---- code contexts -----------------------------------------------------------------------------
# A code context is a long-lived interpreter (forkbox_kernel.py) started on first use; its cells
# run one at a time in arrival order. All context state lives on the loop thread.

KERNEL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkbox_kernel.py")
KERNEL_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkbox_kernel.cjs")
NODE = "/usr/bin/node"
LANGUAGES = ("python", "bash", "javascript")
# how long an interrupted cell may take to unwind before its kernel is killed
INTERRUPT_GRACE_SECONDS = 3.0


class Timer:
    def __init__(self, fn):
        self.on_timer = fn


def signal_name(sig):
    return signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)


class Cell:
    def __init__(self, channel, req):
        self.channel = channel
        self.req = req
        self.timeout_s = (req.get("timeoutMs") or 0) / 1000.0
        self.max_output = int(req.get("maxOutputBytes") or 0) or None
        self.sent = {T_STDOUT: 0, T_STDERR: 0}
        self.truncated = False
        self.timed_out = False
        self.interrupted = False
        self.started = None

    def output(self, ftype, data):
        if self.channel is None:
            return
        data = cap_output(self, ftype, data)
        if data is not None:
            send(ftype, self.channel, data)

    def finish(self, count, error):
        if self.channel is None:
            return
        if self.timed_out:
            trace = (error or {}).get("traceback", "")
            error = {
                "name": "TimeoutError",
                "value": f"the cell ran longer than its {self.timeout_s:g}s timeout and was interrupted",
                "traceback": trace,
            }
        send_json(
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


def cell_error(error):
    """A cell's error as the kernel reported it, reduced to {name, value, traceback} strings."""
    if not isinstance(error, dict):
        return None
    return {k: str(error.get(k) or "") for k in ("name", "value", "traceback")}


class KernelProcess:
    """One interpreter process of a context; a restart makes a new one."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.pid = None
        self.req_fd = None
        self.out_fds = ()
        self.msg_buf = bytearray()
        self.ready = False
        self.dead = False
        self.open_pipes = 0

    # -- called by the loop --
    def output(self, ftype, data):
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
        elif self.ctx.proc is self and self.ctx.cell is not None:
            self.ctx.cell.output(ftype, data)

    def maybe_finish(self):
        pass

    def on_exit(self, status):
        loop.execs.pop(self.pid, None)
        self.dead = True
        self.kill(signal.SIGKILL)  # what it left in its process group goes with it
        for key in list(loop.sel.get_map().values()):
            if isinstance(key.data, tuple) and key.data[0] is self:
                loop.close_pipe(self, key.fd)
        if self.req_fd is not None:
            os.close(self.req_fd)
            self.req_fd = None
        self.ctx.on_kernel_exit(self, status)

    def drain_output(self):
        """Output the kernel's subprocesses wrote before the cell's end."""
        for key in list(loop.sel.get_map().values()):
            if not (isinstance(key.data, tuple) and key.data[0] is self and key.data[1] != "msg"):
                continue
            while True:
                try:
                    data = os.read(key.fd, 65536)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    data = b""
                if not data:
                    break
                self.output(key.data[1], data)

    def kill(self, sig):
        killpg(self.pid, sig)

    def write(self, msg):
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.req_fd, view) :]


class Context:
    def __init__(self, cid, language, cwd, user, env):
        self.id = cid
        self.language = language
        self.cwd = cwd
        self.user = user
        self.env = env
        self.proc = None
        self.starting = False
        self.cell = None  # the Cell (or configure item) the kernel is working on
        self.queue = []
        self.waiters = []  # channels waiting for the kernel to be ready

    def describe(self):
        return {
            "id": self.id,
            "language": self.language,
            "cwd": self.cwd,
            "running": self.proc is not None and self.proc.ready,
        }

    def submit(self, item):
        self.queue.append(item)
        self.pump()

    def pump(self):
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
                loop.add_timer(item.started + item.timeout_s, Timer(lambda now, c=item: self.on_timeout(c)))
        else:
            req = item
        try:
            self.proc.write(req)
        except OSError:
            self.proc.kill(signal.SIGKILL)  # its exit reports the cell

    def start(self):
        if self.starting:
            return
        self.starting = True
        proc = KernelProcess(self)

        def spawn():
            try:
                pw = getpw(self.user)
                env = {"PATH": DEFAULT_PATH, "HOME": pw.pw_dir, "USER": self.user, "LOGNAME": self.user}
                env.update({"LANG": "C.UTF-8", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"})
                env.update(_default_env)
                env.update(self.env)
                if self.language == "python" and os.environ.get("FORKBOX_KERNEL_PRELOAD"):
                    env["FORKBOX_KERNEL_PRELOAD"] = os.environ["FORKBOX_KERNEL_PRELOAD"]
                if self.language == "javascript":
                    if not os.path.exists(NODE):
                        raise OSError(errno.ENOENT, "this template has no Node.js (javascript cells run on /usr/bin/node)")
                    argv = [NODE, KERNEL_JS]
                else:
                    argv = ["/usr/bin/python3", KERNEL_SCRIPT, self.language]
                pid, fds = spawner.spawn(argv[0], argv, env, self.cwd or pw.pw_dir, pw.pw_uid, pw.pw_gid, True, True)
            except Exception as e:  # noqa: BLE001 - its cells get the error; never a hang
                message = f"cannot start the {self.language} kernel: {e}"
                loop.call(lambda: self.on_start_failed(message))
                return
            loop.call(lambda: self.on_spawned(proc, pid, fds))

        spawner.submit(spawn)

    def on_spawned(self, proc, pid, fds):
        self.starting = False
        proc.pid = pid
        proc.req_fd = fds[0]
        for fd, tag in ((fds[1], T_STDOUT), (fds[2], T_STDERR), (fds[3], "msg")):
            os.set_blocking(fd, False)
            loop.sel.register(fd, selectors.EVENT_READ, (proc, tag))
            proc.open_pipes += 1
        self.proc = proc
        loop.execs[pid] = proc
        status = loop.unclaimed.pop(pid, None)
        if status is not None:
            proc.on_exit(status)

    def on_start_failed(self, message):
        self.starting = False
        for item in self.queue:
            if isinstance(item, Cell):
                send_error(item.channel, "GUEST_ERROR", message)
        self.queue = []
        for channel in self.waiters:
            send_error(channel, "GUEST_ERROR", message)
        self.waiters = []

    def on_message(self, proc, msg):
        # the kernel runs user code, which can write anything to its message fd: what the agent gets
        # from here is always well formed (a malformed frame would stop the whole sandbox)
        if proc is not self.proc or not isinstance(msg, dict):
            return
        kind = msg.get("t")
        cell = self.cell if isinstance(self.cell, Cell) else None
        if kind == "ready":
            proc.ready = True
            for channel in self.waiters:
                send_json(channel, {"type": "result", "value": self.describe()})
            self.waiters = []
            self.pump()
        elif kind == "stream" and cell is not None:
            cell.output(T_STDERR if msg.get("name") == "stderr" else T_STDOUT, str(msg.get("text", "")).encode())
        elif kind == "display" and cell is not None and cell.channel is not None:
            data = msg.get("data")
            if isinstance(data, dict):
                send_json(cell.channel, {"type": "display", "main": msg.get("main") is True, "data": data})
        elif kind == "done":
            self.cell = None
            if cell is not None:
                proc.drain_output()
                count = msg.get("count")
                cell.finish(count if type(count) is int else None, cell_error(msg.get("error")))
            self.pump()

    def on_timeout(self, cell):
        if self.cell is not cell or self.proc is None:
            return
        if not cell.interrupted:
            cell.interrupted = True
            cell.timed_out = True
            self.proc.kill(signal.SIGINT)
            loop.add_timer(time.monotonic() + INTERRUPT_GRACE_SECONDS, Timer(lambda now: self.on_timeout(cell)))
        else:
            self.proc.kill(signal.SIGKILL)

    def interrupt(self, channel):
        """The caller of a cell went away: interrupt it if it runs, drop it if it waits."""
        if isinstance(self.cell, Cell) and self.cell.channel == channel:
            if self.proc is not None and not self.cell.interrupted:
                self.cell.interrupted = True
                self.proc.kill(signal.SIGINT)
            return
        for item in self.queue:
            if isinstance(item, Cell) and item.channel == channel:
                self.queue.remove(item)
                send_error(channel, "CANCELLED", "the cell was cancelled before it started")
                return

    def on_kernel_exit(self, proc, status):
        if proc is not self.proc:
            return
        self.proc = None
        cell, self.cell = self.cell, None
        if isinstance(cell, Cell):
            proc.drain_output()
            if os.WIFSIGNALED(status):
                how = f"was killed by {signal_name(os.WTERMSIG(status))}"
                if os.WTERMSIG(status) == signal.SIGKILL and not cell.timed_out:
                    how += " (out of memory?)"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            error = {
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

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill(signal.SIGKILL)
        cell, self.cell = self.cell, None
        if isinstance(cell, Cell):
            cell.finish(None, {"name": "KernelRestarted", "value": "the context was restarted or removed", "traceback": ""})
        for item in self.queue:
            if isinstance(item, Cell):
                send_error(item.channel, "CONTEXT_NOT_FOUND", "the context was removed")
        self.queue = []


_contexts = {}


def default_context(language):
    ctx = _contexts.get(language)
    if ctx is None:
        ctx = _contexts[language] = Context(language, language, None, DEFAULT_USER, {})
    return ctx


def context_of(channel, req):
    """The context a request names (on the loop thread); reports the error itself when there is none."""
    cid = req.get("context")
    language = req.get("language") or "python"
    if cid:
        ctx = _contexts.get(cid)
        if ctx is None:
            send_error(channel, "CONTEXT_NOT_FOUND", f"no code context {cid}")
        return ctx
    if language not in LANGUAGES:
        send_error(channel, "VALIDATION_FAILED", f"unsupported language {language}; supported: {', '.join(LANGUAGES)}")
        return None
    return default_context(language)


def op_run_code(channel, req):
    try:
        check_env(req.get("env"))
    except ValueError as e:
        return send_error(channel, "VALIDATION_FAILED", str(e))
    ctx = context_of(channel, req)
    if ctx is not None:
        ctx.submit(Cell(channel, req))


def op_context_create(channel, req):
    language = req.get("language") or "python"
    if language not in LANGUAGES:
        return send_error(channel, "VALIDATION_FAILED", f"unsupported language {language}; supported: {', '.join(LANGUAGES)}")
    user = req.get("user") or DEFAULT_USER
    try:
        pw = getpw(user)
        cwd = os.path.normpath(req.get("cwd") or pw.pw_dir)
        if not os.path.isabs(cwd):
            raise ValueError(f"cwd must be an absolute path: {cwd}")
        makedirs_owned(cwd, pw.pw_uid, pw.pw_gid)
    except KeyError:
        return send_error(channel, "VALIDATION_FAILED", f"unknown user: {user}")
    except ValueError as e:
        return send_error(channel, "VALIDATION_FAILED", str(e))
    except OSError as e:
        return send_error(channel, os_error_code(e), f"{e.strerror or e}: {e.filename or ''}")
    try:
        env = check_env(req.get("env"))
    except ValueError as e:
        return send_error(channel, "VALIDATION_FAILED", str(e))
    cid = "ctx_" + os.urandom(6).hex()
    ctx = _contexts[cid] = Context(cid, language, cwd, user, env)
    ctx.start()  # its interpreter warms up while the caller prepares the first cell
    send_json(channel, {"type": "result", "value": ctx.describe()})


def op_context_list(channel, req):
    send_json(channel, {"type": "result", "value": [c.describe() for c in _contexts.values()]})


def op_context_restart(channel, req):
    ctx = context_of(channel, req)
    if ctx is None:
        return
    ctx.stop()
    ctx.start()
    send_json(channel, {"type": "result", "value": ctx.describe()})


def op_context_remove(channel, req):
    ctx = context_of(channel, req)
    if ctx is None:
        return
    ctx.stop()
    _contexts.pop(ctx.id, None)
    send_json(channel, {"type": "result", "value": {}})


def op_context_ready(channel, req):
    """Starts a context's kernel if needed and answers once it is ready (the bake's warm-up)."""
    ctx = context_of(channel, req)
    if ctx is None:
        return
    if ctx.proc is not None and ctx.proc.ready:
        return send_json(channel, {"type": "result", "value": ctx.describe()})
    ctx.waiters.append(channel)
    ctx.pump()


def forget_cells():
    """On the loop thread, after a resync: cells of the old agent run on, unheard; its
    subscriptions to background processes end (the processes run on)."""
    for proc in _procs.values():
        if hasattr(proc, "subscribers"):
            proc.subscribers.clear()
    _subs.clear()
    for ctx in _contexts.values():
        if isinstance(ctx.cell, Cell):
            ctx.cell.channel = None
        ctx.queue = [item for item in ctx.queue if not isinstance(item, Cell)]
        ctx.waiters = []


def op_code_interrupt(channel, req):
    for ctx in _contexts.values():
        ctx.interrupt(channel)


def configure_contexts(env, merge, reseed):
    for ctx in _contexts.values():
        if ctx.proc is not None or ctx.starting:
            ctx.submit({"op": "configure", "env": env, "merge": merge, "reseed": reseed})


CONTEXT_OPS = {
    "run_code": op_run_code,
    "context_create": op_context_create,
    "context_list": op_context_list,
    "context_restart": op_context_restart,
    "context_remove": op_context_remove,
    "context_ready": op_context_ready,
    "interrupt": op_code_interrupt,
}


# ---- files -----------------------------------------------------------------------------------
# Every file op runs on a file worker thread that holds the requesting user's uid, gid and groups
# (that thread's alone, switched with raw syscalls as the spawner does): the kernel decides what the
# user may read and write, and what they create is theirs without a chown. Nothing here runs on the
# main loop. Reads stream under the exec window/ack scheme, can be aborted, never send more than the
# size they declared, and refuse anything but regular files. An upload goes to a temp file with a
# random name (O_CREAT|O_EXCL|O_NOFOLLOW) in the target's directory, held open by descriptor, gets
# its mode with fchmod, and is renamed over the target at the end.

FILE_WORKERS = 3
# upload chunks queued for the upload thread before the main loop waits for it
UPLOAD_QUEUE_CHUNKS = 16
READ_WINDOW = 1024 * 1024
# a file whose size the kernel does not know (procfs, sysfs) is read up to this, then refused
UNKNOWN_SIZE_MAX = 16 * 1024 * 1024
# a listing is answered in one frame, which must stay under MAX_FRAME
MAX_LIST_ENTRIES = 100_000
MAX_LIST_BYTES = 15 * 1024 * 1024
# filesystems whose files report a size that is not their content's (0 in procfs, 4096 in sysfs):
# proc, sysfs, cgroup, cgroup2, debugfs, tracefs, securityfs, bpf
PSEUDO_FS = {0x9FA0, 0x62656572, 0x27E0EB, 0x63677270, 0x64626720, 0x74726163, 0x73636673, 0xCAFE4A11}
NO_REPLY = object()  # an op that answered its channel itself


class OpError(Exception):
    """A refusal with a forkbox error code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Identity:
    __slots__ = ("name", "uid", "gid", "groups", "home")

    def __init__(self, name, uid, gid, groups, home):
        self.name, self.uid, self.gid, self.groups, self.home = name, uid, gid, groups, home


_identities = {}


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def identity_of(req):
    """Who a file op acts as: its `user`, else the default user (as for exec)."""
    name = req.get("user") or DEFAULT_USER
    if not isinstance(name, str):
        raise ValueError("invalid user")
    try:
        pw = getpw(name)
    except KeyError:
        raise ValueError(f"unknown user: {name}") from None
    stamp = (_mtime("/etc/group"), tuple(pw))
    hit = _identities.get(name)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    groups = () if pw.pw_uid == 0 else tuple(sorted(set(os.getgrouplist(name, pw.pw_gid))))
    ident = Identity(name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir)
    _identities[name] = (stamp, ident)
    return ident


class ThreadCredentials:
    """Switches the calling thread's effective uid, gid and groups, that thread's alone (raw
    syscalls: glibc's wrappers would switch every thread). With a non-zero effective uid the thread
    has no capabilities, so the kernel checks everything it opens as that user, and what it creates
    is that user's. Real and saved ids stay 0: the thread can switch back, and the user's own
    processes cannot signal or ptrace it (with a real uid of theirs they could tgkill it, and so the
    whole daemon). A thread keeps the identity of its last job until a job needs another (a switch
    costs ~0.2 ms here)."""

    def __init__(self):
        import ctypes

        self._c = ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._root_groups = os.getgroups()
        self._local = threading.local()

    def _call(self, name, *args):
        if self._libc.syscall(self._c.c_long(_SYSCALLS[name]), *args) != 0:
            err = self._c.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")

    def _ids(self, name, a, b, c):
        self._call(name, self._c.c_long(a), self._c.c_long(b), self._c.c_long(c))

    def _groups(self, groups):
        arr = (self._c.c_uint * max(1, len(groups)))(*groups)
        self._call("setgroups", self._c.c_long(len(groups)), arr)

    def act_as(self, ident):
        """On a file worker: from here on this thread acts as `ident` (root: the daemon's own)."""
        want = None if ident.uid == 0 else (ident.uid, ident.gid, ident.groups)
        held = getattr(self._local, "held", None)
        if held == want:
            return
        # "?" until a switch completes: a failed one is retried from the top next time
        self._local.held = "?"
        if held is not None:
            self._ids("setresuid", -1, 0, -1)
            self._ids("setresgid", -1, 0, -1)
            self._groups(self._root_groups)
        if want is not None:
            self._groups(ident.groups)
            self._ids("setresgid", -1, ident.gid, -1)
            self._ids("setresuid", -1, ident.uid, -1)
        self._local.held = want

    def on_pseudo_fs(self, fd):
        """Whether fd's file lives where sizes are made up (procfs, sysfs, ...); unknown: yes."""
        buf = self._c.create_string_buffer(256)
        if self._libc.fstatfs(self._c.c_int(fd), buf) != 0:
            return True
        return struct.unpack_from("l", buf.raw)[0] in PSEUDO_FS


class FileWorkers:
    """Threads running file jobs in arrival order (one thread: strictly one after another)."""

    def __init__(self, name, count, maxsize=0):
        self.jobs = queue.Queue(maxsize)
        for i in range(count):
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn):
        self.jobs.put(fn)

    def _run(self):
        run_jobs(self.jobs, "file")


creds = None
files = None  # stat, list, mkdir, remove, rename, reads
uploads = None  # one thread: an upload's open, chunks and end stay in order


def start_files():
    global creds, files, uploads
    creds = ThreadCredentials()
    files = FileWorkers("files", FILE_WORKERS)
    uploads = FileWorkers("upload", 1, UPLOAD_QUEUE_CHUNKS)


def count_of(value):
    """A byte count from the agent; 0 when it is not one."""
    return value if isinstance(value, int) and value > 0 else 0


def acting_as(req):
    """On a file worker: switches to the request's user; returns its identity."""
    ident = identity_of(req)
    creds.act_as(ident)
    return ident


def resolve(req, ident, key="path"):
    path = req.get(key)
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"invalid {key}")
    if not path.startswith("/"):
        path = os.path.join(ident.home, path)
    return os.path.normpath(path)


def entry(path, st=None):
    if st is None:
        st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        kind = "dir"
    elif stat.S_ISLNK(st.st_mode):
        kind = "symlink"
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "other"
    out = {
        "name": os.path.basename(path) or "/",
        "path": path,
        "type": kind,
        "size": st.st_size,
        "mode": stat.S_IMODE(st.st_mode),
        "mtimeMs": int(st.st_mtime * 1000),
        "uid": st.st_uid,
        "gid": st.st_gid,
    }
    if kind == "symlink":
        try:
            out["target"] = os.readlink(path)
        except OSError:
            pass
    return out


def makedirs_owned(path, uid=None, gid=None):
    """mkdir -p. With uid/gid (a root caller), each directory it creates is given to them through a
    descriptor opened without following links: one swapped for a symlink meanwhile is refused, not
    chowned. File ops pass none: they run as their user, whose directories are theirs already."""
    missing = []
    p = path
    while not os.path.exists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            continue
        if uid is not None:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchown(fd, uid, gid)
            finally:
                os.close(fd)
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)


def check_regular(st, path):
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if not stat.S_ISREG(st.st_mode):
        kind = "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a FIFO or socket"
        raise OpError("NOT_A_REGULAR_FILE", f"{path} is {kind}, not a regular file: only regular files can be read")


def open_regular(path):
    """Opens a regular file to read. Anything else (a device, a FIFO, a socket, the guest's own
    channel through /proc/1/fd) is refused before it is opened and again after (it may have been
    swapped meanwhile), and never read from. O_NONBLOCK: opening a FIFO cannot hang."""
    check_regular(os.stat(path), path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        check_regular(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


_reads = {}  # channel -> FileRead


class FileRead:
    """A file streamed to the agent, flow-controlled like exec output: at most `window` bytes sent
    and not yet acked, past that it waits for acks. Its work runs as file-worker jobs, one at a time
    (`busy`); acks and an abort come from the main loop."""

    def __init__(self, channel, req):
        self.channel = channel
        self.req = req
        self.window = max(CHUNK, count_of(req.get("window")) or READ_WINDOW)
        self.fd = None
        self.size = None  # None: unknown (read up to UNKNOWN_SIZE_MAX)
        self.sent = 0
        self.unacked = 0
        self.lock = threading.Lock()
        self.busy = True  # a job of this read is queued or running
        self.cancelled = False
        self.finished = False

    def open(self):
        """The first job: opens the file as the request's user."""
        try:
            path = resolve(self.req, acting_as(self.req))
            self.fd = open_regular(path)
            st = os.fstat(self.fd)
            if st.st_size > 0 and not creds.on_pseudo_fs(self.fd):
                self.size = st.st_size
        except Exception as e:  # noqa: BLE001 - reported to the caller
            return self.end(lambda: op_failure(self.channel, self.req, e))
        send_json(self.channel, {"type": "file", "size": self.size})
        self.pump()

    def pump(self):
        """Sends what the window allows, then waits for acks (ends the job) or ends the read."""
        while True:
            with self.lock:
                cancelled = self.cancelled
                room = self.window - self.unacked
                if not cancelled and room <= 0:
                    self.busy = False
                    return
            if cancelled:
                return self.end(lambda: send_error(self.channel, "CANCELLED", "the read was cancelled"))
            # a declared size is a hard stop; an unknown one is read one byte past its cap
            left = (self.size if self.size is not None else UNKNOWN_SIZE_MAX + 1) - self.sent
            if left <= 0:
                return self.end(self.done)
            try:
                data = os.read(self.fd, min(CHUNK, room, left))
            except BlockingIOError:
                return self.end(lambda: send_error(self.channel, "NOT_A_REGULAR_FILE", "the file has no data to read now (it would block)"))
            except OSError as e:
                return self.end(lambda: op_failure(self.channel, self.req, e))
            if not data:
                if self.size is not None:
                    msg = f"the file shrank while it was read ({self.sent} of {self.size} bytes)"
                    return self.end(lambda: send_error(self.channel, "GUEST_ERROR", msg))
                return self.end(self.done)
            self.sent += len(data)
            if self.size is None and self.sent > UNKNOWN_SIZE_MAX:
                msg = f"the file reports no size and holds more than {UNKNOWN_SIZE_MAX} bytes"
                return self.end(lambda: send_error(self.channel, "PAYLOAD_TOO_LARGE", msg))
            with self.lock:
                self.unacked += len(data)
            send(T_FILE, self.channel, data)

    def done(self):
        send(T_FILE, self.channel)
        send_json(self.channel, {"type": "result", "value": {"size": self.sent}})

    def end(self, report):
        with self.lock:
            self.finished = True
            self.busy = False
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        _reads.pop(self.channel, None)
        report()

    # -- from the main loop --
    def on_ack(self, n):
        with self.lock:
            self.unacked = max(0, self.unacked - n)
            if self.busy or self.finished or self.unacked > self.window // 2:
                return
            self.busy = True
        files.submit(self.pump)

    def cancel(self):
        with self.lock:
            self.cancelled = True
            if self.busy or self.finished:
                return  # the running job sees it
            self.busy = True
        files.submit(self.pump)


_uploads = {}  # channel -> Upload, or None for a refused one whose chunks are dropped (upload thread)


class Upload:
    """A file write in progress, on the upload thread as its user: chunks land in a temp file beside
    the target, which replaces the target at the end. The directory is held by descriptor, so a path
    swapped for a symlink meanwhile cannot move the temp file or the final rename elsewhere."""

    def __init__(self, channel, req, ident):
        self.channel = channel
        self.req = req
        self.ident = ident
        self.path = resolve(req, ident)
        parent, self.name = os.path.split(self.path)
        if not self.name:
            raise IsADirectoryError(errno.EISDIR, "is a directory", self.path)
        makedirs_owned(parent)
        self.fd = None
        self.tmp = None
        self.failed = None
        self.dir_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                target = os.stat(self.name, dir_fd=self.dir_fd)
            except (FileNotFoundError, NotADirectoryError):
                target = None
            if target is not None and stat.S_ISDIR(target.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", self.path)
            self.create_temp()
        except BaseException:
            self.abort()
            raise

    def create_temp(self):
        # O_EXCL|O_NOFOLLOW: a name planted in advance (a symlink, a file) is never opened
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(8):
            name = f".forkbox-upload-{os.urandom(8).hex()}"
            try:
                self.fd = os.open(name, flags, 0o600, dir_fd=self.dir_fd)
            except FileExistsError:
                continue
            except OSError as e:
                e.filename = self.path  # the caller knows the target, not the temp name
                raise
            self.tmp = name
            return
        raise FileExistsError(errno.EEXIST, "no free temp file name", os.path.dirname(self.path))

    def chunk(self, data):
        if self.failed is not None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as e:
            self.failed = e

    def finish(self):
        creds.act_as(self.ident)
        try:
            if self.failed is not None:
                raise self.failed
            mode = self.req.get("mode")
            os.fchmod(self.fd, int(mode) if mode is not None else 0o644)
            os.close(self.fd)
            self.fd = None
            os.rename(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self.tmp = None
            return entry(self.path, os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False))
        finally:
            self.abort()

    def abort(self):
        """Closes what is open and removes the temp file if it is still there."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.tmp is not None:
            try:
                creds.act_as(self.ident)
                os.unlink(self.tmp, dir_fd=self.dir_fd)
            except OSError:
                pass
            self.tmp = None
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


def upload_open(channel, req):
    try:
        _uploads[channel] = Upload(channel, req, acting_as(req))
    except Exception as e:  # noqa: BLE001 - reported to the caller
        _uploads[channel] = None
        op_failure(channel, req, e)


def upload_data(channel, data):
    if channel not in _uploads:
        return
    up = _uploads[channel]
    if data:
        if up is not None:
            up.chunk(data)
        return
    del _uploads[channel]
    if up is not None:
        run_op(lambda _c, _r: up.finish(), channel, up.req)


def upload_abort(channel, reply=True):
    """The agent's caller went away: the temp file goes, the target is untouched."""
    up = _uploads.pop(channel, None)
    if up is None:
        return
    up.abort()
    if reply:
        send_error(channel, "CANCELLED", "the upload was cancelled")


def forget_files():
    """After a resync: the old agent's reads stop, its uploads go with their temp files."""
    for rd in list(_reads.values()):
        rd.cancel()
    uploads.submit(lambda: [upload_abort(ch, reply=False) for ch in list(_uploads)])


def op_list(channel, req, ident):
    """Answers in one frame built here: entries are capped so it stays under the frame limit."""
    root = resolve(req, ident)
    depth = max(1, int(req.get("depth") or 1))
    parts = []
    size = 0

    def too_large():
        return OpError(
            "RESOURCE_LIMIT_EXCEEDED",
            f"the listing of {root} (depth {depth}) has more than {MAX_LIST_ENTRIES} entries or "
            f"{MAX_LIST_BYTES >> 20} MiB: list a subdirectory, or fewer levels",
        )

    def walk(d, level):
        nonlocal size
        items = []
        with os.scandir(d) as it:
            for e in it:
                items.append(e)
                if len(parts) + len(items) > MAX_LIST_ENTRIES:
                    raise too_large()
        items.sort(key=lambda e: e.name)
        for e in items:
            try:
                part = json.dumps(entry(e.path, e.stat(follow_symlinks=False)), separators=(",", ":"))
            except FileNotFoundError:
                continue
            size += len(part) + 1
            if size > MAX_LIST_BYTES:
                raise too_large()
            parts.append(part)
            if level < depth and e.is_dir(follow_symlinks=False):
                try:
                    walk(e.path, level + 1)
                except PermissionError:
                    pass

    if not os.path.isdir(root):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", root) if os.path.exists(root) else FileNotFoundError(errno.ENOENT, "no such file or directory", root)
    walk(root, 1)
    send(T_JSON, channel, ('{"type":"result","value":[' + ",".join(parts) + "]}").encode())
    return NO_REPLY


def op_stat(channel, req, ident):
    return entry(resolve(req, ident))


def op_mkdir(channel, req, ident):
    path = resolve(req, ident)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)
    makedirs_owned(path)
    return entry(path)


def op_remove(channel, req, ident):
    path = resolve(req, ident)
    if path == "/":
        raise PermissionError(errno.EPERM, "refusing to remove /", path)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        if req.get("recursive", True):
            shutil.rmtree(path)  # fd-based: it does not follow symlinks planted in the tree
        else:
            os.rmdir(path)
    else:
        os.unlink(path)
    return {}


def op_rename(channel, req, ident):
    src = resolve(req, ident, "from")
    dst = resolve(req, ident, "to")
    makedirs_owned(os.path.dirname(dst))
    os.rename(src, dst)
    return entry(dst)


FILE_OPS = {"stat": op_stat, "list": op_list, "mkdir": op_mkdir, "remove": op_remove, "rename": op_rename}


def run_file_op(fn, channel, req):
    """A file op as a worker job, as the request's user."""
    run_op(lambda c, r: fn(c, r, acting_as(r)), channel, req)


def op_usage(channel, req):
    """Bytes used on the writable filesystems (each is its own tmpfs)."""
    used = 0
    for mount in ("/work", "/home", "/tmp"):
        try:
            st = os.statvfs(mount)
        except OSError:
            continue
        used += (st.f_blocks - st.f_bfree) * st.f_frsize
    return {"usedBytes": used}


def op_ping(channel, req):
    return {"version": VERSION, "uptimeMs": int((time.monotonic() - _started) * 1000)}


def op_configure(channel, req):
    """Per-sandbox settings; after a restore from a shared snapshot this is the first request.
    The daemon itself holds no randomness or ids that must differ between sandboxes; its kernels do."""
    env = check_env(req.get("env"))
    if not req.get("merge"):
        _default_env.clear()
    _default_env.update(env)
    # kernels that outlived a restore get the new env and fresh random state
    kernel_env = dict(env)
    loop.call(lambda: configure_contexts(kernel_env, bool(req.get("merge")), bool(req.get("restored"))))
    if not req.get("restored"):
        return {}
    # a snapshot may hold requests of the agent it was taken under: forget them, and have the new
    # agent start past their channels so none of their frames lands on one of its requests
    forget_requests(keep=channel)
    return {"nextChannel": _max_channel + 1}


SIMPLE_OPS = {
    "ping": op_ping,
    "usage": op_usage,
    "configure": op_configure,
}


def op_failure(channel, req, e):
    """Answers a failed request with the error's code."""
    if isinstance(e, OpError):
        send_error(channel, e.code, str(e))
    elif isinstance(e, OSError):
        send_error(channel, os_error_code(e), f"{e.strerror or e}: {e.filename or req.get('path', '')}")
    elif isinstance(e, ValueError):
        send_error(channel, "VALIDATION_FAILED", str(e))
    else:
        send_error(channel, "GUEST_ERROR", f"{type(e).__name__}: {e}")


def run_op(fn, channel, req):
    try:
        value = fn(channel, req)
    except Exception as e:  # noqa: BLE001 - the daemon must outlive any single request
        op_failure(channel, req, e)
        return
    if value is not NO_REPLY:
        send_json(channel, {"type": "result", "value": value})


# ---- main loop -------------------------------------------------------------------------------


def dispatch(ftype, channel, payload):
    global _max_channel
    if channel > _max_channel:
        _max_channel = channel
    if ftype == T_STDIN:
        with _execs_lock:
            ex = _execs.get(channel)
        if ex is not None:
            ex.stdin(payload)
        return
    if ftype == T_FILE:
        uploads.submit(lambda: upload_data(channel, payload))
        return
    if ftype != T_JSON:
        return
    try:
        req = json.loads(payload)
    except ValueError:
        send_error(channel, "VALIDATION_FAILED", "malformed request")
        return
    op = req.get("op")
    if op == "exec":
        ex = Exec(channel, req)
        with _execs_lock:
            _execs[channel] = ex
        spawner.submit(ex.start)
    elif op == "signal":
        with _execs_lock:
            ex = _execs.get(channel)
        if ex is not None:
            sig = getattr(signal, str(req.get("signal", "SIGKILL")), signal.SIGKILL)
            ex.kill(sig)
    elif op == "resize":
        with _execs_lock:
            ex = _execs.get(channel)
        if ex is not None and ex.pty and ex.stdin_fd is not None:
            try:
                set_winsize(ex.stdin_fd, int(req.get("cols") or 80), int(req.get("rows") or 24))
            except (OSError, ValueError):
                pass
    elif op == "ack" and channel in _reads:
        rd = _reads.get(channel)
        if rd is not None:
            rd.on_ack(count_of(req.get("bytes")))
    elif op == "ack":
        with _execs_lock:
            ex = _execs.get(channel)
        if ex is not None:
            n = int(req.get("bytes") or 0)
            loop.call(lambda: ex.on_ack(n))
        else:
            loop.call(lambda: op_proc_ack(channel, req))
    elif op in PROC_OPS:
        fn = PROC_OPS[op]
        loop.call(lambda: fn(channel, req))
    elif op == "write":
        uploads.submit(lambda: upload_open(channel, req))
    elif op == "read":
        rd = _reads[channel] = FileRead(channel, req)
        files.submit(rd.open)
    elif op == "abort":
        rd = _reads.get(channel)
        if rd is not None:
            rd.cancel()
        else:
            uploads.submit(lambda: upload_abort(channel))
    elif op in FILE_OPS:
        fn = FILE_OPS[op]
        files.submit(lambda: run_file_op(fn, channel, req))
    elif op in CONTEXT_OPS:
        fn = CONTEXT_OPS[op]
        loop.call(lambda: fn(channel, req))
    elif op in SIMPLE_OPS:
        run_op(SIMPLE_OPS[op], channel, req)
    else:
        send_error(channel, "VALIDATION_FAILED", f"unknown op: {op}")


def read_exact(buf, n):
    while len(buf) < n:
        data = os.read(0, max(CHUNK, n - len(buf)))
        if not data:
            return None
        buf += data
    return buf


# ---- re-attach ---------------------------------------------------------------------------------
# The agent talks to us through FIFOs that outlive it. A new agent process (after a crash) sends
# SIGUSR2 before anything else: we drop the half-read frame the old one may have left, drain what
# it wrote, forget its requests, and answer {"type": "resynced"} on channel 0, which the new agent
# finds in the byte stream (anything before it belongs to the old agent).


class Resync(Exception):
    pass


_max_channel = 0


def on_resync_signal(signum, frame):
    raise Resync()


def resync(buf):
    buf.clear()
    os.set_blocking(0, False)
    try:
        while os.read(0, CHUNK):
            pass
    except (BlockingIOError, InterruptedError):
        pass
    finally:
        os.set_blocking(0, True)
    forget_requests()
    send_json(0, {"type": "resynced", "nextChannel": _max_channel + 1, "version": VERSION})


def forget_requests(keep=None):
    """What an agent that is gone started can no longer be answered (after a re-attach, or in a
    restored snapshot): commands end as if their caller went away; cells finish unheard; kernels,
    files and setsid'd processes stay. Their last frames go out on channels below the next one the
    new agent is told to use."""
    with _execs_lock:
        execs = [ex for channel, ex in _execs.items() if channel != keep]
        for channel in [c for c in _execs if c != keep]:
            del _execs[channel]
    for ex in execs:
        ex.kill(signal.SIGKILL)
    forget_files()
    loop.call(forget_cells)


def apply_limits():
    """Rlimits on what we spawn, so the common runaway fails inside its process instead of
    tripping the sandbox-wide cgroup limit (which stops the whole sandbox under gVisor)."""
    for name, var in (("RLIMIT_AS", "FORKBOX_RLIMIT_AS"), ("RLIMIT_NPROC", "FORKBOX_RLIMIT_NPROC")):
        value = os.environ.get(var)
        if value:
            try:
                resource.setrlimit(getattr(resource, name), (int(value), int(value)))
            except (ValueError, OSError) as e:
                print(f"forkbox-guest: cannot set {name}: {e}", file=sys.stderr)


def prepare_home():
    """/home and /work are fresh tmpfs in every sandbox: give the default user a home and /work."""
    try:
        pw = pwd.getpwnam(DEFAULT_USER)
    except KeyError:
        return
    if not os.path.isdir(pw.pw_dir):
        if os.path.isdir("/etc/skel"):
            shutil.copytree("/etc/skel", pw.pw_dir, symlinks=True)
        else:
            os.makedirs(pw.pw_dir)
        for root, dirs, files in os.walk(pw.pw_dir):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.lchown(name, pw.pw_uid, pw.pw_gid)
    if os.path.isdir("/work"):
        os.chown("/work", pw.pw_uid, pw.pw_gid)


def prepare_resolver():
    """Names go to the platform's resolver: the host redirects the sandbox's port 53 to it, so one
    fixed address serves every sandbox, whichever network slot a restore puts it in."""
    nameserver = os.environ.get("FORKBOX_NAMESERVER")
    if nameserver:
        with open("/etc/resolv.conf", "w") as f:
            f.write(f"nameserver {nameserver}\noptions timeout:2 attempts:2\n")


def main():
    # Our own stdout is the wire; nothing else may write to it.
    sys.stdout = sys.stderr
    # nor open our fds or memory through /proc (belt and braces: nothing users run sees our pid)
    _, libc = _libc()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    apply_limits()
    global loop, spawner
    loop = IOLoop()
    spawner = Spawner()
    start_files()
    try:
        prepare_home()
    except OSError as e:
        print(f"forkbox-guest: cannot prepare home: {e}", file=sys.stderr)
    try:
        prepare_resolver()
    except OSError as e:
        print(f"forkbox-guest: cannot write resolv.conf: {e}", file=sys.stderr)
    send_json(0, {"type": "ready", "version": VERSION, "pid": os.getpid()})
    buf = bytearray()
    signal.signal(signal.SIGUSR2, on_resync_signal)
    while True:
        try:
            if read_exact(buf, HEADER.size) is None:
                break
            length, ftype, channel = HEADER.unpack_from(buf)
            if length > MAX_FRAME:
                # a corrupt stream: wait for an agent to resync it
                print("forkbox-guest: oversize frame, dropping input until a resync", file=sys.stderr)
                buf.clear()
                signal.pause()
                continue
            if read_exact(buf, HEADER.size + length) is None:
                break
            payload = bytes(buf[HEADER.size : HEADER.size + length])
            del buf[: HEADER.size + length]
            dispatch(ftype, channel, payload)
        except Resync:
            resync(buf)
    # Agent went away: nothing can reach us any more.
    os._exit(0)


if __name__ == "__main__":
    main()
