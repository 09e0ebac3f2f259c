"""Directory watches: what changes in a directory (and, recursive, in the directories under it),
streamed on the request's channel until the agent stops it.

inotify, through libc: one inotify descriptor per watch, read on the loop thread. A watch is set
up, and the directories that appear under a recursive one are added, on a file worker acting as
the request's user: the kernel lets a user watch only what they may read. Events go out in
batches (one per read of the descriptor) as {"type": "events", "events": [{"name", "type"}]},
`name` relative to the watched directory. The agent acks events as its consumer takes them; past
WINDOW unacked the descriptor is not read, so the kernel's queue fills and says it overflowed
(IN_Q_OVERFLOW), which goes out as {"type": "overflow"}: events were lost, never silently.
"""

from __future__ import annotations

import ctypes
import errno
import os
import selectors
import struct
import threading

from .errors import OpError, op_failure
from .files import acting_as
from .spawner import libc_handle
from .transfer import UPLOAD_PREFIX
from .users import resolve

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .messages import WatchEvent, WatchEventType
    from .state import Guest
    from .users import Identity

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR

HEADER = struct.Struct("iIII")  # wd, mask, cookie, name length
# events the guest sends ahead of the agent's acks
WINDOW = 4096
# directories one recursive watch follows; watches per sandbox
MAX_DIRS = 8192
MAX_WATCHES = 128

_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    """The spawner's libc handle, made once (a watch asks for it per directory)."""
    global _libc
    if _libc is None:
        _libc = libc_handle()
    return _libc


def _check(ret: int, what: str, path: str = "") -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", path)
    return ret


def kind_of(mask: int) -> "WatchEventType | None":
    """The event's type as the E2B clients name them (fsnotify's: a move in is a create)."""
    if mask & (IN_CREATE | IN_MOVED_TO):
        return "create"
    if mask & (IN_DELETE | IN_DELETE_SELF):
        return "remove"
    if mask & (IN_MOVED_FROM | IN_MOVE_SELF):
        return "rename"
    if mask & IN_MODIFY:
        return "write"
    if mask & IN_ATTRIB:
        return "chmod"
    return None


