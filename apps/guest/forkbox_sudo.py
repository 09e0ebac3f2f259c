#!/opt/forkbox/runtime/bin/python3 -S
"""sudo for forkbox sandboxes (installed as /usr/bin/sudo in forkbox's templates).

gVisor ignores set-user-ID bits, so Debian's sudo cannot work in a sandbox. This one asks the
sandbox's guest daemon (forkbox_guest/sudo.py, over /run/forkbox/sudo.sock) to run the command as
the target user, handing it this process's stdin, stdout and stderr, and waits for it: its exit
status is ours, signals we get are sent on. On a terminal the command gets a terminal of its own
(as sudo's use_pty), relayed through this one. The options are sudo's, without passwords: who may
use it is decided by the daemon, password-less (root, the sandbox's default user, the sudo group).
"""

from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

SOCKET = "/run/forkbox/sudo.sock"
MSG_LEN = struct.Struct(">I")
# sudoers' env_keep on Debian: what reaches the command without -E
KEEP = {"TERM", "COLORTERM", "DISPLAY", "XAUTHORITY", "LANG", "LANGUAGE", "TZ", "LS_COLORS", "COLORS", "PS1", "PS2", "EDITOR", "VISUAL"}
RELAYED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGINT, signal.SIGQUIT)
VALUE_SHORT = set("ugDCprtTURh")
VALUE_LONG = {"user", "group", "chdir", "close-from", "prompt", "role", "type", "command-timeout", "other-user", "chroot", "host"}
FLAG_LONG = {
    "login": "i",
    "shell": "s",
    "preserve-env": "E",
    "non-interactive": "n",
    "stdin": "S",
    "askpass": "A",
    "background": "b",
    "set-home": "H",
    "preserve-groups": "P",
    "validate": "v",
    "list": "l",
    "reset-timestamp": "k",
    "remove-timestamp": "K",
    "help": "h",
    "version": "V",
    "edit": "e",
}
USAGE = """usage: sudo -h | -K | -k | -V
usage: sudo -v [-ABkNnS] [-g group] [-h host] [-p prompt] [-u user]
usage: sudo -l [-ABkNnS] [-g group] [-h host] [-p prompt] [-U user] [-u user] [command [arg ...]]
usage: sudo [-ABbEHkNnPS] [-C num] [-D directory] [-g group] [-h host] [-p prompt] [-R directory] [-T timeout] [-u user] [VAR=value] [-i | -s] [command [arg ...]]
"""


class Usage(Exception):
    pass


def die(message: str, code: int = 1) -> NoReturn:
    sys.stderr.write(f"sudo: {message}\n")
    sys.exit(code)


def parse(args: list[str]) -> tuple[set[str], dict[str, str], list[str], dict[str, str], list[str]]:
    """sudo's command line: (flags, values, preserve list, VAR=value assignments, command)."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    preserve: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name == "preserve-env":
                if eq:
                    preserve.extend(v for v in value.split(",") if v)
                else:
                    flags.add("E")
            elif name in FLAG_LONG and not eq:
                flags.add(FLAG_LONG[name])
            elif name in VALUE_LONG:
                if not eq:
                    i += 1
                    if i >= len(args):
                        raise Usage(f"option '--{name}' requires an argument")
                    value = args[i]
                values[name[0] if name != "chdir" else "D"] = value
            else:
                raise Usage(f"unrecognized option '{a}'")
            i += 1
            continue
        if not a.startswith("-") or a == "-":
            break
        j = 1
        while j < len(a):
            c = a[j]
            if c == "h" and j == len(a) - 1 and i == len(args) - 1:
                flags.add("h")  # -h alone is help; -h host names a host
            elif c in VALUE_SHORT:
                value = a[j + 1 :]
                if not value:
                    i += 1
                    if i >= len(args):
                        raise Usage(f"option requires an argument -- '{c}'")
                    value = args[i]
                values[c] = value
                break
            elif c in "isEnSAbHPvlkKVeN":
                flags.add(c)
            else:
                raise Usage(f"invalid option -- '{c}'")
            j += 1
        i += 1
    assign: dict[str, str] = {}
    while i < len(args) and "=" in args[i] and not args[i].startswith("=") and args[i].split("=", 1)[0].replace("_", "a").isalnum():
        name, _, value = args[i].partition("=")
        assign[name] = value
        i += 1
    return flags, values, preserve, assign, args[i:]


def send(sock: socket.socket, msg: dict[str, Any], fds: Sequence[int] = (), creds: bool = False) -> None:
    """A length-prefixed JSON message; with `creds`, our ids ride on it (the daemon trusts only
    those: the kernel refuses ids that are not ours)."""
    data = json.dumps(msg, separators=(",", ":")).encode()
    data = MSG_LEN.pack(len(data)) + data
    anc: list[tuple[int, int, bytes]] = []
    if fds:
        anc.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes()))
    if creds:
        anc.append((socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", os.getpid(), os.getuid(), os.getgid())))
    sent = sock.sendmsg([data], anc)
    if sent < len(data):
        sock.sendall(data[sent:])


def recv(sock: socket.socket, want_fd: bool = False) -> tuple[dict[str, Any] | None, int | None]:
    """One message and the fd that came with it (or None); None at the end of the stream."""
    head, fd = b"", None
    while len(head) < MSG_LEN.size:
        data, fds, _, _ = socket.recv_fds(sock, MSG_LEN.size - len(head), 1 if want_fd else 0)
        if fds:
            fd = fds[0]
        if not data:
            return None, fd
        head += data
    (n,) = MSG_LEN.unpack(head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            return None, fd
        body += chunk
    return json.loads(body), fd


def connect() -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(SOCKET)
    except OSError as e:
        die(f"the sandbox's sudo service is not reachable ({SOCKET}: {e.strerror or e})")
    return sock


def finish(status: int) -> NoReturn:
    """Ends as the command did: its exit code, or killed by its signal."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    sys.exit(code)


