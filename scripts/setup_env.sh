#!/usr/bin/env bash
# Create .venv and install openpert with every extra, once; later calls return at once unless
# pyproject.toml changed. Sourced by the other scripts: it activates the environment.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${OPENPERT_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  echo "openpert: creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.openpert-installed"
want="$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "openpert: installing dependencies into $venv (first run only)" >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # The CPU build of torch must come first: an unpinned torch pulled in by a dependency would
  # bring gigabytes of CUDA packages.
  "$venv/bin/python" -m pip install --quiet "torch==2.13.0"
  "$venv/bin/python" -m pip install --quiet -e "$repo[all]"
  echo "$want" > "$stamp"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
