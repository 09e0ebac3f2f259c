"""Who a request acts as: users and their identities (cached), paths resolved for them, env checks."""

from __future__ import annotations

import os
import pwd
import socket
import struct
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any

# a user's image names its own (its USER and WORKDIR), in the guest's environment from the start
DEFAULT_USER = os.environ.get("FORKBOX_DEFAULT_USER") or "user"
DEFAULT_CWD = os.environ.get("FORKBOX_DEFAULT_CWD") or None
IMAGE_DIRS = "FORKBOX_DEFAULT_USER" in os.environ
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# room for one SCM_CREDENTIALS message in a recvmsg's ancillary buffer
CREDS_SPACE = socket.CMSG_SPACE(CREDS.size)


def peer_credentials(anc: Iterable[tuple[int, int, bytes]]) -> tuple[int, int, int] | None:
    """(pid, uid, gid) a message came with on a socket with SO_PASSCRED (the kernel checks them: a
    process can claim only its own unless privileged; the pid is translated to our namespace).
    None when there are none: with none sent, gVisor attaches pid 0 and the overflow ids, which
    are no identity (and pid 0 given to kill() would be our own process group)."""
    for level, kind, cdata in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(cdata) >= CREDS.size:
            pid, uid, gid = CREDS.unpack_from(cdata)
            return (pid, uid, gid) if pid > 0 else None
    return None


def check_env(env: object) -> dict[str, str]:
    """Environment variables as execve takes them: names non-empty without '=' or NUL, values
    without NUL. Returns them as strings; raises ValueError (the protocol refuses these too)."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise ValueError("env must be an object of names to values")
    out: dict[str, str] = {}
    for key, val in env.items():  # pyright: ignore[reportUnknownVariableType]
        name, value = str(key), str(val)  # pyright: ignore[reportUnknownArgumentType]
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"invalid environment variable name {name!r}: names are non-empty, without '=' or NUL")
        if "\0" in value:
            raise ValueError(f"environment variable {name} has a NUL byte in its value")
        out[name] = value
    return out


class Identity:
    __slots__ = ("name", "uid", "gid", "groups", "home")

    def __init__(self, name: str, uid: int, gid: int, groups: tuple[int, ...], home: str) -> None:
        self.name, self.uid, self.gid, self.groups, self.home = name, uid, gid, groups, home


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class Users:
    """The sandbox's users as /etc/passwd and /etc/group say, re-read only when those change."""

    def __init__(self) -> None:
        self._pw: dict[str, tuple[int | None, pwd.struct_passwd]] = {}
        self._identities: dict[str, tuple[tuple[object, ...], Identity]] = {}

    def getpw(self, user: str) -> pwd.struct_passwd:
        """pwd.getpwnam, cached until /etc/passwd changes (parsing it costs ~1 ms under gVisor)."""
        stamp = _mtime("/etc/passwd")
        hit = self._pw.get(user)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        pw = pwd.getpwnam(user)
        self._pw[user] = (stamp, pw)
        return pw

    def identity_of(self, req: Mapping[str, Any]) -> Identity:
        """Who a file op acts as: its `user`, else the default user (as for exec)."""
        name = req.get("user") or DEFAULT_USER
        if not isinstance(name, str):
            raise ValueError("invalid user")
        try:
            pw = self.getpw(name)
        except KeyError:
            raise ValueError(f"unknown user: {name}") from None
        stamp = (_mtime("/etc/group"), tuple(pw))
        hit = self._identities.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        groups = () if pw.pw_uid == 0 else tuple(sorted(set(os.getgrouplist(name, pw.pw_gid))))
        ident = Identity(name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir)
        self._identities[name] = (stamp, ident)
        return ident


def resolve(req: Mapping[str, Any], ident: Identity, key: str = "path") -> str:
    """The request's path `key`, absolute: a relative one is taken from the user's home."""
    path = req.get(key)
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"invalid {key}")
    if not path.startswith("/"):
        path = os.path.join(ident.home, path)
    return os.path.normpath(path)


def login_shell() -> str:
    """The shell a command string runs in: bash, as E2B's commands.run asks for, else the image's
    /bin/sh (busybox, alpine and distroless-with-shell images have no bash)."""
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"
