"""File bytes to and from the agent: streamed reads (flow-controlled) and uploads (atomic replace).

Reads stream under the exec window/ack scheme, can be aborted, never send more than the size they
declared, and refuse anything but regular files. An upload goes to a temp file with a random name
(O_CREAT|O_EXCL|O_NOFOLLOW) in the target's directory, held open by descriptor, gets its mode
with fchmod, and is renamed over the target at the end.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable

from .errors import OpError, op_failure, run_op
from .files import acting_as, count_of, entry, makedirs_owned, write_metadata
from .users import Identity, resolve
from .wire import CHUNK, T_FILE

# an upload is written beside its target under this name, then renamed over it
UPLOAD_PREFIX = ".forkbox-upload-"

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .messages import FileEntry
    from .state import Guest

READ_WINDOW = 1024 * 1024
# a file whose size the kernel does not know (procfs, sysfs) is read up to this, then refused
UNKNOWN_SIZE_MAX = 16 * 1024 * 1024


def check_regular(st: os.stat_result, path: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if not stat.S_ISREG(st.st_mode):
        kind = "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a FIFO or socket"
        raise OpError("NOT_A_REGULAR_FILE", f"{path} is {kind}, not a regular file: only regular files can be read")


def open_regular(path: str) -> int:
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


class FileRead:
    """A file streamed to the agent, flow-controlled like exec output: at most `window` bytes sent
    and not yet acked, past that it waits for acks. Its work runs as file-worker jobs, one at a time
    (`busy`); acks and an abort come from the main loop."""

    def __init__(self, guest: "Guest", channel: int, req: Request) -> None:
        self.guest = guest
        self.channel = channel
        self.req = req
        self.window = max(CHUNK, count_of(req.get("window")) or READ_WINDOW)
        self.fd: int | None = None
        self.size: int | None = None  # None: unknown (read up to UNKNOWN_SIZE_MAX)
        self.sent = 0
        self.unacked = 0
        self.lock = threading.Lock()
        self.busy = True  # a job of this read is queued or running
        self.cancelled = False
        self.finished = False

    def open(self) -> None:
        """The first job: opens the file as the request's user."""
        g = self.guest
        try:
            path = resolve(self.req, acting_as(g, self.req))
            self.fd = open_regular(path)
            st = os.fstat(self.fd)
            if st.st_size > 0 and not g.creds.on_pseudo_fs(self.fd):
                self.size = st.st_size
        except Exception as e:  # noqa: BLE001 - reported to the caller
            return self.end(lambda: op_failure(g.wire, self.channel, self.req, e))
        g.wire.send_json(self.channel, {"type": "file", "size": self.size})
        self.pump()

    def pump(self) -> None:
        """Sends what the window allows, then waits for acks (ends the job) or ends the read."""
        wire = self.guest.wire
        while True:
            with self.lock:
                cancelled = self.cancelled
                room = self.window - self.unacked
                if not cancelled and room <= 0:
                    self.busy = False
                    return
            if cancelled:
                return self.end(lambda: wire.send_error(self.channel, "CANCELLED", "the read was cancelled"))
            # a declared size is a hard stop; an unknown one is read one byte past its cap
            left = (self.size if self.size is not None else UNKNOWN_SIZE_MAX + 1) - self.sent
            if left <= 0:
                return self.end(self.done)
            assert self.fd is not None
            try:
                data = os.read(self.fd, min(CHUNK, room, left))
            except BlockingIOError:
                return self.end(lambda: wire.send_error(self.channel, "NOT_A_REGULAR_FILE", "the file has no data to read now (it would block)"))
            except OSError as e:
                err = e
                return self.end(lambda: op_failure(wire, self.channel, self.req, err))
            if not data:
                if self.size is not None:
                    msg = f"the file shrank while it was read ({self.sent} of {self.size} bytes)"
                    return self.end(lambda: wire.send_error(self.channel, "GUEST_ERROR", msg))
                return self.end(self.done)
            self.sent += len(data)
            if self.size is None and self.sent > UNKNOWN_SIZE_MAX:
                msg = f"the file reports no size and holds more than {UNKNOWN_SIZE_MAX} bytes"
                return self.end(lambda: wire.send_error(self.channel, "PAYLOAD_TOO_LARGE", msg))
            with self.lock:
                self.unacked += len(data)
            wire.send(T_FILE, self.channel, data)

    def done(self) -> None:
        self.guest.wire.send(T_FILE, self.channel)
        self.guest.wire.send_json(self.channel, {"type": "result", "value": {"size": self.sent}})

    def end(self, report: Callable[[], object]) -> None:
        with self.lock:
            self.finished = True
            self.busy = False
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.guest.reads.pop(self.channel, None)
        report()

    # -- from the main loop --
    def on_ack(self, n: int) -> None:
        with self.lock:
            self.unacked = max(0, self.unacked - n)
            if self.busy or self.finished or self.unacked > self.window // 2:
                return
            self.busy = True
        self.guest.files.submit(self.pump)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.busy or self.finished:
                return  # the running job sees it
            self.busy = True
        self.guest.files.submit(self.pump)


