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
    TemplateBuildError,
    TimeoutError,
    UnsupportedByServerError,
    ValidationError,
)
from .models import (
    BuildLogEntry,
    Execution,
    ExecutionError,
    ExecResult,
    FileChange,
    FileEntry,
    Logs,
    ProcessExit,
    Result,
    SandboxInfo,
    Snapshot,
    TemplateBuild,
    TemplateInfo,
    UserTemplate,
)
from .sandbox import AsyncProcess, AsyncSandbox, Process, Sandbox
from .watch import AsyncWatchHandle, WatchHandle
from .template import AsyncTemplate, Template

__all__ = [
    "AsyncProcess",
    "AsyncSandbox",
    "AsyncTemplate",
    "AsyncWatchHandle",
    "AuthenticationError",
    "BuildLogEntry",
    "ConflictError",
    "ConnectionError",
    "ExecResult",
    "Execution",
    "ExecutionError",
    "FileChange",
    "FileEntry",
    "ForkboxError",
    "InternalServerError",
    "Logs",
    "NotFoundError",
    "UnsupportedByServerError",
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
    "Template",
    "TemplateBuild",
    "TemplateBuildError",
    "TemplateInfo",
    "TimeoutError",
    "UserTemplate",
    "ValidationError",
    "WatchHandle",
]
__version__ = "0.1.0"
