#!/usr/bin/env bash
# The reliability figures of docs/reliability.md, each measured here by running the real `capq` binary:
#   1. faults injected / caught   every fault file under tests/data/reliability/faults/gates names
#                                 the gate it must trip (`# gate:`) and the gates it may trip
#                                 besides (`# also:`); one `capq trial` per file against the
#                                 embedded simulator (on the row `# row:` names, default
#                                 rel_fast.yaml), which must fail that gate and no other; every
#                                 file under faults/valid is a server quirk capq must accept: its
#                                 trial must pass; plus process-level faults (server killed
#                                 mid-trial, connection refused, health never ready)
#   2. malformed rows / refused   `capq rows check` on each file of tests/data/rows_bad and
#                                 rows_bad_limits (server_expect against the engine), which must
#                                 fail with the file's `# expect:` message at its `# line:`
#   3. fuzz executions, no crash  each libFuzzer target of the fuzz build for its executions
#                                 (below), printed per target and in total
#   4. interrupted runs kept      SIGINT/SIGTERM into running trials; each must exit 130, leave a
#                                 sealed directory that `capq validate` calls incomplete, and hold
#                                 every measured request its verdict says completed
#
# usage: ci/reliability.sh [BUILD_DIR]          (default: build; needs BUILD_DIR/harness/capq)
# env:   CAPQ_FUZZ_DIR   fuzz build (default: build-fuzz; make it with
#                        cmake --preset fuzz && cmake --build --preset fuzz); several dirs may be
#                        given separated by ':', the first that holds a target is used
#        FUZZ_RUNS       executions for every fuzz target (default: per target, FUZZ_RUNS_<name>,
#                        10M for the four together)
#        FUZZ_MAX_SECONDS  each fuzz target's time cap (default 3600), a safety net: a target it
#                        stops short of its executions counts as a failed check
#        INTERRUPTS      interrupted trials (default 6)
#        KEEP=1          keep the scratch folder
# Exit 0 when every injected fault was caught, every bad row refused as expected, no fuzzer crashed
# and every interrupted run kept its data; 1 otherwise. Only loopback servers it starts itself.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
capq="$build/harness/capq"
fuzz_dir="${CAPQ_FUZZ_DIR:-$root/build-fuzz}"
fuzz_runs_all="${FUZZ_RUNS:-}"
fuzz_max_s="${FUZZ_MAX_SECONDS:-3600}"
interrupts="${INTERRUPTS:-6}"
data="$root/tests/data/reliability"
profile="$root/rows/sim/profiles/small.yaml"

if [[ ! -x "$capq" ]]; then
  echo "no capq binary at $capq" >&2
  echo "build it: cmake --preset default && cmake --build --preset default --target capq" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/capq-reliability.XXXXXX")"
cleanup() {
  local pid
  # Only this shell's own jobs that still run: a reaped pid may belong to someone else by now.
  for pid in $(jobs -pr); do
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ "${KEEP:-0}" == 1 ]]; then
    echo "scratch kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

failures=0
note() { printf '  %-34s %s\n' "$1" "$2"; }
# fault_caught / fault_missed NAME WHAT: counts one injected fault's outcome and prints it.
fault_caught() { caught=$((caught + 1)); note "$1" "caught: $2"; }
fault_missed() { failures=$((failures + 1)); note "$1" "MISSED: $2"; }

# start_sim NAME TIME_SCALE [FAULTS]: a `capq sim` in the background; sets sim_pid and sim_url.
start_sim() {
  local name="$1" scale="$2" faults="${3:-}" i
  # Varied framing: every request drawn among the benign variations real servers send, so each
  # fault must trip its gate, and each valid quirk pass, whatever else the stream varies.
  local -a args=(sim --profile "$profile" --time-scale "$scale" --variations varied
    --variation-seed 7)
  if [[ -n "$faults" ]]; then args+=(--faults "$faults"); fi
  : >"$work/$name.sim.out"
  "$capq" "${args[@]}" >>"$work/$name.sim.out" 2>&1 &
  sim_pid=$!
  sim_url=""
  for ((i = 0; i < 200; i++)); do
    sim_url="$(sed -n 's/^capq sim: listening on \(http:[^ ]*\) .*/\1/p' "$work/$name.sim.out" || true)"
    if [[ -n "$sim_url" ]]; then return 0; fi
    sleep 0.05
  done
  echo "capq sim did not start: $(cat "$work/$name.sim.out")" >&2
  return 1
}