class Upload:
    """A file write in progress, on the upload thread as its user: chunks land in a temp file beside
    the target, which replaces the target at the end. The directory is held by descriptor, so a path
    swapped for a symlink meanwhile cannot move the temp file or the final rename elsewhere."""

    def __init__(self, guest: "Guest", channel: int, req: Request, ident: Identity) -> None:
        self.guest = guest
        self.channel = channel
        self.req = req
        self.ident = ident
        self.path = resolve(req, ident)
        parent, self.name = os.path.split(self.path)
        if not self.name:
            raise IsADirectoryError(errno.EISDIR, "is a directory", self.path)
        makedirs_owned(parent)
        self.fd: int | None = None
        self.tmp: str | None = None
        self.failed: OSError | None = None
        self.dir_fd: int | None = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
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

    def create_temp(self) -> None:
        # O_EXCL|O_NOFOLLOW: a name planted in advance (a symlink, a file) is never opened
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(8):
            name = f"{UPLOAD_PREFIX}{os.urandom(8).hex()}"
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

    def chunk(self, data: bytes) -> None:
        if self.failed is not None or self.fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as e:
            self.failed = e

    def finish(self) -> FileEntry:
        self.guest.creds.act_as(self.ident)
        try:
            if self.failed is not None:
                raise self.failed
            assert self.fd is not None and self.tmp is not None
            mode = self.req.get("mode")
            os.fchmod(self.fd, int(mode) if mode is not None else 0o644)
            write_metadata(self.fd, self.req.get("metadata"))
            os.close(self.fd)
            self.fd = None
            os.rename(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self.tmp = None
            return entry(self.path, os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False), metadata=True)
        finally:
            self.abort()

    def abort(self) -> None:
        """Closes what is open and removes the temp file if it is still there."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.tmp is not None:
            try:
                self.guest.creds.act_as(self.ident)
                os.unlink(self.tmp, dir_fd=self.dir_fd)
            except OSError:
                pass
            self.tmp = None
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


# ---- on the upload thread: an upload's open, chunks and end, in order ----


def upload_open(g: "Guest", channel: int, req: Request) -> None:
    try:
        g.uploads_open[channel] = Upload(g, channel, req, acting_as(g, req))
    except Exception as e:  # noqa: BLE001 - reported to the caller
        g.uploads_open[channel] = None
        op_failure(g.wire, channel, req, e)


def upload_data(g: "Guest", channel: int, data: bytes) -> None:
    if channel not in g.uploads_open:
        return
    up = g.uploads_open[channel]
    if data:
        if up is not None:
            up.chunk(data)
        return
    del g.uploads_open[channel]
    if up is not None:
        run_op(g.wire, lambda _c, _r: up.finish(), channel, up.req)


def upload_abort(g: "Guest", channel: int, reply: bool = True) -> None:
    """The agent's caller went away: the temp file goes, the target is untouched."""
    up = g.uploads_open.pop(channel, None)
    if up is None:
        return
    up.abort()
    if reply:
        g.wire.send_error(channel, "CANCELLED", "the upload was cancelled")


def forget_files(g: "Guest") -> None:
    """After a resync: the old agent's reads stop, its uploads go with their temp files."""
    for rd in list(g.reads.values()):
        rd.cancel()
    g.uploads.submit(lambda: [upload_abort(g, ch, reply=False) for ch in list(g.uploads_open)])
