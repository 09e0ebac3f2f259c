"""Background processes: `exec` with background runs on after its request; callers attach to its log.

Its output goes to a bounded log (offsets count bytes of both streams together) that any number
of callers attach to, from any offset, each with its own flow-control window. While a caller is
attached and reading, the process is held back rather than let the log drop what that caller has
not had (it writes into a full pipe, as into a slow terminal); with no one attached it never
waits. A caller that attaches late, behind the log's start, gets a {"type": "gap"} marker with the
bytes it missed, never a silent drop. All of it runs on the loop thread.
"""

from __future__ import annotations

import base64
import signal
from collections.abc import Callable


TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .execs import Exec
    from .ioloop import Stream
    from .messages import ProcessInfo
    from .state import Guest

LOG_BYTES = 4 * 1024 * 1024
# An attached caller this far behind the log's end holds the process back (a read adds at most
# ioloop.READ_BYTES more, so the log never drops what it has not had); it goes on at half of it.
HOLD_BYTES = LOG_BYTES // 2
MAX_PROCS = 256


class OutputLog:
    def __init__(self, cap: int = LOG_BYTES) -> None:
        self.cap = cap
        self.chunks: list[tuple[int, Stream, bytes]] = []  # (offset, ftype, bytes)
        self.start = 0
        self.end = 0

    def append(self, ftype: Stream, data: bytes) -> None:
        self.chunks.append((self.end, ftype, data))
        self.end += len(data)
        while self.end - self.start > self.cap and len(self.chunks) > 1:
            off, _, dropped = self.chunks.pop(0)
            self.start = off + len(dropped)

    def since(self, offset: int) -> list[tuple[Stream, bytes]]:
        """Chunks from `offset` on, the first one cut to start there."""
        out: list[tuple[Stream, bytes]] = []
        for off, ftype, data in self.chunks:
            if off + len(data) <= offset:
                continue
            out.append((ftype, data[max(0, offset - off) :]))
        return out


class Subscriber:
    def __init__(self, channel: int, offset: int, window: int, output: bool) -> None:
        self.channel = channel
        self.offset = offset  # the next log byte this caller gets
        self.window = window
        self.output = output
        self.unacked = 0


def register(g: "Guest", proc: "Exec") -> None:
    """A background process started: list it, forgetting the oldest ended ones past MAX_PROCS."""
    assert proc.pid is not None
    g.procs[proc.pid] = proc
    while len(g.procs) > MAX_PROCS:
        old = next((p for p in g.procs.values() if p.finished), None)
        if old is None or old.pid is None:
            break
        del g.procs[old.pid]


def proc_output(g: "Guest", proc: "Exec", ftype: Stream, data: bytes) -> None:
    """A background process wrote `data`."""
    log = proc.ensure_log()
    log.append(ftype, data)
    for sub in list(proc.subscribers.values()):
        feed(g, proc, log, sub)
    pace(proc)


def pace(proc: "Exec") -> None:
    """Holds the process back while an attached caller is far behind; lets it go on once none is."""
    log = proc.log
    if log is None:
        return
    lag = max((log.end - s.offset for s in proc.subscribers.values() if s.output), default=0)
    if lag >= HOLD_BYTES and not proc.paused_fds:
        proc.pause()
    elif lag < HOLD_BYTES // 2 and proc.paused_fds:
        proc.resume()


def feed(g: "Guest", proc: "Exec", log: OutputLog, sub: Subscriber) -> None:
    """Sends `sub` what it has not had yet, as far as its window allows; then the exit, if any."""
    if sub.output:
        if sub.offset < log.start:
            g.wire.send_json(sub.channel, {"type": "gap", "bytes": log.start - sub.offset})
            sub.offset = log.start
        for ftype, data in log.since(sub.offset):
            room = sub.window - sub.unacked
            if room <= 0:
                return
            piece = data[:room]
            assert isinstance(ftype, int)
            g.wire.send(ftype, sub.channel, piece)
            sub.offset += len(piece)
            sub.unacked += len(piece)
            if len(piece) < len(data):
                return
    else:
        sub.offset = log.end
    if proc.finished and proc.exit_msg is not None and sub.offset >= log.end:
        proc.subscribers.pop(sub.channel, None)
        g.subs.pop(sub.channel, None)
        g.wire.send_json(sub.channel, {**proc.exit_msg, "offset": log.end})


