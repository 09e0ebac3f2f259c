"""Where to connect: explicit arguments, then FORKBOX_API_KEY / FORKBOX_URL, then the
credentials file ``forkbox up`` writes (~/.config/forkbox/credentials.json), then localhost."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Optional, Tuple

from .errors import AuthenticationError

DEFAULT_URL = "http://127.0.0.1:7411"

# a key travels in an HTTP header: visible ASCII only (httpx would fail to encode anything else)
_NOT_IN_A_KEY = re.compile(r"[^\x21-\x7e]")


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "forkbox" / "credentials.json"


def resolve(api_key: Optional[str] = None, url: Optional[str] = None) -> Tuple[str, str]:
    key = api_key or os.environ.get("FORKBOX_API_KEY") or None
    where = url or os.environ.get("FORKBOX_URL") or None
    if not key or not where:
        try:
            stored = json.loads(credentials_path().read_text())
        except (OSError, ValueError):
            stored = {}
        key = key or stored.get("apiKey") or None
        where = where or stored.get("url") or None
    if not key:
        raise AuthenticationError(
            "MISSING_API_KEY",
            f"no API key: pass api_key=, set FORKBOX_API_KEY, or run `forkbox up` to write {credentials_path()}",
        )
    reason = malformed_key_reason(key)
    if reason:
        raise AuthenticationError("UNAUTHENTICATED", reason, details={"reason": "malformed_key"})
    return key, (where or DEFAULT_URL).rstrip("/")


def malformed_key_reason(key: str) -> Optional[str]:
    """Why ``key`` cannot be a key (it holds a character a key cannot have), or None."""
    bad = _NOT_IN_A_KEY.search(key)
    if bad is None:
        return None
    code = ord(bad.group())
    name = "a space or control character" if code <= 0x20 or code == 0x7F else "a non-ASCII character"
    return (
        f"the API key contains {name} (U+{code:04X} at position {bad.start() + 1}), which a key cannot have: "
        "copy the key again as it was issued"
    )
