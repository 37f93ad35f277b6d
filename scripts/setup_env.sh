#!/usr/bin/env bash
# Create .venv and install openpert with every extra, once; later calls return at once unless
# pyproject.toml changed. Sourced by the other scripts (and by users): it activates the environment
# and leaves the caller's shell options as they were.

# Whether a URL's server answers within a few seconds (exit status 0), with the Python at hand. Any
# HTTP answer counts (a server may refuse HEAD yet serve pip); no answer, or no such host, does not.
_openpert_reachable() {
  "$1" - "$2" <<'PY'
import sys
import urllib.error
import urllib.request

try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=4).close()
except urllib.error.HTTPError:
    pass
except OSError:  # unresolved host, refused connection, timeout: pip's configured indexes instead
    sys.exit(1)
PY
}

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
    # The CPU build of torch must come first: PyPI's Linux wheel (and an unpinned torch pulled in
    # by a dependency) brings gigabytes of CUDA packages. PyTorch's CPU index has it; where that
    # index cannot be reached (a mirror of PyPI only, or pip configured with local wheels), pip
    # installs from its configured indexes as before. The probe is bounded: it fails at once where
    # the host does not resolve and gives up after a few seconds where it hangs.
    torch_index="${OPENPERT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
    if _openpert_reachable "$venv/bin/python" "$torch_index/torch/"; then
      echo "openpert: torch's CPU build from $torch_index" >&2
      "$venv/bin/python" -m pip install --quiet --index-url "$torch_index" "torch==2.13.0"
    else
      echo "openpert: $torch_index not reachable; torch from pip's configured indexes" >&2
      "$venv/bin/python" -m pip install --quiet "torch==2.13.0"
    fi
    "$venv/bin/python" -m pip install --quiet -e "$repo[all]"
    echo "$want" > "$stamp"
  fi
)

_openpert_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_openpert_venv="${OPENPERT_VENV:-$_openpert_repo/.venv}"
if _openpert_setup "$_openpert_repo" "$_openpert_venv"; then
  # shellcheck disable=SC1091
  source "$_openpert_venv/bin/activate"
  unset -f _openpert_setup _openpert_reachable
  unset _openpert_repo _openpert_venv
else
  echo "openpert: setting up $_openpert_venv failed" >&2
  unset -f _openpert_setup _openpert_reachable
  unset _openpert_repo _openpert_venv
  return 1 2>/dev/null || exit 1
fi
