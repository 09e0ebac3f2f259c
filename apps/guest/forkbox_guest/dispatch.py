"""Routes each frame from the agent to its handler, on the thread its work belongs to.

Also the re-attach: the agent talks to us through FIFOs that outlive it. A new agent process
(after a crash) sends SIGUSR2 before anything else: we drop the half-read frame the old one may
have left, drain what it wrote, forget its requests, and answer {"type": "resynced"} on channel 0,
which the new agent finds in the byte stream (anything before it belongs to the old agent).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

from . import contexts, identity, oom, procs, transfer, watch
from .contexts import CONTEXT_OPS
from .errors import run_op
from .execs import Exec
from .files import FILE_OPS, count_of, run_file_op
from .procs import PROC_OPS
from .spawn import set_winsize
from .users import check_env
from .wire import CHUNK, T_FILE, T_JSON, T_STDIN

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .messages import Configured, Ended, Ping, ResyncedMessage, Usage
    from .state import Guest

VERSION = "0.1.0"


def op_usage(g: "Guest", channel: int, req: Request) -> Usage:
    """Bytes used on the writable filesystems (each is its own tmpfs)."""
    used = 0
    for mount in ("/work", "/home", "/tmp"):
        try:
            st = os.statvfs(mount)
        except OSError:
            continue
        used += (st.f_blocks - st.f_bfree) * st.f_frsize
    return {"usedBytes": used}


def op_ping(g: "Guest", channel: int, req: Request) -> Ping:
    return {"version": VERSION, "uptimeMs": int((time.monotonic() - g.started) * 1000)}


def op_configure(g: "Guest", channel: int, req: Request) -> Configured:
    """Per-sandbox settings; after a restore from a shared snapshot this is the first request.
    The daemon itself holds no randomness or ids that must differ between sandboxes; its kernels do."""
    env = check_env(req.get("env"))
    hostname = req.get("hostname")
    if hostname is not None:
        if not identity.valid_hostname(hostname):
            raise ValueError("invalid hostname")
        identity.apply(g, hostname)
    if not req.get("merge"):
        g.default_env.clear()
    g.default_env.update(env)
    # kernels that outlived a restore get the new env and fresh random state
    kernel_env = dict(env)
    g.loop.call(lambda: contexts.configure_contexts(g, kernel_env, bool(req.get("merge")), bool(req.get("restored"))))
    if not req.get("restored"):
        return {}
    # a snapshot may hold requests of the agent it was taken under: forget them, and have the new
    # agent start past their channels so none of their frames lands on one of its requests
    forget_requests(g, keep=channel)
    return {"nextChannel": g.max_channel + 1}


def op_end_processes(g: "Guest", channel: int, req: Request) -> Ended:
    """Every process users run ends (a filesystem-only pause: the image keeps files, not processes)."""
    return {"ended": g.spawner.end_all()}


SIMPLE_OPS: dict[str, Callable[["Guest", int, Request], object]] = {
    "ping": op_ping,
    "usage": op_usage,
    "configure": op_configure,
}


def dispatch(g: "Guest", ftype: int, channel: int, payload: bytes) -> None:
    if channel > g.max_channel:
        g.max_channel = channel
    if ftype == T_STDIN:
        with g.execs_lock:
            ex = g.execs.get(channel)
        if ex is not None:
            ex.stdin(payload)
        return
    if ftype == T_FILE:
        g.uploads.submit(lambda: transfer.upload_data(g, channel, payload))
        return
    if ftype != T_JSON:
        return
    try:
        req = json.loads(payload)
    except ValueError:
        g.wire.send_error(channel, "VALIDATION_FAILED", "malformed request")
        return
    op = req.get("op")
    if op == "exec":
        ex = Exec(g, channel, req)
        with g.execs_lock:
            g.execs[channel] = ex
        g.spawner.submit(ex.start)
    elif op == "signal":
        with g.execs_lock:
            ex = g.execs.get(channel)
        if ex is not None:
            sig = getattr(signal, str(req.get("signal", "SIGKILL")), signal.SIGKILL)
            ex.kill(sig)
    elif op == "resize":
        with g.execs_lock:
            ex = g.execs.get(channel)
        if ex is not None and ex.pty and ex.stdin_fd is not None:
            try:
                set_winsize(ex.stdin_fd, int(req.get("cols") or 80), int(req.get("rows") or 24))
            except (OSError, ValueError):
                pass
    elif op == "ack" and channel in g.reads:
        rd = g.reads.get(channel)
        if rd is not None:
            rd.on_ack(count_of(req.get("bytes")))
    elif op == "ack" and channel in g.watches:
        n_events = count_of(req.get("bytes"))
        g.loop.call(lambda: watch.ack_watch(g, channel, n_events))
    elif op == "ack":
        with g.execs_lock:
            ex = g.execs.get(channel)
        if ex is not None:
            n = int(req.get("bytes") or 0)
            target = ex
            g.loop.call(lambda: target.on_ack(n))
        else:
            g.loop.call(lambda: procs.op_proc_ack(g, channel, req))
    elif op in PROC_OPS:
        proc_fn = PROC_OPS[op]
        g.loop.call(lambda: proc_fn(g, channel, req))
    elif op == "write":
        g.uploads.submit(lambda: transfer.upload_open(g, channel, req))
    elif op == "read":
        rd = g.reads[channel] = transfer.FileRead(g, channel, req)
        g.files.submit(rd.open)
    elif op == "abort":
        rd = g.reads.get(channel)
        if rd is not None:
            rd.cancel()
        else:
            g.uploads.submit(lambda: transfer.upload_abort(g, channel))
    elif op == "watch":
        g.files.submit(lambda: watch.op_watch(g, channel, req))
    elif op == "unwatch":
        g.loop.call(lambda: watch.op_unwatch(g, channel, req))
    elif op in FILE_OPS:
        file_fn = FILE_OPS[op]
        g.files.submit(lambda: run_file_op(g, file_fn, channel, req))
    elif op in CONTEXT_OPS:
        code_fn = CONTEXT_OPS[op]
        g.loop.call(lambda: code_fn(g, channel, req))
    elif op == "end_processes":
        # waits for the exits, which the loop thread reports: on a worker
        g.files.submit(lambda: run_op(g.wire, lambda c, r: op_end_processes(g, c, r), channel, req))
    elif op == "oom_sweep":
        # watches the processes for a moment: on a worker
        g.files.submit(lambda: run_op(g.wire, lambda c, r: oom.op_oom_sweep(g, c, r), channel, req))
    elif op in SIMPLE_OPS:
        simple_fn = SIMPLE_OPS[op]
        run_op(g.wire, lambda c, r: simple_fn(g, c, r), channel, req)
    else:
        g.wire.send_error(channel, "VALIDATION_FAILED", f"unknown op: {op}")


def resync(g: "Guest", buf: bytearray, fd: int = 0) -> None:
    """Drops what the old agent left in `buf` and in our stdin, forgets its requests, and marks the
    stream for the new agent."""
    buf.clear()
    os.set_blocking(fd, False)
    try:
        while os.read(fd, CHUNK):
            pass
    except (BlockingIOError, InterruptedError):
        pass
    finally:
        os.set_blocking(fd, True)
    forget_requests(g)
    msg: ResyncedMessage = {"type": "resynced", "nextChannel": g.max_channel + 1, "version": VERSION}
    g.wire.send_json(0, msg)


def forget_requests(g: "Guest", keep: int | None = None) -> None:
    """What an agent that is gone started can no longer be answered (after a re-attach, or in a
    restored snapshot): commands end as if their caller went away; cells finish unheard; kernels,
    files and setsid'd processes stay. Their last frames go out on channels below the next one the
    new agent is told to use."""
    with g.execs_lock:
        execs = [ex for channel, ex in g.execs.items() if channel != keep]
        for channel in [c for c in g.execs if c != keep]:
            del g.execs[channel]
    for ex in execs:
        ex.kill(signal.SIGKILL)
    transfer.forget_files(g)

    def forget_on_loop() -> None:
        procs.forget_subscribers(g)
        contexts.forget_cells(g)
        watch.forget_watches(g)

    g.loop.call(forget_on_loop)
