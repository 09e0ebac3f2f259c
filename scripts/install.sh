#!/usr/bin/env bash
# Installs everything forkbox needs on a Debian 12 host (run as root); safe to run again.
#   --for-tests   also what the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
[[ "${1:-}" == "--for-tests" ]] && for_tests=1

say() { printf '\033[1m[forkbox install]\033[0m %s\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || { say "must run as root (gVisor needs it)"; exit 1; }

RUNSC_VERSION='0.0~20240729'
need_apt=()
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v ip >/dev/null || need_apt+=(iproute2)
# every sandbox's network rules are nftables on the host; unshare (util-linux) wraps runsc's start
command -v nft >/dev/null || need_apt+=(nftables)
command -v unshare >/dev/null || need_apt+=(util-linux)
# the guest's own Python runtime is assembled from Debian's python3, relinked by patchelf to load
# only its own libraries (guest/runtime.ts): images need no Python
[[ -x /usr/bin/python3 ]] || need_apt+=(python3)
command -v patchelf >/dev/null || need_apt+=(patchelf)
# templates from OCI images: pulled by skopeo and unpacked by umoci, no Docker engine
command -v skopeo >/dev/null || need_apt+=(skopeo)
command -v umoci >/dev/null || need_apt+=(umoci)
# exposed ports are served at PORT-ID.localhost (each its own browser origin): *.localhost must
# resolve to loopback for every program on this host, not only browsers and curl
getent hosts forkbox-check.localhost >/dev/null || need_apt+=(libnss-myhostname)
# the Python SDK's tests run on Debian's python3 with its httpx, in a venv that adds httpx-sse
# (scripts/python-venv.sh; PyPI is not reachable here)
if [[ $for_tests -eq 1 ]]; then
  /usr/bin/python3 -c 'import httpx' 2>/dev/null || need_apt+=(python3-httpx)
  /usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
  # the OCI tests run a registry that wants a login (its htpasswd file is made by apache2-utils)
  command -v htpasswd >/dev/null || need_apt+=(apache2-utils)
  # the OCI tests push an image of only a static busybox (no Python, no libc)
  if [[ ! -x /bin/busybox ]] || ldd /bin/busybox >/dev/null 2>&1; then need_apt+=(busybox-static); fi
  # the TLS tests make a CA and certificates
  command -v openssl >/dev/null || need_apt+=(openssl)
  # the package tests load the SDK's browser build, and the API reference page, in headless Chromium
  command -v chromium >/dev/null || need_apt+=(chromium)
fi
# packages whose binaries tests run on their own (temp dirs, free ports): their services stay off.
# The OCI template tests start a registry; the store tests a PostgreSQL cluster.
need_quiet=()
if [[ $for_tests -eq 1 ]]; then
  [[ -x /usr/bin/docker-registry ]] || need_quiet+=(docker-registry)
  [[ -x /usr/lib/postgresql/15/bin/postgres ]] || need_quiet+=(postgresql-15)
fi
have_runsc=0
if command -v runsc >/dev/null; then
  installed=$(runsc --version 2>/dev/null || true)
  [[ $installed == *"${RUNSC_VERSION}"* ]] && have_runsc=1
fi

apt_updated=0
apt_update() {
  [[ $apt_updated -eq 1 ]] && return
  # a third-party source that cannot be reached must not stop us: Debian's own lists are what we need
  apt-get update -qq >&2 || say "apt-get update reported errors (continuing with the lists it got)"
  apt_updated=1
}

if [[ $have_runsc -eq 0 ]]; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "adding bookworm-backports (runsc ${RUNSC_VERSION} with the systrap platform lives there)"
    echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/forkbox-backports.list
  fi
  apt_update
  say "installing runsc from bookworm-backports"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports runsc >&2
fi
if [[ ${#need_apt[@]} -gt 0 ]]; then
  apt_update
  say "installing ${need_apt[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi
if [[ ${#need_quiet[@]} -gt 0 ]]; then
  apt_update
  say "installing ${need_quiet[*]} (their binaries only: no service of theirs is left running)"
  # policy-rc.d forbids the packages' maintainer scripts to start their services (with or without systemd)
  own_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_quiet[@]}" >&2 || {
    [[ $own_policy -eq 1 ]] && rm -f /usr/sbin/policy-rc.d
    exit 1
  }
  [[ $own_policy -eq 1 ]] && rm -f /usr/sbin/policy-rc.d
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now docker-registry.service postgresql.service >/dev/null 2>&1 || true
  fi
fi

if ! getent hosts forkbox-check.localhost >/dev/null && ! grep -qE '^hosts:.*myhostname' /etc/nsswitch.conf; then
  say "resolving *.localhost to loopback (nss myhostname)"
  sed -i -E 's/^(hosts:[[:space:]]*files)/\1 myhostname/' /etc/nsswitch.conf
fi

if [[ ! -f node_modules/.package-lock.json ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  say "installing npm dependencies"
  npm ci --no-audit --no-fund >&2
fi

# the web dashboard the server serves at / (static files; a second or two)
say "building the dashboard"
npm run build --silent -w apps/dashboard >&2

if [[ $for_tests -eq 1 ]]; then
  say "python venv for the SDK's tests: $(bash scripts/python-venv.sh)"
fi

ln -sf "$PWD/apps/cli/bin/forkbox.mjs" /usr/local/bin/forkbox
chmod +x apps/cli/bin/forkbox.mjs
say "ready: runsc $(runsc --version | head -1 | awk '{print $3}'), node $(node --version)"
