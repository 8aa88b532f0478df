// One trial against the in-process simulator over loopback: metrics, truth log, verdicts,
// the directory and its re-validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "capq/engine/profile.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/record/artifacts.h"
#include "capq/record/capacity_data.h"
#include "trial_test_util.h"

namespace capq::testing {
namespace {

// Virtual TTFT of a lone prompt on a cold engine: its uncached tokens prefilled in chunks of
// chunked_prefill_size, one step per chunk (the engine model's definition; engine.h).
double AnalyticTtftMs(const engine::EngineProfile& p, int64_t uncached_tokens) {
  double s = 0;
  for (int64_t left = uncached_tokens; left > 0; left -= p.chunked_prefill_size) {
    int64_t chunk = std::min<int64_t>(left, p.chunked_prefill_size);
    s += p.b0_s + p.b1_s_per_prefill_token * chunk + p.b2_s_per_chunk_token_sq * chunk * chunk +
         p.overhead_s;
  }
  return s * 1000;
}

TEST(TrialSim, C1MetricsMatchTheEngineModelAndTheTruthLog) {
  SimRowSpec spec;
  spec.time_scale = 10;
  spec.input_tokens = 512;
  spec.output_tokens = 16;
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("c1");
  auto sim = StartSim(row, "", dir + "/truth.jsonl");
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  ASSERT_TRUE(rep.metrics);
  const TrialMetrics& m = *rep.metrics;
  EXPECT_EQ(m.time_scale, 10);
  // Server prompt = 512 message tokens + 51 template tokens, 3 of them cached when cold.
  EXPECT_EQ(m.prompt_tokens_min, 563);
  EXPECT_EQ(m.prompt_tokens_max, 563);
  const double expected = AnalyticTtftMs(sim->profile(), 563 - 3);
  // Wall noise (a few ms on a busy 2-core machine) is multiplied by the time scale.
  EXPECT_NEAR(m.ttft_ms.p50, expected, 0.25 * expected + 2.0 * spec.time_scale)
      << "analytic " << expected;
  EXPECT_GE(m.ttft_ms.min, expected * 0.95);

  // Harness first-content arrival vs the server's own write time of that frame (same clock).
  std::map<std::pair<std::string, int64_t>, int64_t> truth;
  {
    std::ifstream in(dir + "/truth.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      truth[{j["request_id"], j["event_index"]}] = j["wall_mono_ns"];
    }
  }
  ASSERT_FALSE(truth.empty());
  Result<RawEvidenceFile> raw = ReadRawRecords(dir + "/trial/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  int compared = 0;
  for (const RawRecord& r : raw->records) {
    const RawRecord* rec = &r;
    if (rec->phase != Phase::kMeasured) continue;
    for (size_t i = 0; i < rec->events.size(); ++i) {
      if (rec->events[i].data == "[DONE]") continue;
      auto c = nlohmann::json::parse(rec->events[i].data);
      if (!c.contains("choices") || c["choices"].empty()) continue;
      auto& d = c["choices"][0]["delta"];
      if (!d.contains("content") || !d["content"].is_string() ||
          d["content"].get<std::string>().empty()) {
        continue;
      }
      auto it = truth.find({c["id"].get<std::string>(), static_cast<int64_t>(i)});
      ASSERT_NE(it, truth.end()) << "no truth line for " << c["id"] << " frame " << i;
      const int64_t delta_ns = rec->events[i].arrival_ns - it->second;
      EXPECT_GE(delta_ns, 0) << "the harness saw a frame before the server wrote it";
      // Delivery over loopback; generous so a loaded machine does not flip it (the fidelity
      // benchmark reports the real figure).
      EXPECT_LT(delta_ns, 50'000'000);
      ++compared;
      break;
    }
  }
  EXPECT_EQ(compared, 20);
}

TEST(TrialSim, PassDirectoryValidatesAndTamperIsCaught) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("validate");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialOptions o = Options(sim->url(), dir + "/trial", 2);
  TrialReport rep = RunTrial(row, o);
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass);
  for (const char* f :
       {"row.yaml", "plan.json", "raw.jsonl", "results.jsonl", "metrics.json", "verdict.json",
        "server_info.json", "server_metrics.jsonl", "identity.json", "command.txt", "SHA256SUMS"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/trial/" + f)) << f;
  }
  {
    std::ifstream in(dir + "/trial/identity.json");
    auto id = nlohmann::json::parse(in);
    EXPECT_EQ(id["readiness_probe"], "GET /health");
    // Checked in context: rendered through the chat template (the SGLang dialect's chat tokenize).
    EXPECT_NE(id["first_token_check"]["method"].get<std::string>().find("/v1/tokenize"),
              std::string::npos)
        << id["first_token_check"];
    EXPECT_TRUE(id["first_token_check"]["skipped_leads"].is_array());
    EXPECT_EQ(id["cold_prefix"]["allowed_tokens"], 3);  // the profile's template prefix
    EXPECT_EQ(id["check"]["ok"], true);
  }
  {
    // The load kept no text and no chunk gaps: both were read back from the raw evidence, the
    // texts re-counted and the gaps measured, one per pair of text chunks of every stream.
    std::ifstream rin(dir + "/trial/recount.json");
    const auto recount = nlohmann::json::parse(rin);
    std::ifstream min(dir + "/trial/metrics.json");
    const auto metrics = nlohmann::json::parse(min);
    std::ifstream res(dir + "/trial/results.jsonl");
    int64_t measured = 0, gaps = 0;
    for (std::string line; std::getline(res, line);) {
      const auto r = nlohmann::json::parse(line);
      if (r["phase"] != "measured") continue;
      ++measured;
      gaps += r["nonempty_chunks"].get<int64_t>() - 1;
      ASSERT_TRUE(recount["counts"].contains(r["id"].get<std::string>())) << r["id"];
      EXPECT_GT(recount["counts"][r["id"].get<std::string>()].get<int64_t>(), 0);
    }
    EXPECT_GT(measured, 0);
    EXPECT_EQ(recount["counts"].size(), static_cast<size_t>(measured));
    EXPECT_EQ(recount["unavailable"], "");
    EXPECT_EQ(metrics["chunk_gap_ms"]["n"], gaps);
  }
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->checksums_ok);
  EXPECT_TRUE(v->complete);
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
  ASSERT_EQ(v->verdict.slo.size(), 1u);
  EXPECT_DOUBLE_EQ(v->verdict.slo[0].measured_ms, rep.verdict.slo[0].measured_ms);