def describe_proc(proc: "Exec") -> ProcessInfo:
    msg = proc.exit_msg
    return {
        "pid": proc.pid or 0,
        "cmd": proc.describe_cmd,
        "running": not proc.finished,
        "exitCode": msg["exitCode"] if msg else None,
        "signal": msg["signal"] if msg else None,
        "startedAt": proc.started_at,
        "outputBytes": proc.log.end if proc.log is not None else 0,
    }


def proc_of(g: "Guest", channel: int, req: Request) -> "Exec | None":
    proc = g.procs.get(int(req.get("pid") or 0))
    if proc is None:
        g.wire.send_error(channel, "PROCESS_NOT_FOUND", f"no background process {req.get('pid')}")
    return proc


def op_proc_attach(g: "Guest", channel: int, req: Request) -> None:
    """Stream a background process's output (from `offset`) and its exit."""
    proc = proc_of(g, channel, req)
    if proc is None:
        return
    log = proc.ensure_log()
    offset = int(req.get("offset") or 0)
    sub = Subscriber(channel, offset, int(req.get("window") or LOG_BYTES), req.get("output", True) is not False)
    proc.subscribers[channel] = sub
    g.subs[channel] = proc
    g.wire.send_json(channel, {"type": "attached", "pid": proc.pid, "start": log.start, "end": log.end})
    feed(g, proc, log, sub)


def op_proc_detach(g: "Guest", channel: int, req: Request) -> None:
    proc = g.subs.pop(channel, None)
    if proc is not None:
        proc.subscribers.pop(channel, None)
        pace(proc)
        g.wire.send_json(channel, {"type": "result", "value": {"detached": True}})


def op_proc_ack(g: "Guest", channel: int, req: Request) -> None:
    proc = g.subs.get(channel)
    if proc is None or proc.log is None:
        return
    sub = proc.subscribers.get(channel)
    if sub is not None:
        sub.unacked = max(0, sub.unacked - int(req.get("bytes") or 0))
        feed(g, proc, proc.log, sub)
        pace(proc)


def op_proc_list(g: "Guest", channel: int, req: Request) -> None:
    g.wire.send_json(channel, {"type": "result", "value": [describe_proc(p) for p in g.procs.values()]})


def op_proc_stdin(g: "Guest", channel: int, req: Request) -> None:
    proc = proc_of(g, channel, req)
    if proc is None:
        return
    if req.get("eof"):
        proc.close_stdin()
    else:
        proc.stdin(base64.b64decode(req.get("data") or ""))
    g.wire.send_json(channel, {"type": "result", "value": {}})


def op_proc_signal(g: "Guest", channel: int, req: Request) -> None:
    proc = proc_of(g, channel, req)
    if proc is None:
        return
    sig = getattr(signal, str(req.get("signal", "SIGTERM")), None)
    if not isinstance(sig, signal.Signals):
        return g.wire.send_error(channel, "VALIDATION_FAILED", f"unknown signal {req.get('signal')}")
    if not proc.finished:
        proc.kill(sig)
    g.wire.send_json(channel, {"type": "result", "value": describe_proc(proc)})


def forget_subscribers(g: "Guest") -> None:
    """After a resync: the old agent's subscriptions end (the processes run on)."""
    for proc in g.procs.values():
        proc.subscribers.clear()
        pace(proc)
    g.subs.clear()


PROC_OPS: dict[str, Callable[["Guest", int, Request], None]] = {
    "proc_attach": op_proc_attach,
    "proc_detach": op_proc_detach,
    "proc_ack": op_proc_ack,
    "proc_list": op_proc_list,
    "proc_stdin": op_proc_stdin,
    "proc_signal": op_proc_signal,
}
