// capq rows new as a user runs it, against the embedded simulator started here: in each dialect
// the row it writes passes `capq rows check` and a C=1 `capq trial`; what the server cannot tell
// is a TODO that `rows check` refuses at its line until it is filled in; --container asks docker;
// --baseline records the C=1 medians; bad arguments and an unreachable server are named.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "capq/sim/server.h"
#include "cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using capq::sim::Dialect;
using capq::sim::SimServer;
using capq::testing::Capq;
using capq::testing::Read;
using capq::testing::StartSim;

fs::path FreshDir(const std::string& name) {
  return capq::testing::FreshDir("capq_rows_new_", name);
}

const std::string kSource = CAPQ_SOURCE_DIR;
const std::string kSlo = "ttft p95 < 10s";

std::string Profile(const std::string& name) { return kSource + "/rows/sim/profiles/" + name; }

std::vector<std::string> NewArgs(const SimServer& sim, const std::string& engine,
                                 const fs::path& out) {
  return {"rows", "new",   "--url", sim.url(), "--engine", engine,  "--isl",
          "128",  "--osl", "16",    "--slo",   kSlo,       "--out", out.string()};
}

// Replaces every `key: "TODO: ..."` line's value by `value`.
std::string Filled(std::string yaml, const std::string& key, const std::string& value) {
  const size_t at = yaml.find(key + ": \"TODO:");
  EXPECT_NE(at, std::string::npos) << key << "\n" << yaml;
  if (at == std::string::npos) return yaml;
  const size_t end = yaml.find('\n', at);
  yaml.replace(at, end - at, key + ": " + value);
  return yaml;
}

TEST(RowsNewCommand, EachDialectWritesARowThatChecksAndPassesACEqualsOneTrial) {
  const struct {
    const char* engine;
    const char* profile;
    Dialect dialect;
  } cases[] = {{"sim", "small.yaml", Dialect::kSglang},
               {"sim:vllm", "small.yaml", Dialect::kVllm},
               {"sim:llamacpp", "llamacpp_tiny.yaml", Dialect::kLlamacpp}};
  for (const auto& c : cases) {
    const fs::path dir = FreshDir(std::string("dialect_") + c.profile + "_" +
                                  std::to_string(static_cast<int>(c.dialect)));
    auto sim = StartSim(Profile(c.profile), c.dialect);
    ASSERT_TRUE(sim);
    const fs::path row = dir / "mine.yaml";
    std::vector<std::string> args = NewArgs(*sim, c.engine, row);
    args.insert(args.end(), {"--profile", Profile(c.profile)});
    std::string out;
    ASSERT_EQ(Capq(args, &out), 0) << c.engine << "\n" << out;
    EXPECT_EQ(sim->requests_received(), 0) << "rows new generated\n" << out;
    const std::string yaml = Read(row);
    EXPECT_EQ(yaml.find("\"TODO:"), std::string::npos) << c.engine << "\n" << yaml;
    EXPECT_NE(yaml.find("id: mine\n"), std::string::npos) << yaml;
    EXPECT_NE(yaml.find("server_expect:"), std::string::npos) << yaml;
    EXPECT_NE(yaml.find("- {metric: ttft, percentile: 95, below_ms: 10000}"), std::string::npos);
    EXPECT_NE(yaml.find("# The chat template: "), std::string::npos) << yaml;
    EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 0) << c.engine << "\n" << out;
    EXPECT_EQ(Capq({"trial", "--row", row.string(), "--concurrency", "1", "--trial", "1", "--url",
                    sim->url(), "--out", (dir / "trial").string()},
                   &out),
              0)
        << c.engine << "\n"
        << out;
    EXPECT_NE(out.find("verdict: pass"), std::string::npos) << out;
  }
}

