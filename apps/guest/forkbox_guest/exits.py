"""How a process ended, as the wire reports it."""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .messages import ExitMessage


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)


def exit_message(status: int, timed_out: bool, truncated: bool, seconds: float) -> ExitMessage:
    """How a command ended, from its wait status."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name: str | None = signal_name(sig)
        code = 128 + sig
    else:
        name = None
        code = os.WEXITSTATUS(status)
    return {
        "type": "exit",
        "exitCode": code,
        "signal": name,
        "timedOut": timed_out,
        "truncated": truncated,
        "durationMs": round(seconds * 1000, 3),
    }
