"""The JSON messages of the wire, declared: what the agent sends and what this daemon answers.

The same messages are in packages/protocol/src/guest.ts as zod schemas; both sides are checked
against the golden frames in packages/protocol/test/fixtures/guest-frames.json.
"""

from typing import Any, Literal, NotRequired, TypedDict

# ---- agent → guest: requests (NotRequired: the guest applies a default) ----


class ExecRequest(TypedDict):
    op: Literal["exec"]
    cmd: NotRequired[str]
    argv: NotRequired[list[str]]
    cwd: NotRequired[str]
    env: NotRequired[dict[str, str]]
    user: NotRequired[str]
    timeoutMs: NotRequired[int]
    maxOutputBytes: NotRequired[int]
    window: NotRequired[int]
    stdin: NotRequired[bool]
    background: NotRequired[bool]
    pty: NotRequired[bool]
    cols: NotRequired[int]
    rows: NotRequired[int]


class SignalRequest(TypedDict):
    op: Literal["signal"]
    signal: NotRequired[str]


class ResizeRequest(TypedDict):
    op: Literal["resize"]
    cols: int
    rows: int


class AckRequest(TypedDict):
    op: Literal["ack"]
    bytes: int


class AbortRequest(TypedDict):
    op: Literal["abort"]


class ProcAttachRequest(TypedDict):
    op: Literal["proc_attach"]
    pid: int
    offset: NotRequired[int]
    output: NotRequired[bool]
    window: NotRequired[int]


class ProcDetachRequest(TypedDict):
    op: Literal["proc_detach"]


class ProcAckRequest(TypedDict):
    op: Literal["proc_ack"]
    bytes: int


class ProcListRequest(TypedDict):
    op: Literal["proc_list"]


class ProcStdinRequest(TypedDict):
    op: Literal["proc_stdin"]
    pid: int
    data: NotRequired[str]
    eof: NotRequired[bool]


class ProcSignalRequest(TypedDict):
    op: Literal["proc_signal"]
    pid: int
    signal: NotRequired[str]


class ReadRequest(TypedDict):
    op: Literal["read"]
    path: str
    user: NotRequired[str]
    window: NotRequired[int]


class WriteRequest(TypedDict):
    op: Literal["write"]
    path: str
    user: NotRequired[str]
    mode: NotRequired[int]
    metadata: NotRequired[dict[str, str]]


class PathRequest(TypedDict):
    op: Literal["stat", "mkdir"]
    path: str
    user: NotRequired[str]


class ListRequest(TypedDict):
    op: Literal["list"]
    path: str
    user: NotRequired[str]
    depth: NotRequired[int]
    metadata: NotRequired[bool]


class RemoveRequest(TypedDict):
    op: Literal["remove"]
    path: str
    user: NotRequired[str]
    recursive: NotRequired[bool]


# (`from` is a keyword: the functional form)
RenameRequest = TypedDict("RenameRequest", {"op": Literal["rename"], "from": str, "to": str, "user": NotRequired[str]})


class RunCodeRequest(TypedDict):
    op: Literal["run_code"]
    code: str
    language: NotRequired[str]
    context: NotRequired[str]
    env: NotRequired[dict[str, str]]
    timeoutMs: NotRequired[int]
    maxOutputBytes: NotRequired[int]
    silent: NotRequired[bool]


class ContextCreateRequest(TypedDict):
    op: Literal["context_create"]
    language: NotRequired[str]
    cwd: NotRequired[str]
    user: NotRequired[str]
    env: NotRequired[dict[str, str]]


class ContextRequest(TypedDict):
    op: Literal["context_restart", "context_remove", "context_ready"]
    context: NotRequired[str]
    language: NotRequired[str]


class ContextListRequest(TypedDict):
    op: Literal["context_list"]


class InterruptRequest(TypedDict):
    op: Literal["interrupt"]


class PingRequest(TypedDict):
    op: Literal["ping", "usage", "end_processes", "oom_sweep"]


class ConfigureRequest(TypedDict):
    op: Literal["configure"]
    env: NotRequired[dict[str, str]]
    # the sandbox's name: its hostname, and what its machine and boot ids derive from
    hostname: NotRequired[str]
    merge: NotRequired[bool]
    restored: NotRequired[bool]


class WatchRequest(TypedDict):
    op: Literal["watch"]
    path: str
    recursive: NotRequired[bool]
    user: NotRequired[str]


class UnwatchRequest(TypedDict):
    op: Literal["unwatch"]


