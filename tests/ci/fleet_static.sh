#!/usr/bin/env bash
# ctest (label unit): the fleet examples in ci/fleet/ cannot go stale unnoticed.
#   - both YAML files parse (python3 with PyYAML when installed; otherwise said, and only the
#     structural checks below run: no tabs, the keys each file must have);
#   - every rows/... path they name exists, and its `id:` is the id the file gives it;
#   - every flag on a `capq qualify` or `capq report` line is in that command's usage text
#     (harness/src/cli/cmd_qualify.cc, cmd_report.cc);
#   - the Indexed Job's completions equals the number of pairs in its ConfigMap.
set -euo pipefail
src="${1:?usage: fleet_static.sh SOURCE_DIR}"
gha="$src/ci/fleet/github-actions.yml"
k8s="$src/ci/fleet/k8s-indexed-job.yaml"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for f in "$gha" "$k8s"; do
  [[ -f "$f" ]] || { bad "missing $f"; continue; }
  if grep -q $'\t' "$f"; then bad "${f#"$src"/}: a tab (YAML indents with spaces)"; fi
done
[[ $fail -eq 0 ]] || exit 1

if command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$gha" "$k8s" <<'PY' || fail=1
import sys, yaml
for path in sys.argv[1:]:
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    except yaml.YAMLError as e:
        print(f"FAIL: {path}: {e}")
        sys.exit(1)
    print(f"parse: {path.split('/')[-1]}: {len(docs)} document(s)")
PY
else
  echo "parse: skipped (python3 with PyYAML not installed); structural checks only"
fi

# Keys each file must have.
for key in '^jobs:' '^  qualify:' '^    strategy:' '^        server:' '^        row:' 'upload-artifact'; do
  grep -qE "$key" "$gha" || bad "github-actions.yml: no line matching '$key'"
done
for key in '^kind: ConfigMap' '^kind: PersistentVolumeClaim' '^kind: Job' '^  completionMode: Indexed' \
    'JOB_COMPLETION_INDEX' 'exec capq qualify' 'claimName: capq-evidence'; do
  grep -qE "$key" "$k8s" || bad "k8s-indexed-job.yaml: no line matching '$key'"
done

# Rows: each exists; its id is the one the file gives it (the matrix's id:, or the file name).
row_id() { sed -n 's/^id:[[:space:]]*"\{0,1\}\([a-z][a-z0-9_]*\).*/\1/p' "$1" | head -n 1; }
nrows=0
while read -r row; do
  nrows=$((nrows + 1))
  [[ -f "$src/$row" ]] || { bad "row $row: no such file"; continue; }
  id=$(row_id "$src/$row")
  [[ "$id" == "$(basename "$row" .yaml)" ]] || bad "row $row: its id is '$id', not its file name"
done < <(grep -ohE 'rows/[A-Za-z0-9_./-]+\.yaml' "$gha" "$k8s" | sort -u)
[[ $nrows -gt 0 ]] || bad "no rows/... path in the fleet files"
# The matrix pairs id: with path: on the next line.
while read -r id path; do
  [[ -f "$src/$path" && "$(row_id "$src/$path")" == "$id" ]] \
    || bad "github-actions.yml: matrix row id $id does not match $path"
done < <(awk '/- id:/ {id = $3} /path: rows\// && id != "" {print id, $2; id = ""}' "$gha")
echo "rows: $nrows row files named and checked"

# Flags: each flag on a capq qualify / capq report line is in that command's usage text.
usage() { sed -n '/kUsage =/,/;$/p' "$src/harness/src/cli/$1"; }
nflags=0
for cmd in qualify report; do
  text=$(usage "cmd_$cmd.cc")
  [[ -n "$text" ]] || { bad "no usage text in cmd_$cmd.cc"; continue; }
  while read -r flag; do
    nflags=$((nflags + 1))
    grep -qE -- "\\[?${flag}([] \"]|\\\\n)" <<<"$text" || bad "capq $cmd $flag: not in cmd_$cmd.cc's usage"
  done < <(grep -hE "capq $cmd " "$gha" "$k8s" "$src/ci/fleet/merge.sh" \
    | grep -oE -- ' --[a-z][a-z0-9-]*' | sed 's/^ //' | sort -u)
done
echo "flags: $nflags capq flags checked against the usage texts"

# The Indexed Job runs one pod per pair.
pairs=$(awk '/pairs.txt: \|/ {on = 1; next} on && /^    [^ ]/ {n++} on && !/^    / {on = 0} END {print n + 0}' "$k8s")
completions=$(sed -n 's/^  completions:[[:space:]]*\([0-9]*\).*/\1/p' "$k8s")
[[ "$pairs" -gt 0 && "$pairs" == "$completions" ]] \
  || bad "k8s-indexed-job.yaml: completions ${completions:-none} but $pairs pairs"
echo "k8s: $pairs pairs, completions $completions"

[[ $fail -eq 0 ]] && echo "fleet examples: all checks pass"
exit "$fail"
