#!/usr/bin/env bash
# Render the results website.
#
# Usage: scripts/render_site.sh [RESULTS_DIR ...] [-o SITE_DIR]
#   RESULTS_DIR  task results folders holding results.json (default: results/*/)
#   -o SITE_DIR  output folder (default: site/)
# Any other option is passed on to `openpert report`.
set -euo pipefail

# Paths given (and the defaults) are relative to the current folder, not to this script.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Prefer the project's virtualenv; fall back to an openpert already on PATH (an active venv).
if [[ -x "$root/.venv/bin/openpert" ]]; then
    openpert=("$root/.venv/bin/openpert")
elif command -v openpert >/dev/null 2>&1; then
    openpert=(openpert)
else
    echo "render_site.sh: openpert not found; install the project (pip install -e .) or activate its venv" >&2
    exit 1
fi

dirs=()
opts=()
has_out=0
while (($#)); do
    case "$1" in
        -o | --out | --output)
            [[ $# -ge 2 ]] || { echo "render_site.sh: $1 needs a folder" >&2; exit 2; }
            opts+=("$1" "$2")
            has_out=1
            shift 2
            ;;
        -o* | --out=* | --output=*)
            opts+=("$1")
            has_out=1
            shift
            ;;
        -*)
            opts+=("$1")
            shift
            ;;
        *)
            dirs+=("$1")
            shift
            ;;
    esac
done

if ((${#dirs[@]} == 0)); then
    shopt -s nullglob
    for d in results/*/; do
        [[ -f "$d/results.json" ]] && dirs+=("$d")
    done
    shopt -u nullglob
    if ((${#dirs[@]} == 0)); then
        echo "render_site.sh: no results/*/results.json; run a benchmark first or pass folders" >&2
        exit 1
    fi
fi
((has_out)) || opts+=(-o site/)

exec "${openpert[@]}" report "${dirs[@]}" "${opts[@]}"
