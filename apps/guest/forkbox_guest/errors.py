"""How a failed request is answered: forkbox error codes for OS errors and refusals."""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping

from .wire import Wire

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from typing import Any

    # a request as the agent sent it: a JSON object, read field by field (see `messages`)
    Request = Mapping[str, Any]

ERRNO_CODES = {
    errno.ENOENT: "FILE_NOT_FOUND",
    errno.EEXIST: "FILE_EXISTS",
    errno.ENOTDIR: "NOT_A_DIRECTORY",
    errno.EISDIR: "IS_A_DIRECTORY",
    errno.EACCES: "PERMISSION_DENIED",
    errno.EPERM: "PERMISSION_DENIED",
    errno.ENOSPC: "NO_SPACE",
    errno.EDQUOT: "NO_SPACE",
    errno.ENOTEMPTY: "DIRECTORY_NOT_EMPTY",
    errno.EINVAL: "VALIDATION_FAILED",
    errno.ENAMETOOLONG: "VALIDATION_FAILED",
    errno.EXDEV: "VALIDATION_FAILED",
    errno.EROFS: "PERMISSION_DENIED",
}


def os_error_code(err: OSError) -> str:
    return ERRNO_CODES.get(err.errno or 0, "GUEST_ERROR")


class OpError(Exception):
    """A refusal with a forkbox error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NoReply:
    """The value of an op that answered its channel itself."""


NO_REPLY = NoReply()


def op_failure(wire: Wire, channel: int, req: Request, e: BaseException) -> None:
    """Answers a failed request with the error's code."""
    if isinstance(e, OpError):
        wire.send_error(channel, e.code, str(e))
    elif isinstance(e, OSError):
        wire.send_error(channel, os_error_code(e), f"{e.strerror or e}: {e.filename or req.get('path', '')}")
    elif isinstance(e, ValueError):
        wire.send_error(channel, "VALIDATION_FAILED", str(e))
    else:
        wire.send_error(channel, "GUEST_ERROR", f"{type(e).__name__}: {e}")


def run_op(wire: Wire, fn: Callable[[int, Request], object], channel: int, req: Request) -> None:
    """Runs an op and answers with its value as the result, or with its error."""
    try:
        value = fn(channel, req)
    except Exception as e:  # noqa: BLE001 - the daemon must outlive any single request
        op_failure(wire, channel, req, e)
        return
    if not isinstance(value, NoReply):
        wire.send_json(channel, {"type": "result", "value": value})
