"""The transports without a server: retries (which calls, how often, how long between) and event
streams, over httpx's MockTransport."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest
from typing import Callable, List

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import httpx  # noqa: E402

from forkbox import errors  # noqa: E402
from forkbox._core import Call  # noqa: E402
from forkbox._retry import MAX_RETRY_DELAY_SECONDS, RetryPolicy, delay_seconds  # noqa: E402
from forkbox._transport import AsyncTransport, SyncTransport  # noqa: E402

Handler = Callable[[httpx.Request], httpx.Response]
NO_WAIT = {"retry-after": "0"}


def error(status: int, code: str, headers: dict = NO_WAIT) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} here", "requestId": "req_1"}}
    return httpx.Response(status, json=body, headers=headers)


class Recorder:
    """A MockTransport handler answering from a list, one entry per request (the last repeats)."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.requests: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("[Errno 111] Connection refused")


def sync(handler: Handler, **kw) -> SyncTransport:
    return SyncTransport("fbx_test", "http://forkbox.test", http=httpx.MockTransport(handler), **kw)


def async_(handler: Handler, **kw) -> AsyncTransport:
    return AsyncTransport("fbx_test", "http://forkbox.test", http=httpx.MockTransport(handler), **kw)


class RetryTests(unittest.TestCase):
    def test_retries_503_then_succeeds_even_for_post(self) -> None:
        r = Recorder(error(503, "NO_CAPACITY"), httpx.Response(201, json={"id": "sbx-1"}))
        self.assertEqual(sync(r).send(Call("POST", "/v1/sandboxes", json={})), {"id": "sbx-1"})
        self.assertEqual([q.method for q in r.requests], ["POST", "POST"])

    def test_gives_up_on_429_after_two_retries(self) -> None:
        r = Recorder(error(429, "RATE_LIMITED"))
        with self.assertRaises(errors.RateLimitError):
            sync(r).send(Call("GET", "/v1/sandboxes"))
        self.assertEqual(len(r.requests), 3)

    def test_never_retries_a_quota(self) -> None:
        # a 429 without Retry-After is QUOTA_EXCEEDED: waiting does not free it
        r = Recorder(error(429, "QUOTA_EXCEEDED", headers={}), error(429, "RATE_LIMITED"))
        with self.assertRaises(errors.RateLimitError) as raised:
            sync(r).send(Call("GET", "/v1/sandboxes"))
        self.assertEqual(raised.exception.code, "QUOTA_EXCEEDED")
        self.assertEqual(len(r.requests), 1)

    def test_honours_max_retries(self) -> None:
        r = Recorder(error(503, "NO_CAPACITY"))
        with self.assertRaises(errors.ServiceUnavailableError):
            sync(r, max_retries=0).send(Call("GET", "/v1/sandboxes"))
        self.assertEqual(len(r.requests), 1)

    def test_never_retries_other_errors(self) -> None:
        r = Recorder(error(500, "INTERNAL"))
        with self.assertRaises(errors.InternalServerError) as caught:
            sync(r).send(Call("GET", "/v1/sandboxes"))
        self.assertEqual(caught.exception.code, "INTERNAL")
        self.assertEqual(len(r.requests), 1)

    def test_retries_connection_errors_on_get_and_delete(self) -> None:
        r = Recorder(refused(), httpx.Response(200, json={"sandboxes": []}))
        self.assertEqual(sync(r).send(Call("GET", "/v1/sandboxes")), {"sandboxes": []})
        r = Recorder(refused(), refused(), httpx.Response(204))
        self.assertIsNone(sync(r).send(Call("DELETE", "/v1/sandboxes/sbx-1")))
        self.assertEqual(len(r.requests), 3)

    def test_does_not_retry_connection_errors_on_post(self) -> None:
        r = Recorder(refused(), httpx.Response(201, json={}))
        with self.assertRaises(errors.ConnectionError) as caught:
            sync(r).send(Call("POST", "/v1/sandboxes", json={}))
        self.assertEqual(caught.exception.code, "CONNECTION_ERROR")
        self.assertEqual(len(r.requests), 1)

    def test_the_async_client_retries_alike(self) -> None:
        r = Recorder(error(503, "NO_CAPACITY"), refused(), httpx.Response(200, json={"ok": True}))
        self.assertEqual(asyncio.run(async_(r).send(Call("GET", "/v1/sandboxes"))), {"ok": True})
        self.assertEqual(len(r.requests), 3)
        r = Recorder(refused())
        with self.assertRaises(errors.ConnectionError):
            asyncio.run(async_(r).send(Call("POST", "/v1/sandboxes", json={})))
        self.assertEqual(len(r.requests), 1)
        r = Recorder(error(429, "RATE_LIMITED"))
        with self.assertRaises(errors.RateLimitError):
            asyncio.run(async_(r, max_retries=1).send(Call("POST", "/v1/sandboxes", json={})))
        self.assertEqual(len(r.requests), 2)


