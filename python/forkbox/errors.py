"""Errors: every failure the server reports carries its stable ``code``, HTTP ``status`` and ``request_id``."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional


class ForkboxError(Exception):
    """Base of every error this SDK raises."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        details: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.details = details or {}


class ValidationError(ForkboxError):
    """400: the request was malformed (bad path, bad field, unsupported language, ...)."""


class AuthenticationError(ForkboxError):
    """401: no API key, or an unknown or revoked one."""


class PermissionDeniedError(ForkboxError):
    """403."""


class NotFoundError(ForkboxError):
    """404: no such sandbox, file, snapshot, code context or process (for this key)."""


class UnsupportedByServerError(NotFoundError):
    """UNSUPPORTED_BY_SERVER: the server does not serve a call this SDK makes (it is older than
    the SDK); ``server_version`` says which it is, when it says."""

    def __init__(self, code: str, message: str, *, server_version: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(code, message, **kwargs)
        self.server_version = server_version


def unsupported_or(err: ForkboxError, method: str, path: str, server_version: Optional[str]) -> ForkboxError:
    """``err`` as UNSUPPORTED_BY_SERVER when it is the server's 404 for a route it does not serve."""
    no_route = err.details.get("noRoute") is True or err.message.startswith("no route ")
    if err.status != 404 or err.code != "NOT_FOUND" or not no_route:
        return err
    from . import __version__

    server = f"forkbox {server_version}" if server_version else "a forkbox older than 0.1.0"
    return UnsupportedByServerError(
        "UNSUPPORTED_BY_SERVER",
        f"this server ({server}) does not serve {method} {path}, which this SDK ({__version__}) calls: upgrade the server",
        status=404,
        request_id=err.request_id,
        details=err.details,
        server_version=server_version,
    )


class TimeoutError(ForkboxError):  # noqa: A001 - the name users of the SDK look for
    """408: a command ran past its timeout and was killed (partial output in ``details``)."""


class ConflictError(ForkboxError):
    """409: e.g. the sandbox is not running, or the file already exists."""


class SandboxErroredError(ForkboxError):
    """410: the sandbox stopped by itself (out of memory, ...): ``details['reason']``."""


class PayloadTooLargeError(ForkboxError):
    """413."""


class RateLimitError(ForkboxError):
    """429."""


class InternalServerError(ForkboxError):
    """5xx."""


class ServiceUnavailableError(InternalServerError):
    """503: e.g. the host runs as many sandboxes as it may."""


class ConnectionError(ForkboxError):  # noqa: A001
    """The server could not be reached."""


class TemplateBuildError(ForkboxError):
    """A template build ended ``failed``: ``code`` and the first line of ``message`` are its error;
    ``log_tail`` holds its last log lines, which the message repeats below."""

    def __init__(self, build: Any, log_tail: List[Any]) -> None:
        error = build.error or {"code": "INTERNAL", "message": "the build failed without a reason"}
        lines = [f"  [step {e.step}] {e.message}" if e.step is not None else f"  {e.message}" for e in log_tail]
        super().__init__(error["code"], "\n".join([error["message"], *lines]), details={"buildId": build.id})
        self.build = build
        self.build_id = build.id
        self.log_tail = log_tail


_BY_STATUS = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: TimeoutError,
    409: ConflictError,
    410: SandboxErroredError,
    413: PayloadTooLargeError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_from(status: int, body: Any, header_request_id: Optional[str] = None) -> ForkboxError:
    """The typed error for an error response (or an SSE ``error`` event) with ``body``."""
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        code = err["code"]
        if code == "SANDBOX_ERRORED":
            cls = SandboxErroredError
        else:
            cls = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else ForkboxError)
        return cls(
            code,
            str(err.get("message", f"HTTP {status}")),
            status=status,
            request_id=err.get("requestId") or header_request_id,
            details=err.get("details") if isinstance(err.get("details"), dict) else None,
        )
    cls = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else ForkboxError)
    return cls("UNEXPECTED_RESPONSE", f"HTTP {status}", status=status, request_id=header_request_id)


def _status_of(code: str) -> int:
    if code.endswith("NOT_FOUND"):
        return 404
    return {
        "VALIDATION_FAILED": 400,
        "INVALID_PATH": 400,
        "UNAUTHENTICATED": 401,
        "FORBIDDEN": 403,
        "PERMISSION_DENIED": 403,
        "EXEC_TIMEOUT": 408,
        "SANDBOX_NOT_RUNNING": 409,
        "CANCELLED": 409,
        "SANDBOX_ERRORED": 410,
        "CONFLICT": 409,
        "RATE_LIMITED": 429,
        "QUOTA_EXCEEDED": 429,
        "NO_CAPACITY": 503,
        "HOST_UNREACHABLE": 503,
        "STORE_UNAVAILABLE": 503,
        "SANDBOX_MOVING": 503,
        "TEMPLATE_UNAVAILABLE": 503,
    }.get(code, 500)


def error_from_event(payload: Any) -> ForkboxError:
    """An SSE ``error`` event as the error an ordinary response with its code would have raised."""
    code = ((payload or {}).get("error") or {}).get("code", "")
    return error_from(_status_of(code), payload)
