"""Where the clients find their key: a key holding characters no key has is refused before any
request, as an AuthenticationError (not an encoding error from deep inside httpx)."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from forkbox import AsyncSandbox, Sandbox, errors  # noqa: E402
from forkbox._config import resolve  # noqa: E402

# nothing listens there: a request that went out would be a ConnectionError
NOWHERE = "http://127.0.0.1:9"


class MalformedKeyTests(unittest.TestCase):
    def assert_refused(self, err: errors.ForkboxError, what: str) -> None:
        self.assertIsInstance(err, errors.AuthenticationError)
        self.assertEqual(err.code, "UNAUTHENTICATED")
        self.assertIn(what, err.message)
        self.assertIn("which a key cannot have", err.message)
        self.assertNotIn("fbx_secret", err.message)

    def test_refused_by_the_sync_and_async_clients(self) -> None:
        with self.assertRaises(errors.AuthenticationError) as caught:
            Sandbox.list(api_key="fbx_secret\u20ac", url=NOWHERE)
        self.assert_refused(caught.exception, "non-ASCII character (U+20AC at position 11)")

        async def listed() -> None:
            await AsyncSandbox.list(api_key="\u00e9fbx_secret", url=NOWHERE)

        with self.assertRaises(errors.AuthenticationError) as caught:
            asyncio.run(listed())
        self.assert_refused(caught.exception, "non-ASCII character (U+00E9 at position 1)")

    def test_spaces_and_control_characters(self) -> None:
        for key, code in (("fbx_secret ", "U+0020"), ("fbx_secret\n", "U+000A"), ("fbx\tsecret", "U+0009")):
            with self.assertRaises(errors.AuthenticationError) as caught:
                resolve(key, NOWHERE)
            self.assert_refused(caught.exception, f"space or control character ({code}")

    def test_a_well_formed_key_passes(self) -> None:
        self.assertEqual(resolve("fbx_A-z.0~9", NOWHERE), ("fbx_A-z.0~9", NOWHERE))


if __name__ == "__main__":
    unittest.main()
