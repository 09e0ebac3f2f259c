"""The conformance behaviours (behaviours.json) through the Python SDK; prints one JSON object
{name: {ok, error?}}. Needs FORKBOX_URL and FORKBOX_API_KEY."""

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import forkbox  # noqa: E402
from forkbox import Sandbox  # noqa: E402

results = {}


def behaviour(fn):
    try:
        fn()
        results[fn.__name__] = {"ok": True}
    except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
        results[fn.__name__] = {"ok": False, "error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-800:]}"}
    return fn


shared = {}


def ci():
    if "ci" not in shared:
        shared["ci"] = Sandbox.create(template="code-interpreter", ttl_seconds=600)
    return shared["ci"]


@behaviour
def create_and_exec():
    with Sandbox.create() as sbx:
        r = sbx.exec("echo hi")
        assert (r.exit_code, r.stdout) == (0, "hi\n"), r
        assert sbx.exec("exit 3").exit_code == 3


@behaviour
def exec_streaming():
    with Sandbox.create() as sbx:
        pieces = []
        r = sbx.exec("for i in 1 2 3; do echo $i; sleep 0.2; done", on_stdout=pieces.append)
        assert "".join(pieces) == "1\n2\n3\n" and len(pieces) >= 2, pieces
        assert r.stdout == "1\n2\n3\n"


@behaviour
def files_roundtrip():
    with Sandbox.create() as sbx:
        sbx.files.write("/work/a.txt", "hello")
        assert sbx.files.read("/work/a.txt") == "hello"
        assert sbx.files.exists("/work/a.txt")
        assert "a.txt" in [e.name for e in sbx.files.list("/work")]
        sbx.files.remove("/work/a.txt")
        assert not sbx.files.exists("/work/a.txt")
        try:
            sbx.files.read("/work/a.txt")
            raise AssertionError("read of a missing file succeeded")
        except forkbox.NotFoundError as e:
            assert e.code == "FILE_NOT_FOUND", e.code


@behaviour
def run_code_state():
    ci().run_code("x = 1")
    assert ci().run_code("x + 1").text == "2"


