#!/usr/bin/env bash
# System packages that some tests need, installed when missing (Debian): Chromium for the website's
# browser test. Without root (a user's machine) it says what is missing and goes on: those tests
# skip with the reason.
set -uo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "openpert: not installing ${need[*]} (needs root and apt-get); the tests that use them will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
