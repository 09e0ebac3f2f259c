"""The API once, without I/O: each operation is a generator that yields ``Call``s and gets back
their responses, so the sync and async clients share every request and every parse."""

from __future__ import annotations

import io
import os
import tarfile
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Generator, List, Optional, Union
from urllib.parse import quote

from . import errors
from .errors import ForkboxError, TemplateBuildError, error_from_event
from .models import (
    BuildLogEntry,
    Execution,
    ExecResult,
    FileEntry,
    ProcessExit,
    Result,
    SandboxInfo,
    Snapshot,
    TemplateBuild,
    TemplateInfo,
    UserTemplate,
)


@dataclass
class Call:
    method: str
    path: str
    json: Any = None
    params: Optional[Dict[str, Any]] = None
    content: Optional[bytes] = None
    #: the content's type; default application/octet-stream
    content_type: Optional[str] = None
    #: seconds to wait before sending (a reconnect's backoff)
    delay: float = 0.0
    #: the response body as bytes instead of JSON
    raw: bool = False
    #: an event stream: each (event, payload) goes here as it arrives; the call returns None
    events: Optional[Callable[[str, Any], Any]] = None
    #: more headers (file metadata)
    headers: Optional[Dict[str, str]] = None


Op = Generator[Call, Any, Any]


def sandbox_path(sandbox_id: str) -> str:
    return f"/v1/sandboxes/{quote(sandbox_id, safe='')}"