REQUESTS: dict[str, type[Any]] = {}
for _t in (
    ExecRequest, SignalRequest, ResizeRequest, AckRequest, AbortRequest, ProcAttachRequest, ProcDetachRequest,
    ProcAckRequest, ProcListRequest, ProcStdinRequest, ProcSignalRequest, ReadRequest, WriteRequest, PathRequest,
    ListRequest, RemoveRequest, RenameRequest, RunCodeRequest, ContextCreateRequest, ContextRequest,
    ContextListRequest, InterruptRequest, PingRequest, ConfigureRequest, WatchRequest, UnwatchRequest,
):  # fmt: skip
    for _op in _t.__annotations__["op"].__args__:
        REQUESTS[_op] = _t
"""The request type of each op."""

# ---- guest → agent: messages ----


class ReadyMessage(TypedDict):
    type: Literal["ready"]
    version: str
    pid: int


class ResyncedMessage(TypedDict):
    type: Literal["resynced"]
    nextChannel: int
    version: str


class ResultMessage(TypedDict):
    type: Literal["result"]
    value: Any


class ExitMessage(TypedDict):
    type: Literal["exit"]
    exitCode: int
    signal: str | None
    timedOut: bool
    truncated: bool
    durationMs: float
    offset: NotRequired[int]


class ErrorMessage(TypedDict):
    type: Literal["error"]
    code: str
    message: str


class StartedMessage(TypedDict):
    type: Literal["started"]
    pid: int


class FileMessage(TypedDict):
    type: Literal["file"]
    size: int | None


class GapMessage(TypedDict):
    type: Literal["gap"]
    bytes: int


class AttachedMessage(TypedDict):
    type: Literal["attached"]
    pid: int
    start: int
    end: int


class DisplayMessage(TypedDict):
    type: Literal["display"]
    main: bool
    data: dict[str, Any]


class WatchingMessage(TypedDict):
    type: Literal["watching"]
    path: str


WatchEventType = Literal["create", "write", "remove", "rename", "chmod"]


class WatchEvent(TypedDict):
    name: str
    type: WatchEventType


class EventsMessage(TypedDict):
    type: Literal["events"]
    events: list[WatchEvent]


class OverflowMessage(TypedDict):
    type: Literal["overflow"]
    reason: str


MESSAGES: dict[str, type[Any]] = {
    "ready": ReadyMessage,
    "resynced": ResyncedMessage,
    "result": ResultMessage,
    "exit": ExitMessage,
    "error": ErrorMessage,
    "started": StartedMessage,
    "file": FileMessage,
    "gap": GapMessage,
    "attached": AttachedMessage,
    "display": DisplayMessage,
    "watching": WatchingMessage,
    "events": EventsMessage,
    "overflow": OverflowMessage,
}
"""The message type of each `type`."""

# ---- the values of `result` ----


class CellError(TypedDict):
    name: str
    value: str
    traceback: str


class CellResult(TypedDict):
    executionCount: int | None
    error: CellError | None
    timedOut: bool
    truncated: bool
    durationMs: float


class ProcessInfo(TypedDict):
    pid: int
    cmd: str
    running: bool
    exitCode: int | None
    signal: str | None
    startedAt: float | None
    outputBytes: int


class ContextInfo(TypedDict):
    id: str
    language: str
    cwd: str | None
    running: bool


class FileEntry(TypedDict):
    name: str
    path: str
    type: str
    size: int
    mode: int
    mtimeMs: int
    uid: int
    gid: int
    target: NotRequired[str]
    metadata: NotRequired[dict[str, str]]


class ProcessStarted(TypedDict):
    pid: int


class ReadDone(TypedDict):
    size: int


class Detached(TypedDict):
    detached: bool


class Ping(TypedDict):
    version: str
    uptimeMs: int


class Usage(TypedDict):
    usedBytes: int


class Ended(TypedDict):
    ended: int


class Configured(TypedDict):
    nextChannel: NotRequired[int]


class Swept(TypedDict):
    """Processes an OOM sweep sent SIGKILL (oom.py), and those of them that did not end."""

    killed: list[int]
    stuck: list[int]


class WatchEnd(TypedDict):
    reason: Literal["stopped", "gone"]


RESULTS: dict[str, type[Any]] = {
    "cell": CellResult,
    "processInfo": ProcessInfo,
    "context": ContextInfo,
    "entry": FileEntry,
    "processStarted": ProcessStarted,
    "readDone": ReadDone,
    "detached": Detached,
    "ping": Ping,
    "usage": Usage,
    "configured": Configured,
    "ended": Ended,
    "swept": Swept,
    "watchEnd": WatchEnd,
}
"""The result values, by the name the golden frames give them."""
