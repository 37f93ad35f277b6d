#!/usr/bin/env bash
# Run the whole test suite: harness unit tests, task tests and every component's test.
# Sets itself up on a fresh clone (see scripts/setup_env.sh). Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source scripts/setup_env.sh
paths=(tests)
[ -d src ] && paths+=(src)
exec python -m pytest "${paths[@]}" -n 2 -p no:cacheprovider "$@"
