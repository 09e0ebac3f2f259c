"""After the host's OOM killer acted in this sandbox: ending the processes it left wedged.

The host OOM killer takes a sandbox's systrap stub processes (they map the guest's memory). gVisor
then usually fails the allocation (MemoryError) or ends the process, but now and then (seen ~1 in
10 under pressure) the process whose stub died stays "running" forever, spinning in the Sentry:
state R, system time growing, no user time, no progress, and SIGKILL does not end it. The agent
asks for a sweep when the sandbox's cgroup counts a new OOM kill: wedged processes are sent
SIGKILL (should one end, its waiter sees 137), and those still there are reported `stuck`: the
agent then stops the sandbox as out of memory rather than leave a call waiting on it forever.
"""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .errors import Request
    from .messages import Swept
    from .state import Guest

# How long a task is watched: long enough that a live one shows user time.
SAMPLE_S = 1.5
# A wedged task spins: at least this share of the window in system time, none in user time.
MIN_SYSTEM_SHARE = 0.3
# How long a killed process may take to be gone (or a zombie) before it counts as stuck.
KILL_WAIT_S = 2.0

Sample = dict[tuple[int, int], tuple[str, int, int]]


def _stat(path: str) -> tuple[str, int, int] | None:
    """A task's state, user and system ticks."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the name may hold spaces and parentheses: the fields start after the last ")"
    fields = data[data.rindex(b")") + 2 :].split()
    if len(fields) < 13:
        return None
    return fields[0].decode("ascii", "replace"), int(fields[11]), int(fields[12])


def sample(skip: set[int]) -> Sample:
    """Every task (thread) of every process but `skip`, by (pid, tid)."""
    out: Sample = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            tids = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for tid in tids:
            st = _stat(f"/proc/{name}/task/{tid}/stat")
            if st is not None:
                out[(int(name), int(tid))] = st
    return out


def wedged(before: Sample, after: Sample, elapsed_s: float, hz: int) -> list[int]:
    """Processes with a task that ran the whole window in system time only."""
    pids: set[int] = set()
    for key, (state, utime, stime) in after.items():
        prev = before.get(key)
        if prev is None or state != "R" or prev[0] != "R" or utime != prev[1]:
            continue
        if (stime - prev[2]) / hz >= MIN_SYSTEM_SHARE * elapsed_s:
            pids.add(key[0])
    return sorted(pids)


def op_oom_sweep(g: "Guest", channel: int, req: "Request") -> "Swept":
    skip = {1, os.getpid(), os.getppid()}
    before = sample(skip)
    t0 = time.monotonic()
    time.sleep(SAMPLE_S)
    after = sample(skip)
    killed: list[int] = []
    for pid in wedged(before, after, time.monotonic() - t0, os.sysconf("SC_CLK_TCK")):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return {"killed": killed, "stuck": still_running(killed, KILL_WAIT_S)}


def still_running(pids: list[int], wait_s: float) -> list[int]:
    """Those of `pids` neither gone nor a zombie after `wait_s`."""
    deadline = time.monotonic() + wait_s
    left = list(pids)
    while left:
        left = [p for p in left if _alive(p)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return left


def _alive(pid: int) -> bool:
    st = _stat(f"/proc/{pid}/stat")
    return st is not None and st[0] not in ("Z", "X")
