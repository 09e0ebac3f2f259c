"""The sudo service: how `sudo` works in a sandbox.

gVisor ignores set-user-ID bits (every process is no-new-privileges), so Debian's sudo cannot raise
anyone's rights. The sandbox's `sudo` is `forkbox_sudo.py` instead: it sends its command, its
environment and its stdin, stdout and stderr (SCM_RIGHTS) to this daemon on a unix socket; the
daemon checks who is asking (SCM_CREDENTIALS, which the kernel checks) and has the spawner start
the command as the target user, in the users' namespaces like every other process. It answers the
command's pid (and, when the caller is on a terminal, the master of a new terminal the command
runs on) and later its wait status. Signals the caller gets are sent on; a caller that goes away
while its command runs takes the command with it (SIGKILL to its process group).

Who may: root, the sandbox's default user (E2B's `user` has password-less sudo), and members of
the `sudo`, `wheel` or `admin` groups. Everything a request holds is checked: a malformed one is
answered with an error and closed, never fatal to the daemon.
"""

from __future__ import annotations

import array
import grp
import json
import os
import pwd
import selectors
import signal
import socket
import stat
import sys

from .spawn import killpg
from .spawner import MSG_LEN, send_msg
from .users import CREDS_SPACE, DEFAULT_USER, check_env, peer_credentials

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any

    from .ioloop import PipeTag, Stream
    from .spawn import Fds
    from .state import Guest

SUDO_DIR = "/run/forkbox"
SUDO_SOCKET = f"{SUDO_DIR}/sudo.sock"
# sudoers' secure_path on Debian: what a command is looked up in, and the PATH it gets
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SUDO_GROUPS = ("sudo", "wheel", "admin")
MAX_REQUEST = 256 * 1024
MAX_SESSIONS = 256
# the signals a caller may send on: what sudo itself relays
RELAYED = {int(s) for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGTSTP, signal.SIGCONT, signal.SIGALRM)}


class SudoError(Exception):
    """Refused: the message is what the caller prints after `sudo: `."""


def start(g: "Guest") -> None:
    """At the daemon's start: listen on SUDO_SOCKET (from the loop thread on)."""
    try:
        os.makedirs(SUDO_DIR, mode=0o755, exist_ok=True)
        os.chown(SUDO_DIR, 0, 0)
        os.chmod(SUDO_DIR, 0o755)
        try:
            os.unlink(SUDO_SOCKET)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(SUDO_SOCKET)
        os.chmod(SUDO_SOCKET, 0o666)
        sock.listen(64)
        sock.setblocking(False)
    except OSError as e:
        print(f"forkbox-guest: no sudo service: {e}", file=sys.stderr)
        return
    server = SudoServer(g, sock)
    g.loop.call(lambda: g.loop.sel.register(sock.fileno(), selectors.EVENT_READ, server))


