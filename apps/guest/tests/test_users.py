import errno
import os
import unittest

from forkbox_guest.errors import OpError, op_failure, os_error_code
from forkbox_guest.users import Identity, Users, check_env, resolve
from forkbox_guest.wire import T_JSON

from .fakes import PipeWire

USER = Identity("user", 1000, 1000, (1000,), "/home/user")


class ResolveTest(unittest.TestCase):
    def test_a_relative_path_is_taken_from_the_home(self) -> None:
        self.assertEqual(resolve({"path": "notes/a.txt"}, USER), "/home/user/notes/a.txt")

    def test_paths_are_normalized(self) -> None:
        self.assertEqual(resolve({"path": "/work//x/../y/"}, USER), "/work/y")
        self.assertEqual(resolve({"path": "../../etc"}, USER), "/etc")

    def test_other_keys(self) -> None:
        self.assertEqual(resolve({"from": "/a", "to": "b"}, USER, "to"), "/home/user/b")

    def test_invalid_paths_are_refused(self) -> None:
        for bad in ({}, {"path": ""}, {"path": 3}, {"path": "a\0b"}):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                resolve(bad, USER)


class IdentityTest(unittest.TestCase):
    def test_root_keeps_no_supplementary_groups(self) -> None:
        ident = Users().identity_of({"user": "root"})
        self.assertEqual((ident.uid, ident.gid, ident.groups, ident.home), (0, 0, (), "/root"))

    def test_it_is_cached(self) -> None:
        users = Users()
        self.assertIs(users.identity_of({"user": "root"}), users.identity_of({"user": "root"}))

    def test_unknown_and_invalid_users(self) -> None:
        with self.assertRaisesRegex(ValueError, "unknown user: nobody-here"):
            Users().identity_of({"user": "nobody-here"})
        with self.assertRaisesRegex(ValueError, "invalid user"):
            Users().identity_of({"user": 0.5})


class CheckEnvTest(unittest.TestCase):
    def test_values_become_strings(self) -> None:
        self.assertEqual(check_env({"A": 1, "B": "x=y"}), {"A": "1", "B": "x=y"})
        self.assertEqual(check_env(None), {})

    def test_names_and_values_execve_cannot_take(self) -> None:
        for bad in ({"": "x"}, {"A=B": "x"}, {"A\0": "x"}, {"A": "x\0y"}, ["A"]):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                check_env(bad)


class ErrorCodeTest(unittest.TestCase):
    def test_errno_codes(self) -> None:
        cases = {
            errno.ENOENT: "FILE_NOT_FOUND",
            errno.EACCES: "PERMISSION_DENIED",
            errno.EROFS: "PERMISSION_DENIED",
            errno.ENOSPC: "NO_SPACE",
            errno.ENOTEMPTY: "DIRECTORY_NOT_EMPTY",
            errno.ENAMETOOLONG: "VALIDATION_FAILED",
            errno.EIO: "GUEST_ERROR",
        }
        for err, code in cases.items():
            with self.subTest(err=errno.errorcode[err]):
                self.assertEqual(os_error_code(OSError(err, os.strerror(err))), code)
        self.assertEqual(os_error_code(OSError("no errno")), "GUEST_ERROR")

    def test_failures_are_answered_with_their_code(self) -> None:
        wire = PipeWire()
        self.addCleanup(wire.close)
        op_failure(wire, 1, {"path": "/x"}, FileNotFoundError(errno.ENOENT, "No such file or directory"))
        op_failure(wire, 2, {}, OpError("NOT_A_REGULAR_FILE", "a FIFO"))
        op_failure(wire, 3, {}, ValueError("bad"))
        op_failure(wire, 4, {}, KeyError("k"))
        self.assertEqual(
            wire.frames(),
            [
                (T_JSON, 1, {"type": "error", "code": "FILE_NOT_FOUND", "message": "No such file or directory: /x"}),
                (T_JSON, 2, {"type": "error", "code": "NOT_A_REGULAR_FILE", "message": "a FIFO"}),
                (T_JSON, 3, {"type": "error", "code": "VALIDATION_FAILED", "message": "bad"}),
                (T_JSON, 4, {"type": "error", "code": "GUEST_ERROR", "message": "KeyError: 'k'"}),
            ],
        )


if __name__ == "__main__":
    unittest.main()
