# capq in a container: `docker run capq qualify ROW --url URL` on a runner or in a cluster.
#   docker build -t capq .
#   docker run --rm --network host -v "$PWD/evidence:/opt/capq/artifacts" capq \
#     qualify rows/sim/sim_small_reference.yaml
# Untested here: no Docker on the machine it was written on (docs/container-and-fleets.md).
# tests/ci/container_static.sh keeps the build stage's package list equal to ci/setup.sh's and
# checks that every path COPY names exists.

# Build stage: the packages of ci/setup.sh, then capq alone with the main (Release -O2) preset.
FROM debian:12 AS build
# Same list as ci/setup.sh, in its own layer so a source edit does not reinstall it.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev libcurl4-openssl-dev \
      nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libevent-dev zlib1g-dev libzstd-dev libssl-dev \
      openssl shellcheck \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt CMakePresets.json ./
COPY ci/ ci/
COPY harness/ harness/
COPY fixtures/ fixtures/
COPY suites/ suites/
COPY tests/ tests/
COPY rows/ rows/
# ci/setup.sh finds every package installed, configures the `main` preset (no debug info) and
# builds `capq` only, as the README's main job does.
RUN bash ci/setup.sh --preset main capq \
 && mkdir -p /out \
 && strip --strip-debug -o /out/capq build-main/harness/capq
# The runtime packages are those owning the shared libraries the binary loads, so this list cannot
# drift from the link line.
RUN ldd /out/capq | awk '$2 == "=>" && $3 ~ /^\// {print $3}' \
    | while read -r lib; do dpkg -S "*/${lib##*/}"; done \
    | cut -d: -f1 | tr ',' '\n' | sed 's/ //g' | sort -u > /out/runtime-packages \
 && cat /out/runtime-packages

# Runtime stage: the shared libraries capq loads and ca-certificates (a server behind HTTPS).
FROM debian:12
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && xargs -a /tmp/runtime-packages env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && useradd --system --uid 10001 --user-group --home-dir /opt/capq --no-create-home capq
COPY --from=build /out/capq /usr/local/bin/capq
COPY --from=build /src/rows/ /opt/capq/rows/
# Rows are read from rows/ as in the README; artifacts/ (the default --out) is the volume to mount.
RUN mkdir -p /opt/capq/artifacts && chown capq:capq /opt/capq/artifacts
WORKDIR /opt/capq
USER capq
VOLUME ["/opt/capq/artifacts"]
ENTRYPOINT ["capq"]
CMD ["--help"]
