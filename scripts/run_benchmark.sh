#!/usr/bin/env bash
# Run the benchmark of every task on its bundled test resources, then render the website.
# Sets itself up on a fresh clone. Results go to results/<task>/, the site to site/.
# Extra arguments go to `openpert benchmark` (e.g. -j 4 --resume).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source scripts/setup_env.sh
tasks=$(find src -mindepth 2 -maxdepth 2 -name api -type d -printf '%h\n' | xargs -r -n1 basename | sort)
if [ -z "$tasks" ]; then
  echo "openpert: no task under src/" >&2
  exit 1
fi
# One run for every task: the tasks share the job slots, so none sits idle while a task finishes.
# shellcheck disable=SC2086  # $tasks is a list of plain task names
openpert benchmark --task $tasks --input resources_test -o results -j "${OPENPERT_JOBS:-2}" "$@"
openpert report results -o site
echo "open site/index.html"
