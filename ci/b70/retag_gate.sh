#!/usr/bin/env bash
# The B70 retag gate: a tag is only a way to pull an image; the rows' capacity claims belong to the
# digest they pin (seed, Part I). Resolve TAG to its digest. If it is the digest every b70 row pins,
# run the b70 capacity tests against a server started from that digest and publish the trial
# directories and the JUnit XML. If it is not, fail with "requalify" and, where `capq qualify` is
# implemented, qualify the rows on the new image so the candidate rows are the artifacts to review.
#
# Environment:
#   TAG        the moving tag to check (default rahulunair/sglang-xpu:latest)
#   ROWS_DIR   the row family (default rows/b70)
#   BUILD_DIR  the build tree for this job (default build-b70)
#   OUT_DIR    artifacts: junit.xml, trials/, candidates/, gate.txt (default $BUILD_DIR/b70-gate)
#   LAUNCH     1 (default): start the server with ci/b70/launch.sh (needs MODEL_DIR, CONTAINER) and
#              stop it at the end; 0: use the server already at CAPQ_URL (CAPQ_CONTAINER for its image)
#   PULL       1 (default): docker pull TAG first
#   PORT       server port when launching (default 30000)
# Exit status: 0 claims hold; 1 claims failed or requalification needed; 2 usage/setup error.
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)"
TAG="${TAG:-rahulunair/sglang-xpu:latest}"
ROWS_DIR="${ROWS_DIR:-$root/rows/b70}"
BUILD_DIR="${BUILD_DIR:-$root/build-b70}"
OUT_DIR="${OUT_DIR:-$BUILD_DIR/b70-gate}"
LAUNCH="${LAUNCH:-1}"
PULL="${PULL:-1}"
PORT="${PORT:-30000}"

die() {
  printf 'retag_gate.sh: %s\n' "$*" >&2
  exit 2
}
note() {
  printf 'retag_gate.sh: %s\n' "$*" | tee -a "$OUT_DIR/gate.txt"
}

[[ -d "$ROWS_DIR" ]] || die "ROWS_DIR '$ROWS_DIR' is not a directory"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number"
mkdir -p -- "$OUT_DIR"
OUT_DIR="$(cd -- "$OUT_DIR" && pwd -P)"
: >"$OUT_DIR/gate.txt"

# 1. What does the tag point at now?
if [[ "$PULL" == "1" ]]; then
  docker pull --quiet "$TAG" >/dev/null
fi
resolved="$(docker image inspect --format '{{index .RepoDigests 0}}' "$TAG")" ||
  die "cannot resolve '$TAG' (docker image inspect failed)"
[[ "$resolved" =~ @(sha256:[0-9a-f]{64})$ ]] || die "'$TAG' resolved to '$resolved', not a digest"
resolved_digest="${BASH_REMATCH[1]}"
note "tag $TAG resolves to $resolved"

# 2. What do the rows pin? Row files are data: each identity.image value is matched against the
#    digest form and only ever used as a quoted string.
rows_seen=0
mismatched=()
for row in "$ROWS_DIR"/*.yaml; do
  [[ -e "$row" ]] || continue
  rows_seen=$((rows_seen + 1))
  image="$(sed -n 's/^  image:[[:space:]]*"\{0,1\}\([^"[:space:]#]*\).*$/\1/p' -- "$row" | head -n 1)"
  [[ "$image" =~ ^[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}$ ]] ||
    die "$row: identity.image '$image' is not pinned by digest"
  [[ "${image##*@}" == "$resolved_digest" ]] || mismatched+=("$(basename -- "$row") pins $image")
done
((rows_seen > 0)) || die "no row files in $ROWS_DIR"

# 3. Build the suite with the real-server families enabled (the default build leaves them disabled).
cmake -S "$root" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j 2 --target capq capq_capacity_suite
capq="$BUILD_DIR/harness/capq"

# 4. A server running exactly the image under test (started only when something will use it).
export CAPQ_URL="${CAPQ_URL:-http://127.0.0.1:$PORT}"
start_server() {
  [[ "$LAUNCH" == "1" ]] || return 0
  : "${CONTAINER:?set CONTAINER to the name of the server container, or LAUNCH=0}"
  trap 'docker rm -f "$CONTAINER" >/dev/null 2>&1 || true' EXIT
  IMAGE="$resolved" PORT="$PORT" REPLACE=1 bash "$root/ci/b70/launch.sh"
  # Trials read the running image's digest from the container (docker inspect), not from us.
  export CAPQ_CONTAINER="$CONTAINER"
}

if ((${#mismatched[@]} > 0)); then
  note "requalify: $TAG now resolves to $resolved_digest, but these rows pin another image:"
  for line in "${mismatched[@]}"; do note "  $line"; done
  note "the capacity claims belong to the pinned digest and do not carry over to a retagged image."
  if "$capq" qualify --help >/dev/null 2>&1; then
    note "running capq qualify on the new image; candidate rows go to $OUT_DIR/candidates"
    start_server
    rows=("$ROWS_DIR"/*.yaml)
    "$capq" qualify "${rows[@]}" --url "$CAPQ_URL" --out "$OUT_DIR/candidates" ||
      note "capq qualify failed (exit $?); see $OUT_DIR/candidates"
  else
    note "capq qualify is not available in this build: qualify the rows by hand on the new image."
  fi
  exit 1
fi

# 5. Same digest: the claims must still hold. Trial directories land in the artifacts directly.
start_server
note "every row pins $resolved_digest: running ctest -L family=b70 against $CAPQ_URL"
export CAPQ_CAPACITY_DIR="$OUT_DIR/trials"
rc=0
ctest --test-dir "$BUILD_DIR" -L 'family=b70' --output-on-failure \
  --output-junit "$OUT_DIR/junit.xml" || rc=$?
if ((rc == 0)); then
  note "PASS: every b70 capacity claim held on $resolved"
else
  note "FAIL: ctest exited $rc; see $OUT_DIR/junit.xml and the trial directories in $OUT_DIR/trials"
  rc=1
fi
exit "$rc"
