"""Runs the operations of ``_core`` over httpx, blocking or with asyncio: retries (``_retry``),
error mapping, and event streams parsed by httpx-sse."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Optional

import httpx
from httpx_sse import EventSource

from . import errors
from ._config import resolve
from ._core import Call, Op
from ._retry import RetryPolicy

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)


def _headers(key: str, call: Call) -> dict:
    h = {"authorization": f"Bearer {key}", "accept": "text/event-stream" if call.events else "application/json"}
    if call.content is not None:
        h["content-type"] = call.content_type or "application/octet-stream"
    return {**(call.headers or {}), **h}


def _request(client: httpx.Client | httpx.AsyncClient, key: str, call: Call) -> httpx.Request:
    return client.build_request(call.method, call.path, json=call.json, params=call.params, content=call.content, headers=_headers(key, call))


def _error(res: httpx.Response) -> errors.ForkboxError:
    err = errors.error_from(res.status_code, res.text, res.headers.get("x-request-id"))
    return errors.unsupported_or(err, res.request.method, res.request.url.path, res.headers.get("forkbox-version"))


def _decode(call: Call, res: httpx.Response) -> Any:
    if call.raw:
        return res.content
    if res.status_code == 204 or not res.content:
        return None
    return res.json()


class _Transport:
    """What both clients share: where to connect and when to retry (a failure not retried raises)."""

    def __init__(self, api_key: Optional[str], url: Optional[str], max_retries: Optional[int]) -> None:
        self.key, self.url = resolve(api_key, url)
        self.retry = RetryPolicy(max_retries)

    def _unreachable(self, e: httpx.TransportError) -> errors.ConnectionError:
        return errors.ConnectionError("CONNECTION_ERROR", f"cannot reach forkbox at {self.url}: {e}")

    def _delay_after_error(self, attempt: int, call: Call, e: httpx.TransportError) -> float:
        delay = self.retry.after_connection_error(attempt, call.method)
        if delay is None:
            raise self._unreachable(e) from e
        return delay

    def _delay_after_status(self, attempt: int, res: httpx.Response) -> float:
        """For a read, closed response of status >= 400."""
        delay = self.retry.after_status(attempt, res.status_code, res.headers.get("retry-after"))
        if delay is None:
            raise _error(res)
        return delay


class SyncTransport(_Transport):
    def __init__(self, api_key: Optional[str] = None, url: Optional[str] = None, *, max_retries: Optional[int] = None, http: Optional[httpx.BaseTransport] = None) -> None:
        super().__init__(api_key, url, max_retries)
        self.client = httpx.Client(base_url=self.url, timeout=DEFAULT_TIMEOUT, transport=http)

    def _open(self, call: Call) -> httpx.Response:
        """Sends with retries; returns a 2xx response whose body is not read yet."""
        request = _request(self.client, self.key, call)
        if call.delay:
            time.sleep(call.delay)
        attempt = 0
        while True:
            try:
                res = self.client.send(request, stream=True)
            except httpx.TransportError as e:
                delay = self._delay_after_error(attempt, call, e)
            else:
                if res.status_code < 400:
                    return res
                res.read()
                res.close()
                delay = self._delay_after_status(attempt, res)
            time.sleep(delay)
            attempt += 1

    def send(self, call: Call) -> Any:
        res = self._open(call)
        try:
            if call.events is None:
                res.read()
                return _decode(call, res)
            for sse in EventSource(res).iter_sse():
                call.events(sse.event, sse.json())
            return None
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        finally:
            res.close()

    def run(self, op: Op) -> Any:
        """Drives an operation: each call's result goes back into it, and so does a ForkboxError
        (an operation may handle one, e.g. reconnect a broken stream)."""
        try:
            call = next(op)
            while True:
                try:
                    result = self.send(call)
                except errors.ForkboxError as e:
                    call = op.throw(e)
                else:
                    call = op.send(result)
        except StopIteration as stop:
            return stop.value

    def close(self) -> None:
        self.client.close()


class AsyncTransport(_Transport):
    def __init__(self, api_key: Optional[str] = None, url: Optional[str] = None, *, max_retries: Optional[int] = None, http: Optional[httpx.AsyncBaseTransport] = None) -> None:
        super().__init__(api_key, url, max_retries)
        self.client = httpx.AsyncClient(base_url=self.url, timeout=DEFAULT_TIMEOUT, transport=http)

    async def _open(self, call: Call) -> httpx.Response:
        """Sends with retries; returns a 2xx response whose body is not read yet."""
        request = _request(self.client, self.key, call)
        if call.delay:
            await asyncio.sleep(call.delay)
        attempt = 0
        while True:
            try:
                res = await self.client.send(request, stream=True)
            except httpx.TransportError as e:
                delay = self._delay_after_error(attempt, call, e)
            else:
                if res.status_code < 400:
                    return res
                await res.aread()
                await res.aclose()
                delay = self._delay_after_status(attempt, res)
            await asyncio.sleep(delay)
            attempt += 1

    async def send(self, call: Call) -> Any:
        res = await self._open(call)
        try:
            if call.events is None:
                await res.aread()
                return _decode(call, res)
            async for sse in EventSource(res).aiter_sse():
                out = call.events(sse.event, sse.json())
                if inspect.isawaitable(out):
                    await out
            return None
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        finally:
            await res.aclose()

    async def run(self, op: Op) -> Any:
        """``SyncTransport.run``, awaiting each call."""
        try:
            call = next(op)
            while True:
                try:
                    result = await self.send(call)
                except errors.ForkboxError as e:
                    call = op.throw(e)
                else:
                    call = op.send(result)
        except StopIteration as stop:
            return stop.value

    async def aclose(self) -> None:
        await self.client.aclose()