stop_sim() {
  kill -9 "$sim_pid" 2>/dev/null || true
  wait "$sim_pid" 2>/dev/null || true
}

# Output tokens the simulator generated so far (its Prometheus counter).
sim_tokens() {
  local v
  v="$(curl -s --max-time 2 "$sim_url/metrics" |
    sed -n 's/^sglang:generation_tokens_total{[^}]*} \([0-9.e+]*\)$/\1/p')"
  printf '%.0f\n' "${v:-0}"
}

wait_tokens() {
  local want="$1" i
  for ((i = 0; i < 1200; i++)); do
    if (($(sim_tokens) >= want)); then return 0; fi
    sleep 0.05
  done
  return 1
}

# Measured requests in a raw.jsonl that completed with HTTP 200, not cancelled, not timed out.
completed_records() {
  grep '"phase":"measured"' "$1" | grep '"http_status":200' | grep '"cancelled":false' |
    grep -c '"timed_out":false' || true
}

# bg_trial ROW OUT [ARGS...]: `capq trial` itself in the background (no wrapper in between, so a
# signal sent to $trial_pid reaches capq); sets trial_pid.
bg_trial() {
  local row="$1" out="$2"
  shift 2
  "$capq" trial --row "$row" --concurrency 1 --trial 1 --out "$out" --skip-quiet-period \
    --no-progress "$@" >"$out.log" 2>&1 &
  trial_pid=$!
}

