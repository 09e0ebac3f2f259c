"""The daemon's start and its read loop: prepares the sandbox, says ready, then serves frames."""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import signal
import sys
import threading

from . import identity, sudo
from .dispatch import VERSION, dispatch, resync
from .spawner import PR_SET_DUMPABLE, libc_handle
from .state import Guest
from .users import DEFAULT_USER, IMAGE_DIRS
from .wire import CHUNK, HEADER, MAX_FRAME, Wire, decode_header

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from types import FrameType

    from .messages import ReadyMessage


class Resync(Exception):
    """SIGUSR2: a new agent took over the FIFOs."""


def on_resync_signal(signum: int, frame: FrameType | None) -> None:
    raise Resync()


def read_exact(buf: bytearray, n: int, fd: int = 0) -> bytearray | None:
    """Reads until `buf` holds `n` bytes; None at the end of the stream."""
    while len(buf) < n:
        data = os.read(fd, max(CHUNK, n - len(buf)))
        if not data:
            return None
        buf += data
    return buf


def apply_limits() -> None:
    """Rlimits on what we spawn, so the common runaway fails inside its process instead of
    tripping the sandbox-wide cgroup limit (which stops the whole sandbox under gVisor)."""
    for name, var in (("RLIMIT_AS", "FORKBOX_RLIMIT_AS"), ("RLIMIT_NPROC", "FORKBOX_RLIMIT_NPROC")):
        value = os.environ.get(var)
        if value:
            try:
                resource.setrlimit(getattr(resource, name), (int(value), int(value)))
            except (ValueError, OSError) as e:
                print(f"forkbox-guest: cannot set {name}: {e}", file=sys.stderr)


def prepare_home() -> None:
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
    # a user's image keeps its own /work as it made it
    if os.path.isdir("/work") and not IMAGE_DIRS:
        os.chown("/work", pw.pw_uid, pw.pw_gid)


def prepare_resolver() -> None:
    """Names go to the platform's resolver: the host redirects the sandbox's port 53 to it, so one
    fixed address serves every sandbox, whichever network slot a restore puts it in."""
    nameserver = os.environ.get("FORKBOX_NAMESERVER")
    if nameserver:
        with open("/etc/resolv.conf", "w") as f:
            f.write(f"nameserver {nameserver}\noptions timeout:2 attempts:2\n")


def serve(g: Guest) -> None:
    """Reads frames from the agent until it goes away."""
    buf = bytearray()
    signal.signal(signal.SIGUSR2, on_resync_signal)
    while True:
        try:
            if read_exact(buf, HEADER.size) is None:
                break
            length, ftype, channel = decode_header(buf)
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
            dispatch(g, ftype, channel, payload)
        except Resync:
            resync(g, buf)


def main() -> None:
    # Our own stdout is the wire; nothing else may write to it.
    sys.stdout = sys.stderr
    # nor open our fds or memory through /proc (belt and braces: nothing users run sees our pid)
    libc_handle().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    apply_limits()
    threading.stack_size(512 * 1024)
    g = Guest(Wire(1))
    identity.prepare()
    g.start()
    try:
        prepare_home()
    except OSError as e:
        print(f"forkbox-guest: cannot prepare home: {e}", file=sys.stderr)
    try:
        prepare_resolver()
    except OSError as e:
        print(f"forkbox-guest: cannot write resolv.conf: {e}", file=sys.stderr)
    sudo.start(g)
    ready: ReadyMessage = {"type": "ready", "version": VERSION, "pid": os.getpid()}
    g.wire.send_json(0, ready)
    serve(g)
    # Agent went away: nothing can reach us any more.
    os._exit(0)
