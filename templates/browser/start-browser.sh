#!/bin/sh
# The template's start command: Chromium's DevTools endpoint on loopback (it listens nowhere
# else), and cdp-forward.cjs serving it on every address of the sandbox at port 9222.
set -e
profile="$HOME/.cache/forkbox-browser"
mkdir -p "$profile"
/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --disable-background-networking --no-first-run --no-default-browser-check \
  --remote-debugging-port=9223 --user-data-dir="$profile" about:blank &
exec node /opt/forkbox-browser/cdp-forward.cjs 9222 9223
