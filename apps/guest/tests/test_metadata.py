"""File metadata kept as extended attributes (on the host's filesystem; gVisor's in the e2e tests)."""

import errno
import os
import tempfile
import unittest

from forkbox_guest.files import entry, read_metadata, write_metadata


class MetadataTest(unittest.TestCase):
    def test_round_trip_and_only_ours_are_read(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f")
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                write_metadata(fd, {"author": "alice", "Build-Id": "42"})
                os.setxattr(fd, "user.other", b"not ours")
            except OSError as e:
                if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                    self.skipTest("no user xattrs here")
                raise
            finally:
                os.close(fd)
            self.assertEqual(read_metadata(path), {"author": "alice", "Build-Id": "42"})
            self.assertEqual(entry(path, metadata=True).get("metadata"), {"author": "alice", "Build-Id": "42"})
            self.assertNotIn("metadata", entry(path))
            bare = os.path.join(d, "g")
            open(bare, "w").close()
            self.assertNotIn("metadata", entry(bare, metadata=True))


if __name__ == "__main__":
    unittest.main()
