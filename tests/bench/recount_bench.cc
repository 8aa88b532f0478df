// The cost of re-counting every measured stream's text with the server's tokenizer (the
// text_recount gate), on the real trial path: one RunTrial at C = 1,024 (4,096 measured streams)
// against the in-process simulator, then the re-count's wall time from recount.json beside the
// trial's. The re-count runs after the load, so it costs wall time, never TTFT.
//   recount_s           wall seconds of the re-count (the raw evidence read back in one pass,
//                       every stream's text one tokenize request)
//   recount_us_per_stream
//   recount_share       recount_s / the whole trial's wall seconds
// Prints figures beside the trial's verdict; a trial that did not pass prints no figure, only its
// verdict and why. Asserts nothing.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "capq/model/row_loader.h"
#include "capq/sim/server.h"
#include "capq/trial/trial.h"
#include "trial_verdict.h"

namespace {

// Every session runs at once and steps are cheap: the figure is the re-count, not queueing.
constexpr const char* kProfile = R"(name: recount_wide
served_model_name: sim-wide
model_path: capq/sim-wide
max_total_tokens: 40000000
page_size: 16
max_running_requests: 2048
chunked_prefill_size: 262144
context_length: 8192
policy: prefill_first
b0_s: 0.004
b1_s_per_prefill_token: 1.0e-7
b3_s_per_decode_row: 1.0e-6
b4_s_per_decode_kv_token: 0
overhead_s: 0.0005
)";

std::string RowYaml(int c, int output_tokens) {
  return "schema: capq/row/v1\nid: recount_c" + std::to_string(c) +
         "\nidentity:\n  engine: sim\n  sim_profile: profiles/recount_wide.yaml\n  time_scale: 1\n"
         "workload:\n  input_tokens: 64\n  output_tokens: " +
         std::to_string(output_tokens) +
         "\n  sampling: {temperature: 0, ignore_eos: true}\n  arrival: {kind: closed_loop}\n"
         "cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}\n"
         "warmup: {requests: 4, concurrency: 1}\nmeasured: {min_requests: 64, per_concurrency: 4}\n"
         "slo:\n  - {metric: ttft, percentile: 95, below_ms: 600000}\n"
         "trials: {count: 1, quiet_period_s: 0, seeds: [7]}\nrequest_timeout_s: 600\n";
}

void BM_TextRecount(benchmark::State& state) {
  const int c = static_cast<int>(state.range(0));
  const int output_tokens = static_cast<int>(state.range(1));
  const std::string dir = std::filesystem::temp_directory_path().string() + "/capq-recount-" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/profiles");
  std::ofstream(dir + "/profiles/recount_wide.yaml") << kProfile;
  auto row = capq::LoadRowFromString(RowYaml(c, output_tokens), dir + "/row.yaml");
  if (!row.ok()) {
    state.SkipWithError(row.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    auto sim = capq::sim::SimServer::Start(capq::sim::ServerOptionsForRow(*row));
    if (!sim.ok()) {
      state.SkipWithError(sim.status().ToString().c_str());
      return;
    }
    capq::TrialOptions o;
    o.url = (*sim)->url();
    o.out_dir = dir + "/trial";
    o.level = c;
    o.skip_quiet_period = true;
    const auto t0 = std::chrono::steady_clock::now();
    capq::TrialReport rep = capq::RunTrial(*row, o);
    const double trial_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (*sim)->Stop();
    if (!capq::bench::ReportVerdict(state, rep.verdict)) break;
    std::ifstream in(dir + "/trial/recount.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("counts")) {
      state.SkipWithError("no re-count in the trial directory");
      return;
    }
    const double recount_s = j.value("wall_s", 0.0);
    const double streams = static_cast<double>(j["counts"].size());
    state.counters["streams"] = streams;
    state.counters["recount_s"] = recount_s;
    state.counters["recount_us_per_stream"] = streams > 0 ? recount_s * 1e6 / streams : 0;
    state.counters["trial_s"] = trial_s;
    state.counters["recount_share"] = trial_s > 0 ? recount_s / trial_s : 0;
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_TextRecount)
    ->Args({1024, 256})
    ->ArgNames({"C", "out"})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