def _compact(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def create(*, template, ttl_seconds, metadata, envs, resources, snapshot, persistent, network=None, on_timeout=None, freeze=None) -> Op:
    body = _compact(
        {
            "template": template,
            "ttlSeconds": ttl_seconds,
            "metadata": metadata,
            "envs": envs,
            "resources": resources,
            "snapshot": snapshot,
            "persistent": persistent,
            "network": network_body(network) if network is not None else None,
            "onTimeout": on_timeout,
            "freeze": freeze,
        }
    )
    return SandboxInfo.from_json((yield Call("POST", "/v1/sandboxes", json=body)))


def network_body(network: Dict[str, Any]) -> Dict[str, Any]:
    """Accepts the API's names or snake_case ones (allow_out, deny_out)."""
    names = {"allow_out": "allowOut", "deny_out": "denyOut"}
    return {names.get(k, k): v for k, v in network.items() if v is not None}


def update_network(sandbox_id: str, network: Dict[str, Any]) -> Op:
    return SandboxInfo.from_json((yield Call("PATCH", f"{sandbox_path(sandbox_id)}/network", json=network_body(network))))


def host_of(url: str, sandbox_id: str, domain: str, port: int) -> str:
    """`PORT-ID.DOMAIN[:apiPort]`: where an exposed port is served, its own origin (see network.ports)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return f"{port}-{sandbox_id}.{domain}" + (f":{u.port}" if u.port else "")


def get(sandbox_id: str) -> Op:
    return SandboxInfo.from_json((yield Call("GET", sandbox_path(sandbox_id))))


def list_sandboxes(*, metadata=None, state=None) -> Op:
    params = {f"metadata.{k}": v for k, v in (metadata or {}).items()}
    if state:
        params["state"] = state
    res = yield Call("GET", "/v1/sandboxes", params=params)
    return [SandboxInfo.from_json(s) for s in res["sandboxes"]]


def kill(sandbox_id: str) -> Op:
    yield Call("DELETE", sandbox_path(sandbox_id))


def set_timeout(sandbox_id: str, ttl_seconds: int) -> Op:
    return SandboxInfo.from_json((yield Call("POST", f"{sandbox_path(sandbox_id)}/timeout", json={"ttlSeconds": ttl_seconds})))


def hibernate(sandbox_id: str, keep_memory: bool = True) -> Op:
    body = None if keep_memory else {"keepMemory": False}
    return SandboxInfo.from_json((yield Call("POST", f"{sandbox_path(sandbox_id)}/hibernate", json=body)))


def snapshot(sandbox_id: str, name: Optional[str] = None) -> Op:
    body = {"name": name} if name else None
    return Snapshot.from_json((yield Call("POST", f"{sandbox_path(sandbox_id)}/snapshots", json=body)))


def list_snapshots(name: Optional[str] = None) -> Op:
    res = yield Call("GET", "/v1/snapshots", params=_compact({"name": name}))
    return [Snapshot.from_json(s) for s in res["snapshots"]]


def delete_snapshot(snapshot_id: str) -> Op:
    """By id or name."""
    yield Call("DELETE", f"/v1/snapshots/{quote(snapshot_id, safe='')}")


def fork(sandbox_id: str, *, count, ttl_seconds, metadata, spread=None) -> Op:
    body = _compact({"count": count, "ttlSeconds": ttl_seconds, "metadata": metadata, "spread": spread})
    res = yield Call("POST", f"{sandbox_path(sandbox_id)}/fork", json=body)
    return [SandboxInfo.from_json(s) for s in res["sandboxes"]]


def exec_(sandbox_id: str, cmd: Union[str, List[str]], *, timeout_seconds, env, cwd, user, stdin, on_stdout, on_stderr) -> Op:
    body = _compact({"cmd": cmd, "env": env, "cwd": cwd, "user": user, "timeoutSeconds": timeout_seconds})
    if isinstance(stdin, bytes):
        import base64

        body.update(stdin=base64.b64encode(stdin).decode(), stdinEncoding="base64")
    elif stdin is not None:
        body["stdin"] = stdin
    path = f"{sandbox_path(sandbox_id)}/exec"
    if on_stdout is None and on_stderr is None:
        r = yield Call("POST", path, json=body)
        return ExecResult(r["exitCode"], r["stdout"], r["stderr"], r.get("signal"), r["timedOut"], r["truncated"], r["durationMs"])
    out: Dict[str, Any] = {"stdout": [], "stderr": [], "exit": None, "error": None}

    def on_event(event: str, payload: Any):
        if event in ("stdout", "stderr"):
            out[event].append(payload["data"])
            cb = on_stdout if event == "stdout" else on_stderr
            return cb(payload["data"]) if cb else None
        if event == "exit":
            out["exit"] = payload
        elif event == "error":
            out["error"] = payload
        return None

    yield Call("POST", path, json=body, events=on_event)
    if out["error"] is not None:
        raise error_from_event(out["error"])
    e = out["exit"]
    if e is None:
        raise ForkboxError("UNEXPECTED_RESPONSE", "the exec stream ended before the command did")
    return ExecResult(e["exitCode"], "".join(out["stdout"]), "".join(out["stderr"]), e.get("signal"), e["timedOut"], e["truncated"], e["durationMs"])


def run_code(sandbox_id: str, code: str, *, language, context, envs, timeout_seconds, on_stdout, on_stderr, on_result) -> Op:
    body = _compact(
        {
            "code": code,
            "language": language,
            "contextId": context if isinstance(context, (str, type(None))) else context["id"],
            "envs": envs,
            "timeoutSeconds": timeout_seconds,
        }
    )
    path = f"{sandbox_path(sandbox_id)}/code"
    if on_stdout is None and on_stderr is None and on_result is None:
        return Execution.from_json((yield Call("POST", path, json=body)))
    execution = Execution()
    state: Dict[str, Any] = {"end": None, "error": None}

    def on_event(event: str, payload: Any):
        if event in ("stdout", "stderr"):
            getattr(execution.logs, event).append(payload["text"])
            cb = on_stdout if event == "stdout" else on_stderr
            return cb(payload["text"]) if cb else None
        if event == "result":
            r = Result.from_json(payload)
            execution.results.append(r)
            return on_result(r) if on_result else None
        if event == "end":
            state["end"] = payload
        elif event == "error":
            state["error"] = payload
        return None

    yield Call("POST", path, json=body, events=on_event)
    if state["error"] is not None:
        raise error_from_event(state["error"])
    if state["end"] is None:
        raise ForkboxError("UNEXPECTED_RESPONSE", "the code stream ended before the cell did")
    return execution._finish(state["end"])


def create_context(sandbox_id: str, *, language, cwd, envs) -> Op:
    body = _compact({"language": language, "cwd": cwd, "envs": envs})
    return (yield Call("POST", f"{sandbox_path(sandbox_id)}/code/contexts", json=body))


def files_read(sandbox_id: str, path: str, *, user=None) -> Op:
    return (yield Call("GET", f"{sandbox_path(sandbox_id)}/files", params=_compact({"path": path, "user": user}), raw=True))


def files_write(sandbox_id: str, path: str, data: Union[str, bytes], *, user=None, metadata=None) -> Op:
    content = data.encode() if isinstance(data, str) else bytes(data)
    params = _compact({"path": path, "user": user})
    headers = {f"x-metadata-{k}": v for k, v in (metadata or {}).items()}
    return FileEntry.from_json((yield Call("PUT", f"{sandbox_path(sandbox_id)}/files", params=params, content=content, headers=headers)))


def files_list(sandbox_id: str, path: str, *, depth=1, user=None, metadata=False) -> Op:
    params = _compact({"path": path, "depth": depth, "user": user, "metadata": "true" if metadata else None})
    res = yield Call("GET", f"{sandbox_path(sandbox_id)}/files/list", params=params)
    return [FileEntry.from_json(e) for e in res["entries"]]


def files_stat(sandbox_id: str, path: str, *, user=None) -> Op:
    return FileEntry.from_json((yield Call("GET", f"{sandbox_path(sandbox_id)}/files/stat", params=_compact({"path": path, "user": user}))))


def files_url(sandbox_id: str, path: str, operation: str, *, expires_in_seconds=None, user=None) -> Op:
    body = _compact({"path": path, "operation": operation, "expiresInSeconds": expires_in_seconds, "user": user})
    return (yield Call("POST", f"{sandbox_path(sandbox_id)}/files/url", json=body))["path"]


def files_make_dir(sandbox_id: str, path: str, *, user=None) -> Op:
    return FileEntry.from_json((yield Call("POST", f"{sandbox_path(sandbox_id)}/files/mkdir", json=_compact({"path": path, "user": user}))))


def files_remove(sandbox_id: str, path: str, *, user=None) -> Op:
    yield Call("DELETE", f"{sandbox_path(sandbox_id)}/files", params=_compact({"path": path, "user": user}))


def files_rename(sandbox_id: str, src: str, dst: str, *, user=None) -> Op:
    body = _compact({"from": src, "to": dst, "user": user})
    return FileEntry.from_json((yield Call("POST", f"{sandbox_path(sandbox_id)}/files/rename", json=body)))


def start_process(sandbox_id: str, cmd: Union[str, List[str]], *, timeout_seconds, env, cwd, user) -> Op:
    body = _compact({"cmd": cmd, "env": env, "cwd": cwd, "user": user, "timeoutSeconds": timeout_seconds, "background": True})
    return (yield Call("POST", f"{sandbox_path(sandbox_id)}/exec", json=body))["pid"]


def list_processes(sandbox_id: str) -> Op:
    return (yield Call("GET", f"{sandbox_path(sandbox_id)}/processes"))["processes"]


def process_stdin(sandbox_id: str, pid: int, data: Optional[Union[str, bytes]], eof: bool) -> Op:
    body: Dict[str, Any] = {"eof": eof}
    if isinstance(data, bytes):
        import base64

        body.update(data=base64.b64encode(data).decode(), encoding="base64")
    elif data is not None:
        body["data"] = data
    yield Call("POST", f"{sandbox_path(sandbox_id)}/processes/{pid}/stdin", json=body)


def process_signal(sandbox_id: str, pid: int, signal: str) -> Op:
    return (yield Call("POST", f"{sandbox_path(sandbox_id)}/processes/{pid}/signal", json={"signal": signal}))


def process_wait(sandbox_id: str, pid: int, *, on_stdout, on_stderr) -> Op:
    """The process's exit; with callbacks, its output from the start of its log meanwhile."""
    if on_stdout is None and on_stderr is None:
        e = yield Call("GET", f"{sandbox_path(sandbox_id)}/processes/{pid}/wait")
        return ProcessExit(e["exitCode"], e.get("signal"), e["timedOut"], e["durationMs"])
    state: Dict[str, Any] = {"exit": None, "error": None}

    def on_event(event: str, payload: Any):
        if event in ("stdout", "stderr"):
            cb = on_stdout if event == "stdout" else on_stderr
            return cb(payload["data"]) if cb else None
        if event == "exit":
            state["exit"] = payload
        elif event == "error":
            state["error"] = payload
        return None

    yield Call("GET", f"{sandbox_path(sandbox_id)}/processes/{pid}/output", params={"offset": 0}, events=on_event)
    if state["error"] is not None:
        raise error_from_event(state["error"])
    e = state["exit"]
    if e is None:
        raise ForkboxError("UNEXPECTED_RESPONSE", f"the output of process {pid} ended before it did")
    return ProcessExit(e["exitCode"], e.get("signal"), e["timedOut"], e["durationMs"])


# -- templates --

#: how many of a failed build's last log lines its error carries
BUILD_LOG_TAIL_LINES = 20
#: reconnects in a row that bring no new log line before the stream counts as broken
MAX_LOG_RECONNECTS = 5

BuildContext = Union[str, "os.PathLike[str]", bytes]


def template_path(name: str) -> str:
    return f"/v1/templates/{quote(name, safe='')}"


def build_path(build_id: str) -> str:
    return f"/v1/builds/{quote(build_id, safe='')}"


def list_templates() -> Op:
    res = yield Call("GET", "/v1/templates")
    return [TemplateInfo.from_json(t) for t in res["templates"]]


def get_template(name: str) -> Op:
    return UserTemplate.from_json((yield Call("GET", template_path(name))))


def delete_template(name: str) -> Op:
    yield Call("DELETE", template_path(name))


def get_build(build_id: str, *, logs_offset: int = 0) -> Op:
    return TemplateBuild.from_json((yield Call("GET", build_path(build_id), params={"logsOffset": logs_offset})))


def _owned_by_root(info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    if info.isdev():  # devices and FIFOs are no part of a build context
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def context_tar(context: BuildContext) -> bytes:
    """A tar archive as it is, or a directory tarred with every file in it (names relative to it);
    ``.dockerignore`` is applied by the builder, not here."""
    if isinstance(context, (bytes, bytearray, memoryview)):
        return bytes(context)
    root = os.fspath(context)
    if not os.path.isdir(root):
        raise ValueError(f"the build context {root} is not a directory")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(root)):
            tar.add(os.path.join(root, name), arcname=name, filter=_owned_by_root)
    return buf.getvalue()


OnLog = Callable[[BuildLogEntry], Any]


def build_template(
    *,
    name: str,
    description: Optional[str],
    image: Optional[str],
    dockerfile: Optional[str],
    context: Optional[BuildContext],
    build_args: Optional[Dict[str, str]],
    resources: Optional[Dict[str, int]],
    on_log: Optional[OnLog],
    start_cmd: Optional[str] = None,
    ready_cmd: Optional[str] = None,
    registry_auth: Optional[Dict[str, str]] = None,
    archive: Optional[Union[str, "os.PathLike[str]", bytes]] = None,
) -> Op:
    """Starts a build, uploads its context (or image archive), and waits for it (see ``wait_for_build``)."""
    if dockerfile is None and image is None and archive is None and isinstance(context, (str, os.PathLike)):
        with open(os.path.join(os.fspath(context), "Dockerfile"), encoding="utf-8") as f:
            dockerfile = f.read()
    body = _compact(
        {
            "name": name,
            "description": description,
            "image": image,
            "dockerfile": dockerfile,
            "buildArgs": build_args,
            "resources": resources,
            "startCmd": start_cmd,
            "readyCmd": ready_cmd,
            "registryAuth": registry_auth,
            "context": True if context is not None else None,
            "archive": True if archive is not None else None,
        }
    )
    # read first: a context or archive that cannot be read fails before a build waits for it in vain
    if archive is not None:
        if isinstance(archive, bytes):
            tar: Optional[bytes] = archive
        else:
            with open(os.fspath(archive), "rb") as f:
                tar = f.read()
    else:
        tar = context_tar(context) if context is not None else None
    build_id = (yield Call("POST", "/v1/templates", json=body))["build"]["id"]
    if tar is not None:
        yield Call("PUT", f"{build_path(build_id)}/context", content=tar, content_type="application/x-tar")
    return (yield from wait_for_build(build_id, on_log=on_log))


def wait_for_build(build_id: str, *, offset: int = 0, on_log: Optional[OnLog] = None) -> Op:
    """Follows the build's log from ``offset`` (each line to ``on_log`` once, in order, across
    dropped connections) until it ends: returns it when ready, raises ``TemplateBuildError`` when failed."""
    state: Dict[str, Any] = {"next": offset, "end": None, "error": None, "progress": False}
    tail: Deque[BuildLogEntry] = deque(maxlen=BUILD_LOG_TAIL_LINES)

    def on_event(event: str, payload: Any) -> Any:
        if event == "log":
            entry = BuildLogEntry.from_json(payload)
            if entry.seq < state["next"]:
                return None
            state["next"], state["progress"] = entry.seq + 1, True
            tail.append(entry)
            return on_log(entry) if on_log else None
        if event == "end":
            state["end"] = payload
        elif event == "error":
            state["error"] = payload
        return None

    reconnects = 0
    while True:
        state["progress"] = False
        delay = min(0.1 * 2 ** (reconnects - 1), 3.0) if reconnects else 0.0
        cause: Optional[errors.ConnectionError] = None
        try:
            yield Call("GET", f"{build_path(build_id)}/logs", params={"offset": state["next"]}, events=on_event, delay=delay)
        except errors.ConnectionError as e:
            cause = e
        if state["error"] is not None:
            raise error_from_event(state["error"])
        if state["end"] is not None:
            break
        reconnects = 1 if state["progress"] else reconnects + 1
        if reconnects > MAX_LOG_RECONNECTS:
            raise errors.ConnectionError("CONNECTION_ERROR", f"the log stream of build {build_id} keeps breaking off") from cause
    build = TemplateBuild.from_json(state["end"])
    if build.status == "failed":
        raise TemplateBuildError(build, list(tail))
    return build
