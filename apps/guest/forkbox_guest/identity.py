"""The sandbox's identity as its users see it: its hostname, machine id and boot id.

Every sandbox restored from one snapshot would otherwise share them (the snapshot's hostname
`sandbox`, gVisor's boot id, no machine id), and software that tells machines apart by them would
see one machine. The agent names the sandbox (its id) in `configure` after every boot, restore,
claim from the pool, fork and wake; the ids are derived from that name, so a woken sandbox keeps
its own and forks get theirs.
"""

from __future__ import annotations

import os
import sys

from .spawner import BOOT_ID_FILE

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .state import Guest

HOSTNAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def prepare() -> None:
    """At the daemon's start, before the spawner: a boot id file for the users' namespace to bind."""
    try:
        os.makedirs(os.path.dirname(BOOT_ID_FILE), mode=0o755, exist_ok=True)
        _write(BOOT_ID_FILE, _uuid(os.urandom(16).hex()) + "\n", 0o444)
    except OSError as e:
        print(f"forkbox-guest: no boot id file: {e}", file=sys.stderr)


def valid_hostname(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 63 and not name.startswith("-") and set(name) <= HOSTNAME_CHARS


def apply(g: "Guest", hostname: str) -> None:
    """Makes `hostname` the sandbox's name, and its machine and boot ids those derived from it."""
    import hashlib

    digest = hashlib.sha256(f"forkbox\0{hostname}".encode()).hexdigest()
    for path, content, mode in (
        ("/etc/machine-id", digest[:32] + "\n", 0o444),
        (BOOT_ID_FILE, _uuid(digest[32:64]) + "\n", 0o444),
        ("/etc/hostname", hostname + "\n", 0o644),
    ):
        try:
            _write(path, content, mode)
        except OSError as e:
            print(f"forkbox-guest: cannot write {path}: {e}", file=sys.stderr)
    try:
        _name_in_hosts(hostname)
    except OSError as e:
        print(f"forkbox-guest: cannot write /etc/hosts: {e}", file=sys.stderr)

    def set_name() -> None:
        try:
            g.spawner.set_hostname(hostname)
        except (OSError, ValueError) as e:
            print(f"forkbox-guest: cannot set the hostname: {e}", file=sys.stderr)

    # the spawner thread runs requests in order: a command asked for after this sees the name
    g.spawner.submit(set_name)


def _uuid(hex32: str) -> str:
    """A random-style (version 4) UUID from 32 hex digits, as /proc's boot_id reads."""
    h = hex32[:12] + "4" + hex32[13:16] + "89ab"[int(hex32[16], 16) % 4] + hex32[17:32]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _write(path: str, content: str, mode: int) -> None:
    """In place (the users' bind mount of the boot id holds the file itself), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, mode)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, content.encode())
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _name_in_hosts(hostname: str, path: str = "/etc/hosts") -> None:
    """/etc/hosts names the sandbox (127.0.1.1, keeping the template's own names there), so its
    hostname resolves without a resolver."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        lines = ["127.0.0.1\tlocalhost"]
    else:
        with os.fdopen(fd) as f:
            lines = f.read().splitlines()
    entry = f"127.0.1.1\t{hostname} sandbox"
    for i, line in enumerate(lines):
        if line.split()[:1] == ["127.0.1.1"]:
            lines[i] = entry
            break
    else:
        lines.append(entry)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