  // Edit one measured figure: the checksum no longer holds.
  { std::ofstream(dir + "/trial/metrics.json", std::ios::app) << " "; }
  auto t = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->checksums_ok);
  EXPECT_FALSE(t->complete);
  ASSERT_FALSE(t->problems.empty());
  EXPECT_NE(t->problems[0].find("metrics.json"), std::string::npos) << t->problems[0];
  EXPECT_NE(t->verdict.outcome, TrialOutcome::kPass);
}

// A row with SLO tiers: the trial measures once and checks every tier's gates beside its own, and
// capq validate derives the same figures from the raw records.
TEST(TrialSim, EveryTiersGateIsCheckedOnceAndValidatedFromTheRecords) {
  SimRowSpec spec;
  spec.slo_tiers =
      "slo_tiers:\n"
      "  - name: strict\n"
      "    slo: [{metric: ttft, percentile: 95, below_ms: 100000}, {metric: itl, percentile: 95, "
      "below_ms: 0.001}]\n"
      "  - name: e2e\n"
      "    slo: [{metric: e2e, percentile: 90, below_ms: 100000}]\n";
  Row row = MakeSimRow(spec);
  ASSERT_EQ(row.slo_tiers.size(), 2u);
  std::string dir = ScratchDir("tiers");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  // The ITL gate nothing meets is a tier's: the row's own verdict is untouched by it.
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  ASSERT_EQ(rep.verdict.tier_slo.size(), 2u);  // p95 TTFT is the row's own gate: not repeated
  EXPECT_EQ(rep.verdict.tier_slo[0].gate.metric, SloMetric::kItl);
  EXPECT_FALSE(rep.verdict.tier_slo[0].passed);
  EXPECT_EQ(rep.verdict.tier_slo[1].gate.metric, SloMetric::kE2e);
  EXPECT_TRUE(rep.verdict.tier_slo[1].passed);
  EXPECT_DOUBLE_EQ(rep.verdict.tier_slo[1].measured_ms,
                   SloValueMs(*rep.metrics, row.slo_tiers[1].slo[0]));
  auto summary = ReadTrialDir(dir + "/trial");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->tier_slo.size(), 2u);
  EXPECT_DOUBLE_EQ(summary->tier_slo[0].measured_ms, rep.verdict.tier_slo[0].measured_ms);
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  ASSERT_EQ(v->verdict.tier_slo.size(), 2u);
  EXPECT_DOUBLE_EQ(v->verdict.tier_slo[0].measured_ms, rep.verdict.tier_slo[0].measured_ms);
}