// A real engine's adapter against the simulator speaking its dialect: the image, revision,
// hardware and driver are nowhere on the server, so they are TODOs until a person fills them in.
TEST(RowsNewCommand, WhatTheServerCannotTellIsATodoThatRowsCheckRefusesUntilFilled) {
  const fs::path dir = FreshDir("todo");
  auto sim = StartSim(Profile("llamacpp_tiny.yaml"), Dialect::kLlamacpp);
  ASSERT_TRUE(sim);
  const fs::path row = dir / "tiny.yaml";
  std::string out;
  ASSERT_EQ(Capq(NewArgs(*sim, "llamacpp", row), &out), 0) << out;
  for (const char* key :
       {"identity.image", "identity.model_revision", "identity.hardware", "identity.driver"}) {
    EXPECT_NE(out.find(std::string("TODO  ") + key + ": "), std::string::npos) << key << out;
  }
  std::string yaml = Read(row);
  EXPECT_NE(yaml.find("total_slots: "), std::string::npos) << yaml;
  EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 1) << out;
  EXPECT_NE(out.find("tiny.yaml:"), std::string::npos) << out;
  EXPECT_NE(out.find(": identity.image: not filled in: \"TODO: no --container named"),
            std::string::npos)
      << out;
  yaml = Filled(yaml, "image", "local/llama-server@sha256:" + std::string(64, 'a'));
  yaml = Filled(yaml, "model_revision", std::string(40, 'b'));
  yaml = Filled(yaml, "hardware", "2-core x86-64 VM");
  // One TODO left is still refused, at its own key.
  std::ofstream(row) << yaml;
  EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 1) << out;
  EXPECT_NE(out.find(": identity.driver: not filled in"), std::string::npos) << out;
  std::ofstream(row) << Filled(yaml, "driver", "\"none\"");
  EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 0) << out;
}

// The TODO lines `capq rows new` listed on stderr, key by key ("identity.image", ...).
std::vector<std::string> TodoKeys(const std::string& out) {
  std::vector<std::string> keys;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("TODO  ", 0) == 0) keys.push_back(line.substr(6, line.find(':') - 6));
  }
  return keys;
}

// Each real engine's adapter against the simulator speaking its dialect, as a user points capq at
// a server: every limit the server reports is pinned and only what it cannot tell is left to a
// person; once that is filled in the row checks and passes a C=1 trial (the running image given as
// the header's run line says). The vLLM dialect reports its KV pool in the vllm:cache_config_info
// gauge as vLLM does, so num_gpu_blocks and block_size are pinned from it.
TEST(RowsNewCommand, EachEngineAdapterWritesARowThatChecksOnceFilledAndRunsACEqualsOneTrial) {
  const std::vector<std::string> unknowable = {"identity.image", "identity.model_revision",
                                               "identity.hardware", "identity.driver"};
  const struct {
    const char* engine;
    const char* profile;
    Dialect dialect;
    const char* pinned;  // a limit the server reported, as the row pins it
  } cases[] = {{"sglang", "small.yaml", Dialect::kSglang, "    max_running_requests: 6\n"},
               {"vllm", "small.yaml", Dialect::kVllm, "    num_gpu_blocks: 768\n"},
               {"llamacpp", "llamacpp_tiny.yaml", Dialect::kLlamacpp, "    total_slots: 8\n"}};
  const std::string image = "local/server@sha256:" + std::string(64, 'e');
  for (const auto& c : cases) {
    const fs::path dir = FreshDir(std::string("adapter_") + c.engine);
    auto sim = StartSim(Profile(c.profile), c.dialect);
    ASSERT_TRUE(sim);
    const fs::path row = dir / "real.yaml";
    std::string out;
    ASSERT_EQ(Capq(NewArgs(*sim, c.engine, row), &out), 0) << c.engine << "\n" << out;
    EXPECT_EQ(sim->requests_received(), 0) << "rows new generated\n" << out;
    EXPECT_EQ(TodoKeys(out), unknowable) << c.engine << "\n" << out;
    std::string yaml = Read(row);
    EXPECT_NE(yaml.find(c.pinned), std::string::npos) << c.engine << "\n" << yaml;
    EXPECT_NE(yaml.find("# Run: CAPQ_IMAGE_DIGEST=<identity.image> capq qualify THIS_FILE --url " +
                        sim->url()),
              std::string::npos)
        << yaml;
    yaml = Filled(yaml, "image", "\"" + image + "\"");
    yaml = Filled(yaml, "model_revision", std::string(40, 'f'));
    yaml = Filled(yaml, "hardware", "\"2-core x86-64 VM\"");
    yaml = Filled(yaml, "driver", "\"none\"");
    // A real server's default quiet period (15 s between trials) is more than a simulator needs.
    const std::string quiet_real = "quiet_period_s: 15}";
    const size_t quiet = yaml.find(quiet_real);
    ASSERT_NE(quiet, std::string::npos) << yaml;
    std::ofstream(row) << yaml.replace(quiet, quiet_real.size(), "quiet_period_s: 0}");
    EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 0) << c.engine << "\n" << out;
    setenv("CAPQ_IMAGE_DIGEST", image.c_str(), 1);
    const int trial = Capq({"trial", "--row", row.string(), "--concurrency", "1", "--trial", "1",
                            "--url", sim->url(), "--out", (dir / "trial").string()},
                           &out);
    unsetenv("CAPQ_IMAGE_DIGEST");
    EXPECT_EQ(trial, 0) << c.engine << "\n" << out;
    EXPECT_NE(out.find("verdict: pass (exit 0)"), std::string::npos) << c.engine << "\n" << out;
  }
}

