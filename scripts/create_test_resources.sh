#!/usr/bin/env bash
# Regenerate resources_test/<task>/ for every task (or the tasks named), deterministically.
# Each task keeps its recipe in scripts/create_test_resources/<task>.sh, which states its inputs (shared
# data files, seeds) at its top. With $OPENPERT_TEST_RESOURCES set, <task>/ is written below that folder
# instead of resources_test/ (tests/test_test_resources.py does so, and compares; resources_test/README.md).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source scripts/setup_env.sh
tasks=("$@")
if [ ${#tasks[@]} -eq 0 ]; then
  mapfile -t tasks < <(find scripts/create_test_resources -name '*.sh' -printf '%f\n' 2>/dev/null | sed 's/\.sh$//' | sort)
fi
for task in "${tasks[@]}"; do
  echo "== $task" >&2
  bash "scripts/create_test_resources/$task.sh"
done
