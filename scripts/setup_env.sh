#!/usr/bin/env bash
# Create .venv and install openpert with every extra, once; later calls return at once unless
# pyproject.toml changed. Sourced by the other scripts (and by users): it activates the environment
# and leaves the caller's shell options as they were.

_openpert_setup() (
  # A subshell: `set -euo pipefail` stops the installation at the first error without leaking into
  # the shell that sourced this file.
  set -euo pipefail
  repo="$1"
  venv="$2"
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
)

_openpert_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_openpert_venv="${OPENPERT_VENV:-$_openpert_repo/.venv}"
if _openpert_setup "$_openpert_repo" "$_openpert_venv"; then
  # shellcheck disable=SC1091
  source "$_openpert_venv/bin/activate"
  unset -f _openpert_setup
  unset _openpert_repo _openpert_venv
else
  echo "openpert: setting up $_openpert_venv failed" >&2
  unset -f _openpert_setup
  unset _openpert_repo _openpert_venv
  return 1 2>/dev/null || exit 1
fi
