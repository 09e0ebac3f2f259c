"""The I/O loop: one thread multiplexes every running command's pipes, exits and timers.

A thread per pipe or per command costs ~2.3 ms each to start under gVisor, more than the rest of
an exec's overhead together. Its output pipes, its exit (SIGCHLD reaches us through a wakeup fd,
the spawner process reports its children's) and its timeout all land here.
"""

from __future__ import annotations

import heapq
import os
import queue
import selectors
import signal
import sys
import threading
import time
from collections.abc import Callable

from .wire import T_STDERR, T_STDOUT

# One read of a command's output: its pipes hold up to this much (spawn.PIPE_BYTES), so a
# command writing fast is carried in a few large frames rather than many 64 KiB ones.
READ_BYTES = 1024 * 1024
# A read this short may be a piece of more that is there already (a terminal's are 4 KiB).
SMALL_READ = 64 * 1024

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Protocol, Union

    from .execs import Exec
    from .spawn import ExitFeed
    from .state import Guest

    # an output pipe's stream: a wire frame type, or "msg" for a kernel's message channel
    Stream = Union[int, str]

    class Piped(Protocol):
        """A process whose pipes the loop reads: a command or a kernel."""

        pid: int | None
        open_pipes: int
        # fds held back by flow control: not read until the caller acks
        paused_fds: "dict[int, PipeTag]"
        # past its end: a pipe that a short read emptied is closed
        drain_close: bool

        def output(self, ftype: Stream, data: bytes) -> None: ...

        def maybe_finish(self) -> None: ...

        def on_exit(self, status: int) -> None: ...

    class Readable(Protocol):
        """What the loop calls when its socket is readable: a spawner's exit feed, the sudo service."""

        def on_readable(self) -> None: ...

    class Timed(Protocol):
        def on_timer(self, now: float) -> None: ...

    PipeTag = tuple[Piped, Stream]

    class Capped(Protocol):
        max_output: int | None
        sent: dict[Stream, int]
        truncated: bool


def cap_output(owner: Capped, ftype: Stream, data: bytes) -> bytes | None:
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


class IOLoop:
    def __init__(self, guest: "Guest") -> None:
        self.guest = guest
        self.sel = selectors.DefaultSelector()
        self.execs: dict[int, Piped] = {}  # pid -> what the loop reads
        self.unclaimed: dict[int, int] = {}  # pid -> status, for children reaped before their Exec was registered
        self.timers: list[tuple[float, int, Timed]] = []  # heap of (deadline, seq, exec)
        self._seq = 0
        self._inbox: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sig_r, self._sig_w = os.pipe()
        os.set_blocking(self._sig_r, False)
        os.set_blocking(self._sig_w, False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.sel.register(self._sig_r, selectors.EVENT_READ, "sigchld")

    def start(self) -> None:
        """From the main thread: take SIGCHLD and start the loop thread."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self._sig_w, warn_on_full_buffer=False)
        threading.Thread(target=self._run, name="ioloop", daemon=True).start()

    def call(self, fn: Callable[[], object]) -> None:
        """Run fn on the loop thread."""
        self._inbox.put(fn)
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def _drain(self, fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _reap(self) -> None:
        """Our own children: spawner processes (and a dead one's user init)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            spawner = self.guest.spawner
            proc = spawner.proc
            if proc is not None and pid == proc.pid:
                spawner.on_exit(proc)

    def child_exited(self, pid: int, status: int) -> None:
        """A command, terminal or kernel ended (the spawner process reports it)."""
        ex = self.execs.get(pid)
        if ex is None:
            self.unclaimed[pid] = status
            if len(self.unclaimed) > 4096:
                self.unclaimed.pop(next(iter(self.unclaimed)))
        else:
            ex.on_exit(status)

    def watch_spawner(self, feed: "ExitFeed") -> None:
        feed.sock.setblocking(False)
        self.sel.register(feed.sock.fileno(), selectors.EVENT_READ, feed)

    def add(self, ex: "Exec") -> None:
        """On the loop thread: start watching a just-spawned command."""
        assert ex.pid is not None and ex.fds is not None
        for fd, ftype in ((ex.fds[1], T_STDOUT), (ex.fds[2], T_STDERR)):
            if fd is None:  # a terminal: one fd for both
                continue
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, (ex, ftype))
            ex.open_pipes += 1
        if ex.timeout_s:
            self.add_timer(time.monotonic() + ex.timeout_s, ex)
        self.claim(ex.pid, ex)

    def claim(self, pid: int, owner: Piped) -> None:
        """On the loop thread: `owner` is told of `pid`'s exit (at once if it came first)."""
        self.execs[pid] = owner
        status = self.unclaimed.pop(pid, None)
        if status is not None:
            owner.on_exit(status)

    def add_timer(self, deadline: float, ex: Timed) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (deadline, self._seq, ex))

    def watch(self, owner: Piped, fd: int, stream: Stream) -> None:
        """On the loop thread: read a pipe of `owner`'s."""
        os.set_blocking(fd, False)
        self.sel.register(fd, selectors.EVENT_READ, (owner, stream))
        owner.open_pipes += 1

    def pipes_of(self, owner: Piped) -> list[tuple[int, Stream]]:
        """The pipes of `owner`'s the loop reads now (not those paused by flow control)."""
        out: list[tuple[int, Stream]] = []
        for key in list(self.sel.get_map().values()):
            if isinstance(key.data, tuple) and key.data[0] is owner:
                out.append((key.fd, key.data[1]))
        return out

    def close_pipe(self, ex: Piped, fd: int) -> None:
        try:
            self.sel.unregister(fd)
        except KeyError:
            pass  # paused by flow control
        if fd in ex.paused_fds:
            del ex.paused_fds[fd]
        os.close(fd)
        ex.open_pipes -= 1
        ex.maybe_finish()

    def _run(self) -> None:
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

    def _dispatch(self, key: selectors.SelectorKey) -> None:
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
        elif not isinstance(tag, tuple):
            readable: Readable = tag
            readable.on_readable()
        else:
            ex, ftype = tag
            try:
                data = read_available(key.fd)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                ex.output(ftype, data)
                # past its exit, a pipe that a short read emptied is done
                if len(data) < READ_BYTES and ex.drain_close:
                    self.close_pipe(ex, key.fd)
            else:
                self.close_pipe(ex, key.fd)


def read_available(fd: int) -> bytes:
    """What `fd` holds now, up to READ_BYTES. A terminal hands out 4 KiB a read: its pieces are
    gathered into one frame (a terminal printing fast went at 15 MB/s, a frame per 4 KiB)."""
    data = os.read(fd, READ_BYTES)
    if not data or len(data) >= SMALL_READ:
        return data
    parts = [data]
    size = len(data)
    while size < READ_BYTES:
        try:
            more = os.read(fd, READ_BYTES - size)
        except OSError:  # nothing more now (or its end, which the next read reports)
            break
        if not more:
            break
        parts.append(more)
        size += len(more)
    return b"".join(parts) if len(parts) > 1 else data


def run_jobs(jobs: "queue.SimpleQueue[Callable[[], object]] | queue.Queue[Callable[[], object]]", what: str) -> None:
    """On a worker thread: runs what is put on `jobs`, in order, forever."""
    while True:
        fn = jobs.get()
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - a job reports its own errors; never die here
            print(f"forkbox-guest: {what} job failed: {e!r}", file=sys.stderr)
