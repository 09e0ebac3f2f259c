"""Directory watches on the host's real inotify (gVisor's is exercised by the e2e tests)."""

import os
import selectors
import shutil
import tempfile
import unittest
from typing import Any, cast
from unittest import mock

from forkbox_guest import watch
from forkbox_guest.users import Identity
from forkbox_guest.wire import T_JSON

from .fakes import InlineLoop, PipeWire, fake_guest


class SelectingLoop(InlineLoop):
    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()


class AsRoot:
    def act_as(self, ident: Identity) -> None:
        pass


class Users:
    def identity_of(self, req: Any) -> Identity:
        return Identity("root", 0, 0, (), "/root")


class WatchTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.wire = PipeWire()
        self.loop = SelectingLoop()
        self.g = fake_guest(self.wire, loop=self.loop, creds=AsRoot(), users=Users(), watches={})

    def tearDown(self) -> None:
        for w in list(self.g.watches.values()):
            w.end(None)
        self.wire.close()
        shutil.rmtree(self.dir)

    def start(self, recursive: bool, channel: int = 7) -> watch.Watch:
        watch.op_watch(self.g, channel, {"op": "watch", "path": self.dir, "recursive": recursive})
        self.assertEqual(self.messages(), [{"type": "watching", "path": self.dir}])
        return self.g.watches[channel]

    def messages(self) -> list[dict[str, Any]]:
        return [m for t, _, m in self.wire.frames() if t == T_JSON]

    def events(self, w: watch.Watch) -> list[tuple[str, str]]:
        w.on_readable()
        out: list[tuple[str, str]] = []
        for m in self.messages():
            if m["type"] == "events":
                out += [(e["type"], e["name"]) for e in m["events"]]
        return out

    def test_create_write_chmod_rename_remove_in_order(self) -> None:
        w = self.start(recursive=False)
        path = os.path.join(self.dir, "a.txt")
        with open(path, "w") as f:
            f.write("x")
        os.chmod(path, 0o600)
        os.rename(path, os.path.join(self.dir, "b.txt"))
        os.unlink(os.path.join(self.dir, "b.txt"))
        self.assertEqual(
            self.events(w),
            [("create", "a.txt"), ("write", "a.txt"), ("chmod", "a.txt"), ("rename", "a.txt"), ("create", "b.txt"), ("remove", "b.txt")],
        )

    def test_an_upload_reads_as_a_create_and_write_of_its_name_not_of_its_temp_file(self) -> None:
        w = self.start(recursive=False)
        tmp = os.path.join(self.dir, ".forkbox-upload-0123456789abcdef")
        with open(tmp, "w") as f:
            f.write("x")
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(self.dir, "up.txt"))
        self.assertEqual(self.events(w), [("create", "up.txt"), ("write", "up.txt")])

    def test_not_recursive_misses_what_happens_in_subdirectories(self) -> None:
        os.mkdir(os.path.join(self.dir, "sub"))
        w = self.start(recursive=False)
        with open(os.path.join(self.dir, "sub", "f"), "w"):
            pass
        self.assertEqual(self.events(w), [])

    def test_recursive_follows_new_and_moved_directories(self) -> None:
        os.makedirs(os.path.join(self.dir, "old", "deep"))
        w = self.start(recursive=True)
        with open(os.path.join(self.dir, "old", "deep", "f"), "w"):
            pass
        self.assertEqual(self.events(w), [("create", "old/deep/f")])
        os.mkdir(os.path.join(self.dir, "new"))
        self.assertEqual(self.events(w), [("create", "new")])
        with open(os.path.join(self.dir, "new", "g"), "w"):
            pass
        self.assertEqual(self.events(w), [("create", "new/g")])
        # a directory renamed inside the tree keeps being watched under its new name
        os.rename(os.path.join(self.dir, "old"), os.path.join(self.dir, "moved"))
        self.assertEqual(self.events(w), [("rename", "old"), ("create", "moved")])
        with open(os.path.join(self.dir, "moved", "deep", "h"), "w"):
            pass
        self.assertEqual(self.events(w), [("create", "moved/deep/h")])

    def test_what_a_new_directory_held_before_it_was_watched_is_reported(self) -> None:
        w = self.start(recursive=True)
        staged = tempfile.mkdtemp()
        try:
            os.makedirs(os.path.join(staged, "tree", "x"))
            os.rename(os.path.join(staged, "tree"), os.path.join(self.dir, "tree"))
        finally:
            shutil.rmtree(staged)
        self.assertEqual(sorted(self.events(w)), [("create", "tree"), ("create", "tree/x")])

    def test_acks_open_the_window_again(self) -> None:
        w = self.start(recursive=False)
        with mock.patch.object(watch, "WINDOW", 3):
            w.emit([{"name": "n", "type": "write"}] * 2)
            self.assertTrue(w.reading)
            w.emit([{"name": "n", "type": "write"}])
            self.assertFalse(w.reading)  # the kernel queues what comes meanwhile
            w.on_ack(1)
            self.assertTrue(w.reading)

    def test_stop_and_a_removed_directory_end_the_channel(self) -> None:
        w = self.start(recursive=False)
        watch.op_unwatch(self.g, 7, {"op": "unwatch"})
        self.assertEqual(self.messages(), [{"type": "result", "value": {"reason": "stopped"}}])
        self.assertTrue(w.closed)
        self.assertEqual(self.g.watches, {})
        w2 = self.start(recursive=False, channel=9)
        os.rmdir(self.dir)
        w2.on_readable()
        msgs = self.messages()
        self.assertEqual(msgs[-1], {"type": "result", "value": {"reason": "gone"}})
        self.assertIn({"type": "events", "events": [{"name": "", "type": "remove"}]}, msgs)
        os.mkdir(self.dir)

    def test_a_stop_before_the_watch_is_set_up_ends_it_when_it_is(self) -> None:
        watch.op_unwatch(self.g, 5, {"op": "unwatch"})
        watch.op_watch(self.g, 5, {"op": "watch", "path": self.dir})
        self.assertEqual(self.messages(), [{"type": "result", "value": {"reason": "stopped"}}])
        self.assertEqual(self.g.watches, {})
        self.assertEqual(self.g.watch_stops, set())

    def test_a_missing_path_or_a_file_is_refused(self) -> None:
        watch.op_watch(self.g, 3, {"op": "watch", "path": os.path.join(self.dir, "nope")})
        open(os.path.join(self.dir, "file"), "w").close()
        watch.op_watch(self.g, 4, {"op": "watch", "path": os.path.join(self.dir, "file")})
        codes = [m.get("code") for m in self.messages()]
        self.assertEqual(codes, ["FILE_NOT_FOUND", "NOT_A_DIRECTORY"])
        self.assertEqual(cast(dict[int, object], self.g.watches), {})


if __name__ == "__main__":
    unittest.main()
