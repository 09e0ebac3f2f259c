"""What the API returns, as plain dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class SandboxInfo:
    id: str
    template: str
    state: str
    metadata: Dict[str, str]
    resources: Dict[str, int]
    created_at: str
    expires_at: str
    ended_at: Optional[str] = None
    error_reason: Optional[str] = None
    error_message: Optional[str] = None
    persistent: bool = False
    network: Dict[str, Any] = field(default_factory=dict)
    #: ``kill``, ``hibernate`` or ``hibernate-disk``: what its TTL does
    on_timeout: str = "kill"
    #: frozen while idle (``freeze=False`` at create: never)
    freeze: bool = True
    access_token: str = ""
    domain: str = "localhost"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SandboxInfo":
        return cls(
            id=d["id"],
            template=d["template"],
            state=d["state"],
            metadata=d.get("metadata") or {},
            resources=d.get("resources") or {},
            created_at=d.get("createdAt", ""),
            expires_at=d.get("expiresAt", ""),
            ended_at=d.get("endedAt"),
            error_reason=d.get("errorReason"),
            error_message=d.get("errorMessage"),
            persistent=bool(d.get("persistent")),
            network=d.get("network") or {},
            on_timeout=d.get("onTimeout") or "kill",
            freeze=d.get("freeze", True) is not False,
            access_token=d.get("accessToken", ""),
            domain=d.get("domain", "localhost"),
        )


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    signal: Optional[str] = None
    timed_out: bool = False
    truncated: bool = False
    duration_ms: float = 0.0


@dataclass
class Result:
    """One displayed value, in every form it offers (images base64). ``is_main_result``: the
    cell's last expression."""

    is_main_result: bool = False
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    svg: Optional[str] = None
    json: Any = None
    latex: Optional[str] = None
    javascript: Optional[str] = None
    pdf: Optional[str] = None
    #: a DataFrame's columns, each as the list of its values
    data: Optional[Dict[str, Any]] = None
    #: a matplotlib figure's chart as data (E2B's ``chart``): type, title, elements, axes
    chart: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Result":
        return cls(
            is_main_result=bool(d.get("isMainResult")),
            text=d.get("text"),
            html=d.get("html"),
            markdown=d.get("markdown"),
            png=d.get("png"),
            jpeg=d.get("jpeg"),
            svg=d.get("svg"),
            json=d.get("json"),
            latex=d.get("latex"),
            javascript=d.get("javascript"),
            pdf=d.get("pdf"),
            data=d.get("data"),
            chart=d.get("chart"),
            extra=d.get("extra") or {},
        )

    def formats(self) -> List[str]:
        return [k for k in ("text", "html", "markdown", "png", "jpeg", "svg", "json", "latex", "javascript", "pdf", "data", "chart") if getattr(self, k) is not None]


@dataclass
class ExecutionError:
    name: str
    value: str
    traceback: str


@dataclass
class Logs:
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class Execution:
    """What a cell did. An exception in the cell is ``error``, not a raised error."""

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None
    timed_out: bool = False
    truncated: bool = False
    duration_ms: float = 0.0

    @property
    def text(self) -> Optional[str]:
        """The main result's text, if the cell ended with a value."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    def _finish(self, d: Dict[str, Any]) -> "Execution":
        err = d.get("error")
        self.error = ExecutionError(err["name"], err["value"], err.get("traceback", "")) if err else None
        self.execution_count = d.get("executionCount")
        self.timed_out = bool(d.get("timedOut"))
        self.truncated = bool(d.get("truncated"))
        self.duration_ms = float(d.get("durationMs") or 0)
        return self

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Execution":
        e = cls(
            results=[Result.from_json(r) for r in d.get("results", [])],
            logs=Logs(stdout=list(d.get("logs", {}).get("stdout", [])), stderr=list(d.get("logs", {}).get("stderr", []))),
        )
        return e._finish(d)


@dataclass
class FileEntry:
    name: str
    path: str
    type: str
    size: int
    mode: int
    mtime_ms: float
    #: user metadata written with the file (stat always; list when asked)
    metadata: Optional[Dict[str, str]] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileEntry":
        return cls(d["name"], d["path"], d["type"], int(d["size"]), int(d["mode"]), float(d.get("mtimeMs") or 0), d.get("metadata"))


@dataclass
class FileChange:
    """A change in a watched directory: ``type`` is create, write, remove, rename or chmod; ``name``
    is relative to the watched directory ("" for the directory itself), ``path`` absolute."""

    type: str
    name: str
    path: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileChange":
        return cls(type=d["type"], name=d["name"], path=d["path"])


@dataclass
class Snapshot:
    id: str
    sandbox_id: str
    template: str
    size_bytes: int
    created_at: str
    name: Optional[str] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(d["id"], d["sandboxId"], d["template"], int(d["sizeBytes"]), d["createdAt"], d.get("name"))


@dataclass
class ProcessExit:
    """How a background process ended."""

    exit_code: int
    signal: Optional[str]
    timed_out: bool
    duration_ms: float


@dataclass
class BuildLogEntry:
    """One line of a template build's log; ``seq`` is its 0-based place (resume from ``seq + 1``)."""

    seq: int
    at: str
    step: Optional[int]
    stream: str
    message: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "BuildLogEntry":
        return cls(int(d["seq"]), d.get("at", ""), d.get("step"), d.get("stream", "system"), d.get("message", ""))


@dataclass
class TemplateBuild:
    """A build of one version of a template: ``waiting`` (for its context), ``queued``, ``building``,
    then ``ready`` or ``failed`` (``error`` has its ``code`` and ``message``). ``logs`` is filled only
    by ``get_build``."""

    id: str
    template_id: str
    template: str
    version: int
    status: str
    error: Optional[Dict[str, str]]
    created_at: str
    finished_at: Optional[str] = None
    logs: List[BuildLogEntry] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TemplateBuild":
        return cls(
            id=d["id"],
            template_id=d["templateId"],
            template=d["template"],
            version=int(d["version"]),
            status=d["status"],
            error=d.get("error"),
            created_at=d.get("createdAt", ""),
            finished_at=d.get("finishedAt"),
            logs=[BuildLogEntry.from_json(e) for e in d.get("logs") or []],
        )


@dataclass
class TemplateInfo:
    """A template as listed: a built-in (``id`` and ``version`` None) or one a key built."""

    name: str
    description: str
    defaults: Dict[str, int]
    maxima: Dict[str, int]
    ready: bool
    id: Optional[str] = None
    version: Optional[int] = None
    public: bool = True

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TemplateInfo":
        return cls(
            name=d["name"],
            description=d.get("description", ""),
            defaults=d.get("defaults") or {},
            maxima=d.get("maxima") or {},
            ready=bool(d.get("ready")),
            id=d.get("id"),
            version=d.get("version"),
            public=bool(d.get("public", True)),
        )


@dataclass
class UserTemplate:
    """A template a key built, with its builds (newest first); ``version`` is what ``name`` alone creates from."""

    id: str
    name: str
    description: str
    public: bool
    version: Optional[int]
    created_at: str
    builds: List[TemplateBuild] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "UserTemplate":
        return cls(
            id=d["id"],
            name=d["name"],
            description=d.get("description", ""),
            public=bool(d.get("public")),
            version=d.get("version"),
            created_at=d.get("createdAt", ""),
            builds=[TemplateBuild.from_json(b) for b in d.get("builds") or []],
        )
