import os
import pwd
import selectors
import signal
import socket
import subprocess
import unittest
from collections.abc import Callable
from typing import Any, cast

import forkbox_sudo
from forkbox_guest.sudo import SECURE_PATH, SudoError, SudoServer, SudoSession, build_command, may_sudo, shell_escape

from .fakes import PipeWire, fake_guest

NOBODY = pwd.getpwnam("nobody")


class ParseTest(unittest.TestCase):
    def test_options_then_the_command(self) -> None:
        flags, values, preserve, assign, command = forkbox_sudo.parse(["-E", "-u", "bob", "ls", "-l", "/"])
        self.assertEqual((flags, values, preserve, assign, command), ({"E"}, {"u": "bob"}, [], {}, ["ls", "-l", "/"]))

    def test_combined_and_attached_values(self) -> None:
        self.assertEqual(forkbox_sudo.parse(["-Eu", "bob", "id"])[:2], ({"E"}, {"u": "bob"}))
        self.assertEqual(forkbox_sudo.parse(["-ubob", "id"])[1], {"u": "bob"})
        self.assertEqual(forkbox_sudo.parse(["-iu", "bob"])[:2], ({"i"}, {"u": "bob"}))
        self.assertEqual(forkbox_sudo.parse(["--user=bob", "--chdir", "/tmp", "id"])[1], {"u": "bob", "D": "/tmp"})

    def test_preserve_env(self) -> None:
        flags, _, preserve, _, _ = forkbox_sudo.parse(["--preserve-env=A,B", "env"])
        self.assertEqual((flags, preserve), (set(), ["A", "B"]))
        self.assertEqual(forkbox_sudo.parse(["--preserve-env", "env"])[0], {"E"})

    def test_assignments_before_the_command(self) -> None:
        _, _, _, assign, command = forkbox_sudo.parse(["FOO=bar", "X_1=", "env", "Y=z"])
        self.assertEqual((assign, command), ({"FOO": "bar", "X_1": ""}, ["env", "Y=z"]))

    def test_double_dash_ends_the_options(self) -> None:
        self.assertEqual(forkbox_sudo.parse(["--", "-weird", "x"])[4], ["-weird", "x"])
        self.assertEqual(forkbox_sudo.parse(["echo", "-u"])[4], ["echo", "-u"])

    def test_bad_options(self) -> None:
        for args in (["-z", "ls"], ["-u"], ["--frobnicate", "ls"], ["--user"]):
            with self.subTest(args=args), self.assertRaises(forkbox_sudo.Usage):
                forkbox_sudo.parse(args)


class ShellEscapeTest(unittest.TestCase):
    def test_as_sudo_does(self) -> None:
        self.assertEqual(shell_escape("echo $HOME"), "echo\\ $HOME")
        self.assertEqual(shell_escape("a;b'c"), "a\\;b\\'c")
        self.assertEqual(shell_escape("plain_word-1"), "plain_word-1")


class BuildCommandTest(unittest.TestCase):
    def test_a_command_runs_as_root_with_a_reset_environment(self) -> None:
        msg = {"command": ["true", "x"], "cwd": "/", "env": {"TERM": "xterm"}, "assign": {"FOO": "bar"}}
        c = build_command(msg, 0, 0, [0, 1, 2])
        self.assertTrue(c.exe.endswith("/true"))
        self.assertEqual(c.argv, ["true", "x"])
        self.assertEqual((c.uid, c.gid, c.cwd, c.pty), (0, 0, "/", None))
        self.assertEqual(c.env["PATH"], SECURE_PATH)
        self.assertEqual((c.env["USER"], c.env["HOME"], c.env["SUDO_USER"], c.env["SUDO_UID"]), ("root", "/root", "root", "0"))
        self.assertEqual((c.env["TERM"], c.env["FOO"]), ("xterm", "bar"))

    def test_a_login_shell_starts_in_the_target_home(self) -> None:
        c = build_command({"command": ["echo", "$HOME x"], "mode": "login", "cwd": "/tmp", "env": {}}, 0, 0, [0, 1, 2])
        shell = pwd.getpwnam("root").pw_shell
        self.assertEqual(c.argv, ["-" + os.path.basename(shell), "-c", "echo $HOME\\ x"])
        self.assertEqual(c.cwd, "/root")

    def test_another_target_user(self) -> None:
        c = build_command({"command": ["id"], "cwd": "/", "user": "nobody"}, 0, 0, [0, 1, 2])
        self.assertEqual((c.uid, c.gid, c.env["USER"]), (NOBODY.pw_uid, NOBODY.pw_gid, "nobody"))
        c = build_command({"command": ["id"], "cwd": "/", "user": f"#{NOBODY.pw_uid}"}, 0, 0, [0, 1, 2])
        self.assertEqual(c.uid, NOBODY.pw_uid)

    def test_refusals(self) -> None:
        for msg, uid, text in (
            ({"command": ["id"], "cwd": "/"}, NOBODY.pw_uid, "nobody is not in the sudoers file."),
            ({"command": ["no-such-command-here"], "cwd": "/"}, 0, "no-such-command-here: command not found"),
            ({"command": ["id"], "cwd": "/", "user": "no-such-user"}, 0, "unknown user no-such-user"),
            ({"command": ["id"], "cwd": "/", "group": "no-such-group"}, 0, "unknown group no-such-group"),
        ):
            with self.subTest(msg=msg), self.assertRaises(SudoError) as cm:
                build_command(msg, uid, uid, [0, 1, 2])
            self.assertEqual(str(cm.exception), text)

    def test_malformed_requests(self) -> None:
        for msg, fds in (
            ({"command": "id", "cwd": "/"}, [0, 1, 2]),
            ({"command": [1], "cwd": "/"}, [0, 1, 2]),
            ({"command": [], "cwd": "/"}, [0, 1, 2]),
            ({"command": ["id"], "cwd": "rel"}, [0, 1, 2]),
            ({"command": ["id"], "cwd": "/", "env": {"A=B": "x"}}, [0, 1, 2]),
            ({"command": ["id"], "cwd": "/", "mode": "other"}, [0, 1, 2]),
            ({"command": ["id"], "cwd": "/", "pty": [0, 24]}, []),
            ({"command": ["id"], "cwd": "/"}, [0]),
        ):
            with self.subTest(msg=msg), self.assertRaises(ValueError):
                build_command(msg, 0, 0, fds)

    def test_who_may(self) -> None:
        self.assertTrue(may_sudo(0, 0))
        self.assertFalse(may_sudo(NOBODY.pw_uid, NOBODY.pw_gid))
        self.assertFalse(may_sudo(4_000_000, 4_000_000))  # not in the passwd database


