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
for task in $tasks; do
  openpert benchmark --task "$task" --input "resources_test/$task" -o results -j "${OPENPERT_JOBS:-2}" "$@"
done
openpert report results -o site
echo "open site/index.html"
