#!/usr/bin/env bash
# Installs capq's build dependencies from Debian 12 packages (as root) and builds a CMake preset
# (`default` unless `--preset NAME` comes first): everything, or only the CMake targets given as
# arguments. ci/capq builds just `capq` with the `main` preset (no debug info, build-main/), so the
# main job waits neither for the tests and benchmarks nor for the debug info the tests' build keeps.
# Quiet when everything is already there; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# openssl and shellcheck serve the reliability tests (a TLS server, the ci/ script lint).
packages=(cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev libcurl4-openssl-dev
  nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libevent-dev zlib1g-dev libzstd-dev libssl-dev
  openssl shellcheck)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "capq: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

preset=default
if [ "${1:-}" = --preset ]; then
  preset="${2:?usage: setup.sh [--preset NAME] [TARGET...]}"
  shift 2
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset "$preset" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
