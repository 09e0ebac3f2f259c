"""forkbox: self-hosted sandboxes for AI-generated code on gVisor, with fork of a live sandbox.

    from forkbox import Sandbox
    with Sandbox.create(template="code-interpreter") as sbx:
        print(sbx.run_code("1 + 1").text)
"""

from .errors import (
    AuthenticationError,
    ConflictError,
    ConnectionError,
    ForkboxError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    SandboxErroredError,
    ServiceUnavailableError,
    TimeoutError,
    ValidationError,
)
from .models import Execution, ExecutionError, ExecResult, FileEntry, Logs, ProcessExit, Result, SandboxInfo, Snapshot
from .sandbox import AsyncProcess, AsyncSandbox, Process, Sandbox

__all__ = [
    "AsyncProcess",
    "AsyncSandbox",
    "AuthenticationError",
    "ConflictError",
    "ConnectionError",
    "ExecResult",
    "Execution",
    "ExecutionError",
    "FileEntry",
    "ForkboxError",
    "InternalServerError",
    "Logs",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Process",
    "ProcessExit",
    "RateLimitError",
    "Result",
    "Sandbox",
    "SandboxErroredError",
    "SandboxInfo",
    "ServiceUnavailableError",
    "Snapshot",
    "TimeoutError",
    "ValidationError",
]
__version__ = "0.1.0"
