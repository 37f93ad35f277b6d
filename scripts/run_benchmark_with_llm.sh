#!/usr/bin/env bash
# Run the benchmark of every task on its bundled resources, with the language-model components
# answered by a real small model: SmolLM2-135M-Instruct served by llama.cpp on 127.0.0.1
# (scripts/serve_llm.sh; installed first if missing), on the small `*llm*` datasets only, every
# completion capped at $OPENPERT_LLM_MAX_TOKENS tokens (default 32), with a fresh generation cache.
# It checks that every language-model method and judge runs end to end on a real model (its chat
# template, its rambling, its window); the scores are no result of the methods' own models (docs/llm.md).
# The website names the model. Extra arguments go to `openpert benchmark`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/serve_llm.sh install
# A generation cache of this run's own (unless the caller names one, e.g. to finish an interrupted
# run): every answer then comes from the model, none from an earlier run's cache, so the run checks
# the server path whatever the machine has cached.
own_cache=""
if [ -z "${OPENPERT_LLM_CACHE:-}" ]; then
  own_cache="$(mktemp -d)"
  export OPENPERT_LLM_CACHE="$own_cache"
fi
bash scripts/serve_llm.sh start >/dev/null
trap 'bash scripts/serve_llm.sh stop; if [ -n "$own_cache" ]; then rm -rf "$own_cache"; fi' EXIT
eval "$(bash scripts/serve_llm.sh env)"
export OPENPERT_LLM_MAX_TOKENS="${OPENPERT_LLM_MAX_TOKENS:-32}"
echo "language model: $OPENPERT_LLM_MODEL at $OPENPERT_LLM_BASE_URL, completions capped at $OPENPERT_LLM_MAX_TOKENS tokens"
bash scripts/run_benchmark.sh --llm-datasets '*llm*' "$@"