@behaviour
def run_code_rich():
    html = ci().run_code('import pandas as pd\npd.DataFrame({"a": [1, 2]})').results[0].html
    assert html and "<table" in html
    import base64

    figures = [r for r in ci().run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()").results if r.png]
    assert figures and base64.b64decode(figures[0].png or "")[1:4] == b"PNG"
    assert (figures[0].chart or {}).get("type") == "line", figures[0].chart


@behaviour
def run_code_error():
    e = ci().run_code("1 / 0")
    assert e.error is not None and e.error.name == "ZeroDivisionError", e.error


@behaviour
def fork():
    with Sandbox.create() as parent:
        parent.files.write("/work/f.txt", "parent")
        a, b = parent.fork(count=2)
        try:
            assert a.files.read("/work/f.txt") == "parent" and b.files.read("/work/f.txt") == "parent"
            a.files.write("/work/f.txt", "a")
            assert b.files.read("/work/f.txt") == "parent"
            assert parent.files.read("/work/f.txt") == "parent"
        finally:
            a.kill()
            b.kill()


@behaviour
def error_not_found():
    try:
        Sandbox.connect("sbx-does-not-exist")
        raise AssertionError("connect succeeded")
    except forkbox.NotFoundError as e:
        assert (e.status, e.code) == (404, "SANDBOX_NOT_FOUND") and e.request_id, vars(e)


@behaviour
def error_auth():
    try:
        Sandbox.list(api_key="fbx_wrong")
        raise AssertionError("a bad key was accepted")
    except forkbox.AuthenticationError as e:
        assert e.status == 401


@behaviour
def background_process():
    with Sandbox.create() as sbx:
        proc = sbx.exec(["python3", "-c", "print(input()[::-1])"], background=True)
        assert proc.pid in [p["pid"] for p in sbx.processes.list()]
        proc.send_stdin("forkbox\n")
        out = []
        exit_ = proc.wait(on_stdout=out.append)
        assert exit_.exit_code == 0 and "".join(out) == "xobkrof\n", (exit_, out)


@behaviour
def network_policy():
    with Sandbox.create() as sbx:
        assert sbx.info.network["internet"] is False, sbx.info.network
        info = sbx.update_network(internet=True, ports=[8000])
        assert info.network == {"internet": True, "allowOut": [], "denyOut": [], "ports": [8000]}, info.network
        assert sbx.get_host(8000).startswith(f"8000-{sbx.id}.localhost:")
        assert sbx.access_token.startswith("fbt_")


@behaviour
def hibernate_on_timeout():
    import time

    with Sandbox.create(ttl_seconds=2, on_timeout="hibernate") as sbx:
        assert sbx.info.on_timeout == "hibernate"
        sbx.files.write("/work/kept.txt", "kept")
        deadline = time.monotonic() + 60
        while sbx.get_info().state != "hibernated":
            assert time.monotonic() < deadline, f"not hibernated: {sbx.info.state}"
            time.sleep(0.2)
        assert sbx.exec("cat /work/kept.txt").stdout == "kept"
        assert sbx.get_info().state == "running"


@behaviour
def hibernate_disk_only():
    with Sandbox.create() as sbx:
        sbx.files.write("/work/kept.txt", "kept")
        sbx.exec("sleep 3600", background=True)
        assert sbx.hibernate(keep_memory=False).state == "hibernated"
        assert sbx.exec("cat /work/kept.txt").stdout == "kept"
        assert sbx.exec('pgrep -fx "sleep 3600"').exit_code == 1


@behaviour
def files_watch():
    import time

    with Sandbox.create() as sbx:
        seen = []
        handle = sbx.files.watch("/work", lambda c: seen.append(f"{c.type} {c.name} {c.path}"), recursive=True)
        sbx.files.write("/work/a.txt", "a")
        sbx.exec("mkdir /work/sub && sleep 0.3 && echo b > /work/sub/b.txt")
        deadline = time.monotonic() + 10
        while "create sub/b.txt /work/sub/b.txt" not in seen or "create a.txt /work/a.txt" not in seen:
            assert time.monotonic() < deadline, f"saw {seen}"
            time.sleep(0.1)
        handle.stop()
        assert handle.wait() == "stopped"
        count = len(seen)
        sbx.files.write("/work/late.txt", "x")
        time.sleep(0.3)
        assert len(seen) == count, seen


@behaviour
def named_snapshot():
    import time

    with Sandbox.create() as sbx:
        sbx.files.write("/work/kept.txt", "kept")
        name = f"conf-py-{int(time.time() * 1000)}"
        snap = sbx.snapshot(name=name)
        assert snap.name == name, snap
        try:
            assert [s.id for s in Sandbox.list_snapshots(name=name)] == [snap.id]
            with Sandbox.create(snapshot=name) as child:
                assert child.exec("cat /work/kept.txt").stdout == "kept"
        finally:
            Sandbox.delete_snapshot(name)
        assert Sandbox.list_snapshots(name=name) == []


@behaviour
def signed_urls():
    import urllib.request

    with Sandbox.create() as sbx:
        req = urllib.request.Request(sbx.files.upload_url("/work/u.txt"), data=b"via url", method="PUT")
        with urllib.request.urlopen(req) as res:
            assert res.status == 200
        with urllib.request.urlopen(sbx.files.download_url("/work/u.txt", expires_in_seconds=60)) as res:
            assert res.read() == b"via url"


@behaviour
def kill_on_exit():
    with Sandbox.create() as sbx:
        sid = sbx.id
    assert Sandbox.connect(sid).info.state == "killed"


if "ci" in shared:
    shared["ci"].kill()
print(json.dumps(results))
