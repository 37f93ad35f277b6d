#!/usr/bin/env bash
# Refresh requirements/dev-lock.txt: the exact version of every package the development and CI
# environment installs (openpert with every extra of `all`), resolved by pip-tools' pip-compile from
# pyproject.toml; and requirements/llm-server-lock.txt, the language-model server's
# (requirements/llm-server.in, scripts/serve_llm.sh). scripts/setup_env.sh installs the project under these pins (`pip install -c`), so a
# fresh clone runs the test suite with exactly the versions it last passed with.
#
#   bash scripts/lock_dependencies.sh              # resolve the newest versions pyproject.toml allows
#   bash scripts/lock_dependencies.sh --upgrade-package scanpy   # extra arguments go to pip-compile
#
# Then rebuild the environment (`source scripts/setup_env.sh` reinstalls when the lock changed), run
# `bash scripts/test.sh`, and commit the lock with the change that needed it.
#
# torch is left out of the lock: setup_env.sh installs torch==2.13.0 first, from PyTorch's CPU index
# where it answers (version 2.13.0+cpu) and from pip's indexes otherwise, and a local-version pin
# would refuse one of the two. The project itself (openpert, named by the `all` extra) is not a pin.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
python="${PYTHON:-python3}"
"$python" -m venv "$tools/venv"
"$tools/venv/bin/python" -m pip install --quiet --upgrade pip "pip-tools==7.6.2"
# Keep the existing pins unless asked to upgrade: pip-compile starts from the output file.
"$tools/venv/bin/pip-compile" --quiet --extra all --strip-extras --no-emit-index-url --no-emit-find-links \
  --unsafe-package torch --unsafe-package openpert --output-file requirements/dev-lock.txt "$@" pyproject.toml
echo "openpert: wrote requirements/dev-lock.txt ($(grep -c '==' requirements/dev-lock.txt) pins)" >&2
# The language-model server of scripts/serve_llm.sh, in an environment of its own.
"$tools/venv/bin/pip-compile" --quiet --strip-extras --no-emit-index-url --no-emit-find-links \
  --output-file requirements/llm-server-lock.txt "$@" requirements/llm-server.in
echo "openpert: wrote requirements/llm-server-lock.txt ($(grep -c '==' requirements/llm-server-lock.txt) pins)" >&2
