"""File ops, each run on a file worker thread as the requesting user: stat, list, mkdir, remove, rename.

Every file op runs on a file worker thread that holds the requesting user's uid, gid and groups
(that thread's alone, switched with raw syscalls as the spawner does): the kernel decides what the
user may read and write, and what they create is theirs without a chown. Nothing here runs on the
main loop. Streamed reads and uploads are in `transfer`.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import queue
import shutil
import stat
import struct
import threading
from collections.abc import Callable

from .errors import NO_REPLY, NoReply, OpError, run_op
from .ioloop import run_jobs
from .spawner import _SYSCALLS
from .users import Identity, resolve
from .wire import T_JSON

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .messages import FileEntry
    from .state import Guest

    FileOp = Callable[[Guest, int, Request, Identity], object]

FILE_WORKERS = 3
# upload chunks queued for the upload thread before the main loop waits for it
UPLOAD_QUEUE_CHUNKS = 16
# a listing is answered in one frame, which must stay under MAX_FRAME
MAX_LIST_ENTRIES = 100_000
MAX_LIST_BYTES = 15 * 1024 * 1024
# filesystems whose files report a size that is not their content's (0 in procfs, 4096 in sysfs):
# proc, sysfs, cgroup, cgroup2, debugfs, tracefs, securityfs, bpf
PSEUDO_FS = {0x9FA0, 0x62656572, 0x27E0EB, 0x63677270, 0x64626720, 0x74726163, 0x73636673, 0xCAFE4A11}


class ThreadCredentials:
    """Switches the calling thread's effective uid, gid and groups, that thread's alone (raw
    syscalls: glibc's wrappers would switch every thread). With a non-zero effective uid the thread
    has no capabilities, so the kernel checks everything it opens as that user, and what it creates
    is that user's. Real and saved ids stay 0: the thread can switch back, and the user's own
    processes cannot signal or ptrace it (with a real uid of theirs they could tgkill it, and so the
    whole daemon). A thread keeps the identity of its last job until a job needs another (a switch
    costs ~0.2 ms here)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._root_groups = os.getgroups()
        self._local = threading.local()

    def _call(self, name: str, *args: object) -> None:
        if self._libc.syscall(ctypes.c_long(_SYSCALLS[name]), *args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")

    def _ids(self, name: str, a: int, b: int, c: int) -> None:
        self._call(name, ctypes.c_long(a), ctypes.c_long(b), ctypes.c_long(c))

    def _groups(self, groups: "tuple[int, ...] | list[int]") -> None:
        arr = (ctypes.c_uint * max(1, len(groups)))(*groups)
        self._call("setgroups", ctypes.c_long(len(groups)), arr)

    def act_as(self, ident: Identity) -> None:
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

    def on_pseudo_fs(self, fd: int) -> bool:
        """Whether fd's file lives where sizes are made up (procfs, sysfs, ...); unknown: yes."""
        buf = ctypes.create_string_buffer(256)
        if self._libc.fstatfs(ctypes.c_int(fd), buf) != 0:
            return True
        return struct.unpack_from("l", buf.raw)[0] in PSEUDO_FS


class FileWorkers:
    """Threads running file jobs in arrival order (one thread: strictly one after another)."""

    def __init__(self, name: str, count: int, maxsize: int = 0) -> None:
        self.name = name
        self.count = count
        self.jobs: queue.Queue[Callable[[], object]] = queue.Queue(maxsize)

    def start(self) -> None:
        for i in range(self.count):
            threading.Thread(target=self._run, name=f"{self.name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[[], object]) -> None:
        self.jobs.put(fn)

    def _run(self) -> None:
        run_jobs(self.jobs, "file")


def count_of(value: object) -> int:
    """A byte count from the agent; 0 when it is not one."""
    return value if isinstance(value, int) and value > 0 else 0


def acting_as(g: "Guest", req: Request) -> Identity:
    """On a file worker: switches to the request's user; returns its identity."""
    ident = g.users.identity_of(req)
    g.creds.act_as(ident)
    return ident


# user metadata of a file (E2B's "file metadata"): one extended attribute per key
META_PREFIX = "user.forkbox."


def read_metadata(path: str) -> dict[str, str]:
    """A file's or directory's user metadata ({} where the filesystem keeps none)."""
    try:
        names = [n for n in os.listxattr(path, follow_symlinks=False) if n.startswith(META_PREFIX)]
        return {n[len(META_PREFIX) :]: os.getxattr(path, n, follow_symlinks=False).decode("ascii", "replace") for n in names}
    except OSError:
        return {}


def write_metadata(fd: int, metadata: object) -> None:
    """Sets the metadata on an open file (the caller checked keys and values)."""
    if not isinstance(metadata, dict):
        return
    for key, value in metadata.items():
        try:
            os.setxattr(fd, META_PREFIX + str(key), str(value).encode("ascii"))
        except OSError as e:
            if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                raise OpError("VALIDATION_FAILED", "this filesystem keeps no file metadata") from None
            raise


def entry(path: str, st: os.stat_result | None = None, metadata: bool = False) -> FileEntry:
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
    out: FileEntry = {
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
    elif metadata:
        meta = read_metadata(path)
        if meta:
            out["metadata"] = meta
    return out


def makedirs_owned(path: str, uid: int | None = None, gid: int | None = None) -> None:
    """mkdir -p. With uid/gid (a root caller), each directory it creates is given to them through a
    descriptor opened without following links: one swapped for a symlink meanwhile is refused, not
    chowned. File ops pass none: they run as their user, whose directories are theirs already."""
    missing: list[str] = []
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
        if uid is not None and gid is not None:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchown(fd, uid, gid)
            finally:
                os.close(fd)
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)


def op_list(g: "Guest", channel: int, req: Request, ident: Identity) -> NoReply:
    """Answers in one frame built here: entries are capped so it stays under the frame limit."""
    root = resolve(req, ident)
    depth = max(1, int(req.get("depth") or 1))
    with_meta = bool(req.get("metadata"))
    parts: list[str] = []
    size = 0

    def too_large() -> OpError:
        return OpError(
            "RESOURCE_LIMIT_EXCEEDED",
            f"the listing of {root} (depth {depth}) has more than {MAX_LIST_ENTRIES} entries or "
            f"{MAX_LIST_BYTES >> 20} MiB: list a subdirectory, or fewer levels",
        )

    def walk(d: str, level: int) -> None:
        nonlocal size
        items: list[os.DirEntry[str]] = []
        with os.scandir(d) as it:
            for e in it:
                items.append(e)
                if len(parts) + len(items) > MAX_LIST_ENTRIES:
                    raise too_large()
        items.sort(key=lambda e: e.name)
        for e in items:
            try:
                part = json.dumps(entry(e.path, e.stat(follow_symlinks=False), with_meta), separators=(",", ":"))
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
    g.wire.send(T_JSON, channel, ('{"type":"result","value":[' + ",".join(parts) + "]}").encode())
    return NO_REPLY


def op_stat(g: "Guest", channel: int, req: Request, ident: Identity) -> FileEntry:
    return entry(resolve(req, ident), metadata=True)


def op_mkdir(g: "Guest", channel: int, req: Request, ident: Identity) -> FileEntry:
    path = resolve(req, ident)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)
    makedirs_owned(path)
    return entry(path)


def op_remove(g: "Guest", channel: int, req: Request, ident: Identity) -> dict[str, object]:
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


def op_rename(g: "Guest", channel: int, req: Request, ident: Identity) -> FileEntry:
    src = resolve(req, ident, "from")
    dst = resolve(req, ident, "to")
    makedirs_owned(os.path.dirname(dst))
    os.rename(src, dst)
    return entry(dst)


FILE_OPS: dict[str, FileOp] = {"stat": op_stat, "list": op_list, "mkdir": op_mkdir, "remove": op_remove, "rename": op_rename}


def run_file_op(g: "Guest", fn: FileOp, channel: int, req: Request) -> None:
    """A file op as a worker job, as the request's user."""
    run_op(g.wire, lambda c, r: fn(g, c, r, acting_as(g, r)), channel, req)
