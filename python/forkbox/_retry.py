"""The retry policy both clients share, the same as the TypeScript SDK's: 429 (with Retry-After) and 503 are retried
for any call, a connection error only for GET and DELETE (a POST may have acted before the
connection broke), at most ``max_retries`` times, with jittered exponential backoff or the
server's ``Retry-After`` (seconds), never waiting more than 5 s."""

from __future__ import annotations

import math
import random
from typing import Optional

DEFAULT_MAX_RETRIES = 2
RETRY_BASE_DELAY_SECONDS = 0.2
MAX_RETRY_DELAY_SECONDS = 5.0
RETRYABLE_STATUSES = frozenset({429, 503})
CONNECTION_RETRY_METHODS = frozenset({"GET", "DELETE"})


def delay_seconds(attempt: int, retry_after: Optional[str]) -> float:
    """How long to wait before retry number ``attempt + 1``."""
    if retry_after is not None:
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_RETRY_DELAY_SECONDS)
    exp = RETRY_BASE_DELAY_SECONDS * 2**attempt
    return min(exp / 2 + random.random() * exp / 2, MAX_RETRY_DELAY_SECONDS)


class RetryPolicy:
    def __init__(self, max_retries: Optional[int] = None) -> None:
        self.max_retries = max(0, DEFAULT_MAX_RETRIES if max_retries is None else max_retries)

    def after_status(self, attempt: int, status: int, retry_after: Optional[str]) -> Optional[float]:
        """Seconds to wait before retrying a response with this status, or None: do not retry.
        A 429 without ``Retry-After`` is a quota (``QUOTA_EXCEEDED``), which waiting does not free."""
        if status == 429 and retry_after is None:
            return None
        if status in RETRYABLE_STATUSES and attempt < self.max_retries:
            return delay_seconds(attempt, retry_after)
        return None

    def after_connection_error(self, attempt: int, method: str) -> Optional[float]:
        """Seconds to wait before retrying a call whose connection failed, or None: do not retry."""
        if method in CONNECTION_RETRY_METHODS and attempt < self.max_retries:
            return delay_seconds(attempt, None)
        return None
