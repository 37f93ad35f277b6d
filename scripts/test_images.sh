#!/usr/bin/env bash
# Run component tests each in the environment of the image its config declares: one virtual
# environment per base image of docker/ (exactly its pinned requirement files, plus pytest and the
# harness from this checkout), an overlay only for a component that adds packages. A component
# that imports what its image lacks fails here. Environments are cached in .cache/images (or
# $OPENPERT_IMAGE_ENVS) and rebuilt when their requirement files change.
#
#   bash scripts/test_images.sh                           # every component of src/
#   bash scripts/test_images.sh src/perturbqa/methods/gat # these components (or task folders)
#   bash scripts/test_images.sh --exclude src/pertreasonqa -j 1
#
# Prints a line per component, then the environments (built or cached, with build times) and a
# summary; exits 1 when a component test failed.
#
# The ml and text environments pin torch's CPU build (torch==<version>+cpu), which is not on PyPI:
# where no local wheel is configured for pip, set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# The driver only needs the harness: use the python that has it (CI installs it with pip), else
# set up the project's .venv.
if ! python3 -c "import openpert.images" >/dev/null 2>&1; then
  # shellcheck source=scripts/setup_env.sh
  source scripts/setup_env.sh
fi
exec python3 -m openpert.images test "$@"
