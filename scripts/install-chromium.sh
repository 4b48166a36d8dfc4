#!/bin/sh
# install-chromium.sh — Debian's headless-capable chromium for the profiler
# report test (tests/test_profiler.py opens the HTML report in it).
# Idempotent and quick when chromium is already there; fails (non-zero)
# when it cannot be installed, so the test fails instead of skipping.
set -eu
for exe in chromium chromium-browser; do
  if command -v "$exe" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium.sh: chromium is missing and installing it needs root (apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
  apt-get update >/dev/null
  apt-get install -y --no-install-recommends chromium
}
command -v chromium >/dev/null 2>&1