# wait_bounded PID SECONDS: its exit code, or 124 after SIGKILL when it outlived SECONDS.
wait_bounded() {
  local pid="$1" limit="$2" i rc=0
  for ((i = 0; i < limit * 20; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 124
  fi
  wait "$pid" || rc=$?
  return "$rc"
}

trial() {
  # trial ROW OUT [ARGS...]: one trial, bounded; prints nothing; returns its exit code.
  local row="$1" out="$2"
  shift 2
  timeout 180 "$capq" trial --row "$row" --concurrency 1 --trial 1 --out "$out" \
    --skip-quiet-period --no-progress "$@" >"$out.log" 2>&1
}

echo "capq reliability figures ($(date -u +%Y-%m-%dT%H:%M:%SZ), $capq)"

# ---------------------------------------------------------------------------------------------
echo
echo "1. faults injected / caught"
injected=0
caught=0
fast="$data/rows/rel_fast.yaml"
slow="$data/rows/rel_slow.yaml"
mkdir -p "$work/faults"
# failed_gates LOG: the gates a trial's log lists as failed, one a line.
failed_gates() { sed -n 's/^  - \([a-z0-9_]*\): .*/\1/p' "$1" | sort -u; }
# fault_trial NAME FILE OUT ROW: the trial (two for lying_flush) of one fault file; its exit code.
fault_trial() {
  local name="$1" f="$2" out="$3" row="$4" rc=0
  if [[ "$name" == lying_flush ]]; then
    # Only a second trial with the same prompts can tell that the flush kept the cache.
    start_sim "$name" 100 "$f"
    trial "$row" "$out.first" --url "$sim_url" || true
    trial "$row" "$out" --url "$sim_url" || rc=$?
    stop_sim
  else
    trial "$row" "$out" --sim-faults "$f" || rc=$?
  fi
  return "$rc"
}
fault_row() {
  local row
  row="$(sed -n 's/^# row: //p' "$1" | head -n 1)"
  row="${row%% *}"
  echo "$data/rows/${row:-rel_fast.yaml}"
}
for f in "$data"/faults/gates/*.yaml; do
  name="$(basename "$f" .yaml)"
  gate="$(sed -n 's/^# gate: //p' "$f" | head -n 1)"
  read -r -a also <<<"$(sed -n 's/^# also: //p' "$f" | head -n 1)"
  out="$work/faults/$name"
  injected=$((injected + 1))
  rc=0
  fault_trial "$name" "$f" "$out" "$(fault_row "$f")" || rc=$?
  others=""
  for g in $(failed_gates "$out.log"); do
    if [[ "$g" != "$gate" && " ${also[*]} " != *" $g "* ]]; then others="$others $g"; fi
  done
  if [[ "$rc" == 2 ]] && grep -q "^  - $gate: " "$out.log" && [[ -z "$others" ]]; then
    fault_caught "$name" "$gate failed (exit 2)${also[*]:+, also ${also[*]}}"
  elif [[ -n "$others" ]]; then
    fault_missed "$name" "exit $rc, undeclared gates failed:$others (see $out.log)"
  else
    fault_missed "$name" "exit $rc, no '$gate:' reason (see $out.log)"
  fi
done

# Valid server quirks: capq must read them as the clean stream they are.
valid_injected=0
valid_passed=0
for f in "$data"/faults/valid/*.yaml; do
  name="$(basename "$f" .yaml)"
  out="$work/faults/$name"
  injected=$((injected + 1))
  valid_injected=$((valid_injected + 1))
  rc=0
  fault_trial "$name" "$f" "$out" "$(fault_row "$f")" || rc=$?
  if [[ "$rc" == 0 ]] && grep -q "^  verdict: pass" "$out.log"; then
    caught=$((caught + 1))
    valid_passed=$((valid_passed + 1))
    note "$name" "VALID/pass: $(sed -n 's/^# valid: //p' "$f" | head -n 1)"
  else
    failures=$((failures + 1))
    note "$name" "VALID but FAILED: exit $rc, gates: $(failed_gates "$out.log" | tr '\n' ' ')"
  fi
done

# Process-level faults: the server dies, was never there, or never becomes ready.
injected=$((injected + 1))
start_sim killed 1
bg_trial "$slow" "$work/faults/server_killed" --url "$sim_url" --setup-timeout 20
rc=0
if wait_tokens $((16 * 8)); then
  kill -9 "$sim_pid"
  wait "$sim_pid" 2>/dev/null || true  # reaped here, so the shell prints no "Killed" notice
  killed_at=$SECONDS
  wait_bounded "$trial_pid" 60 || rc=$?
  took=$((SECONDS - killed_at))
else
  rc=-1
  took=0
fi
stop_sim
kept="$(completed_records "$work/faults/server_killed/raw.jsonl" 2>/dev/null || echo 0)"
if [[ "$rc" == 3 ]] && grep -q "server lost" "$work/faults/server_killed.log" && ((took <= 10)); then
  fault_caught "server killed mid-trial" "'server lost', exit 3 after ${took}s, $kept completed requests kept"
else
  fault_missed "server killed mid-trial" "exit $rc after ${took}s"
fi

injected=$((injected + 1))
# A port nothing listens on: one a simulator just gave back.
start_sim refused_port 100
port="${sim_url##*:}"
stop_sim
rc=0
trial "$fast" "$work/faults/refused" --url "http://127.0.0.1:$port" --setup-timeout 3 || rc=$?
if [[ "$rc" == 3 ]] && grep -q "server unreachable" "$work/faults/refused.log"; then
  fault_caught "connection refused" "'server unreachable', exit 3"
else
  fault_missed "connection refused" "exit $rc"
fi

injected=$((injected + 1))
start_sim never_ready 100 "$data/faults/health_never_ready.yaml"
rc=0
trial "$fast" "$work/faults/never_ready" --url "$sim_url" --setup-timeout 3 || rc=$?
stop_sim
if [[ "$rc" == 3 ]] && grep -q "not ready.*503" "$work/faults/never_ready.log"; then
  fault_caught "health never ready" "'not ready ... HTTP 503', exit 3"
else
  fault_missed "health never ready" "exit $rc"
fi
fig_faults="$caught of $injected injected fault classes caught by their gate or passed as valid ($valid_passed of $valid_injected valid)"
echo "  => $fig_faults"

# ---------------------------------------------------------------------------------------------
echo
echo "2. malformed rows / refused with the right message"
rows=0
refused=0
for f in "$root"/tests/data/rows_bad/*.yaml "$root"/tests/data/rows_bad_limits/*.yaml; do
  rows=$((rows + 1))
  expect="$(sed -n 's/^# expect: //p' "$f" | head -n 1)"
  line="$(sed -n 's/^# line: //p' "$f" | head -n 1)"
  rc=0
  msg="$("$capq" rows check "$f" 2>&1 >/dev/null)" || rc=$?
  if [[ "$rc" != 0 && -n "$expect" && "$msg" == *"$f:$line:"* && "$msg" == *"$expect"* ]]; then
    refused=$((refused + 1))
  else
    failures=$((failures + 1))
    note "$(basename "$f")" "NOT refused as expected (exit $rc): $msg"
  fi
done
fig_rows="$refused of $rows malformed rows refused with the expected message and line"
echo "  => $fig_rows"

# ---------------------------------------------------------------------------------------------
echo
echo "3. fuzz executions with no crash"
IFS=: read -r -a fuzz_dirs <<<"$fuzz_dir"
execs=0
fuzz_split=""
ran=0
crashed=0
short=0
# Executions per target (libFuzzer -runs), so that the figure does not depend on how fast or busy
# the machine is: two targets run at a time, one per core, the fast pair first, and most runs go to
# the fast targets. One run of these counts on this shared 2-core box (fuzz preset: -O1, ASan +
# UBSan), side by side: SSE framer 22k/s, re-count gate 11k/s, chunk decoder 2.9k/s (its every run
# writes the raw record's JSON and parses it back), row loader 2.9k/s; 10M in 520 s of wall time.
# FUZZ_RUNS sets every target's count, FUZZ_RUNS_<name> one. The time cap (FUZZ_MAX_SECONDS per
# target) is a safety net only: a target it stops short of its count is reported and fails the run.
declare -A fuzz_default=([sse_framer]=5500000 [text_recount]=3500000 [chunk_decoder]=600000
  [row_loader]=400000)
# Input caps: the framer slows several-fold as its corpus grows to libFuzzer's 4096-byte default;
# 1024 bytes still cross every small cap its selector byte picks (1-128 bytes; the default cap is
# out of reach at 4096 too). The re-count target reads no more than 16 + 24 x 24 bytes.
declare -A fuzz_max_len=([sse_framer]=1024 [chunk_decoder]=4096 [row_loader]=4096 [text_recount]=592)
fuzz_names=(sse_framer text_recount chunk_decoder row_loader)
declare -A fuzz_bin fuzz_runs

# fuzz_one NAME: one target in its scratch corpus; its exit code goes to $work/NAME.fuzz.rc.
fuzz_one() {
  local name="$1" rc=0
  local corpus="$work/corpus-$name"
  mkdir -p "$corpus"
  # New inputs go to the scratch corpus (the first folder); the row loader also starts from the
  # project's real and malformed rows.
  local -a seeds=()
  if [[ "$name" == row_loader ]]; then seeds=("$root/rows/b70" "$root/tests/data/rows_bad"); fi
  "${fuzz_bin[$name]}" -runs="${fuzz_runs[$name]}" -max_total_time="$fuzz_max_s" \
    -max_len="${fuzz_max_len[$name]}" -print_final_stats=1 -artifact_prefix="$work/$name-" \
    "$corpus" "${seeds[@]}" >"$work/$name.fuzz.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$name.fuzz.rc"
}

# fuzz_executed LOG: the executions libFuzzer counted, from its final statistics (or its "Done N
# runs in S second(s)" line when the statistics are missing); 0 when neither is there.
fuzz_executed() {
  local n
  n="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$1" | tail -n 1)"
  if [[ -z "$n" ]]; then n="$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$1" | tail -n 1)"; fi
  echo "${n:-0}"
}

for name in "${fuzz_names[@]}"; do
  var="FUZZ_RUNS_$name"
  fuzz_runs[$name]="${!var:-${fuzz_runs_all:-${fuzz_default[$name]}}}"
  for dir in "${fuzz_dirs[@]}"; do
    for cand in "$dir/tests/capq_${name}_fuzz" "$dir/capq_${name}_fuzz"; do
      if [[ -z "${fuzz_bin[$name]:-}" && -x "$cand" ]]; then fuzz_bin[$name]="$cand"; fi
    done
  done
done
for pair in "sse_framer text_recount" "chunk_decoder row_loader"; do
  pids=()
  for name in $pair; do
    if [[ -n "${fuzz_bin[$name]:-}" ]]; then
      fuzz_one "$name" &
      pids+=("$!")
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
done
for name in "${fuzz_names[@]}"; do
  if [[ -z "${fuzz_bin[$name]:-}" ]]; then
    note "$name" "not built in $fuzz_dir"
    continue
  fi
  rc="$(cat "$work/$name.fuzz.rc" 2>/dev/null || echo lost)"
  n="$(fuzz_executed "$work/$name.fuzz.log")"
  secs="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$work/$name.fuzz.log" | tail -n 1)"
  ran=$((ran + 1))
  execs=$((execs + n))
  fuzz_split="${fuzz_split:+$fuzz_split, }$name $n"
  if [[ "$rc" != 0 ]]; then
    crashed=$((crashed + 1))
    failures=$((failures + 1))
    note "$name" "CRASH after $n executions (exit $rc): see $work/$name.fuzz.log"
  elif ((n < fuzz_runs[$name])); then
    short=$((short + 1))
    failures=$((failures + 1))
    note "$name" "SHORT: $n of ${fuzz_runs[$name]} executions in ${secs:-?}s, stopped by the ${fuzz_max_s}s cap, no crash"
  else
    note "$name" "$n executions in ${secs:-?}s, no crash (${fuzz_bin[$name]})"
  fi
done
if ((ran == 0)); then
  fig_fuzz="not measured: no fuzz build in $fuzz_dir (cmake --preset fuzz && cmake --build --preset fuzz)"
else
  fig_fuzz="$execs fuzz executions over $ran targets, $crashed crashes"
  fig_fuzz="$fig_fuzz ($fuzz_split)"
  if ((short > 0)); then fig_fuzz="$fig_fuzz ($short short of their count: time cap)"; fi
  if ((ran < ${#fuzz_names[@]})); then
    fig_fuzz="$fig_fuzz (only $ran of ${#fuzz_names[@]} targets built: cmake --build --preset fuzz)"
  fi
fi
echo "  => $fig_fuzz"

# ---------------------------------------------------------------------------------------------
echo
echo "4. interrupted runs that kept their data"
kept_runs=0
kept_records=0
mkdir -p "$work/interrupt"
for ((i = 1; i <= interrupts; i++)); do
  if ((i % 2)); then sig=INT; else sig=TERM; fi
  out="$work/interrupt/run$i"
  start_sim "interrupt$i" 1
  bg_trial "$slow" "$out" --url "$sim_url" --setup-timeout 20
  # Interrupt at a different point of each run: after 2 + i measured requests were generated.
  rc=0
  if wait_tokens $((16 * (4 + i))); then
    kill -s "$sig" "$trial_pid"
    wait_bounded "$trial_pid" 60 || rc=$?
  else
    rc=-1
  fi
  stop_sim
  have="$(completed_records "$out/raw.jsonl" 2>/dev/null || echo 0)"
  said="$(sed -n 's/.*interrupted: \([0-9]*\) of [0-9]* measured requests completed.*/\1/p' \
    "$out.log" | head -n 1)"
  vrc=0
  "$capq" validate "$out" >"$out.validate" 2>&1 || vrc=$?
  if [[ "$rc" == 130 && "$vrc" != 0 && "$have" == "${said:-x}" ]] &&
    grep -q "checksums: ok" "$out.validate" && grep -q "(incomplete)" "$out.validate" &&
    ! grep -q "re-derived verdict: pass" "$out.validate"; then
    kept_runs=$((kept_runs + 1))
    kept_records=$((kept_records + have))
    note "SIG$sig run $i" "exit 130, $have completed requests on disk, validate: incomplete"
  else
    failures=$((failures + 1))
    note "SIG$sig run $i" "LOST: exit $rc, $have on disk vs ${said:-?} reported, validate exit $vrc"
  fi
done
fig_interrupt="$kept_runs of $interrupts interrupted runs kept their data ($kept_records measured requests)"
echo "  => $fig_interrupt"

echo
echo "reliability figures:"
echo "  faults injected / caught:            $fig_faults"
echo "  malformed rows / refused:            $fig_rows"
echo "  fuzz executions with no crash:       $fig_fuzz"
echo "  interrupted runs that kept data:     $fig_interrupt"
if ((failures > 0)); then
  echo "FAILED: $failures checks did not hold"
  exit 1
fi
echo "all held"