// A vLLM launched without metrics reports no KV pool: the limits its row must pin are TODOs that
// say where vLLM reports them, and rows check stops at the first one by name.
TEST(RowsNewCommand, ALimitTheRowMustPinThatTheServerLeavesOutIsATodoNamingWhereItIsReported) {
  const fs::path dir = FreshDir("unreported");
  std::ofstream(dir / "no_metrics.yaml") << Read(Profile("small.yaml")) << "\nmetrics: false\n";
  auto sim = StartSim((dir / "no_metrics.yaml").string(), Dialect::kVllm);
  ASSERT_TRUE(sim);
  const fs::path row = dir / "blind.yaml";
  std::vector<std::string> args = NewArgs(*sim, "vllm", row);
  args[11] = "ttft p95 < 10s, itl p99 < 50ms";
  std::string out;
  ASSERT_EQ(Capq(args, &out), 0) << out;
  const std::vector<std::string> keys = TodoKeys(out);
  for (const char* key :
       {"identity.server_expect.num_gpu_blocks", "identity.server_expect.block_size"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key << "\n" << out;
  }
  const std::string yaml = Read(row);
  EXPECT_NE(yaml.find("    max_model_len: 8192\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("    num_gpu_blocks: \"TODO: the server did not report it; vllm reports it "
                      "at /metrics vllm:cache_config_info{num_gpu_blocks=...}"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  - {metric: ttft, percentile: 95, below_ms: 10000}\n"
                      "  - {metric: itl, percentile: 99, below_ms: 50}\n"),
            std::string::npos)
      << yaml;
  std::string filled = yaml;
  for (const char* key : {"image", "model_revision", "hardware", "driver"}) {
    filled = Filled(filled, key,
                    key == std::string("image") ? "\"v/v@sha256:" + std::string(64, 'a') + "\""
                                                : "\"" + std::string(40, 'b') + "\"");
  }
  std::ofstream(row) << filled;
  EXPECT_EQ(Capq({"rows", "check", row.string()}, &out), 1) << out;
  EXPECT_NE(out.find("blind.yaml:"), std::string::npos) << out;
  EXPECT_NE(out.find(": identity.server_expect.num_gpu_blocks: not filled in: \"TODO: the server "
                     "did not report it"),
            std::string::npos)
      << out;
}

// PATH holds only a stand-in runtime: the image digest comes from `docker inspect`, else `podman
// inspect`, of the named container, or its TODO says why not.
void StandInRuntime(const fs::path& bin, const std::string& runtime, const std::string& digest) {
  fs::create_directories(bin);
  std::ofstream(bin / runtime) << "#!/bin/sh\n"
                                  "if [ \"$1\" = inspect ]; then echo sha256:1234; exit 0; fi\n"
                                  "echo '"
                               << digest << " other@sha256:00'\n";
  fs::permissions(bin / runtime, fs::perms::owner_all);
}

TEST(RowsNewCommand, ContainerImageDigestComesFromDockerOrPodmanOrItsTodoSaysWhy) {
  const fs::path dir = FreshDir("docker");
  auto sim = StartSim(Profile("small.yaml"), Dialect::kVllm);
  ASSERT_TRUE(sim);
  const fs::path bin = dir / "bin";
  const std::string path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", bin.c_str(), 1);
  struct Run {
    int rc;
    std::string out, yaml;
  };
  auto run = [&](const std::string& name) {
    std::vector<std::string> args = NewArgs(*sim, "vllm", dir / (name + ".yaml"));
    args.insert(args.end(), {"--container", "vllm-a"});
    Run r;
    r.rc = Capq(args, &r.out);
    r.yaml = Read(dir / (name + ".yaml"));
    return r;
  };
  const std::string docker_digest = "vllm/vllm-openai@sha256:" + std::string(64, 'c');
  const std::string podman_digest = "quay.io/vllm/vllm@sha256:" + std::string(64, 'd');
  StandInRuntime(bin, "docker", docker_digest);
  const Run docker = run("docker");
  fs::remove(bin / "docker");
  StandInRuntime(bin, "podman", podman_digest);
  const Run podman = run("podman");
  fs::remove(bin / "podman");
  const Run neither = run("neither");
  setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(docker.rc, 0) << docker.out;
  EXPECT_NE(docker.yaml.find("image: \"" + docker_digest + "\"\n"), std::string::npos)
      << docker.yaml;
  EXPECT_EQ(docker.out.find("TODO  identity.image"), std::string::npos) << docker.out;
  EXPECT_EQ(podman.rc, 0) << podman.out;
  EXPECT_NE(podman.yaml.find("image: \"" + podman_digest + "\"\n"), std::string::npos)
      << podman.yaml;
  EXPECT_EQ(podman.out.find("TODO  identity.image"), std::string::npos) << podman.out;
  EXPECT_EQ(neither.rc, 0) << neither.out;
  EXPECT_NE(neither.out.find("TODO  identity.image: neither docker nor podman can be run: "
                             "docker inspect vllm-a: "),
            std::string::npos)
      << neither.out;
  EXPECT_NE(neither.yaml.find("image: \"TODO: neither docker nor podman can be run"),
            std::string::npos)
      << neither.yaml;
}

TEST(RowsNewCommand, BaselineRecordsTheCEqualsOneMediansTheLoaderReadsBack) {
  const fs::path dir = FreshDir("baseline");
  auto sim = StartSim(Profile("small.yaml"), Dialect::kSglang);
  ASSERT_TRUE(sim);
  const fs::path row = dir / "base.yaml";
  std::vector<std::string> args = NewArgs(*sim, "sim", row);
  args.insert(args.end(), {"--profile", Profile("small.yaml"), "--baseline"});
  std::string out;
  ASSERT_EQ(Capq(args, &out), 0) << out;
  EXPECT_GT(sim->requests_received(), 0) << "the baseline trial ran against the server";
  const std::string yaml = Read(row);
  EXPECT_NE(yaml.find("expect:\n  baseline: {ttft_p50_ms: "), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("itl_p50_ms: "), std::string::npos) << yaml;
  EXPECT_EQ(Capq({"rows", "show", "base", "--rows", dir.string()}, &out), 0) << out;
  EXPECT_NE(out.find("baseline:"), std::string::npos) << out;
}

TEST(RowsNewCommand, BadArgumentsAndAnUnreachableServerAreNamed) {
  const fs::path dir = FreshDir("bad");
  auto sim = StartSim(Profile("small.yaml"), Dialect::kSglang);
  ASSERT_TRUE(sim);
  std::string out;
  std::vector<std::string> args = NewArgs(*sim, "sim", dir / "x.yaml");
  args[11] = "ttft p95 > 10s";
  EXPECT_EQ(Capq(args, &out), 2) << out;
  EXPECT_NE(out.find("--slo \"ttft p95 > 10s\": '>' is not '<'"), std::string::npos) << out;
  args[11] = "ttfb p95 < 10s";
  EXPECT_EQ(Capq(args, &out), 2) << out;
  EXPECT_NE(out.find("metric 'ttfb' is not ttft, itl or e2e"), std::string::npos) << out;
  args = NewArgs(*sim, "tgi", dir / "x.yaml");
  EXPECT_EQ(Capq(args, &out), 2) << out;
  EXPECT_NE(out.find("unknown engine 'tgi'"), std::string::npos) << out;
  std::ofstream(dir / "taken.yaml") << "kept\n";
  EXPECT_EQ(Capq(NewArgs(*sim, "sim", dir / "taken.yaml"), &out), 2) << out;
  EXPECT_NE(out.find("taken.yaml exists: not overwritten"), std::string::npos) << out;
  EXPECT_EQ(Read(dir / "taken.yaml"), "kept\n");
  args = NewArgs(*sim, "sim", dir / "x.yaml");
  args[3] = "http://127.0.0.1:1";
  args.insert(args.end(), {"--timeout", "0.5"});
  EXPECT_EQ(Capq(args, &out), 3) << out;
  EXPECT_FALSE(fs::exists(dir / "x.yaml"));
}

}  // namespace
