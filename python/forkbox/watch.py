"""Directory watches: ``sandbox.files.watch`` over the server's event stream.

``AsyncWatchHandle`` follows the stream in a task; ``WatchHandle`` (the blocking client) runs the
same in an event loop on a thread of its own, so ``stop()`` can cut the stream at once.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Dict, Optional, Union

from . import _core as core
from ._transport import AsyncTransport, _Transport
from .errors import ForkboxError, error_from_event
from .models import FileChange

OnChange = Callable[[FileChange], Union[None, Awaitable[None]]]
OnOverflow = Callable[[str], Any]


def watch_op(sandbox_id: str, path: str, *, recursive: bool, user: Optional[str], on_start: Callable[[str], Any], on_change: OnChange, on_overflow: Optional[OnOverflow]) -> core.Op:
    """The watch's stream: `on_start` once it is set up, then each change; returns how it ended
    (``gone``), raises what ended it otherwise."""
    state: Dict[str, Any] = {"end": None, "error": None}

    def on_event(event: str, payload: Any) -> Any:
        if event == "start":
            return on_start(payload["path"])
        if event == "change":
            return on_change(FileChange.from_json(payload))
        if event == "overflow":
            return on_overflow(payload["reason"]) if on_overflow else None
        if event == "end":
            state["end"] = payload
        elif event == "error":
            state["error"] = payload
        return None

    params = {"path": path, "recursive": "true" if recursive else None, "user": user}
    yield core.Call("GET", f"{core.sandbox_path(sandbox_id)}/files/watch", params=core._compact(params), events=on_event)
    if state["error"] is not None:
        raise error_from_event(state["error"])
    if state["end"] is None:
        raise ForkboxError("UNEXPECTED_RESPONSE", f"the watch of {path} ended without saying why")
    return str(state["end"]["reason"])


class AsyncWatchHandle:
    """A running watch. ``stop()`` ends it; ``wait()`` returns how it ended (``stopped`` or ``gone``:
    the directory was removed or moved away) or raises what ended it (the sandbox went)."""

    def __init__(self, path: str, task: "asyncio.Task[str]") -> None:
        self.path = path
        self._task = task

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, ForkboxError):
            pass

    async def wait(self) -> str:
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if self._task.cancelled():
                return "stopped"
            raise

    async def __aenter__(self) -> "AsyncWatchHandle":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()


async def start_async(transport: AsyncTransport, sandbox_id: str, path: str, on_change: OnChange, *, recursive: bool, user: Optional[str], on_overflow: Optional[OnOverflow]) -> AsyncWatchHandle:
    """Opens the watch; returns once it is set up (every change from then on is reported)."""
    started: "asyncio.Future[str]" = asyncio.get_running_loop().create_future()

    def on_start(root: str) -> None:
        if not started.done():
            started.set_result(root)

    op = watch_op(sandbox_id, path, recursive=recursive, user=user, on_start=on_start, on_change=on_change, on_overflow=on_overflow)
    task = asyncio.ensure_future(transport.run(op))

    def settled(t: "asyncio.Task[str]") -> None:
        if started.done():
            return
        if t.cancelled():
            started.cancel()
        elif t.exception() is not None:
            started.set_exception(t.exception())  # type: ignore[arg-type]
        else:
            started.set_exception(ForkboxError("UNEXPECTED_RESPONSE", f"the watch of {path} ended before it started"))

    task.add_done_callback(settled)
    try:
        root = await started
    except BaseException:
        task.cancel()
        raise
    return AsyncWatchHandle(root, task)


class WatchHandle:
    """A running watch of the blocking client: changes go to its callback on the watch's own
    thread. ``stop()`` ends it; ``wait()`` as ``AsyncWatchHandle.wait``."""

    def __init__(self, base: _Transport, sandbox_id: str, path: str, on_change: Callable[[FileChange], Any], *, recursive: bool, user: Optional[str], on_overflow: Optional[OnOverflow]) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._handle: Optional[AsyncWatchHandle] = None
        self._error: Optional[BaseException] = None
        self._end: Optional[str] = None
        self.path = path

        async def follow() -> None:
            transport = AsyncTransport(base.key, base.url, max_retries=base.retry.max_retries)
            try:
                self._handle = await start_async(transport, sandbox_id, path, on_change, recursive=recursive, user=user, on_overflow=on_overflow)
                self.path = self._handle.path
                self._ready.set()
                self._end = await self._handle.wait()
            except BaseException as e:  # noqa: BLE001 - handed to the caller of wait() (or of the constructor)
                self._error = e
            finally:
                self._ready.set()
                await transport.aclose()

        def run() -> None:
            try:
                self._loop.run_until_complete(follow())
            finally:
                self._loop.close()
                self._done.set()

        threading.Thread(target=run, name="forkbox-watch", daemon=True).start()
        self._ready.wait()
        if self._handle is None:
            self._done.wait()
            raise self._error if self._error is not None else ForkboxError("UNEXPECTED_RESPONSE", "the watch did not start")

    def stop(self) -> None:
        handle = self._handle
        if handle is not None and not self._done.is_set():
            try:
                asyncio.run_coroutine_threadsafe(handle.stop(), self._loop).result()
            except RuntimeError:
                pass  # its loop ended meanwhile
        self._done.wait()

    def wait(self, timeout: Optional[float] = None) -> str:
        if not self._done.wait(timeout):
            raise TimeoutError(f"the watch of {self.path} is still running")
        if self._error is not None:
            raise self._error
        return self._end or "stopped"

    def __enter__(self) -> "WatchHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