class DelayTests(unittest.TestCase):
    def test_retry_after_is_honoured_and_capped(self) -> None:
        self.assertEqual(delay_seconds(0, "1.5"), 1.5)
        self.assertEqual(delay_seconds(3, "0"), 0)
        self.assertEqual(delay_seconds(0, "120"), MAX_RETRY_DELAY_SECONDS)

    def test_backoff_doubles_with_jitter_when_the_server_gives_no_delay(self) -> None:
        for attempt, (low, high) in enumerate([(0.1, 0.2), (0.2, 0.4), (0.4, 0.8)]):
            for retry_after in (None, "soon"):
                d = delay_seconds(attempt, retry_after)
                self.assertTrue(low <= d <= high, (attempt, d))
        self.assertEqual(delay_seconds(10, None), MAX_RETRY_DELAY_SECONDS)

    def test_policy(self) -> None:
        p = RetryPolicy()
        self.assertEqual(p.max_retries, 2)
        self.assertIsNotNone(p.after_status(1, 503, "0"))
        self.assertIsNone(p.after_status(2, 503, "0"))
        self.assertIsNone(p.after_status(0, 500, "0"))
        self.assertIsNone(p.after_status(0, 408, "0"))
        self.assertIsNotNone(p.after_connection_error(0, "GET"))
        self.assertIsNone(p.after_connection_error(0, "PUT"))
        self.assertIsNone(RetryPolicy(-1).after_status(0, 429, "0"))


STREAM = (
    b": keep-alive comment\r\n"
    b"event: stdout\r\nid: 1\r\ndata: {\"data\":\r\ndata:  \"a\\u00e9\"}\r\n\r\n"
    b"event: stderr\nid: 2\ndata: {\"data\": \"b\"}\n\n"
    b"id: 3\rdata: {\"n\": 3}\r\r"
    b"event: exit\r\ndata: {\"exitCode\": 0}\r\n\r\n"
)


def sse(body: bytes = STREAM) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


class EventStreamTests(unittest.TestCase):
    expected = [("stdout", {"data": "aé"}), ("stderr", {"data": "b"}), ("message", {"n": 3}), ("exit", {"exitCode": 0})]

    def test_sync_stream_reads_crlf_ids_comments_and_multiline_data(self) -> None:
        seen: list = []
        r = Recorder(sse())
        self.assertIsNone(sync(r).send(Call("POST", "/x", json={}, events=lambda e, p: seen.append((e, p)))))
        self.assertEqual(seen, self.expected)
        self.assertEqual(r.requests[0].headers["accept"], "text/event-stream")

    def test_async_stream_alike_with_async_callbacks(self) -> None:
        seen: list = []

        async def on_event(e: str, p: object) -> None:
            seen.append((e, p))

        asyncio.run(async_(Recorder(sse())).send(Call("POST", "/x", json={}, events=on_event)))
        self.assertEqual(seen, self.expected)

    def test_a_stream_that_is_refused_first_is_retried_before_any_event(self) -> None:
        seen: list = []
        r = Recorder(error(503, "NO_CAPACITY"), sse())
        sync(r).send(Call("GET", "/x", events=lambda e, p: seen.append(e)))
        self.assertEqual(seen, ["stdout", "stderr", "message", "exit"])
        self.assertEqual(len(r.requests), 2)

    def test_a_route_the_server_lacks_is_unsupported_by_server(self) -> None:
        from forkbox import __version__

        body = {"error": {"code": "NOT_FOUND", "message": "no route POST /v1/x", "details": {"noRoute": True}}}
        newer = httpx.Response(404, json=body, headers={"forkbox-version": "0.0.9"})
        with self.assertRaises(errors.UnsupportedByServerError) as caught:
            sync(Recorder(newer)).send(Call("POST", "/v1/x"))
        e = caught.exception
        self.assertIsInstance(e, errors.NotFoundError)
        self.assertEqual((e.code, e.server_version), ("UNSUPPORTED_BY_SERVER", "0.0.9"))
        self.assertEqual(e.message, f"this server (forkbox 0.0.9) does not serve POST /v1/x, which this SDK ({__version__}) calls: upgrade the server")
        # a server from before versions were reported: the message alone tells
        ancient = httpx.Response(404, json={"error": {"code": "NOT_FOUND", "message": "no route POST /v1/x"}})
        with self.assertRaises(errors.UnsupportedByServerError) as caught:
            sync(Recorder(ancient)).send(Call("POST", "/v1/x"))
        self.assertIsNone(caught.exception.server_version)
        # a thing that is not there stays a NotFoundError
        with self.assertRaises(errors.NotFoundError) as plain:
            sync(Recorder(error(404, "SANDBOX_NOT_FOUND"))).send(Call("GET", "/v1/sandboxes/x"))
        self.assertNotIsInstance(plain.exception, errors.UnsupportedByServerError)

    def test_an_error_status_on_a_stream_raises_the_typed_error(self) -> None:
        with self.assertRaises(errors.NotFoundError) as caught:
            sync(Recorder(error(404, "PROCESS_NOT_FOUND"))).send(Call("GET", "/x", events=lambda e, p: None))
        self.assertEqual(caught.exception.code, "PROCESS_NOT_FOUND")


if __name__ == "__main__":
    unittest.main()
