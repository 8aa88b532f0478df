#!/usr/bin/env bash
# ctest: every ci/ script and tests/bench script passes shellcheck. Exit 77 (ctest
# SKIP_RETURN_CODE) when shellcheck is not installed, so a missing tool is reported as skipped,
# never as a pass.
set -euo pipefail
src="${1:?usage: shellcheck.sh SOURCE_DIR}"
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "SKIPPED: shellcheck is not installed (ci/setup.sh installs it: apt-get install shellcheck)"
  exit 77
fi
shopt -s nullglob
files=()
for f in "$src"/ci/*.sh "$src"/ci/b70/*.sh "$src"/ci/capq "$src"/ci/test "$src"/tests/bench/*.sh; do
  [[ -f "$f" ]] && files+=("$f")
done
if [[ ${#files[@]} -eq 0 ]]; then
  echo "no ci/ scripts found under $src" >&2
  exit 1
fi
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p') on ${#files[@]} scripts:"
printf '  %s\n' "${files[@]#"$src"/}"
shellcheck --external-sources --severity=style "${files[@]}"
echo "all clean"
