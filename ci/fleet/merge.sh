#!/usr/bin/env bash
# Merges a fleet's qualifications into one report: every capacity-data.json found under the given
# directories (downloaded GitHub Actions artifacts, or the Indexed Job's evidence volume) goes to
# `capq report DATA... --out OUT`, which writes one report.html over all their rows, each headed
# with the server it measured. Each qualification's own report.html stays where it is.
#   ci/fleet/merge.sh OUT.html DIR...
# CAPQ (default: capq on PATH, else build/harness/capq) names the binary.
set -euo pipefail
out="${1:?usage: merge.sh OUT.html DIR...}"
shift
[ $# -gt 0 ] || { echo "usage: merge.sh OUT.html DIR..." >&2; exit 2; }
capq="${CAPQ:-}"
if [ -z "$capq" ]; then
  if command -v capq >/dev/null 2>&1; then
    capq=capq
  else
    capq="$(cd "$(dirname "$0")/../.." && pwd)/build/harness/capq"
  fi
fi
data=()
while IFS= read -r -d '' f; do data+=("$f"); done \
  < <(find "$@" -name capacity-data.json -type f -print0 | sort -z)
if [ ${#data[@]} -eq 0 ]; then
  echo "merge.sh: no capacity-data.json under $*" >&2
  exit 3
fi
echo "merging ${#data[@]} qualifications into $out" >&2
exec "$capq" report "${data[@]}" --out "$out"
