#!/usr/bin/env bash
# What early decision saves: each row qualified twice in one run against its embedded simulator,
# once as capq runs by default (a trial stops once its verdict is certain) and once with
# --full-trials, side by side. Prints, per row, the wall seconds of each phase in both runs and
# their ratio, after checking that both runs proved the same Cmax with the same pass or fail for
# every trial (in any order); a row where they differ prints no figure, only why, and the script
# exits 1.
#
# usage: tests/bench/early_decision.sh [BUILD_DIR] [ROW...]
#   default rows: rows/sim/sim_small_reference.yaml, rows/sim/sim_small_heavy.yaml and the B70
#   8,192 / 1,024 row on the b70_twin profile (written here, and named b70_twin_8k1k as a ROW:
#   rows/b70's row with the simulator as its engine, time scale 40, 2 warm-ups and no quiet
#   period).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
shift || true
capq="$build/harness/capq"
[[ -x "$capq" ]] || {
  echo "no capq at $capq" >&2
  exit 2
}
work="$(mktemp -d "${TMPDIR:-/tmp}/capq-early.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The B70 reference 8K/1K row's workload and SLO on the twin profile.
twin="$work/b70_twin_8k1k.yaml"
cat >"$twin" <<EOF
schema: capq/row/v1
id: b70_twin_8k1k
title: The B70 8K in / 1K out row on the b70_twin profile
identity:
  engine: sim
  sim_profile: $root/rows/sim/profiles/b70_twin.yaml
  time_scale: 40
workload:
  input_tokens: 8192
  input_stddev_tokens: 0
  output_tokens: 1024
  output_stddev_tokens: 0
  sampling: {temperature: 0, ignore_eos: true}
  arrival: {kind: closed_loop}
  prompt_corpus: synthetic
cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}
warmup: {requests: 2, concurrency: 1}
measured: {min_requests: 64, per_concurrency: 4}
slo:
  - {metric: ttft, percentile: 95, below_ms: 10000}
percentile_method: linear
trials: {count: 3, quiet_period_s: 0, seeds: [101, 202, 303]}
request_timeout_s: 21600
EOF

rows=()
for r in "$@"; do
  if [[ "$r" == b70_twin_8k1k ]]; then rows+=("$twin"); else rows+=("$r"); fi
done
if ((${#rows[@]} == 0)); then
  rows=("$root/rows/sim/sim_small_reference.yaml" "$root/rows/sim/sim_small_heavy.yaml" "$twin")
fi

# One qualification; its capacity data in $2/capacity-data.json.
qualify() {
  local row="$1" out="$2"
  shift 2
  "$capq" qualify "$row" --out "$out" "$@" >"$out.log" 2>&1 || true
}

# Compares the two runs' capacity data and prints the row's table; exits 1 from python when the
# runs disagree.
compare() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys

def load(path):
    data = path + "/capacity-data.json"
    if not os.path.exists(data):
        tail = open(path + ".log").read().splitlines()[-5:]
        print("%s: no figure: no capacity data; its log ends:\n  %s"
              % (os.path.basename(path), "\n  ".join(tail)))
        sys.exit(1)
    return json.load(open(data))["rows"][0]

early, full = load(sys.argv[1]), load(sys.argv[2])
rid = early["row"]["id"] if isinstance(early["row"], dict) else early["row"]
def verdicts(q):
    return [(t["phase"], t.get("level", t.get("concurrency")), t["trial"], t["outcome"])
            for t in q["trials"]]
def cmax(q):
    return q["result"].get("cmax")
problems = []
if early["result"].get("status") != "proven" or full["result"].get("status") != "proven":
    problems.append("not proven: %s / %s" % (early["result"].get("status"),
                                               full["result"].get("status")))
if cmax(early) != cmax(full):
    problems.append("Cmax %s with early decision, %s without" % (cmax(early), cmax(full)))
# A trial is its phase, level and index (its seed and prompts follow from them): the same trials
# must have run with the same verdicts. The locator may probe them in another order, a decided
# failure's bound aiming it where the whole figure did not; that order is printed, not refused.
if sorted(verdicts(early)) != sorted(verdicts(full)):
    problems.append("the trials differ: %s vs %s" % (verdicts(early), verdicts(full)))
if problems:
    print("%s: no figure: %s" % (rid, "; ".join(problems)))
    sys.exit(1)
decided = sum(1 for t in early["trials"] if t.get("early_decision"))
def probes(q):
    return ", ".join("C=%s" % v[1] for v in verdicts(q) if v[0] == "probe")
order = ("" if verdicts(early) == verdicts(full) else
         "; probed in another order: %s with early decision, %s without" % (probes(early),
                                                                            probes(full)))
print("%s: Cmax %s both ways, %d trials with the same verdicts (%d decided early)%s"
      % (rid, cmax(early), len(early["trials"]), decided, order))
print("  %-9s %10s %10s %7s" % ("phase", "early s", "full s", "ratio"))
full_phases = {p["name"]: p["wall_s"] for p in full["phases"]}
for p in early["phases"]:
    f = full_phases.get(p["name"], float("nan"))
    print("  %-9s %10.1f %10.1f %7.2f" % (p["name"], p["wall_s"], f, p["wall_s"] / f))
print("  %-9s %10.1f %10.1f %7.2f   (%.0f%% less wall time)"
      % ("total", early["wall_s"], full["wall_s"], early["wall_s"] / full["wall_s"],
         100 * (1 - early["wall_s"] / full["wall_s"])))
PY
}

status=0
for row in "${rows[@]}"; do
  name="$(basename "$row" .yaml)"
  qualify "$row" "$work/$name-early"
  qualify "$row" "$work/$name-full" --full-trials
  compare "$work/$name-early" "$work/$name-full" || status=1
done
exit "$status"
