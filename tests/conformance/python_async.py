"""The async mirror (AsyncSandbox): the same calls, awaited, with coroutine callbacks; prints {ok}."""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import forkbox  # noqa: E402
from forkbox import AsyncSandbox  # noqa: E402


async def main():
    async with await AsyncSandbox.create(template="code-interpreter") as sbx:
        r = await sbx.exec("echo hi")
        assert (r.exit_code, r.stdout) == (0, "hi\n"), r
        pieces = []

        async def collect(text):
            pieces.append(text)

        await sbx.exec("for i in 1 2 3; do echo $i; sleep 0.2; done", on_stdout=collect)
        assert "".join(pieces) == "1\n2\n3\n", pieces
        await sbx.files.write("/work/a.txt", "hello")
        assert await sbx.files.read("/work/a.txt") == "hello"
        await sbx.run_code("x = 20")
        assert (await sbx.run_code("x + 22")).text == "42"
        seen = []
        e = await sbx.run_code("print('streamed')\n1/0", on_stdout=seen.append)
        assert seen == ["streamed\n"] and e.error.name == "ZeroDivisionError", (seen, e.error)
        proc = await sbx.exec(["python3", "-c", "print(input()[::-1])"], background=True)
        await proc.send_stdin("forkbox\n")
        assert (await proc.wait()).exit_code == 0
        info = await sbx.update_network(internet=True, allow_out=["203.0.113.0/24"])
        assert info.network["allowOut"] == ["203.0.113.0/24"], info.network
        changes = []

        async def on_change(c):
            changes.append(c.name)

        watch = await sbx.files.watch("/work", on_change)
        await sbx.files.write("/work/watched.txt", "x")
        for _ in range(100):
            if "watched.txt" in changes:
                break
            await asyncio.sleep(0.1)
        assert "watched.txt" in changes, changes
        await watch.stop()
        assert await watch.wait() == "stopped"
        forks = await sbx.fork(count=1)
        assert (await forks[0].run_code("x")).text == "20"
        await forks[0].kill()
        sid = sbx.id
    try:
        await AsyncSandbox.connect("sbx-nope")
        raise AssertionError("connect succeeded")
    except forkbox.NotFoundError:
        pass
    assert (await AsyncSandbox.connect(sid)).info.state == "killed"


asyncio.run(main())
print(json.dumps({"ok": True}))
