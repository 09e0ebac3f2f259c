"""``Sandbox`` (blocking) and ``AsyncSandbox`` (asyncio): the same methods, one over each transport."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

from . import _core as core
from ._transport import AsyncTransport, SyncTransport
from .errors import NotFoundError
from .models import Execution, ExecResult, FileChange, FileEntry, ProcessExit, SandboxInfo, Snapshot
from .watch import AsyncWatchHandle, OnChange, OnOverflow, WatchHandle, start_async

Text = Union[str, bytes]


class Files:
    """Files of one sandbox. Paths are absolute or relative to the user's home."""

    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t, self._id = transport, sandbox_id

    def read(self, path: str, *, user: Optional[str] = None) -> str:
        return self.read_bytes(path, user=user).decode()

    def read_bytes(self, path: str, *, user: Optional[str] = None) -> bytes:
        return self._t.run(core.files_read(self._id, path, user=user))

    def write(self, path: str, data: Text, *, user: Optional[str] = None, metadata: Optional[Dict[str, str]] = None) -> FileEntry:
        """Writes the whole file; ``metadata`` is kept with it (replacing what it had)."""
        return self._t.run(core.files_write(self._id, path, data, user=user, metadata=metadata))

    def list(self, path: str = ".", *, depth: int = 1, user: Optional[str] = None, metadata: bool = False) -> List[FileEntry]:
        return self._t.run(core.files_list(self._id, path, depth=depth, user=user, metadata=metadata))

    def stat(self, path: str, *, user: Optional[str] = None) -> FileEntry:
        return self._t.run(core.files_stat(self._id, path, user=user))

    def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            self.stat(path, user=user)
            return True
        except NotFoundError:
            return False

    def make_dir(self, path: str, *, user: Optional[str] = None) -> FileEntry:
        return self._t.run(core.files_make_dir(self._id, path, user=user))

    def remove(self, path: str, *, user: Optional[str] = None) -> None:
        self._t.run(core.files_remove(self._id, path, user=user))

    def rename(self, src: str, dst: str, *, user: Optional[str] = None) -> FileEntry:
        return self._t.run(core.files_rename(self._id, src, dst, user=user))

    def download_url(self, path: str, *, expires_in_seconds: Optional[int] = None, user: Optional[str] = None) -> str:
        """A URL that downloads the file (plain GET) with no key until it expires (default 1 hour,
        at most 7 days): for a browser, or a service that must not hold the key."""
        return self._t.url.rstrip("/") + self._t.run(core.files_url(self._id, path, "read", expires_in_seconds=expires_in_seconds, user=user))

    def upload_url(self, path: str, *, expires_in_seconds: Optional[int] = None, user: Optional[str] = None) -> str:
        """A URL that writes the file (PUT of the raw bytes) with no key until it expires."""
        return self._t.url.rstrip("/") + self._t.run(core.files_url(self._id, path, "write", expires_in_seconds=expires_in_seconds, user=user))

    def watch(self, path: str, on_change: Callable[[FileChange], Any], *, recursive: bool = False, user: Optional[str] = None, on_overflow: Optional[OnOverflow] = None) -> WatchHandle:
        """Watches a directory: each change goes to ``on_change`` (on the watch's own thread) as it
        happens. Returns once the watch is set up; ``stop()`` the handle to end it."""
        return WatchHandle(self._t, self._id, path, on_change, recursive=recursive, user=user, on_overflow=on_overflow)


class Process:
    """A background command: it runs on after the call that started it and any client watching it."""

    def __init__(self, transport: SyncTransport, sandbox_id: str, pid: int) -> None:
        self._t, self._id, self.pid = transport, sandbox_id, pid

    def send_stdin(self, data: Text) -> None:
        self._t.run(core.process_stdin(self._id, self.pid, data, False))

    def close_stdin(self) -> None:
        self._t.run(core.process_stdin(self._id, self.pid, None, True))

    def kill(self, signal: str = "SIGKILL") -> Dict[str, Any]:
        return self._t.run(core.process_signal(self._id, self.pid, signal))

    def wait(self, *, on_stdout: Optional[Callable[[str], Any]] = None, on_stderr: Optional[Callable[[str], Any]] = None) -> ProcessExit:
        """Waits for the exit; with callbacks, the output (from the start of its log) goes to them meanwhile."""
        return self._t.run(core.process_wait(self._id, self.pid, on_stdout=on_stdout, on_stderr=on_stderr))


