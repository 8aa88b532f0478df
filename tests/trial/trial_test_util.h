// Helpers for the trial tests: a sim row with a small workload, a scratch folder, a loopback
// simulator. Large time scales keep each trial around a second of wall time.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "capq/model/row_loader.h"
#include "capq/sim/server.h"
#include "capq/trial/trial.h"

namespace capq::testing {

struct SimRowSpec {
  double time_scale = 100;
  int input_tokens = 64;
  int output_tokens = 16;
  double slo_below_ms = 100000;
  int warmups = 2;
  int min_requests = 20;
  double request_timeout_s = 600;  // virtual seconds
  std::string server_expect;       // extra lines under identity (already indented), optional
  std::string correctness;         // a `correctness:` block (unindented lines), optional
  std::string slo_tiers;           // a `slo_tiers:` block (unindented lines), optional
};

inline Row MakeSimRow(const SimRowSpec& s) {
  std::string yaml = R"(schema: capq/row/v1
id: trial_test_row
identity:
  engine: sim
  sim_profile: profiles/small.yaml
  time_scale: )" + std::to_string(s.time_scale) +
                     "\n" + s.server_expect + R"(workload:
  input_tokens: )" + std::to_string(s.input_tokens) +
                     R"(
  output_tokens: )" + std::to_string(s.output_tokens) +
                     R"(
  sampling: {temperature: 0, ignore_eos: true}
  arrival: {kind: closed_loop}
cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}
warmup: {requests: )" +
                     std::to_string(s.warmups) +
                     R"(, concurrency: 1}
measured: {min_requests: )" +
                     std::to_string(s.min_requests) +
                     R"(, per_concurrency: 1}
slo:
  - {metric: ttft, percentile: 95, below_ms: )" +
                     std::to_string(s.slo_below_ms) + "}\n" + s.slo_tiers +
                     R"(trials: {count: 3, quiet_period_s: 0, seeds: [11, 22, 33]}
request_timeout_s: )" +
                     std::to_string(s.request_timeout_s) + "\n" + s.correctness;
  Result<Row> row =
      LoadRowFromString(yaml, std::string(CAPQ_SOURCE_DIR) + "/rows/sim/trial_test_row.yaml");
  EXPECT_TRUE(row.ok()) << row.status().ToString() << "\n" << yaml;
  return row.ok() ? *row : Row{};
}

// The qualify tests' tiny row (tests/data/capacity/rows/qualify_tiny.yaml): C=6 passes, C=7 fails.
inline Row QualifyTinyRow() {
  Result<Row> row =
      LoadRow(std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/rows/qualify_tiny.yaml");
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return row.ok() ? *row : Row{};
}

inline std::string ScratchDir(const std::string& name) {
  std::string d =
      std::string(CAPQ_BINARY_DIR) + "/test-scratch/h5-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::string WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

inline std::unique_ptr<sim::SimServer> StartSim(const Row& row, const std::string& faults = "",
                                                const std::string& truth = "",
                                                double time_scale = 0) {
  sim::ServerOptions o = sim::ServerOptionsForRow(row);
  if (time_scale > 0) o.time_scale = time_scale;
  o.faults_path = faults;
  o.truth_log_path = truth;
  auto s = sim::SimServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

inline TrialOptions Options(const std::string& url, const std::string& dir, int c = 1) {
  TrialOptions o;
  o.url = url;
  o.out_dir = dir;
  o.level = c;
  o.trial_index = 1;
  o.skip_quiet_period = true;
  o.setup_timeout_s = 5;
  o.command_line = "capq trial (test)";
  return o;
}

// Runs `row` against `sim` and interrupts it (TrialOptions::cancel) once the server has received
// `requests` chat requests, as a signal handler would.
inline TrialReport RunTrialInterruptedAfter(const Row& row, sim::SimServer& sim,
                                            const std::string& out_dir, int requests) {
  std::atomic<bool> cancel{false};
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    const MonoNs give_up = NowNs() + 30'000'000'000LL;
    while (sim.requests_received() < requests && !done && NowNs() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    cancel = true;
  });
  TrialOptions o = Options(sim.url(), out_dir);
  o.cancel = &cancel;
  TrialReport rep = RunTrial(row, o);
  done = true;
  stopper.join();
  return rep;
}

inline const GateResult* Gate(const TrialVerdict& v, const std::string& name) {
  return v.correctness.Find(name);
}

}  // namespace capq::testing
