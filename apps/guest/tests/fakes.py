"""Test doubles at the guest's edges: a wire into a pipe, a loop that runs calls at once."""

import json
import os
from collections.abc import Callable
from typing import Any, cast

from forkbox_guest.state import Guest
from forkbox_guest.wire import HEADER, Wire, decode_header


class PipeWire(Wire):
    """A Wire whose frames land in a pipe the test reads back."""

    def __init__(self) -> None:
        self.r, w = os.pipe()
        os.set_blocking(self.r, False)
        super().__init__(w)

    def frames(self) -> list[tuple[int, int, Any]]:
        """(frame type, channel, JSON message or bytes) of every frame sent so far."""
        data = b""
        try:
            while chunk := os.read(self.r, 1 << 16):
                data += chunk
        except BlockingIOError:
            pass
        out: list[tuple[int, int, Any]] = []
        while data:
            length, ftype, channel = decode_header(data)
            payload = data[HEADER.size : HEADER.size + length]
            data = data[HEADER.size + length :]
            out.append((ftype, channel, json.loads(payload) if ftype == 1 else payload))
        return out

    def close(self) -> None:
        os.close(self.r)
        os.close(self.fd)


class InlineLoop:
    def call(self, fn: Callable[[], object]) -> None:
        fn()


class InlineWorkers:
    def submit(self, fn: Callable[[], object]) -> None:
        fn()


def fake_guest(wire: Wire, **fields: object) -> Guest:
    """A Guest without threads or processes: only the state the code under test reads."""
    g = object.__new__(Guest)
    g.wire = wire
    g.default_env = {}
    g.max_channel = 0
    g.execs = {}
    g.procs = {}
    g.subs = {}
    g.contexts = {}
    g.reads = {}
    g.uploads_open = {}
    g.watches = {}
    g.watch_stops = set()
    g.loop = cast(Any, InlineLoop())
    g.uploads = cast(Any, InlineWorkers())
    g.files = cast(Any, InlineWorkers())
    import threading

    g.execs_lock = threading.Lock()
    g.watch_lock = threading.Lock()
    for k, v in fields.items():
        setattr(g, k, v)
    return g