class Watch:
    def __init__(self, g: "Guest", channel: int, root: str, recursive: bool, ident: "Identity") -> None:
        self.g = g
        self.channel = channel
        self.root = root
        self.recursive = recursive
        self.ident = ident
        self.fd = _check(libc().inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")
        self.dirs: dict[int, str] = {}  # wd -> the directory's path relative to root ("" for root)
        # dirs and fd are shared by the loop and the file workers that add directories
        self.lock = threading.Lock()
        self.unacked = 0
        self.reading = False
        self.closed = False
        self.overflowed = False
        # uploads moved out of their temp name, by cookie: the move in reports as the file's create and write
        self.uploads: set[int] = set()

    # ---- on a file worker, as the request's user ----

    def add_dir(self, rel: str) -> bool:
        """Watches the directory at `rel`; False when it is gone, or past the cap (said once)."""
        if len(self.dirs) >= MAX_DIRS:
            self.g.loop.call(lambda: self.overflow(f"more than {MAX_DIRS} directories: those past it are not watched"))
            return False
        path = os.path.join(self.root, rel) if rel else self.root
        try:
            # the kernel here lets anyone watch what they cannot list: check it as the user does
            os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            if not rel:
                raise
            return False
        with self.lock:
            if self.closed:
                return False
            wd = libc().inotify_add_watch(self.fd, os.fsencode(path), MASK)
            if wd < 0:
                err = ctypes.get_errno()
                if rel and err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    return False  # gone already, or not the user's to read
                raise OSError(err, os.strerror(err), path)
            self.dirs[wd] = rel
        return True

    def add_tree(self, rel: str, report: bool) -> list[WatchEvent]:
        """Watches `rel` and every directory under it; with `report`, a create event for each
        entry found (what appeared before its directory was watched)."""
        found: list[WatchEvent] = []
        pending = [rel]
        while pending:
            d = pending.pop()
            if not self.add_dir(d):
                continue
            try:
                with os.scandir(os.path.join(self.root, d) if d else self.root) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                name = os.path.join(d, e.name) if d else e.name
                if report:
                    found.append({"name": name, "type": "create"})
                if e.is_dir(follow_symlinks=False):
                    pending.append(name)
        return found

    def follow(self, rel: str) -> None:
        """A directory appeared under a recursive watch: watch it and what is in it already."""
        if self.closed:
            return
        self.g.creds.act_as(self.ident)
        found = self.add_tree(rel, report=True)
        if found:
            self.g.loop.call(lambda: self.emit(found))

    # ---- on the loop thread ----

    def start(self) -> None:
        if self.closed:
            return  # stopped before it started
        self.g.wire.send_json(self.channel, {"type": "watching", "path": self.root})
        self.resume()

    def resume(self) -> None:
        if not self.reading and not self.closed:
            self.g.loop.sel.register(self.fd, selectors.EVENT_READ, self)
            self.reading = True

    def pause(self) -> None:
        if self.reading:
            self.g.loop.sel.unregister(self.fd)
            self.reading = False

    def emit(self, events: list[WatchEvent]) -> None:
        if self.closed or not events:
            return
        self.g.wire.send_json(self.channel, {"type": "events", "events": events})
        self.unacked += len(events)
        if self.unacked >= WINDOW:
            self.pause()

    def overflow(self, reason: str) -> None:
        if not self.closed and not self.overflowed:
            self.overflowed = True
            self.g.wire.send_json(self.channel, {"type": "overflow", "reason": reason})

    def on_ack(self, n: int) -> None:
        self.unacked = max(0, self.unacked - n)
        if self.unacked < WINDOW:
            self.resume()

    def on_readable(self) -> None:
        """The loop's call: what inotify has queued, as one batch of events."""
        buf = b""
        try:
            while True:
                buf += os.read(self.fd, 65536)
        except (BlockingIOError, InterruptedError):
            pass
        with self.lock:
            events, root_gone, new_dirs = self.parse(buf)
        for rel in new_dirs:
            self.g.files.submit(lambda rel=rel: self.follow(rel))
        self.emit(events)
        if root_gone:
            self.end({"type": "result", "value": {"reason": "gone"}})

    def parse(self, buf: bytes) -> tuple[list[WatchEvent], bool, list[str]]:
        """The events in `buf`; whether the watched directory itself is gone; the directories that
        appeared (to follow, when recursive). Keeps the map of watched directories up to date
        (under the lock)."""
        events: list[WatchEvent] = []
        new_dirs: list[str] = []
        moved_dirs: dict[int, str] = {}  # cookie -> the relative path a directory left
        root_gone = False
        off = 0
        while off + HEADER.size <= len(buf):
            wd, mask, cookie, length = HEADER.unpack_from(buf, off)
            raw = buf[off + HEADER.size : off + HEADER.size + length].split(b"\0", 1)[0]
            off += HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                self.overflowed = False  # a new loss: say it again
                self.overflow("the kernel's event queue overflowed: events were lost")
                continue
            base = self.dirs.get(wd)
            if base is None:
                continue
            if mask & IN_IGNORED:
                del self.dirs[wd]
                root_gone = root_gone or base == ""
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                # said by the parent's watch already, but for the watched directory itself
                if base == "":
                    kind = kind_of(mask)
                    if kind:
                        events.append({"name": "", "type": kind})
                continue
            name = os.fsdecode(raw)
            rel = os.path.join(base, name) if base else name
            if name.startswith(UPLOAD_PREFIX):
                # an upload's temp file is not the user's: only its move to its name is told
                if mask & IN_MOVED_FROM and len(self.uploads) < 1024:
                    self.uploads.add(cookie)
                continue
            if mask & IN_MOVED_TO and cookie in self.uploads:
                self.uploads.discard(cookie)
                events.append({"name": rel, "type": "create"})
                events.append({"name": rel, "type": "write"})
                continue
            kind = kind_of(mask)
            if kind:
                events.append({"name": rel, "type": kind})
            if not (mask & IN_ISDIR) or not self.recursive:
                continue
            if mask & IN_MOVED_FROM:
                moved_dirs[cookie] = rel
            elif mask & IN_MOVED_TO and cookie in moved_dirs:
                self.rename_subtree(moved_dirs.pop(cookie), rel)
            elif mask & (IN_CREATE | IN_MOVED_TO):
                new_dirs.append(rel)
        for rel in moved_dirs.values():
            self.drop_subtree(rel)  # moved out of the watched tree
        return events, root_gone, new_dirs

    def rename_subtree(self, old: str, new: str) -> None:
        for wd, rel in list(self.dirs.items()):
            if rel == old or rel.startswith(old + "/"):
                self.dirs[wd] = new + rel[len(old) :]

    def drop_subtree(self, old: str) -> None:
        for wd, rel in list(self.dirs.items()):
            if rel == old or rel.startswith(old + "/"):
                del self.dirs[wd]
                libc().inotify_rm_watch(self.fd, wd)

    def end(self, last: dict[str, object] | None) -> None:
        """Stops the watch; `last` (if any) is the message that ends its channel."""
        if self.closed:
            return
        self.pause()
        with self.lock:
            self.closed = True
            os.close(self.fd)
        self.g.watches.pop(self.channel, None)
        if last is not None:
            self.g.wire.send_json(self.channel, last)


def op_watch(g: "Guest", channel: int, req: Request) -> None:
    """On a file worker: sets the watch up as the request's user, then hands it to the loop."""
    try:
        if len(g.watches) >= MAX_WATCHES:
            raise OpError("RESOURCE_LIMIT_EXCEEDED", f"more than {MAX_WATCHES} watches in this sandbox: stop one first")
        ident = acting_as(g, req)
        root = resolve(req, ident)
        if not os.path.isdir(root):
            if os.path.exists(root):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", root)
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", root)
        w = Watch(g, channel, root, bool(req.get("recursive")), ident)
    except Exception as e:  # noqa: BLE001 - answered as the request's error
        op_failure(g.wire, channel, req, e)
        return
    try:
        if w.recursive:
            w.add_tree("", report=False)
        else:
            w.add_dir("")
    except Exception as e:  # noqa: BLE001 - as above
        os.close(w.fd)
        op_failure(g.wire, channel, req, e)
        return
    with g.watch_lock:
        stopped = channel in g.watch_stops
        g.watch_stops.discard(channel)
        if not stopped:
            g.watches[channel] = w
    if stopped:
        # the agent stopped it while it was being set up
        os.close(w.fd)
        g.wire.send_json(channel, {"type": "result", "value": {"reason": "stopped"}})
        return
    g.loop.call(w.start)


def op_unwatch(g: "Guest", channel: int, req: Request) -> None:
    with g.watch_lock:
        w = g.watches.get(channel)
        if w is None:
            # not set up yet (or gone): one being set up ends as soon as it is; channels only grow,
            # so past the cap the oldest stop is one no watch will come for
            if len(g.watch_stops) >= MAX_WATCHES:
                g.watch_stops.discard(min(g.watch_stops))
            g.watch_stops.add(channel)
    if w is not None:
        w.end({"type": "result", "value": {"reason": "stopped"}})


def forget_watches(g: "Guest") -> None:
    """On the loop thread, after a resync or a restore: the agent that asked for them is gone."""
    for w in list(g.watches.values()):
        w.end(None)
    with g.watch_lock:
        g.watch_stops.clear()


def ack_watch(g: "Guest", channel: int, n: int) -> None:
    """An ack for a watch's channel (on the loop thread; the watch may have ended meanwhile)."""
    w = g.watches.get(channel)
    if w is not None:
        w.on_ack(n)
