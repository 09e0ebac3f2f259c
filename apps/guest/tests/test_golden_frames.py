"""The guest's declared messages against the golden frames the protocol's zod schemas check too."""

import ast
import json
import os
import types
import typing
import unittest
from pathlib import Path
from typing import Any

from forkbox_guest import exits, messages
from forkbox_guest.contexts import CONTEXT_OPS
from forkbox_guest.dispatch import SIMPLE_OPS
from forkbox_guest.files import FILE_OPS, entry
from forkbox_guest.procs import PROC_OPS

GOLDEN = Path(__file__).resolve().parents[3] / "packages/protocol/test/fixtures/guest-frames.json"
PACKAGE = Path(messages.__file__).parent
# ops the dispatch handles itself, beside its tables
DISPATCHED = {"exec", "signal", "resize", "ack", "write", "read", "abort", "watch", "unwatch", "end_processes", "oom_sweep"}


def mismatches(value: object, tp: Any, where: str = "") -> list[str]:
    """Where `value` (parsed JSON) does not fit the type `tp`; [] when it does."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return []
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        hints = typing.get_type_hints(tp)
        out = [f"{where}.{k}: not declared" for k in value if k not in hints]
        out += [f"{where}.{k}: missing" for k in tp.__required_keys__ if k not in value]
        for k, v in value.items():
            if k in hints:
                out += mismatches(v, hints[k], f"{where}.{k}")
        return out
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{where}: {value!r} not in {typing.get_args(tp)}"]
    if origin in (typing.Union, types.UnionType):
        options = [mismatches(value, t, where) for t in typing.get_args(tp)]
        return [] if any(not o for o in options) else [f"{where}: {value!r} fits none of {tp}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [m for i, v in enumerate(value) for m in mismatches(v, typing.get_args(tp)[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [m for k, v in value.items() for m in mismatches(v, typing.get_args(tp)[1], f"{where}.{k}")]
    if tp is type(None):
        return [] if value is None else [f"{where}: not null"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{where}: {value!r} is not {tp.__name__}"]


def load() -> dict[str, Any]:
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)


class GoldenFramesTest(unittest.TestCase):
    golden = load()

    def test_every_golden_request_fits_its_declared_type(self) -> None:
        for req in self.golden["requests"]:
            with self.subTest(op=req["op"]):
                self.assertIn(req["op"], messages.REQUESTS)
                self.assertEqual(mismatches(req, messages.REQUESTS[req["op"]], req["op"]), [])

    def test_every_op_the_guest_serves_is_declared_and_has_a_golden_frame(self) -> None:
        served = DISPATCHED | set(PROC_OPS) | set(FILE_OPS) | set(CONTEXT_OPS) | set(SIMPLE_OPS)
        self.assertEqual(served, set(messages.REQUESTS))
        self.assertEqual(served, {r["op"] for r in self.golden["requests"]})

    def test_every_golden_message_fits_its_declared_type(self) -> None:
        for msg in self.golden["daemon"] + self.golden["channel"]:
            with self.subTest(type=msg["type"]):
                self.assertEqual(mismatches(msg, messages.MESSAGES[msg["type"]], msg["type"]), [])
        self.assertEqual({m["type"] for m in self.golden["daemon"] + self.golden["channel"]}, set(messages.MESSAGES))

    def test_every_golden_result_fits_its_declared_type(self) -> None:
        self.assertEqual(set(self.golden["results"]), set(messages.RESULTS))
        for name, values in self.golden["results"].items():
            for v in values:
                with self.subTest(result=name):
                    self.assertEqual(mismatches(v, messages.RESULTS[name], name), [])

    def test_builders_produce_the_declared_fields(self) -> None:
        built = json.loads(json.dumps(exits.exit_message(9, True, False, 0.25)))
        self.assertEqual(mismatches(built, messages.ExitMessage), [])
        self.assertEqual(set(built), set(self.golden["channel"][1]))
        st = entry(os.path.dirname(__file__))
        self.assertEqual(mismatches(json.loads(json.dumps(st)), messages.FileEntry), [])

    def test_every_request_field_the_guest_reads_is_declared(self) -> None:
        declared = {k for t in messages.REQUESTS.values() for k in typing.get_type_hints(t)}
        read: set[str] = set()
        for path in PACKAGE.glob("*.py"):
            if path.name in ("spawner.py", "messages.py", "users.py"):
                continue  # spawner: its own protocol; users: takes the key as an argument
            for node in ast.walk(ast.parse(path.read_text())):
                # req.get("x"), req["x"] and self.req.get("x") on a request
                target = None
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                    target, key = node.func.value, node.args[0] if node.args else None
                elif isinstance(node, ast.Subscript):
                    target, key = node.value, node.slice
                else:
                    continue
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
                if name == "req" and isinstance(key, ast.Constant) and isinstance(key.value, str):
                    read.add(key.value)
        self.assertTrue(read)
        self.assertEqual(read - declared, set(), "fields read from requests that messages.py does not declare")


if __name__ == "__main__":
    unittest.main()
