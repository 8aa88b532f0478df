#!/usr/bin/env bash
# Renders a capq report.html to a PNG with headless Chromium (Debian package `chromium`), so the
# figures can be looked at. Not part of ctest: the report tests count figures and points; this is
# the eye check.
#
#   tests/report/render.sh REPORT.html OUT.png [WIDTH] [HEIGHT]
#   tests/report/render.sh --fixture OUT.png      # render the fixture capacity data first
#
# With --fixture it rebuilds report.html from tests/data/capacity/seed_like with `capq report`
# (CAPQ_BIN, default build/harness/capq).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"

if [[ "${1:-}" == "--fixture" ]]; then
  out="${2:?usage: render.sh --fixture OUT.png}"
  capq_bin="${CAPQ_BIN:-${root}/build/harness/capq}"
  work="$(mktemp -d)"
  cp "${root}/tests/data/capacity/seed_like/capacity-data.json" "${work}/"
  "${capq_bin}" report "${work}"
  html="${work}/report.html"
  shift 2
else
  html="${1:?usage: render.sh REPORT.html OUT.png [WIDTH] [HEIGHT]}"
  out="${2:?usage: render.sh REPORT.html OUT.png [WIDTH] [HEIGHT]}"
  shift 2
fi
width="${1:-1400}"
height="${2:-6000}"

chromium_bin="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "${chromium_bin}" ]]; then
  echo "render.sh: chromium not found (apt-get install chromium)" >&2
  exit 2
fi
profile="$(mktemp -d)"
trap 'rm -rf "${profile}"' EXIT
html_abs="$(cd "$(dirname "${html}")" && pwd)/$(basename "${html}")"
out_abs="$(cd "$(dirname "${out}")" && pwd)/$(basename "${out}")"
# No network: the report is self-contained, and every background service is switched off.
"${chromium_bin}" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="${profile}" --screenshot="${out_abs}" \
  --window-size="${width},${height}" "file://${html_abs}" 2>/dev/null
echo "render.sh: ${out_abs} (${width}x${height}) from ${html_abs}"
