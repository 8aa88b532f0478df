#!/usr/bin/env bash
# ctest (label unit): static checks of the Dockerfile, which cannot be built where the tests run.
#   - every stage is FROM debian:12;
#   - the build stage's apt-get install names exactly the packages of ci/setup.sh (no drift);
#   - every path a COPY takes from the build context exists and is not left out by .dockerignore;
#   - the image runs as a non-root user with ENTRYPOINT capq.
set -euo pipefail
src="${1:?usage: container_static.sh SOURCE_DIR}"
dockerfile="$src/Dockerfile"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The Dockerfile's instructions, one a line (continuations joined, comments dropped).
instructions() {
  sed -e '/^[[:space:]]*#/d' "$dockerfile" | awk '
    /\\$/ { sub(/\\$/, ""); line = line $0 " "; next }
    { line = line $0; if (line ~ /[^[:space:]]/) print line; line = "" }'
}

# FROM: Debian 12 everywhere.
while read -r _ image _; do
  [[ "$image" == "debian:12" ]] || bad "FROM $image: every stage must be debian:12"
done < <(instructions | grep -E '^FROM ')
instructions | grep -qE '^FROM ' || bad "no FROM in $dockerfile"

# Packages: ci/setup.sh's packages=( ... ) against the first apt-get install of the Dockerfile.
setup_pkgs=$(sed -n '/^packages=(/,/)/p' "$src/ci/setup.sh" | sed -e 's/^packages=(//' -e 's/).*//' \
  | tr -s '[:blank:]' '\n' | sed '/^$/d' | sort)
docker_pkgs=$(instructions | grep -m1 'apt-get install' | sed 's/.*apt-get install//' \
  | sed 's/&&.*//' | tr -s '[:blank:]' '\n' | grep -v '^-' | sed '/^$/d' | sort)
[[ -n "$setup_pkgs" ]] || bad "no packages=( ... ) list in ci/setup.sh"
if [[ "$setup_pkgs" != "$docker_pkgs" ]]; then
  bad "the Dockerfile's build-stage packages differ from ci/setup.sh's (< setup.sh, > Dockerfile):"
  diff <(echo "$setup_pkgs") <(echo "$docker_pkgs") || true
else
  echo "packages: the build stage installs the $(echo "$setup_pkgs" | wc -l) packages of ci/setup.sh"
fi

# COPY from the build context: each source exists and .dockerignore keeps it in the context.
ignores=()
if [[ -f "$src/.dockerignore" ]]; then
  while IFS= read -r p; do ignores+=("$p"); done \
    < <(sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$src/.dockerignore")
fi
copies=0
while read -r -a words; do
  [[ "${words[1]}" == --from=* ]] && continue
  args=("${words[@]:1}")
  for ((i = 0; i < ${#args[@]} - 1; i++)); do
    path="${args[$i]%/}"
    [[ "$path" == --* ]] && continue
    copies=$((copies + 1))
    [[ -e "$src/$path" ]] || bad "COPY $path: no such path in the source tree"
    top="${path%%/*}"
    for p in "${ignores[@]}"; do
      # shellcheck disable=SC2053  # the .dockerignore pattern is a glob on purpose
      [[ "$top" == $p ]] && bad "COPY $path: .dockerignore leaves it out ($p)"
    done
  done
done < <(instructions | grep -E '^COPY ')
[[ $copies -gt 0 ]] || bad "no COPY from the build context"
echo "copy: $copies paths from the build context checked"

# Runs as a non-root user, capq as the entry point.
user=$(instructions | grep -E '^USER ' | tail -n 1 | awk '{print $2}')
[[ -n "$user" && "$user" != root && "$user" != 0 ]] || bad "the last USER must be a non-root user (is '${user:-none}')"
instructions | grep -qE '^ENTRYPOINT \["capq"\]' || bad 'no ENTRYPOINT ["capq"]'

[[ $fail -eq 0 ]] && echo "Dockerfile: all checks pass"
exit "$fail"
