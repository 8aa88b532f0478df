#!/usr/bin/env bash
# ctest (label docs): no shell example in README.md or docs/*.md can go stale unnoticed.
# Every ```sh block is either run or, when its info string says `norun=REASON` (a GPU server,
# Docker, a long build), checked without running:
#   - run: in a scratch folder holding a copy of rows/ and the build (as `build`), with `capq` on
#     PATH standing for the built binary and `bash ci/capq`, `build/harness/capq` and
#     `build-main/harness/capq` meaning it too (the set-up commands themselves are norun); the
#     block must exit 0 within 300 s; a port it names (`capq sim --port N &`, its URLs) is
#     replaced by one free here;
#   - norun: every capq subcommand it names must exist and every --flag after it must appear,
#     whole, in that subcommand's usage, and every repository path it names must exist.
# Both checks apply to every block; the `$ ` lines of a transcript (a plain ``` block of command
# and output) are checked as a norun block.
#   doc_examples.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="${1:?usage: doc_examples.sh SOURCE_DIR BUILD_DIR}"
build="${2:?usage: doc_examples.sh SOURCE_DIR BUILD_DIR}"
capq="$build/harness/capq"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$work/run" "$work/bin" "$work/blocks"
cp -r "$src/rows" "$work/run/rows"
ln -s "$build" "$work/run/build"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$capq" > "$work/bin/capq"
chmod +x "$work/bin/capq"

# Blocks: blocks/N.sh with blocks/N.where ("README.md:57") and blocks/N.info ("sh norun=setup").
# A fence may be indented (a block inside a list item); its lines lose that indent. The `$ `
# lines of any other block (a transcript: command, then output) are a norun block of their own.
n=0
for doc in "$src/README.md" "$src"/docs/*.md; do
  awk -v out="$work/blocks" -v doc="${doc#"$src"/}" -v start="$n" '
    function open_block(info) {
      n = start + (++k)
      print doc ":" FNR > (out "/" n ".where"); print info > (out "/" n ".info")
      printf "" > (out "/" n ".sh")
    }
    {
      line = $0
      if (inside) { sub("^" indent, "", line) }
    }
    line ~ /^[ ]*```/ {
      if (!inside) {
        match(line, /^[ ]*/); indent = substr(line, 1, RLENGTH)
        info = substr(line, RLENGTH + 4)
        if (info ~ /^sh( |$)/) { inside = 1; open_block(info) } else { inside = 2; shown = 0 }
      } else { inside = 0 }
      next
    }
    inside == 1 { print line >> (out "/" n ".sh") }
    inside == 2 && line ~ /^\$ / {
      if (!shown) { shown = 1; open_block("transcript norun=transcript") }
      print substr(line, 3) >> (out "/" n ".sh")
    }
    END { print start + k > (out "/count") }' "$doc"
  n=$(cat "$work/blocks/count")
done
echo "$n shell blocks in README.md and docs/"
[[ $n -gt 0 ]] || { bad "no shell block found"; exit 1; }

known_subcommands=$("$capq" --help 2>&1 | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' | sort -u)
usage_of() {  # the usage text of `capq SUB [VERB]`, however the subcommand prints it
  { "$capq" "$@" --help; "$capq" "$@"; } 2>&1
}

# Every capq invocation of a (continuation-joined) block: its subcommand must exist and each of its
# flags must be in the subcommand's usage.
check_capq_lines() {
  local block="$1" where="$2"
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$block" | sed 's/[[:space:]]#.*//' | while read -r line; do
    # shellcheck disable=SC2001
    rest=$(echo "$line" | sed -n 's/.*\(bash ci\/capq\|build\(-main\)\{0,1\}\/harness\/capq\|^capq\|[ ;&|(]capq\) \(.*\)/\3/p')
    [[ -n "$rest" ]] || continue
    read -r sub verb _ <<< "$rest"
    if ! grep -qx "$sub" <<< "$known_subcommands"; then
      case "$line" in
        *"bash ci/capq"*|*"harness/capq"*) echo "FAIL: $where: capq has no subcommand '$sub'";;
      esac
      continue
    fi
    usage=$(if [[ "$sub" == rows ]]; then usage_of rows "$verb"; else usage_of "$sub"; fi)
    grep -o -- '--[a-z][a-z-]*' <<< "$rest" | sort -u | while read -r flag; do
      grep -qE -- "$flag([^a-z-]|$)" <<< "$usage" || echo "FAIL: $where: capq $sub has no flag $flag"
    done
  done
}

free_port() {  # a port nothing listens on now, outside the kernel's ephemeral range
  local p
  while :; do
    p=$(( 20000 + RANDOM % 12000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

check_paths() {
  local block="$1" where="$2"
  # A path starts a word (build/harness/capq is the build's, not the repository's harness/).
  for p in $(grep -o '\(^\|[[:space:]=,"(]\)\(rows\|ci\|tests\|docs\|harness\|fixtures\|suites\)/[A-Za-z0-9_./,-]*' \
             "$block" | sed 's/^[[:space:]=,"(]//' | tr ',' '\n' | sort -u); do
    p="${p%/}"
    [[ "$p" == *OUT* || "$p" == rows/mine* ]] && continue
    [[ -e "$src/$p" ]] || echo "FAIL: $where: $p does not exist"
  done
}

for i in $(seq 1 "$n"); do
  block="$work/blocks/$i.sh" where=$(cat "$work/blocks/$i.where") info=$(cat "$work/blocks/$i.info")
  problems=$( { check_capq_lines "$block" "$where"; check_paths "$block" "$where"; } )
  if [[ -n "$problems" ]]; then
    echo "$problems"
    fail=1
  fi
  if [[ "$info" == *norun=* ]]; then
    echo "checked $where (${info#*norun=}: not run here)"
    continue
  fi
  sed -e 's#bash ci/capq #capq #g' -e 's#build-main/harness/capq #capq #g' \
    -e 's#build/harness/capq #capq #g' "$block" > "$work/run.sh"
  # A server the block starts (`capq sim --port N &`) gets a port free here, its URLs with it.
  while read -r port; do
    free=$(free_port)
    sed -i -e "s#127\.0\.0\.1:$port\b#127.0.0.1:$free#g" -e "s#--port $port\b#--port $free#g" \
      "$work/run.sh"
  done < <(grep -o -e '127\.0\.0\.1:[0-9][0-9]*' -e '--port [0-9][0-9]*' "$work/run.sh" \
           | grep -o '[0-9]*$' | sort -u)
  start=$(date +%s)
  # Its own process group, so that a server the block left running is stopped with it.
  (cd "$work/run" && PATH="$work/bin:$PATH" exec setsid timeout 300 bash -euo pipefail \
    "$work/run.sh") > "$work/out" 2>&1 &
  pid=$!
  wait "$pid"
  rc=$?
  kill -- "-$pid" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    bad "$where exited $rc:"
    sed 's/^/    /' "$work/out" | tail -n 30
  else
    echo "ran $where in $(( $(date +%s) - start )) s"
  fi
done
[[ $fail -eq 0 ]] && echo "every shell example of README.md and docs/ holds"
exit "$fail"