TEST(TrialSim, WithoutTokenizeTheWarmupsCalibrateFromUsage) {
  SimRowSpec spec;
  spec.input_tokens = 300;
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("usage-calibration");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialOptions o = Options(sim->url(), dir + "/trial");
  o.ignore_tokenize_endpoint = true;
  TrialReport rep = RunTrial(row, o);
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  std::ifstream in(dir + "/trial/plan.json");
  auto plan = nlohmann::json::parse(in);
  EXPECT_EQ(plan["calibration"], "usage_prompt_tokens");
  EXPECT_NE(plan["calibration_note"].get<std::string>().find("51.0 template tokens"),
            std::string::npos)
      << plan["calibration_note"];
  // The simulator counts a word as a token, so the fit is exact: 300 + 51 template tokens.
  EXPECT_EQ(rep.metrics->prompt_tokens_min, 351);
  EXPECT_EQ(rep.metrics->prompt_tokens_max, 351);
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
}

TEST(TrialSim, SloGateIsStrictAndSaysWhy) {
  SimRowSpec spec;
  spec.slo_below_ms = 1;  // no prefill fits in a virtual millisecond
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("slo");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialOptions opt = Options(sim->url(), dir + "/trial");
  opt.full_trials = true;  // the gate's own words on the whole sample, not an early decision's
  TrialReport rep = RunTrial(row, opt);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_EQ(rep.verdict.ExitCode(), 1);
  EXPECT_TRUE(rep.verdict.correctness_pass);
  EXPECT_FALSE(rep.verdict.decided);
  ASSERT_FALSE(rep.verdict.reasons.empty());
  EXPECT_NE(rep.verdict.reasons[0].find("p95 ttft"), std::string::npos);
  EXPECT_NE(rep.verdict.reasons[0].find("is not below 1.0 ms"), std::string::npos);
}

TEST(TrialSim, IdentityMismatchNamesPinnedAndRunning) {
  SimRowSpec spec;
  spec.server_expect =
      "  server_expect: {max_total_num_tokens: 12288, max_running_requests: 7, "
      "context_length: 8192}\n";
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("identity");
  auto sim = StartSim(row, "", "", /*time_scale=*/50);  // the row says 100
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCouldNotRun);
  EXPECT_EQ(rep.verdict.ExitCode(), 3);
  ASSERT_FALSE(rep.verdict.reasons.empty());
  const std::string& why = rep.verdict.reasons[0];
  EXPECT_NE(why.find("identity mismatch"), std::string::npos) << why;
  EXPECT_NE(why.find("time_scale pinned 100, running 50"), std::string::npos) << why;
  EXPECT_NE(why.find("server_expect.max_running_requests pinned 7, running 6"), std::string::npos)
      << why;
  EXPECT_EQ(sim->requests_received(), 0) << "no load may be sent to a server of the wrong identity";
  EXPECT_TRUE(std::filesystem::exists(dir + "/trial/verdict.json"));
}

TEST(TrialSim, ConnectionRefusedIsASetupErrorWithinTheDeadline) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("refused");
  int port = 0;
  {
    auto sim = StartSim(row);  // take a free port, then free it again
    ASSERT_TRUE(sim);
    port = sim->port();
    sim->Stop();
  }
  TrialOptions o = Options("http://127.0.0.1:" + std::to_string(port), dir + "/trial");
  o.setup_timeout_s = 1;
  const MonoNs t0 = NowNs();
  TrialReport rep = RunTrial(row, o);
  EXPECT_LT(NsToS(NowNs() - t0), 30.0);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCouldNotRun);
  ASSERT_FALSE(rep.verdict.reasons.empty());
  EXPECT_NE(rep.verdict.reasons[0].find("server unreachable"), std::string::npos)
      << rep.verdict.reasons[0];
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->complete);
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kCouldNotRun);
}

