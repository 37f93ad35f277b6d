# Sourced by the generators of the test resources (a library, not a generator: no .sh).
#
# run_component CONFIG ARGS... does what `openpert run-component CONFIG ARGS...` does, and returns its
# exit status, but every call of one shell is run by one harness process (run_component_server.py,
# started at the shell's first call and ended with it): a generator's jobs then cost one harness start
# instead of one each. A subshell gets a harness of its own, so independent jobs can run at once
# (at_once, below); wait for background subshells by their process ids (a bare `wait` would wait for
# the harness too, which ends only with its shell).

_run_component_server="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run_component_server.py"

run_component() {
  if [ "${_run_component_shell:-}" != "$BASHPID" ]; then
    coproc _RUN_COMPONENT { exec python "$_run_component_server"; }
    _run_component_shell=$BASHPID
  fi
  local status
  printf '%s\0' "$#" "$@" >&"${_RUN_COMPONENT[1]}"
  if ! read -r status <&"${_RUN_COMPONENT[0]}"; then
    echo "run_component $1: the harness process ended without an answer" >&2
    return 1
  fi
  return "$status"
}

# at_once FUNCTION...: runs each function in a background subshell (each with a harness process of
# its own) and waits for all of them, so that none is left running when one fails; returns the first
# nonzero status among them, in the order given.
at_once() {
  local function pid pids=() status=0 failed
  for function in "$@"; do
    "$function" &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { failed=$?; [ "$status" -ne 0 ] || status=$failed; }
  done
  return "$status"
}
