#!/usr/bin/env bash
# Launches the capacity post's SGLang server on the B70 box (seed, Part I), with the image pinned by
# digest and the model from a pinned snapshot, then waits until it is ready WITHOUT generating:
# /server_info answers only once the scheduler has reported its token pool, and reading it sends no
# request through the model (/health and /health_generate may both generate on SGLang).
#
# Environment:
#   MODEL_DIR        the pinned checkpoint snapshot (required), e.g. .../snapshots/<40-hex revision>
#   CONTAINER        a local container name (required)
#   IMAGE            repo@sha256:<digest> (default: the digest the b70 rows pin)
#   MODEL_REVISION   expected snapshot revision (default: the rows' model_revision); checked when
#                    MODEL_DIR ends in a 40-hex folder name
#   PORT             host port (default 30000)
#   READY_TIMEOUT_S  how long to wait for readiness (default 1800: loading and graph capture are slow)
#   REPLACE=1        remove an existing container of that name first (default: refuse)
set -euo pipefail

readonly PINNED_IMAGE='rahulunair/sglang-xpu@sha256:feb7b9130eff2fa26dfa09ab1a8b9a8423db013ad7d18f804f8b55a57cb2c175'
readonly PINNED_REVISION='2bf7f1646dc0875cff4404fdfef976cfb0ff2199'

IMAGE="${IMAGE:-$PINNED_IMAGE}"
MODEL_REVISION="${MODEL_REVISION:-$PINNED_REVISION}"
PORT="${PORT:-30000}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-1800}"
: "${MODEL_DIR:?set MODEL_DIR to the pinned checkpoint snapshot}"
: "${CONTAINER:?choose a local container name}"

die() {
  printf 'launch.sh: %s\n' "$*" >&2
  exit 1
}

# A tag is not an identity: only repo@sha256:<64 hex> is accepted.
[[ "$IMAGE" =~ ^[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}$ ]] ||
  die "IMAGE must be pinned by digest (repo@sha256:<64 hex>), got '$IMAGE'"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'"
[[ "$READY_TIMEOUT_S" =~ ^[0-9]+$ ]] || die "READY_TIMEOUT_S must be a number of seconds"
[[ -d "$MODEL_DIR" ]] || die "MODEL_DIR '$MODEL_DIR' is not a directory"
[[ -f "$MODEL_DIR/config.json" ]] || die "MODEL_DIR '$MODEL_DIR' has no config.json"
snapshot="$(basename -- "$(cd -- "$MODEL_DIR" && pwd -P)")"
if [[ "$snapshot" =~ ^[0-9a-f]{40}$ && "$snapshot" != "$MODEL_REVISION" ]]; then
  die "MODEL_DIR is snapshot $snapshot but the rows pin $MODEL_REVISION: requalify or fix MODEL_DIR"
fi

if docker container inspect "$CONTAINER" >/dev/null 2>&1; then
  if [[ "${REPLACE:-0}" == "1" ]]; then
    docker rm -f "$CONTAINER" >/dev/null
  else
    die "a container named '$CONTAINER' exists; remove it or set REPLACE=1"
  fi
fi

render_gid="$(getent group render | cut -d: -f3)"
[[ -n "$render_gid" ]] || die "no 'render' group on this host (Intel GPU driver missing?)"

SERVER_ARGS=(
  python -m sglang.launch_server
  --model-path /model --served-model-name Qwen3.8-27B
  --device xpu --tp-size 4 --host 0.0.0.0 --port 30000
  --trust-remote-code --nccl-port 41130
  --attention-backend intel_xpu --page-size 64
  --context-length 262144 --max-total-tokens 262144
  --chunked-prefill-size 4096 --mem-fraction-static 0.85
  --max-running-requests 64 --max-mamba-cache-size 48
  --disable-custom-all-reduce --watchdog-timeout 1800
  --cuda-graph-config
  '{"decode":{"backend":"full","bs":[1,2,4,8]},"prefill":{"backend":"disabled"}}'
  --skip-server-warmup --language-only
  --reasoning-parser qwen3-thinking --tool-call-parser qwen3_coder
  --strip-thinking-cache --enable-strict-thinking --enable-cache-report
  --speculative-algorithm EAGLE --speculative-num-steps 7
  --speculative-eagle-topk 1 --speculative-num-draft-tokens 8
)

printf 'launch.sh: starting %s as %s (model %s)\n' "$IMAGE" "$CONTAINER" "$MODEL_DIR"
docker run -d --name "$CONTAINER" \
  --device=/dev/dri -v /dev/dri:/dev/dri \
  --group-add video --group-add "$render_gid" \
  --ipc=host --shm-size=64g \
  --cap-add=SYS_PTRACE --security-opt seccomp=unconfined \
  --ulimit memlock=-1 --ulimit stack=67108864 \
  -p "$PORT:30000" \
  -e ONEAPI_DEVICE_SELECTOR=level_zero:gpu \
  -e XPU_REPO=/opt/xpu \
  -e XPU_DENSE_INT8_MAX_M=8 \
  -e XPU_SYMM_AR_MAX_BYTES=131072 \
  -v "$MODEL_DIR:/model:ro" \
  "$IMAGE" "${SERVER_ARGS[@]}" >/dev/null

url="http://127.0.0.1:$PORT"
deadline=$((SECONDS + READY_TIMEOUT_S))
# Older SGLang builds name it /get_server_info.
ready() {
  curl -fsS --max-time 5 -o /dev/null "$url/server_info" ||
    curl -fsS --max-time 5 -o /dev/null "$url/get_server_info"
}
until ready; do
  running="$(docker container inspect --format '{{.State.Running}}' "$CONTAINER" 2>/dev/null || true)"
  if [[ "$running" != "true" ]]; then
    docker logs --tail 50 "$CONTAINER" >&2 || true
    die "container '$CONTAINER' stopped before it was ready"
  fi
  if ((SECONDS >= deadline)); then
    docker logs --tail 50 "$CONTAINER" >&2 || true
    die "not ready at $url/server_info after ${READY_TIMEOUT_S} s"
  fi
  sleep 5
done

# The allocator, not the launch flag, decides the active limit (seed, Part I): show what it granted.
docker logs "$CONTAINER" 2>&1 | grep -E 'max_running_requests|max_total_num_tokens' | tail -n 2 || true
printf 'launch.sh: ready at %s (readiness: GET /server_info, no generation)\n' "$url"