def relay_signals(sock: socket.socket, which: Sequence[int]) -> None:
    def relay(signum: int, frame: object) -> None:
        try:
            send(sock, {"signal": signum})
        except OSError:
            pass

    for s in which:
        signal.signal(s, relay)


def write_all(fd: int, data: bytes) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


def run_on_terminal(sock: socket.socket, master: int) -> int:
    """Relays our terminal to the command's until it exits; returns its wait status."""
    import fcntl
    import termios
    import tty

    def copy_size(*_: object) -> None:
        try:
            fcntl.ioctl(master, termios.TIOCSWINSZ, fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))
        except OSError:
            pass

    signal.signal(signal.SIGWINCH, copy_size)
    relay_signals(sock, RELAYED[:5])
    saved = termios.tcgetattr(0)
    tty.setraw(0, termios.TCSADRAIN)  # what was typed ahead is the command's
    # gVisor's terminal still signals ^C, ^\ and ^Z in raw mode: they go on as the keys they were,
    # for the command's terminal to signal its own foreground job
    keys: dict[int, int] = {signal.SIGINT: termios.VINTR, signal.SIGQUIT: termios.VQUIT, signal.SIGTSTP: termios.VSUSP}

    def type_key(signum: int, frame: object) -> None:
        key = saved[6][keys[signum]]
        try:
            write_all(master, key if isinstance(key, bytes) else bytes([key]))
        except OSError:
            pass

    for sig in keys:
        signal.signal(sig, type_key)
    status: int | None = None
    try:
        inputs: list[int] = [0, master, sock.fileno()]
        while status is None or master in inputs:
            try:
                ready, _, _ = select.select(inputs, [], [], 0.05 if status is not None else None)
            except InterruptedError:
                continue
            if not ready and status is not None:
                break  # exited, and its terminal has gone quiet
            for fd in ready:
                if fd == 0:
                    data = os.read(0, 65536)
                    if data:
                        write_all(master, data)
                    else:
                        inputs.remove(0)
                elif fd == master:
                    try:
                        data = os.read(master, 65536)
                    except OSError:
                        data = b""
                    if data:
                        write_all(1, data)
                    else:
                        inputs.remove(master)
                else:
                    msg, _ = recv(sock)
                    inputs.remove(sock.fileno())
                    if msg is None or "exit" not in msg:
                        die("the sudo service went away")
                    status = msg["exit"]
                    inputs = [fd for fd in inputs if fd != 0]
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)
    assert status is not None
    return status


def main() -> None:
    try:
        flags, values, preserve, assign, command = parse(sys.argv[1:])
    except Usage as e:
        sys.stderr.write(f"sudo: {e}\n{USAGE}")
        sys.exit(1)
    if "h" in flags:
        sys.stdout.write(f"sudo - execute a command as another user (forkbox)\n\n{USAGE}")
        sys.exit(0)
    if "V" in flags:
        print("Sudo version 1.9 (forkbox: served by the sandbox's guest, password-less)")
        sys.exit(0)
    if "e" in flags:
        die("sudoedit is not supported in forkbox sandboxes: run your editor with sudo")
    if "i" in flags and "s" in flags:
        die("you may not specify both the -i and -s options")
    mode = "login" if "i" in flags else "shell" if "s" in flags else None
    if flags & {"v", "l"} or (flags & {"k", "K"} and not command and not mode):
        sock = connect()
        send(sock, {"check": True}, creds=True)
        msg, _ = recv(sock)
        if not msg or not msg.get("ok"):
            die((msg or {}).get("error") or "the sudo service went away")
        if "l" in flags:
            user = msg.get("user", "")
            print(f"User {user} may run the following commands on this sandbox:\n    (ALL : ALL) NOPASSWD: ALL")
        sys.exit(0)
    if not command and not mode:
        sys.stderr.write(USAGE)
        sys.exit(1)
    env = dict(os.environ) if "E" in flags else {k: v for k, v in os.environ.items() if k in KEEP or k.startswith("LC_")}
    for name in preserve:
        if name in os.environ:
            env[name] = os.environ[name]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    req: dict[str, Any] = {"command": command, "mode": mode, "env": env, "assign": assign, "cwd": values.get("D", cwd), "user": values.get("u") or "root"}
    if "g" in values:
        req["group"] = values["g"]
    if mode == "shell" and os.environ.get("SHELL"):
        req["shell"] = os.environ["SHELL"]
    background = "b" in flags
    on_terminal = not background and os.isatty(0) and os.isatty(1)
    fds: list[int] = []
    if background:
        req["background"] = True
    if on_terminal:
        size = os.get_terminal_size(1)
        req["pty"] = [size.columns or 80, size.lines or 24]
    else:
        for fd in (0, 1, 2):
            try:
                os.fstat(fd)
            except OSError:
                os.open(os.devnull, os.O_RDWR)  # takes the lowest free fd: this one
            fds.append(fd)
    sock = connect()
    send(sock, req, fds, creds=True)
    msg, master = recv(sock, want_fd=on_terminal)
    if msg is None:
        die("the sudo service went away")
    if "error" in msg:
        die(msg["error"])
    if background:
        sys.exit(0)
    if on_terminal:
        if master is None:
            die("no terminal came with the command")
        finish(run_on_terminal(sock, master))
    relay_signals(sock, RELAYED)
    msg, _ = recv(sock)
    if msg is None or "exit" not in msg:
        die("the sudo service went away")
    finish(msg["exit"])


if __name__ == "__main__":
    main()