class Processes:
    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t, self._id = transport, sandbox_id

    def list(self) -> List[Dict[str, Any]]:
        return self._t.run(core.list_processes(self._id))

    def connect(self, pid: int) -> Process:
        return Process(self._t, self._id, pid)


class Sandbox:
    """A sandbox. ``with Sandbox.create(...) as sbx:`` kills it when the block ends."""

    def __init__(self, transport: SyncTransport, info: SandboxInfo) -> None:
        self._t = transport
        self.info = info
        self.id = info.id
        self.files = Files(transport, info.id)
        self.processes = Processes(transport, info.id)

    # -- lifecycle --
    @classmethod
    def create(
        cls,
        *,
        template: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        metadata: Optional[Dict[str, str]] = None,
        envs: Optional[Dict[str, str]] = None,
        resources: Optional[Dict[str, int]] = None,
        snapshot: Optional[str] = None,
        persistent: Optional[bool] = None,
        network: Optional[Dict[str, Any]] = None,
        on_timeout: Optional[str] = None,
        freeze: Optional[bool] = None,
        api_key: Optional[str] = None,
        url: Optional[str] = None,
        max_retries: Optional[int] = None,
    ) -> "Sandbox":
        t = SyncTransport(api_key, url, max_retries=max_retries)
        info = t.run(core.create(template=template, ttl_seconds=ttl_seconds, metadata=metadata, envs=envs, resources=resources, snapshot=snapshot, persistent=persistent, network=network, on_timeout=on_timeout, freeze=freeze))
        return cls(t, info)

    @classmethod
    def connect(cls, sandbox_id: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> "Sandbox":
        t = SyncTransport(api_key, url, max_retries=max_retries)
        return cls(t, t.run(core.get(sandbox_id)))

    @staticmethod
    def list(*, metadata: Optional[Dict[str, str]] = None, state: Optional[str] = None, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> List[SandboxInfo]:
        t = SyncTransport(api_key, url, max_retries=max_retries)
        try:
            return t.run(core.list_sandboxes(metadata=metadata, state=state))
        finally:
            t.close()

    @staticmethod
    def list_snapshots(*, name: Optional[str] = None, api_key: Optional[str] = None, url: Optional[str] = None) -> List[Snapshot]:
        """The key's snapshots (with ``name``: the one of that name, if any)."""
        t = SyncTransport(api_key, url)
        try:
            return t.run(core.list_snapshots(name))
        finally:
            t.close()

    @staticmethod
    def delete_snapshot(snapshot_id: str, *, api_key: Optional[str] = None, url: Optional[str] = None) -> None:
        """Deletes a snapshot, by id or name."""
        t = SyncTransport(api_key, url)
        try:
            t.run(core.delete_snapshot(snapshot_id))
        finally:
            t.close()

    def get_info(self) -> SandboxInfo:
        self.info = self._t.run(core.get(self.id))
        return self.info

    def set_timeout(self, ttl_seconds: int) -> SandboxInfo:
        self.info = self._t.run(core.set_timeout(self.id, ttl_seconds))
        return self.info

    def update_network(self, **network: Any) -> SandboxInfo:
        """Changes internet, allow_out, deny_out or ports; fields not given keep their value."""
        self.info = self._t.run(core.update_network(self.id, network))
        return self.info

    def get_host(self, port: int) -> str:
        """Where an exposed port is served: `http://{get_host(p)}/` with the key or `access_token`."""
        return core.host_of(self._t.url, self.id, self.info.domain, port)

    @property
    def access_token(self) -> str:
        return self.info.access_token

    def kill(self) -> None:
        self._t.run(core.kill(self.id))

    def snapshot(self, name: Optional[str] = None) -> Snapshot:
        """Keeps the live state; ``name``: start sandboxes from it by that name too (it moves from the snapshot that had it)."""
        return self._t.run(core.snapshot(self.id, name))

    def fork(
        self,
        *,
        count: int = 1,
        ttl_seconds: Optional[int] = None,
        metadata: Optional[Dict[str, str]] = None,
        spread: Optional[bool] = None,
    ) -> List["Sandbox"]:
        """``count`` sandboxes from this one's live state; ``spread=True`` places them across a fleet's hosts."""
        infos = self._t.run(core.fork(self.id, count=count, ttl_seconds=ttl_seconds, metadata=metadata, spread=spread))
        return [Sandbox(self._t, i) for i in infos]

    def hibernate(self, *, keep_memory: bool = True) -> SandboxInfo:
        """Checkpoints and stops it; the next call wakes it. ``keep_memory=False`` keeps only its
        disk: its processes end and its template's start command starts again (it wakes as if booted)."""
        self.info = self._t.run(core.hibernate(self.id, keep_memory))
        return self.info

    # -- running things --
    def exec(
        self,
        cmd: Union[str, List[str]],
        *,
        timeout_seconds: Optional[float] = None,
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Optional[Text] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        background: bool = False,
    ) -> Any:
        """Runs a command and waits (a string runs under bash -c), returning an ``ExecResult``; a
        non-zero exit is a result. With ``on_stdout``/``on_stderr`` output streams to them as it is
        written. With ``background=True`` it returns a ``Process`` at once (see ``start``)."""
        if background:
            return self.start(cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user)
        return self._t.run(core.exec_(self.id, cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user, stdin=stdin, on_stdout=on_stdout, on_stderr=on_stderr))

    def start(self, cmd: Union[str, List[str]], *, timeout_seconds: Optional[float] = None, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None, user: Optional[str] = None) -> Process:
        """Starts a command in the background and returns at once (no timeout unless given)."""
        pid = self._t.run(core.start_process(self.id, cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user))
        return Process(self._t, self.id, pid)

    def run_code(
        self,
        code: str,
        *,
        language: Optional[str] = None,
        context: Optional[Union[str, Dict[str, Any]]] = None,
        envs: Optional[Dict[str, str]] = None,
        timeout_seconds: Optional[float] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        on_result: Optional[Callable[[Any], Any]] = None,
    ) -> Execution:
        """Runs a cell in a persistent interpreter (state carries over between cells)."""
        return self._t.run(core.run_code(self.id, code, language=language, context=context, envs=envs, timeout_seconds=timeout_seconds, on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result))

    def create_code_context(self, *, language: Optional[str] = None, cwd: Optional[str] = None, envs: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return self._t.run(core.create_context(self.id, language=language, cwd=cwd, envs=envs))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill()
        except NotFoundError:
            pass


class AsyncFiles:
    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t, self._id = transport, sandbox_id

    async def read(self, path: str, *, user: Optional[str] = None) -> str:
        return (await self.read_bytes(path, user=user)).decode()

    async def read_bytes(self, path: str, *, user: Optional[str] = None) -> bytes:
        return await self._t.run(core.files_read(self._id, path, user=user))

    async def write(self, path: str, data: Text, *, user: Optional[str] = None, metadata: Optional[Dict[str, str]] = None) -> FileEntry:
        return await self._t.run(core.files_write(self._id, path, data, user=user, metadata=metadata))

    async def list(self, path: str = ".", *, depth: int = 1, user: Optional[str] = None, metadata: bool = False) -> List[FileEntry]:
        return await self._t.run(core.files_list(self._id, path, depth=depth, user=user, metadata=metadata))

    async def stat(self, path: str, *, user: Optional[str] = None) -> FileEntry:
        return await self._t.run(core.files_stat(self._id, path, user=user))

    async def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            await self.stat(path, user=user)
            return True
        except NotFoundError:
            return False

    async def make_dir(self, path: str, *, user: Optional[str] = None) -> FileEntry:
        return await self._t.run(core.files_make_dir(self._id, path, user=user))

    async def remove(self, path: str, *, user: Optional[str] = None) -> None:
        await self._t.run(core.files_remove(self._id, path, user=user))

    async def rename(self, src: str, dst: str, *, user: Optional[str] = None) -> FileEntry:
        return await self._t.run(core.files_rename(self._id, src, dst, user=user))

    async def download_url(self, path: str, *, expires_in_seconds: Optional[int] = None, user: Optional[str] = None) -> str:
        return self._t.url.rstrip("/") + await self._t.run(core.files_url(self._id, path, "read", expires_in_seconds=expires_in_seconds, user=user))

    async def upload_url(self, path: str, *, expires_in_seconds: Optional[int] = None, user: Optional[str] = None) -> str:
        return self._t.url.rstrip("/") + await self._t.run(core.files_url(self._id, path, "write", expires_in_seconds=expires_in_seconds, user=user))

    async def watch(self, path: str, on_change: OnChange, *, recursive: bool = False, user: Optional[str] = None, on_overflow: Optional[OnOverflow] = None) -> AsyncWatchHandle:
        """Watches a directory: each change goes to ``on_change`` (awaited when it is a coroutine)
        as it happens. Returns once the watch is set up; ``await handle.stop()`` to end it."""
        return await start_async(self._t, self._id, path, on_change, recursive=recursive, user=user, on_overflow=on_overflow)


class AsyncProcess:
    """``Process`` for asyncio."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str, pid: int) -> None:
        self._t, self._id, self.pid = transport, sandbox_id, pid

    async def send_stdin(self, data: Text) -> None:
        await self._t.run(core.process_stdin(self._id, self.pid, data, False))

    async def close_stdin(self) -> None:
        await self._t.run(core.process_stdin(self._id, self.pid, None, True))

    async def kill(self, signal: str = "SIGKILL") -> Dict[str, Any]:
        return await self._t.run(core.process_signal(self._id, self.pid, signal))

    async def wait(self, *, on_stdout: Optional[Callable[[str], Any]] = None, on_stderr: Optional[Callable[[str], Any]] = None) -> ProcessExit:
        return await self._t.run(core.process_wait(self._id, self.pid, on_stdout=on_stdout, on_stderr=on_stderr))


class AsyncProcesses:
    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t, self._id = transport, sandbox_id

    async def list(self) -> List[Dict[str, Any]]:
        return await self._t.run(core.list_processes(self._id))

    def connect(self, pid: int) -> AsyncProcess:
        return AsyncProcess(self._t, self._id, pid)


class AsyncSandbox:
    """``Sandbox`` for asyncio: ``async with await AsyncSandbox.create(...) as sbx:``. Callbacks may be coroutines."""

    def __init__(self, transport: AsyncTransport, info: SandboxInfo) -> None:
        self._t = transport
        self.info = info
        self.id = info.id
        self.files = AsyncFiles(transport, info.id)
        self.processes = AsyncProcesses(transport, info.id)

    @classmethod
    async def create(
        cls,
        *,
        template: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        metadata: Optional[Dict[str, str]] = None,
        envs: Optional[Dict[str, str]] = None,
        resources: Optional[Dict[str, int]] = None,
        snapshot: Optional[str] = None,
        persistent: Optional[bool] = None,
        network: Optional[Dict[str, Any]] = None,
        on_timeout: Optional[str] = None,
        freeze: Optional[bool] = None,
        api_key: Optional[str] = None,
        url: Optional[str] = None,
        max_retries: Optional[int] = None,
    ) -> "AsyncSandbox":
        t = AsyncTransport(api_key, url, max_retries=max_retries)
        info = await t.run(core.create(template=template, ttl_seconds=ttl_seconds, metadata=metadata, envs=envs, resources=resources, snapshot=snapshot, persistent=persistent, network=network, on_timeout=on_timeout, freeze=freeze))
        return cls(t, info)

    @classmethod
    async def connect(cls, sandbox_id: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> "AsyncSandbox":
        t = AsyncTransport(api_key, url, max_retries=max_retries)
        return cls(t, await t.run(core.get(sandbox_id)))

    @staticmethod
    async def list(*, metadata: Optional[Dict[str, str]] = None, state: Optional[str] = None, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> List[SandboxInfo]:
        t = AsyncTransport(api_key, url, max_retries=max_retries)
        try:
            return await t.run(core.list_sandboxes(metadata=metadata, state=state))
        finally:
            await t.aclose()

    @staticmethod
    async def list_snapshots(*, name: Optional[str] = None, api_key: Optional[str] = None, url: Optional[str] = None) -> List[Snapshot]:
        t = AsyncTransport(api_key, url)
        try:
            return await t.run(core.list_snapshots(name))
        finally:
            await t.aclose()

    @staticmethod
    async def delete_snapshot(snapshot_id: str, *, api_key: Optional[str] = None, url: Optional[str] = None) -> None:
        t = AsyncTransport(api_key, url)
        try:
            await t.run(core.delete_snapshot(snapshot_id))
        finally:
            await t.aclose()

    async def get_info(self) -> SandboxInfo:
        self.info = await self._t.run(core.get(self.id))
        return self.info

    async def set_timeout(self, ttl_seconds: int) -> SandboxInfo:
        self.info = await self._t.run(core.set_timeout(self.id, ttl_seconds))
        return self.info

    async def update_network(self, **network: Any) -> SandboxInfo:
        """Changes internet, allow_out, deny_out or ports; fields not given keep their value."""
        self.info = await self._t.run(core.update_network(self.id, network))
        return self.info

    def get_host(self, port: int) -> str:
        """Where an exposed port is served: `http://{get_host(p)}/` with the key or `access_token`."""
        return core.host_of(self._t.url, self.id, self.info.domain, port)

    @property
    def access_token(self) -> str:
        return self.info.access_token

    async def kill(self) -> None:
        await self._t.run(core.kill(self.id))

    async def snapshot(self, name: Optional[str] = None) -> Snapshot:
        """Keeps the live state; ``name``: start sandboxes from it by that name too (it moves from the snapshot that had it)."""
        return await self._t.run(core.snapshot(self.id, name))

    async def fork(
        self,
        *,
        count: int = 1,
        ttl_seconds: Optional[int] = None,
        metadata: Optional[Dict[str, str]] = None,
        spread: Optional[bool] = None,
    ) -> List["AsyncSandbox"]:
        infos = await self._t.run(core.fork(self.id, count=count, ttl_seconds=ttl_seconds, metadata=metadata, spread=spread))
        return [AsyncSandbox(self._t, i) for i in infos]

    async def hibernate(self, *, keep_memory: bool = True) -> SandboxInfo:
        """As :meth:`Sandbox.hibernate`."""
        self.info = await self._t.run(core.hibernate(self.id, keep_memory))
        return self.info

    async def exec(
        self,
        cmd: Union[str, List[str]],
        *,
        timeout_seconds: Optional[float] = None,
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Optional[Text] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        background: bool = False,
    ) -> Any:
        if background:
            return await self.start(cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user)
        return await self._t.run(core.exec_(self.id, cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user, stdin=stdin, on_stdout=on_stdout, on_stderr=on_stderr))

    async def start(self, cmd: Union[str, List[str]], *, timeout_seconds: Optional[float] = None, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None, user: Optional[str] = None) -> AsyncProcess:
        pid = await self._t.run(core.start_process(self.id, cmd, timeout_seconds=timeout_seconds, env=env, cwd=cwd, user=user))
        return AsyncProcess(self._t, self.id, pid)

    async def run_code(
        self,
        code: str,
        *,
        language: Optional[str] = None,
        context: Optional[Union[str, Dict[str, Any]]] = None,
        envs: Optional[Dict[str, str]] = None,
        timeout_seconds: Optional[float] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        on_result: Optional[Callable[[Any], Any]] = None,
    ) -> Execution:
        return await self._t.run(core.run_code(self.id, code, language=language, context=context, envs=envs, timeout_seconds=timeout_seconds, on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result))

    async def create_code_context(self, *, language: Optional[str] = None, cwd: Optional[str] = None, envs: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return await self._t.run(core.create_context(self.id, language=language, cwd=cwd, envs=envs))

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.kill()
        except NotFoundError:
            pass
