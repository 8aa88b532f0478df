#!/usr/bin/env bash
# ctest (label unit): ci/fleet/merge.sh merges a fleet's qualifications into one report. Three
# evidence directories as a fleet's jobs leave them (two servers; the second qualified one row less)
# go through merge.sh with the built capq; the page must hold every row of every directory, the
# surface across both servers, and each directory's own report must be left as it was.
set -euo pipefail
src="${1:?usage: fleet_merge.sh SOURCE_DIR CAPQ}"
capq="${2:?usage: fleet_merge.sh SOURCE_DIR CAPQ}"
fixture="$src/tests/data/capacity/seed_like/capacity-data.json"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Job layout: evidence/<server>-<row>/qualify-<row>-<utc>/capacity-data.json, one row per job.
split_job() {  # server_port image_hex row_index dir
  python3 - "$fixture" "$1" "$2" "$3" "$4" <<'PY'
import json, os, sys
fixture, port, image_hex, index, out = sys.argv[1:]
d = json.load(open(fixture))
q = d["rows"][int(index)]
q["url"] = f"http://127.0.0.1:{port}"
if image_hex:
    q["row"]["identity"]["image"] = "rahulunair/sglang-xpu@sha256:" + image_hex
d["rows"] = [q]
os.makedirs(out, exist_ok=True)
json.dump(d, open(os.path.join(out, "capacity-data.json"), "w"), indent=1)
PY
}
split_job 30000 "" 0 "$work/evidence/a-r0/qualify-r0-1"
split_job 30000 "" 1 "$work/evidence/a-r1/qualify-r1-1"
split_job 30000 "" 2 "$work/evidence/a-r2/qualify-r2-1"
split_job 30001 0123456789abcdef0123 0 "$work/evidence/b-r0/qualify-r0-1"
split_job 30001 0123456789abcdef0123 1 "$work/evidence/b-r1/qualify-r1-1"
echo "kept" > "$work/evidence/a-r0/qualify-r0-1/report.html"

CAPQ="$capq" bash "$src/ci/fleet/merge.sh" "$work/fleet.html" "$work/evidence" \
  > "$work/stdout" 2> "$work/stderr" || { cat "$work/stderr"; bad "merge.sh exited $?"; }
grep -q 'merging 5 qualifications' "$work/stderr" || bad "merge.sh did not find all 5: $(cat "$work/stderr")"
grep -q '(5 rows)' "$work/stdout" || bad "capq report did not merge 5 rows: $(cat "$work/stdout")"
page="$work/fleet.html"
[[ -s "$page" ]] || { bad "no merged page"; exit 1; }
for id in b70_qwen38_27b_2k512 b70_qwen38_27b_8k1k b70_qwen38_27b_16k2k; do
  grep -q "<section id=\"row-$id\"" "$page" || bad "the merged page has no section for $id"
done
grep -q 'and 2 servers' "$page" || bad "the surface does not span both servers"
[[ "$(grep -o '<rect class="bar row srv1"' "$page" | wc -l)" -eq 2 ]] ||
  bad "the second server's two rows are not its own bars on the surface"
grep -q 'at http://127.0.0.1:30001' "$page" || bad "the second server is not named"
[[ "$(cat "$work/evidence/a-r0/qualify-r0-1/report.html")" == kept ]] ||
  bad "merge.sh rewrote a job's own report"

# Nothing to merge is an error, not an empty page.
mkdir -p "$work/empty"
if CAPQ="$capq" bash "$src/ci/fleet/merge.sh" "$work/none.html" "$work/empty" 2>/dev/null; then
  bad "merge.sh over no capacity data exited 0"
fi
[[ ! -e "$work/none.html" ]] || bad "merge.sh over no capacity data wrote a page"
[[ $fail -eq 0 ]] && echo "fleet merge: 5 qualifications of 2 servers in one page"
exit "$fail"