class FakeLoop:
    """The loop's part the sudo service uses: its selector and the exits it hands out."""

    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.execs: dict[int, Any] = {}
        self.unclaimed: dict[int, int] = {}

    def call(self, fn: Callable[[], object]) -> None:
        fn()

    def claim(self, pid: int, owner: Any) -> None:
        self.execs[pid] = owner


class FakeSpawner:
    """Starts the command for real (as this test's user, in a session of its own), so that the
    signals the service sends land on a process the test owns."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str], dict[str, str], str, int, int]] = []
        self.children: list[subprocess.Popen[bytes]] = []

    def submit(self, fn: Callable[[], object]) -> None:
        fn()

    def start_process(self, exe: str, argv: list[str], env: dict[str, str], cwd: str, uid: int, gid: int, actions: object, fds: list[int]) -> int:
        self.started.append((exe, argv, env, cwd, uid, gid))
        child = subprocess.Popen(["sleep", "30"], start_new_session=True)
        self.children.append(child)
        return child.pid


class SessionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.loop = FakeLoop()
        self.spawner = FakeSpawner()
        g = fake_guest(PipeWire(), loop=self.loop, spawner=self.spawner)
        self.server = SudoServer(g, cast(Any, None))
        self.client, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        theirs.setblocking(False)
        self.session = SudoSession(self.server, theirs)
        self.server.sessions.add(self.session)
        self.loop.sel.register(theirs.fileno(), selectors.EVENT_READ, self.session)

    def tearDown(self) -> None:
        for child in self.spawner.children:
            if child.poll() is None:
                child.kill()
            child.wait()
        self.client.close()
        self.session.close()

    def answer(self) -> dict[str, Any] | None:
        self.session.on_readable()
        self.client.settimeout(2)
        return forkbox_sudo.recv(self.client)[0]

    def test_a_request_without_credentials_is_refused(self) -> None:
        # (Linux attaches the sender's own ids when it sends none; gVisor attaches no identity)
        self.session.conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        forkbox_sudo.send(self.client, {"command": ["true"], "cwd": "/"}, [0, 1, 2], creds=True)
        self.assertEqual(self.answer(), {"error": "the request came without the caller's credentials (SCM_CREDENTIALS)"})
        self.assertEqual(self.spawner.started, [])

    def test_malformed_requests_are_answered_and_closed(self) -> None:
        self.client.sendall(forkbox_sudo.MSG_LEN.pack(3) + b"{x]")
        self.assertEqual(self.answer(), {"error": "a malformed request"})
        self.assertEqual(self.session.state, "closed")

    def test_the_command_runs_its_signals_are_sent_on_and_its_exit_answered(self) -> None:
        forkbox_sudo.send(self.client, {"command": ["true"], "cwd": "/", "env": {}}, [0, 1, 2], creds=True)
        msg = self.answer()
        assert msg is not None
        child = self.spawner.children[0]
        self.assertEqual(msg, {"pid": child.pid})
        exe, argv, env, _, uid, _ = self.spawner.started[0]
        self.assertEqual((argv, uid, env["SUDO_UID"]), (["true"], 0, str(os.getuid())))
        self.assertTrue(exe.endswith("/true"))
        forkbox_sudo.send(self.client, {"signal": int(signal.SIGTERM)})
        self.session.on_readable()
        self.assertEqual(child.wait(5), -signal.SIGTERM)
        self.session.on_exit(signal.SIGTERM)
        self.assertEqual(forkbox_sudo.recv(self.client)[0], {"exit": int(signal.SIGTERM)})

    def test_a_caller_that_goes_away_takes_its_command_with_it(self) -> None:
        forkbox_sudo.send(self.client, {"command": ["true"], "cwd": "/"}, [0, 1, 2], creds=True)
        self.assertIsNotNone(self.answer())
        self.client.close()
        self.session.on_readable()
        self.assertEqual(self.spawner.children[0].wait(5), -signal.SIGKILL)
        self.assertEqual(self.session.state, "closed")
