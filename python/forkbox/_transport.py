"""Runs the operations of ``_core`` over httpx, blocking or with asyncio."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import httpx

from . import errors
from ._config import resolve
from ._core import Call, Op, SseParser

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)


def _headers(key: str, call: Call) -> dict:
    h = {"authorization": f"Bearer {key}", "accept": "text/event-stream" if call.events else "application/json"}
    if call.content is not None:
        h["content-type"] = "application/octet-stream"
    return h


def _check(res: httpx.Response) -> None:
    if res.status_code >= 400:
        raise errors.error_from(res.status_code, res.text, res.headers.get("x-request-id"))


def _decode(call: Call, res: httpx.Response) -> Any:
    if call.raw:
        return res.content
    if res.status_code == 204 or not res.content:
        return None
    return res.json()


class SyncTransport:
    def __init__(self, api_key: Optional[str] = None, url: Optional[str] = None) -> None:
        self.key, self.url = resolve(api_key, url)
        self.client = httpx.Client(base_url=self.url, timeout=DEFAULT_TIMEOUT)

    def send(self, call: Call) -> Any:
        try:
            if call.events is None:
                res = self.client.request(call.method, call.path, json=call.json, params=call.params, content=call.content, headers=_headers(self.key, call))
                _check(res)
                return _decode(call, res)
            with self.client.stream(call.method, call.path, json=call.json, params=call.params, headers=_headers(self.key, call)) as res:
                if res.status_code >= 400:
                    res.read()
                    _check(res)
                parser = SseParser()
                for line in res.iter_lines():
                    done = parser.feed(line)
                    if done:
                        call.events(*done)
                done = parser.end()
                if done:
                    call.events(*done)
            return None
        except httpx.TransportError as e:
            raise errors.ConnectionError("CONNECTION_ERROR", f"cannot reach forkbox at {self.url}: {e}") from e

    def run(self, op: Op) -> Any:
        try:
            call = next(op)
            while True:
                call = op.send(self.send(call))
        except StopIteration as stop:
            return stop.value

    def close(self) -> None:
        self.client.close()


class AsyncTransport:
    def __init__(self, api_key: Optional[str] = None, url: Optional[str] = None) -> None:
        self.key, self.url = resolve(api_key, url)
        self.client = httpx.AsyncClient(base_url=self.url, timeout=DEFAULT_TIMEOUT)

    async def send(self, call: Call) -> Any:
        try:
            if call.events is None:
                res = await self.client.request(call.method, call.path, json=call.json, params=call.params, content=call.content, headers=_headers(self.key, call))
                _check(res)
                return _decode(call, res)
            async with self.client.stream(call.method, call.path, json=call.json, params=call.params, headers=_headers(self.key, call)) as res:
                if res.status_code >= 400:
                    await res.aread()
                    _check(res)
                parser = SseParser()
                async for line in res.aiter_lines():
                    done = parser.feed(line)
                    if done:
                        out = call.events(*done)
                        if inspect.isawaitable(out):
                            await out
                done = parser.end()
                if done:
                    out = call.events(*done)
                    if inspect.isawaitable(out):
                        await out
            return None
        except httpx.TransportError as e:
            raise errors.ConnectionError("CONNECTION_ERROR", f"cannot reach forkbox at {self.url}: {e}") from e

    async def run(self, op: Op) -> Any:
        try:
            call = next(op)
            while True:
                call = op.send(await self.send(call))
        except StopIteration as stop:
            return stop.value

    async def aclose(self) -> None:
        await self.client.aclose()
