"""The daemon's side of the kernel zygote: what comes back over its socket is mapped, or refused."""

import json
import os
import selectors
import signal
import socket
import struct
import unittest
from typing import Any, cast

from forkbox_guest.users import CREDS, peer_credentials
from forkbox_guest.zygote import Zygote

from .fakes import PipeWire, fake_guest


class RecordingLoop:
    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.exits: list[tuple[int, int]] = []

    def call(self, fn: Any) -> None:
        fn()

    def child_exited(self, pid: int, status: int) -> None:
        self.exits.append((pid, status))


class ZygoteTest(unittest.TestCase):
    def setUp(self) -> None:
        self.wire = PipeWire()
        self.loop = RecordingLoop()
        self.g = fake_guest(self.wire, loop=cast(Any, self.loop), zygote=None)
        self.z = self.g.zygote = Zygote(self.g, os.getuid(), {"HOME": "/home/user", "PATH": "/bin"})
        assert self.z.theirs is not None
        self.theirs = self.z.theirs.dup()
        self.z.handed_over()

    def tearDown(self) -> None:
        self.theirs.close()
        self.z.on_gone()
        self.wire.close()

    def send(self, msg: object, creds: bool = False) -> None:
        anc = [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", os.getpid(), os.getuid(), os.getgid()))] if creds else []
        self.theirs.sendmsg([json.dumps(msg).encode()], anc)

    def test_fits_only_the_same_user_and_start_time_env(self) -> None:
        self.assertTrue(self.z.fits(os.getuid(), {"HOME": "/home/user", "PATH": "/usr/bin", "FOO": "x"}))
        self.assertFalse(self.z.fits(os.getuid(), {"HOME": "/home/user", "PYTHONPATH": "/x"}))
        self.assertFalse(self.z.fits(os.getuid(), {"HOME": "/root"}))
        self.assertFalse(self.z.fits(os.getuid() + 1, {"HOME": "/home/user"}))

    def test_a_hello_maps_the_kernel_and_its_exit_is_reported_by_our_pid(self) -> None:
        got: list[tuple[Any, ...]] = []
        self.z.fork({"HOME": "/home/user"}, "/", lambda *a: got.append(a))
        # the zygote side got the request with four fds
        msg, fds, _, _ = socket.recv_fds(self.theirs, 65536, 8)
        self.assertEqual(json.loads(msg)["cwd"], "/")
        self.assertEqual(len(fds), 4)
        for fd in fds:
            os.close(fd)
        self.send({"id": 1, "pid": 7}, creds=True)
        self.z.on_readable()
        self.assertEqual(len(got), 1)
        pid, ours, error, _ = got[0]
        self.assertEqual((pid, error), (os.getpid(), None))  # the pid the credentials carry
        for fd in ours:
            os.close(fd)
        self.send({"exit": 7, "status": 3 << 8})
        self.z.on_readable()
        self.assertEqual(self.loop.exits, [(os.getpid(), 3 << 8)])

    def test_a_garbled_message_ends_the_zygote_and_what_it_forked(self) -> None:
        for bad in ({"exit": "x", "status": 0}, {"exit": 9, "status": 2**80}, {"exit": -1, "status": 0}, {"id": [1]}, {}):
            with self.subTest(bad=bad):
                self.tearDown()
                self.setUp()
                self.z.kernels[9] = 2**22 + 5  # no such process: the kill is a no-op
                self.send(bad)
                self.z.on_readable()
                self.assertTrue(self.z.dead)
                self.assertIsNone(self.g.zygote)
                self.assertEqual(self.loop.exits, [(2**22 + 5, signal.SIGKILL)])

    def test_credentials_with_pid_0_are_none(self) -> None:
        cred = (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)
        self.assertEqual(peer_credentials([(*cred, CREDS.pack(42, 1000, 1000))]), (42, 1000, 1000))
        # what gVisor attaches when a sender sent none: killpg(0) would end this daemon's own group
        self.assertIsNone(peer_credentials([(*cred, CREDS.pack(0, 65534, 65534))]))
        self.assertIsNone(peer_credentials([]))
        # so a hello with them is one without credentials: that context starts cold, nothing is mapped
        got: list[tuple[Any, ...]] = []
        self.z.fork({"HOME": "/home/user"}, "/", lambda *a: got.append(a))
        _, fds, _, _ = socket.recv_fds(self.theirs, 65536, 8)
        for fd in fds:
            os.close(fd)
        self.z.on_message({"id": 1, "pid": 7}, None)
        self.assertEqual(got, [(None, None, "the kernel's hello came without credentials", True)])
        self.assertEqual(self.z.kernels, {})

    def test_waiting_requests_start_cold_when_the_zygote_is_gone(self) -> None:
        got: list[tuple[Any, ...]] = []
        self.z.fork({"HOME": "/home/user"}, "/", lambda *a: got.append(a))
        self.theirs.close()
        self.theirs = socket.socket()
        self.z.on_readable()
        self.assertTrue(self.z.dead)
        self.assertEqual(len(got), 1)
        pid, fds, _, cold_ok = got[0]
        self.assertEqual((pid, fds, cold_ok), (None, None, True))


if __name__ == "__main__":
    unittest.main()
