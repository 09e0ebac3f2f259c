import os
import re
import tempfile
import unittest

from forkbox_guest import identity


class IdentityTest(unittest.TestCase):
    def test_boot_ids_read_as_version_4_uuids(self) -> None:
        for hex32 in ("0" * 32, "f" * 32, os.urandom(16).hex()):
            self.assertRegex(identity._uuid(hex32), r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

    def test_hostnames(self) -> None:
        self.assertTrue(identity.valid_hostname("sbx-0123456789abcdef0123"))
        for bad in ("", "-x", "a" * 64, "a b", "a.b", "a\nb", 3, None):
            self.assertFalse(identity.valid_hostname(bad), bad)

    def test_the_name_goes_into_hosts_keeping_the_rest(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hosts")
            with open(path, "w") as f:
                f.write("127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost\n")
            identity._name_in_hosts("sbx-1", path)
            identity._name_in_hosts("sbx-2", path)
            with open(path) as f:
                self.assertEqual(f.read(), "127.0.0.1\tlocalhost\n127.0.1.1\tsbx-2 sandbox\n::1\tlocalhost ip6-localhost\n")
            os.remove(path)
            identity._name_in_hosts("sbx-3", path)
            with open(path) as f:
                self.assertTrue(re.search(r"^127\.0\.1\.1\tsbx-3 sandbox$", f.read(), re.M))