class SudoServer:
    """On the loop thread: accepts sudo callers."""

    def __init__(self, guest: "Guest", sock: socket.socket) -> None:
        self.guest = guest
        self.sock = sock
        self.sessions: set[SudoSession] = set()

    def on_readable(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            print(f"forkbox-guest: sudo accept failed: {e}", file=sys.stderr)
            return
        if len(self.sessions) >= MAX_SESSIONS:
            _answer(conn, {"error": "too many sudo commands at once"})
            conn.close()
            return
        try:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        except OSError:
            conn.close()
            return
        conn.setblocking(False)
        session = SudoSession(self, conn)
        self.sessions.add(session)
        self.guest.loop.sel.register(conn.fileno(), selectors.EVENT_READ, session)


def _answer(conn: socket.socket, msg: dict[str, Any], fds: list[int] | None = None) -> bool:
    """A short message to a caller (the spawner's framing); False when it cannot take it (gone, or
    not reading)."""
    try:
        send_msg(conn, msg, fds or ())
        return True
    except OSError:
        return False


class SudoSession:
    """One caller: its request, then its command's life (a `Piped` to the loop, without pipes)."""

    def __init__(self, server: SudoServer, conn: socket.socket) -> None:
        self.server = server
        self.conn = conn
        # who is asking: the SCM_CREDENTIALS the request came with (gVisor's SO_PEERCRED names the
        # listener, not the caller; explicit credentials are checked by the kernel: a process can
        # claim only its own ids unless it holds CAP_SETUID)
        self.creds: tuple[int, int] | None = None
        self.buf = bytearray()
        self.fds: list[int] = []
        self.pid: int | None = None
        self.state = "request"  # then "spawning", "running", "closed"
        self.background = False
        self.open_pipes = 0
        self.paused_fds: dict[int, PipeTag] = {}
        self.drain_close = False

    # -- the loop's Piped: exits only --
    def output(self, ftype: Stream, data: bytes) -> None:
        pass

    def maybe_finish(self) -> None:
        pass

    def on_exit(self, status: int) -> None:
        self.server.guest.loop.execs.pop(self.pid or 0, None)
        if self.state == "running":
            _answer(self.conn, {"exit": status})
        self.close()

    # -- the caller's socket --
    def on_readable(self) -> None:
        try:
            data, anc, _, _ = self.conn.recvmsg(65536, socket.CMSG_SPACE(4 * 4) + CREDS_SPACE, socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                self.fds += array.array("i", cdata[: len(cdata) - len(cdata) % 4])
        creds = peer_credentials(anc)
        if creds is not None and self.creds is None and not self.buf and data:
            self.creds = creds[1:]
        if self.state != "request":
            for fd in self.fds:  # only the request brings fds
                os.close(fd)
            self.fds = []
        if not data:
            self.hang_up()
            return
        self.buf += data
        while len(self.buf) >= MSG_LEN.size and self.state != "closed":
            (n,) = MSG_LEN.unpack_from(self.buf)
            if n > MAX_REQUEST:
                self.refuse("the request is too large")
                return
            if len(self.buf) < MSG_LEN.size + n:
                return
            raw = bytes(self.buf[MSG_LEN.size : MSG_LEN.size + n])
            del self.buf[: MSG_LEN.size + n]
            try:
                msg = json.loads(raw)
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
            except ValueError:
                self.refuse("a malformed request")
                return
            if self.state == "request":
                self.on_request(msg)
            elif self.state == "running" and type(msg.get("signal")) is int and msg["signal"] in RELAYED:
                killpg(self.pid, msg["signal"])

    def hang_up(self) -> None:
        """The caller went away: a command it still waited for ends with it."""
        if self.state == "running" and not self.background:
            killpg(self.pid, signal.SIGKILL)
        elif self.state == "spawning":
            self.background = False
            self.state = "orphaned"  # killed as soon as it is known
            return
        self.close()

    def refuse(self, message: str) -> None:
        _answer(self.conn, {"error": message})
        self.close()

    def close(self) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        try:
            self.server.guest.loop.sel.unregister(self.conn.fileno())
        except (KeyError, ValueError):
            pass
        self.conn.close()
        self.server.sessions.discard(self)

    def on_request(self, msg: dict[str, Any]) -> None:
        if self.creds is None:
            self.refuse("the request came without the caller's credentials (SCM_CREDENTIALS)")
            return
        uid, gid = self.creds
        if msg.get("check"):  # sudo -v, -l: may the caller?
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)
            if may_sudo(uid, gid):
                _answer(self.conn, {"ok": True, "user": name})
                self.close()
            else:
                self.refuse(f"{name} is not in the sudoers file.")
            return
        try:
            spec = build_command(msg, uid, gid, self.fds)
        except SudoError as e:
            self.refuse(str(e))
            return
        except (ValueError, TypeError) as e:
            self.refuse(f"invalid request: {e}")
            return
        self.state = "spawning"
        self.background = bool(msg.get("background"))
        g = self.server.guest
        fds, self.fds = self.fds, []

        def spawn() -> None:
            try:
                pid, tty = spawn_command(g, spec, fds)
            except (OSError, ValueError) as e:
                err = e
                g.loop.call(lambda: self.on_spawn_failed(err))
                return
            finally:
                for fd in fds:
                    os.close(fd)
            g.loop.call(lambda: self.on_spawned(pid, tty))

        g.spawner.submit(spawn)

    def on_spawn_failed(self, e: OSError | ValueError) -> None:
        if isinstance(e, OSError) and e.filename:
            message = f"{e.filename}: {e.strerror or e}"
        else:
            message = f"unable to execute the command: {e}"
        self.refuse(message)

    def on_spawned(self, pid: int, tty: int | None) -> None:
        self.pid = pid
        loop = self.server.guest.loop
        orphaned = self.state == "orphaned"
        self.state = "running"
        if orphaned or not _answer(self.conn, {"pid": pid}, [tty] if tty is not None else None):
            killpg(pid, signal.SIGKILL)
        if tty is not None:
            os.close(tty)
        if orphaned or self.background:
            self.state = "detached"
            self.close()
        loop.claim(pid, self)


class Command:
    __slots__ = ("exe", "argv", "env", "cwd", "uid", "gid", "pty")

    def __init__(self, exe: str, argv: list[str], env: dict[str, str], cwd: str, uid: int, gid: int, pty: tuple[int, int] | None) -> None:
        self.exe, self.argv, self.env, self.cwd, self.uid, self.gid, self.pty = exe, argv, env, cwd, uid, gid, pty


def may_sudo(uid: int, gid: int) -> bool:
    if uid == 0:
        return True
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return False
    if name == DEFAULT_USER:
        return True
    try:
        groups = set(os.getgrouplist(name, gid))
    except OSError:
        return False
    for group in SUDO_GROUPS:
        try:
            if grp.getgrnam(group).gr_gid in groups:
                return True
        except KeyError:
            continue
    return False


def _str_list(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError(f"{what} must be a list of strings")
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


def find_command(name: str, cwd: str) -> str:
    """The executable a command name runs, as sudo finds it: a name with a slash is a path (from
    `cwd`), any other is looked up in SECURE_PATH."""
    if "/" in name:
        path = os.path.normpath(os.path.join(cwd, name))
        candidates = [path]
    else:
        candidates = [os.path.join(d, name) for d in SECURE_PATH.split(":")]
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            return path
    raise SudoError(f"{name}: command not found")


def shell_escape(arg: str) -> str:
    """As sudo passes a command to `-s` and `-i` shells: every character but letters, digits, `_`,
    `-` and `$` behind a backslash (so `$VAR` is the target shell's)."""
    return "".join(c if c.isalnum() or c in "_-$" else "\\" + c for c in arg)


def build_command(msg: dict[str, Any], uid: int, gid: int, fds: list[int]) -> Command:
    """What a request asks to run, checked: raises SudoError (refused) or ValueError (malformed)."""
    try:
        caller = pwd.getpwuid(uid)
    except KeyError:
        raise SudoError(f"you do not exist in the passwd database (uid {uid})") from None
    if not may_sudo(uid, gid):
        raise SudoError(f"{caller.pw_name} is not in the sudoers file.")
    command = _str_list(msg.get("command"), "command")
    env = check_env(msg.get("env"))
    assigns = check_env(msg.get("assign"))
    cwd = msg.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise ValueError("cwd must be an absolute path")
    target = msg.get("user") or "root"
    if not isinstance(target, str):
        raise ValueError("user must be a string")
    try:
        pw = pwd.getpwuid(int(target[1:])) if target.startswith("#") else pwd.getpwnam(target)
    except (KeyError, ValueError):
        raise SudoError(f"unknown user {target}") from None
    target_gid = pw.pw_gid
    group = msg.get("group")
    if group is not None:
        if not isinstance(group, str):
            raise ValueError("group must be a string")
        try:
            target_gid = int(group[1:]) if group.startswith("#") else grp.getgrnam(group).gr_gid
        except (KeyError, ValueError):
            raise SudoError(f"unknown group {group}") from None
    if not os.path.isdir(cwd):
        cwd = "/"
    mode = msg.get("mode")
    if mode is None:
        if not command:
            raise ValueError("no command")
        argv = command
        exe = find_command(argv[0], cwd)
    elif mode in ("shell", "login"):
        shell = pw.pw_shell or "/bin/sh"
        caller_shell = msg.get("shell")
        if mode == "shell" and isinstance(caller_shell, str) and caller_shell.startswith("/"):
            shell = caller_shell
        exe = find_command(shell, cwd)
        name = os.path.basename(shell)
        argv = ["-" + name if mode == "login" else name]
        if command:
            argv += ["-c", " ".join(shell_escape(a) for a in command)]
        if mode == "login":
            cwd = pw.pw_dir if os.path.isdir(pw.pw_dir) else "/"
    else:
        raise ValueError("mode must be shell or login")
    pty = msg.get("pty")
    size: tuple[int, int] | None = None
    if pty is not None:
        if not (isinstance(pty, list) and len(pty) == 2 and all(isinstance(v, int) and 0 < v < 10000 for v in pty)):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            raise ValueError("pty must be [cols, rows]")
        size = (pty[0], pty[1])
    elif len(fds) != 3:
        raise ValueError("stdin, stdout and stderr must come with the request")
    out = dict(env)
    out.update(
        {
            "PATH": SECURE_PATH,
            "HOME": pw.pw_dir,
            "SHELL": pw.pw_shell or "/bin/sh",
            "USER": pw.pw_name,
            "LOGNAME": pw.pw_name,
            "MAIL": f"/var/mail/{pw.pw_name}",
            "SUDO_USER": caller.pw_name,
            "SUDO_UID": str(uid),
            "SUDO_GID": str(gid),
            "SUDO_COMMAND": " ".join([exe, *argv[1:]])[:4096],
        }
    )
    out.setdefault("LANG", "C.UTF-8")
    out.update(assigns)
    return Command(exe, argv, out, cwd, pw.pw_uid, target_gid, size)


def spawn_command(g: "Guest", c: Command, fds: list[int]) -> tuple[int, int | None]:
    """On the spawner thread: starts the command; returns its pid and, on a terminal, the master."""
    if c.pty is not None:
        pid, ends = g.spawner.spawn_pty(c.exe, c.argv, c.env, c.cwd, c.uid, c.gid, c.pty[0], c.pty[1])
        return pid, _input_end(ends)
    actions: list[tuple[Any, ...]] = [("fd", 0, 0), ("fd", 1, 1), ("fd", 2, 2)]
    return g.spawner.start_process(c.exe, c.argv, c.env, c.cwd, c.uid, c.gid, actions, fds), None


def _input_end(ends: Fds) -> int:
    """spawn_pty hands two fds of one master: the caller needs one."""
    os.close(ends[1])
    return ends[0]
