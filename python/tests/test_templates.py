"""Template builds through the Python SDK against the real server app (a fake agent): started by
packages/sdk/test/python-sdk.test.ts, which passes FORKBOX_TEST_URL, FORKBOX_TEST_API_KEY and
FORKBOX_TEST_CUT_URL (a proxy that cuts every build log stream from offset 0 mid-event)."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tarfile
import tempfile
import unittest
from typing import List

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from forkbox import AsyncTemplate, BuildLogEntry, NotFoundError, Sandbox, Template, TemplateBuildError, ValidationError  # noqa: E402

URL = os.environ.get("FORKBOX_TEST_URL")
KEY = os.environ.get("FORKBOX_TEST_API_KEY")
CUT_URL = os.environ.get("FORKBOX_TEST_CUT_URL")
CONN = {"url": URL, "api_key": KEY}


def context_line(logs: List[BuildLogEntry]) -> str:
    return next(e.message for e in logs if e.message.startswith("context: "))


@unittest.skipUnless(URL and KEY, "needs the test server (run from packages/sdk/test/python-sdk.test.ts)")
class TemplateTests(unittest.TestCase):
    def test_build_from_image_with_on_log_then_list_get_create_delete(self) -> None:
        logs: List[BuildLogEntry] = []
        build = Template.build(name="py-env", image="registry.local/env:1", start_cmd="sleep infinity", ready_cmd="true", on_log=logs.append, **CONN)
        self.assertEqual((build.status, build.template, build.version), ("ready", "py-env", 1))
        self.assertEqual([e.seq for e in logs], list(range(len(logs))))
        self.assertTrue(logs[-1].message.startswith("ready in"))
        listed = {t.name: t for t in Template.list(**CONN)}
        self.assertEqual((listed["py-env"].version, listed["py-env"].public), (1, False))
        self.assertEqual([b.id for b in Template.get("py-env", **CONN).builds], [build.id])
        self.assertEqual(Template.get_build(build.id, logs_offset=2, **CONN).logs, logs[2:])
        with Sandbox.create(template="py-env@1", **CONN) as sbx:
            self.assertEqual(sbx.info.state, "running")
        Template.delete("py-env", **CONN)
        with self.assertRaises(NotFoundError):
            Template.get("py-env", **CONN)

    def test_failed_build_raises_with_code_and_log_tail(self) -> None:
        with self.assertRaises(TemplateBuildError) as caught:
            Template.build(name="py-broken", image="missing/img:1", **CONN)
        err = caught.exception
        self.assertEqual(err.code, "IMAGE_NOT_FOUND")
        self.assertEqual(err.build.status, "failed")
        self.assertTrue(err.log_tail[-1].message.startswith("failed: image missing/img:1"))
        self.assertIn("\n  failed: image missing/img:1", err.message)

    def test_refused_request_raises_before_any_build(self) -> None:
        with self.assertRaises(ValidationError):
            Template.build(name="base", image="x:1", **CONN)

    def test_a_missing_context_directory_fails_before_any_build(self) -> None:
        with self.assertRaises(ValueError):
            Template.build(name="py-nodir", dockerfile="FROM x", context="/no/such/context", **CONN)
        with self.assertRaises(NotFoundError):
            Template.get("py-nodir", **CONN)

    def test_context_from_a_directory_and_from_bytes(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "Dockerfile"), "w") as f:
                f.write("FROM forkbox:base\nCOPY . /app\n")
            os.mkdir(os.path.join(d, "src"))
            with open(os.path.join(d, "src", "main.py"), "w") as f:
                f.write('print("hi")\n')
            os.symlink("src/main.py", os.path.join(d, "main.py"))
            logs: List[BuildLogEntry] = []
            Template.build(name="py-dir", context=d, on_log=logs.append, **CONN)
        self.assertEqual(context_line(logs), "context: Dockerfile (30 bytes), main.py -> src/main.py, src/, src/main.py (12 bytes)")

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("a.txt")
            info.size = 5
            tar.addfile(info, io.BytesIO(b"hello"))
        logs = []
        Template.build(name="py-bytes", dockerfile="FROM x", context=buf.getvalue(), on_log=logs.append, **CONN)
        self.assertEqual(context_line(logs), "context: a.txt (5 bytes)")

    @unittest.skipUnless(CUT_URL, "needs the cutting proxy")
    def test_a_cut_log_stream_resumes_without_repeats_or_gaps(self) -> None:
        logs: List[BuildLogEntry] = []
        build = Template.build(name="py-cut", image="img:1", on_log=logs.append, url=CUT_URL, api_key=KEY)
        self.assertGreater(len(logs), 30)
        self.assertEqual(logs, Template.get_build(build.id, **CONN).logs)

    @unittest.skipUnless(CUT_URL, "needs the cutting proxy")
    def test_async_build_with_a_coroutine_on_log_across_a_cut(self) -> None:
        logs: List[BuildLogEntry] = []

        async def on_log(e: BuildLogEntry) -> None:
            await asyncio.sleep(0)
            logs.append(e)

        async def main() -> None:
            build = await AsyncTemplate.build(name="py-async", image="img:1", on_log=on_log, url=CUT_URL, api_key=KEY)
            self.assertEqual(logs, (await AsyncTemplate.get_build(build.id, **CONN)).logs)
            with self.assertRaises(TemplateBuildError):
                await AsyncTemplate.build(name="py-async-broken", image="missing/x:1", **CONN)
            self.assertIn("py-async", [t.name for t in await AsyncTemplate.list(**CONN)])
            await AsyncTemplate.delete("py-async", **CONN)

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