TEST(TrialSim, HealthNeverReadyIsASetupError) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("health");
  std::string faults = WriteText(dir + "/faults.yaml",
                                 "faults:\n  - kind: health_503_for_s\n    seconds: 1000000\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialOptions o = Options(sim->url(), dir + "/trial");
  o.setup_timeout_s = 1;
  TrialReport rep = RunTrial(row, o);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCouldNotRun);
  ASSERT_FALSE(rep.verdict.reasons.empty());
  EXPECT_NE(rep.verdict.reasons[0].find("not ready"), std::string::npos) << rep.verdict.reasons[0];
  EXPECT_NE(rep.verdict.reasons[0].find("HTTP 503"), std::string::npos) << rep.verdict.reasons[0];
  EXPECT_EQ(sim->requests_received(), 0);
}

TEST(TrialSim, ServerKilledMidTrialKeepsCompletedRecords) {
  SimRowSpec spec;
  spec.time_scale = 10;
  spec.min_requests = 40;
  spec.request_timeout_s = 50;  // 5 wall seconds
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("killed");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  std::atomic<bool> done{false};
  std::thread killer([&] {
    // Bounded: a trial that ends early (a broken server) must not leave this thread spinning.
    const MonoNs give_up = NowNs() + 30'000'000'000LL;
    while (sim->requests_received() < 12 && !done && NowNs() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    sim->Stop();
  });
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  done = true;
  killer.join();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCouldNotRun);
  ASSERT_FALSE(rep.verdict.reasons.empty());
  EXPECT_NE(rep.verdict.reasons[0].find("server lost"), std::string::npos)
      << rep.verdict.reasons[0];
  // The requests finished before the kill are on disk.
  Result<RawEvidenceFile> raw = ReadRawRecords(dir + "/trial/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  int ok200 = 0;
  for (const RawRecord& rec : raw->records) {
    if (rec.phase == Phase::kMeasured && rec.http_status == 200 && !rec.cancelled) ++ok200;
  }
  EXPECT_GE(ok200, 5);
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->complete);
  EXPECT_NE(v->verdict.outcome, TrialOutcome::kPass);
}

TEST(TrialSim, InterruptWritesAPartialDirectoryThatNeverPasses) {
  SimRowSpec spec;
  spec.time_scale = 10;
  spec.min_requests = 40;
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("interrupt");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrialInterruptedAfter(row, *sim, dir + "/trial", 10);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kInterrupted);
  EXPECT_EQ(rep.verdict.ExitCode(), 130);
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->checksums_ok);
  EXPECT_FALSE(v->complete);
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kInterrupted);
}

TEST(TrialSim, TheLoadsRunningCountsGoToTheirOwnCallback) {
  Row row = MakeSimRow({});
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialOptions o = Options(sim->url(), ScratchDir("progress") + "/trial");
  std::vector<std::string> events, counts;
  o.on_progress = [&](const std::string& l) { events.push_back(l); };
  o.on_load_progress = [&](const std::string& l) { counts.push_back(l); };
  TrialReport rep = RunTrial(row, o);
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass);
  ASSERT_FALSE(counts.empty());
  EXPECT_NE(counts.back().find("done"), std::string::npos) << counts.back();
  for (const std::string& e : events) EXPECT_EQ(e.find(" in flight"), std::string::npos) << e;
  EXPECT_NE(std::find(events.begin(), events.end(), "verdict: pass"), events.end());
}

TEST(TrialSim, ApiKeyNeverAppearsInTheDirectory) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("apikey");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  const std::string key = "sk-capq-test-7f3a9c21e5";
  TrialOptions o = Options(sim->url(), dir + "/trial");
  o.api_key = key;
  std::string progress;
  o.on_progress = [&](const std::string& l) { progress += l + "\n"; };
  TrialReport rep = RunTrial(row, o);
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/trial")) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find(key), std::string::npos) << e.path();
    EXPECT_EQ(ss.str().find("Bearer"), std::string::npos) << e.path();
    ++files;
  }
  EXPECT_GE(files, 10);
  EXPECT_EQ(progress.find(key), std::string::npos);
}

}  // namespace
}  // namespace capq::testing
