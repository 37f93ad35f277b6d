#!/usr/bin/env bash
# Run the whole test suite: harness unit tests, task tests and every component's test.
# Sets itself up on a fresh clone (see scripts/setup_env.sh). Extra arguments go to pytest; folders
# or files of tests/ or src/ among them are what it runs instead of the whole suite (a pull request
# that only changes methods: `bash scripts/test.sh src/perturbqa/methods/x tests/perturbqa`).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source scripts/setup_env.sh
# Bytecode is cached (in the git-ignored __pycache__ folders), pytest's rewritten test modules
# included: with PYTHONDONTWRITEBYTECODE set, as some machines set it, every process of the suite
# would compile again every module it imports, and each worker rewrite every test module's asserts.
unset PYTHONDONTWRITEBYTECODE
paths=(tests)
[ -d src ] && paths+=(src)
for arg in "$@"; do
  if [[ "$arg" == tests* || "$arg" == src* ]] && [ -e "${arg%%::*}" ]; then
    paths=()  # pytest's own arguments name what to run
    break
  fi
done
# --dist loadfile: a file's tests run in one worker, so that each module fixture (a component or a
# benchmark run several tests read) is made once, not once in each worker. One worker more than the
# machine has cores: many tests wait (on a job's time limit, a server, a browser) with a core idle;
# tests/ took 216 s with 3 workers on 2 cores, 234 s with 2 and 215 s with 4.
exec python -m pytest "${paths[@]}" -n "$(( $(nproc) + 1 ))" --dist loadfile -p no:cacheprovider "$@"
