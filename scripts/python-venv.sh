#!/usr/bin/env bash
# The Python the SDK's tests run on: Debian's python3 with its httpx, plus httpx-sse from the
# machine's pip index, in .venv; made once, then reused. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.venv"
if ! "$venv/bin/python" -c 'import httpx, httpx_sse' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 0 'httpx-sse>=0.4' >&2
fi
echo "$venv/bin/python"
