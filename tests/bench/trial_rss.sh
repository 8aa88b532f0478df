#!/usr/bin/env bash
# Peak RSS of one whole `capq trial` (the real trial path: plan, load, recorder, evidence, decode,
# re-count, validate, seal) against a `capq sim` in its own process, and the size of the evidence
# it left. Prints one line per case: the trial's verdict beside its figures when it passed; when
# it did not, no figure, only its verdict and why (from its verdict.json, else from capq's exit
# code and last words). Exits 1 when a trial did not pass (targets: docs/performance.md).
#
# usage: tests/bench/trial_rss.sh [BUILD_DIR] [CASES...]
#   CASE = C:OUTPUT_TOKENS (default: 1024:32 4096:1024); every case sends C measured requests at
#   concurrency C, so all C streams are open together.
# env: EVIDENCE=auto|zstd|none  capq trial --evidence (default auto)
#      LOOPS=N|auto                capq trial --loops (default 1: every stream on one event loop);
#                                  with more than one, each loop's line follows its case's
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
shift || true
cases=("$@")
if ((${#cases[@]} == 0)); then cases=(1024:32 4096:1024); fi
capq="$build/harness/capq"
[[ -x "$capq" ]] || {
  echo "no capq at $capq" >&2
  exit 2
}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

work="$(mktemp -d "${TMPDIR:-/tmp}/capq-rss.XXXXXX")"
sim_pid=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n "$sim_pid" ]]; then
    kill -9 "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# An engine that runs every stream at once: the figures measure the client, not a queue.
cat >"$work/wide.yaml" <<'EOF'
name: rss_wide
served_model_name: sim-wide
model_path: capq/sim-wide
max_total_tokens: 20000000
page_size: 16
max_running_requests: 8192
chunked_prefill_size: 1048576
context_length: 8192
policy: prefill_first
b0_s: 0.004
b1_s_per_prefill_token: 1.0e-7
b3_s_per_decode_row: 1.0e-6
b4_s_per_decode_kv_token: 0
overhead_s: 0.0005
EOF

row() { # row C OUTPUT_TOKENS
  cat <<EOF
schema: capq/row/v1
id: rss_c$1_o$2
identity: {engine: sim, sim_profile: wide.yaml, time_scale: 1}
workload:
  input_tokens: 64
  output_tokens: $2
  sampling: {temperature: 0, ignore_eos: true}
  arrival: {kind: closed_loop}
cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}
warmup: {requests: 2, concurrency: 1}
measured: {min_requests: $1, per_concurrency: 1}
slo:
  - {metric: ttft, percentile: 95, below_ms: 600000}
trials: {count: 1, quiet_period_s: 0, seeds: [5]}
request_timeout_s: 1200
EOF
}

"$capq" sim --profile "$work/wide.yaml" >"$work/sim.out" 2>&1 &
sim_pid=$!
url=""
for ((i = 0; i < 200; i++)); do
  url="$(sed -n 's/^capq sim: listening on \(http:[^ ]*\) .*/\1/p' "$work/sim.out" 2>/dev/null ||
    true)"
  [[ -n "$url" ]] && break
  sleep 0.05
done
[[ -n "$url" ]] || {
  echo "capq sim did not start: $(cat "$work/sim.out")" >&2
  exit 1
}

# verdict_words RC DIR LOG: the trial's outcome and first reasons, from DIR/verdict.json (with jq),
# else the outcome its exit code RC means and the reasons capq printed in LOG (its last line when
# it printed none).
verdict_words() {
  local rc="$1" dir="$2" log="$3" outcome why
  if [[ -f "$dir/verdict.json" ]] && command -v jq >/dev/null; then
    jq -r '.outcome + ": "
      + (.reasons[:2] | map(if length > 240 then .[:240] + "..." else . end) | join("; "))
      + (if (.reasons | length) > 2 then " (+\(.reasons | length - 2) more)" else "" end)' \
      "$dir/verdict.json"
    return
  fi
  case "$rc" in
    0) outcome=pass ;;
    1) outcome=slo_fail ;;
    2) outcome=correctness_fail ;;
    3) outcome=could_not_run ;;
    130) outcome=interrupted ;;
    *) outcome="capq failed" ;;
  esac
  why="$(sed -n 's/^  - //p' "$log" | head -n 2 | cut -c1-240 |
    awk 'NR > 1 { printf "; " } { printf "%s", $0 }')"
  [[ -n "$why" ]] || why="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)"
  echo "$outcome: $why"
}

failed=0
printf '%-12s %-11s %-10s %-10s %-14s %s\n' case verdict "rss_MB" wall_s evidence file
for c in "${cases[@]}"; do
  conc="${c%%:*}" out_tokens="${c##*:}"
  row "$conc" "$out_tokens" >"$work/row_$conc.yaml"
  rc=0
  /usr/bin/time -f '%M %e' -o "$work/time.txt" "$capq" trial --row "$work/row_$conc.yaml" \
    --concurrency "$conc" --trial 1 --url "$url" --out "$work/t_$conc" --skip-quiet-period \
    --no-progress --evidence "${EVIDENCE:-auto}" --loops "${LOOPS:-1}" >"$work/trial_$conc.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    failed=1
    printf '%-12s %-11s %s\n' "$c" "exit$rc fail" \
      "$(verdict_words "$rc" "$work/t_$conc" "$work/trial_$conc.log")"
    rm -rf "$work/t_$conc"
    continue
  fi
  read -r kb wall < <(tail -n 1 "$work/time.txt")
  raw="$(find "$work/t_$conc" -maxdepth 1 -name 'raw.jsonl*' | head -1)"
  size="$(du -m "$raw" 2>/dev/null | cut -f1 || echo '?')"
  printf '%-12s %-11s %-10s %-10s %-14s %s\n' "$c" "exit0 pass" "$((kb / 1024))" "$wall" \
    "${size} MB" "$(basename "${raw:-none}")"
  if [[ -f "$work/t_$conc/metrics.json" ]] && command -v jq >/dev/null; then
    jq -r '(.load_loops // [])[] | "  loop \(.loop): \(.streams) streams, \(.events) events, "
      + "peak \(.peak_in_flight) in flight, send lateness p99 \(.send_lateness_p99_ms * 1000 | round / 1000) ms"' \
      "$work/t_$conc/metrics.json"
  fi
  rm -rf "$work/t_$conc"
done
exit "$failed"
