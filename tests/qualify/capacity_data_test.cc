#include "capq/record/capacity_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "capq/qualify/qualify.h"
#include "capq/qualify/recommend.h"
#include "tier_test_util.h"

namespace capq {
namespace {

namespace fs = std::filesystem;

const std::string kFixture =
    std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/seed_like/capacity-data.json";

fs::path TempDir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("capq_capdata_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void WriteText(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

TEST(CapacityDataTest, FixtureRoundTripsExactly) {
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  nlohmann::json once = CapacityDataToJson(*d);
  auto again = CapacityDataFromJson(once);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(CapacityDataToJson(*again), once);
  // Spot checks against the file itself.
  ASSERT_EQ(d->rows.size(), 3u);
  const RowQualification& ref = d->rows[1];
  EXPECT_EQ(ref.row.id, "b70_qwen38_27b_8k1k");
  EXPECT_EQ(ref.status, QualifyStatus::kProven);
  EXPECT_EQ(ref.cmax, 7);
  EXPECT_EQ(ref.Trials(QualifyPhase::kConfirm, 7).size(), 3u);
  EXPECT_EQ(ref.Trials(QualifyPhase::kConfirm, 8).size(), 3u);
  EXPECT_EQ(ref.row.slo.at(0).below_ms, 10000);
  const TrialSummary& t = *ref.Trials(QualifyPhase::kConfirm, 8).front();
  EXPECT_FALSE(t.passed());
  EXPECT_GE(t.GatingMs(), 10000);
  EXPECT_EQ(t.ttft_ms_by_arrival.size(), 64u);
  EXPECT_EQ(t.totals.streams, 64);
}

TEST(CapacityDataTest, QualificationResultRoundTrips) {
  Row row;
  row.id = "rt";
  row.workload.input_tokens = 100;
  row.workload.output_tokens = 10;
  row.slo = {SloGate{SloMetric::kTtft, 95, 500}};
  row.trials.seeds = {1, 2, 3};
  TrialRunner runner = [](const Row& r, const TrialRequest& req) {
    TrialSummary t;
    double p95 = 90.0 * req.level;
    t.has_metrics = true;
    t.ttft_ms.n = 64;
    t.ttft_ms.p95 = p95;
    t.ttft_ms.p50 = NAN;  // a value the trial could not measure must survive as null
    t.ttft_ms_by_arrival = {1.0, NAN, 3.0};
    t.slo = {SloCheck{"ttft", 95, r.slo[0].below_ms, p95, p95 < r.slo[0].below_ms, {}}};
    t.outcome = p95 < r.slo[0].below_ms ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    t.totals.streams = 64;
    t.corpus = PhaseName(req.phase) + std::string("/c") + std::to_string(req.level);
    t.max_cached_tokens = 4;
    t.cold_allowed_tokens = 4;
    t.command = "capq trial --row x --concurrency " + std::to_string(req.level);
    return t;
  };
  RowQualification q = Qualify(row, runner, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  q.predicted_cmax = 4;
  q.prediction_source = "baseline calibration on baseline trial rt/baseline/c1-t1";
  q.predicted_curve = {{4, 420.5, true}, {5, 560.0, false}};
  q.prediction_parameters = {
      {"b1_s_per_prefill_token", 2.5e-4, engine::Basis::kMeasured, "TTFT"},
      {"b4_s_per_decode_kv_token", 0, engine::Basis::kAssumed, "one length"}};
  CapacityData d;
  d.generated_utc = "2026-11-29T12:00:00.000Z";
  d.rows.push_back(q);
  fs::path dir = TempDir("rt");
  std::string path = (dir / "capacity-data.json").string();
  ASSERT_TRUE(WriteCapacityData(path, d).ok());
  auto back = ReadCapacityData(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CapacityDataToJson(*back), CapacityDataToJson(d));
  const RowQualification& b = back->rows.at(0);
  EXPECT_EQ(b.cmax, q.cmax);
  EXPECT_EQ(b.summary_line, q.summary_line);
  EXPECT_EQ(b.trials.size(), q.trials.size());
  EXPECT_TRUE(std::isnan(b.trials[0].ttft_ms.p50));
  EXPECT_EQ(b.trials[0].corpus, q.trials[0].corpus);
  EXPECT_EQ(b.trials[0].max_cached_tokens, 4);
  EXPECT_EQ(b.trials[0].cold_allowed_tokens, 4);
  EXPECT_TRUE(std::isnan(b.trials[0].ttft_ms_by_arrival[1]));
  EXPECT_EQ(b.phases.size(), 3u);
  // The prediction stands beside the outcome: its curve, its parameters and its miss.
  EXPECT_EQ(b.prediction_source, q.prediction_source);
  ASSERT_EQ(b.predicted_curve.size(), 2u);
  EXPECT_DOUBLE_EQ(b.predicted_curve[0].gating_ms, 420.5);
  EXPECT_FALSE(b.predicted_curve[1].passes);
  ASSERT_EQ(b.prediction_parameters.size(), 2u);
  EXPECT_EQ(b.prediction_parameters[1].basis, engine::Basis::kAssumed);
  EXPECT_EQ(RowQualificationToJson(b)["locate"]["prediction_detail"]["error_levels"], *q.cmax - 4);
  // Atomic write leaves no temporary files behind.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}

TEST(CapacityDataTest, EveryTierRoundTripsWithItsTrials) {
  CapacityData d;
  d.rows.push_back(testing::FakeTieredQualification());
  const RowQualification& q = d.rows[0];
  ASSERT_EQ(q.tiers.size(), 3u);
  ASSERT_FALSE(q.tier_trials.empty());
  nlohmann::json j = CapacityDataToJson(d);
  const nlohmann::json& tiers = j["rows"][0]["tiers"];
  ASSERT_EQ(tiers.size(), 3u);
  EXPECT_EQ(tiers[1]["name"], "ttft_itl");
  EXPECT_EQ(tiers[1]["slo"][1]["metric"], "itl");
  EXPECT_EQ(tiers[1]["status"], "proven");
  EXPECT_EQ(tiers[1]["cmax"], 3);
  EXPECT_EQ(tiers[1]["decided_by"].size(), 6u);
  EXPECT_EQ(tiers[1]["decided_by"][0]["phase"], "confirm");
  EXPECT_EQ(tiers[2]["trials_run"], 0);
  EXPECT_EQ(j["rows"][0]["tier_trials"].size(), q.tier_trials.size());
  EXPECT_TRUE(j["rows"][0]["trials"][0].contains("tier_slo")) << "each trial keeps its tier gates";

  auto back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CapacityDataToJson(*back), j);
  const RowQualification& b = back->rows[0];
  ASSERT_EQ(b.tiers.size(), 3u);
  for (size_t i = 0; i < b.tiers.size(); ++i) {
    SCOPED_TRACE(q.tiers[i].name);
    EXPECT_EQ(b.tiers[i].name, q.tiers[i].name);
    EXPECT_EQ(b.tiers[i].slo.size(), q.tiers[i].slo.size());
    EXPECT_EQ(b.tiers[i].status, q.tiers[i].status);
    EXPECT_EQ(b.tiers[i].cmax, q.tiers[i].cmax);
    EXPECT_EQ(b.tiers[i].trials_run, q.tiers[i].trials_run);
    EXPECT_EQ(b.tiers[i].trials_reused, q.tiers[i].trials_reused);
    EXPECT_EQ(b.tiers[i].DecidedBy().size(), q.tiers[i].DecidedBy().size());
    EXPECT_EQ(b.tiers[i].summary_line, q.tiers[i].summary_line);
  }
  ASSERT_EQ(b.tier_trials.size(), q.tier_trials.size());
  EXPECT_EQ(b.tier_trials[0].tier_slo.size(), q.tier_trials[0].tier_slo.size());
  EXPECT_NE(b.FindTrial(QualifyPhase::kConfirm, 3, 1), nullptr);

  // A row without tiers writes neither key, as before tiers existed.
  CapacityData plain;
  plain.rows.push_back(testing::FakeTieredQualification());
  plain.rows[0].tiers.clear();
  plain.rows[0].tier_trials.clear();
  EXPECT_FALSE(CapacityDataToJson(plain)["rows"][0].contains("tiers"));
  EXPECT_FALSE(CapacityDataToJson(plain)["rows"][0].contains("tier_trials"));

  j["rows"][0]["tiers"][1]["status"] = "maybe";
  auto bad = CapacityDataFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rows[0].tiers"), std::string::npos)
      << bad.status().message();
}

TEST(CapacityDataTest, RefusesAnotherSchemaAndNamesBadKeys) {
  auto wrong = CapacityDataFromJson(nlohmann::json{{"schema", "capq/capacity/v0"}, {"rows", {}}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("capq/capacity/v0"), std::string::npos);

  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok());
  nlohmann::json j = CapacityDataToJson(*d);
  j["rows"][1]["trials"][2]["concurrency"] = "seven";
  auto bad = CapacityDataFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rows[1].trials[2]"), std::string::npos)
      << bad.status().message();
  // An outcome is one of the five names a verdict has, and an unknown one is named.
  nlohmann::json odd = CapacityDataToJson(*d);
  odd["rows"][1]["trials"][2]["outcome"] = "maybe";
  auto unknown = CapacityDataFromJson(odd);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("rows[1].trials[2]"), std::string::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("unknown trial outcome 'maybe'"), std::string::npos)
      << unknown.status().message();

  fs::path dir = TempDir("bad");
  WriteText(dir / "capacity-data.json", "{not json");
  auto unreadable = ReadCapacityData((dir / "capacity-data.json").string());
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("not valid JSON"), std::string::npos);
  fs::remove_all(dir);
}

// Data written before rate rows loads as closed loop; a trial written before its stability
// failures had a key of their own takes them from its reasons.
TEST(CapacityDataTest, OlderDataLoadsAndKeepsWhatDecidedItsTrials) {
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  for (const auto& q : d->rows) {
    EXPECT_EQ(q.row.arrival, ArrivalKind::kClosedLoop);
    EXPECT_FALSE(q.row.open_loop());
    EXPECT_FALSE(q.rmax_rps.has_value());
    EXPECT_EQ(q.proven_level(), q.cmax);
    EXPECT_EQ(q.row.scale().Label(3), "C=3");
  }
  nlohmann::json j = CapacityDataToJson(*d);
  nlohmann::json& trial = j["rows"][1]["trials"][0];
  // A trial's misses are read as data, never taken back out of its reasons' text.
  trial["reasons"] = {
      "queue_bounded: client in-flight last third 9 > 4 (first third 1.6 x 1.25 + 2)",
      "p95 ttft 12.0 ms is not below 10 ms"};
  auto back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->rows[1].trials[0].misses.empty());
  // A rate trial written before GateMiss listed its stability failures as strings: each is kept
  // whole, with no figures read out of it.
  trial["stability_failures"] = {"queue_bounded: client in-flight last third 9 > 4"};
  back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows[1].trials[0].misses.size(), 1u);
  EXPECT_EQ(back->rows[1].trials[0].misses[0].text,
            "queue_bounded: client in-flight last third 9 > 4");
  EXPECT_TRUE(std::isnan(back->rows[1].trials[0].misses[0].value));
  trial.erase("stability_failures");
  trial["misses"] = {{{"gate", "queue_bounded"},
                      {"subject", "client in-flight"},
                      {"value", 9},
                      {"bound", 4},
                      {"in_ms", false},
                      {"text", "queue_bounded: client in-flight last third 9 > 4"}}};
  back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows[1].trials[0].misses.size(), 1u);
  EXPECT_EQ(back->rows[1].trials[0].misses[0].gate, "queue_bounded");
  EXPECT_EQ(back->rows[1].trials[0].misses[0].value, 9);
  EXPECT_EQ(back->rows[1].trials[0].misses[0].bound, 4);
  // A failed gate written as one "name: evidence" string (before FailedGate) still loads, whole.
  trial["failed_gates"] = {"nonempty_deltas: 2 streams empty: m3, m9"};
  back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows[1].trials[0].failed_gates.size(), 1u);
  EXPECT_EQ(back->rows[1].trials[0].failed_gates[0].Text(),
            "nonempty_deltas: 2 streams empty: m3, m9");
  // A rate trial keeps its level and rate under their own names.
  TrialSummary t;
  t.phase = QualifyPhase::kConfirm;
  t.level = 6;
  t.rate_rps = 1.5;
  t.outcome = TrialOutcome::kSloFail;
  nlohmann::json tj = TrialSummaryToJson(t);
  EXPECT_EQ(tj["level"], 6);
  EXPECT_EQ(tj["rate_rps"], 1.5);
  EXPECT_FALSE(tj.contains("concurrency"));
}

// The recommendation is written beside the result and read back as written; data written
// without one reads without one, and the policy gives it the one its trials give.
TEST(CapacityDataTest, RecommendationRoundTripsAndOlderDataDerivesIt) {
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->rows[1].recommendation_recorded);
  EXPECT_FALSE(d->rows[1].recommendation.level.has_value());
  RecommendWhereNotRecorded(&*d);
  EXPECT_TRUE(d->rows[1].recommendation_recorded);
  // The fixture predates recommendations: C=7 of the reference row kept 6.9% headroom (thin).
  const Recommendation& ref = d->rows[1].recommendation;
  EXPECT_EQ(ref.level, 5);
  EXPECT_TRUE(ref.thin_margin);
  EXPECT_EQ(ref.requalify_on.at(1).field, "identity.image");
  nlohmann::json j = CapacityDataToJson(*d);
  nlohmann::json& rec = j["rows"][1]["recommendation"];
  EXPECT_EQ(rec["level"], 5);
  EXPECT_EQ(rec["from_level"], 7);
  EXPECT_NEAR(rec["margin"]["headroom_pct"].get<double>(), 6.87, 0.01);
  EXPECT_FALSE(rec.contains("rate_rps"));
  // What is written is what is read, even where the trials would give another.
  rec["level"] = 4;
  rec["rule"] = "a stricter policy";
  rec["requalify_on"] = {{{"field", "identity.driver"}, {"value", "1"}}};
  auto back = CapacityDataFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const Recommendation& read = back->rows[1].recommendation;
  EXPECT_EQ(read.level, 4);
  EXPECT_EQ(read.from_level, 7);
  EXPECT_EQ(read.steps_down, 2);
  EXPECT_EQ(read.rule, "a stricter policy");
  EXPECT_EQ(read.reason, ref.reason);
  ASSERT_TRUE(read.margin.has_value());
  EXPECT_EQ(read.margin->text, ref.margin->text);
  EXPECT_EQ(read.margin->measured_ms, ref.margin->measured_ms);
  ASSERT_EQ(read.requalify_on.size(), 1u);
  EXPECT_EQ(read.requalify_on[0].value, "1");
  EXPECT_EQ(CapacityDataToJson(*back), j);
  // No recommendation is written as a null level with its reason.
  RowQualification none = d->rows[0];
  none.status = QualifyStatus::kFailsAtOne;
  none.recommendation = Recommendation{};
  none.recommendation.reason = "no proven Cmax: C=1 misses the row's gates";
  CapacityData one;
  one.rows.push_back(none);
  auto again = CapacityDataFromJson(CapacityDataToJson(one));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->rows[0].recommendation.level.has_value());
  EXPECT_FALSE(again->rows[0].recommendation.margin.has_value());
  EXPECT_EQ(again->rows[0].recommendation.reason, none.recommendation.reason);
}

// A phase is a value inside capq: a trial whose recorded phase is none of the three is refused
// with the key named, never read as some default phase.
TEST(CapacityDataTest, ATrialOfAnUnknownPhaseIsRefusedNamingTheKey) {
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  nlohmann::json j = CapacityDataToJson(*d);
  j["rows"][0]["trials"][0]["phase"] = "locate";
  Result<CapacityData> back = CapacityDataFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("'phase'"), std::string::npos) << back.status().message();
  EXPECT_NE(back.status().message().find("'locate'"), std::string::npos) << back.status().message();
}

TEST(CapacityDataTest, ReadsATrialDirectory) {
  fs::path dir = TempDir("trial");
  WriteText(dir / "verdict.json", R"({"schema":"capq/verdict/v1","row_id":"r","concurrency":5,
    "trial":2,"seed":202,"phase":"confirm","outcome":"correctness_fail","exit_code":2,
    "latency_pass":true,"correctness_pass":false,
    "slo":[{"metric":"ttft","percentile":95,"below_ms":2000,"measured_ms":1712.5,"passed":true}],
    "correctness":{"passed":false,"gates":[
      {"name":"status_200","enabled":true,"passed":true,"evidence":"64 of 64"},
      {"name":"nonempty_deltas","enabled":true,"passed":false,"evidence":"2 streams empty: m3, m9"},
      {"name":"unique_outputs","enabled":false,"passed":false,"evidence":"off: reason"}],
      "totals":{"streams":64,"completion_tokens":4096,"nonempty_chunks":4000,"utf8_bytes":20000,
                "unique_output_hashes":64,"warmup_prompts":8,"measured_prompts":64}},
    "reasons":["gate nonempty_deltas failed"],"time_scale":50,"started_utc":"2026-11-29T12:00:00Z",
    "complete":true})");
  WriteText(dir / "metrics.json", R"({"time_scale":50,"percentile_method":"linear","requests":64,
    "ttft_ms":{"n":64,"min":1,"p50":300,"p90":1500,"p95":1712.5,"p99":1900,"max":2000,"mean":500},
    "itl_ms":{"n":64,"min":1,"p50":12,"p90":14,"p95":15,"p99":16,"max":17,"mean":12.5},
    "e2e_ms":{"n":0,"min":null,"p50":null,"p90":null,"p95":null,"p99":null,"max":null,"mean":null},
    "output_tok_s":812.5,"request_per_s":3.2,"duration_s":20,"prompt_tokens_min":530,
    "prompt_tokens_max":533,"ttft_ms_by_arrival":[100,null,300],"ttft_p95_steady_ms":640,
    "tokens_per_chunk_mean":3.25})");
  WriteText(dir / "server_info.json", R"({"schema":"capq/server_info/v1",
    "limits":{"total_slots":"8","n_ctx":"2048"}})");
  WriteText(dir / "command.txt", "capq trial --row r.yaml --concurrency 5 --trial 2\n");
  WriteText(dir / "SHA256SUMS", "abc  verdict.json\n");
  auto t = ReadTrialDir(dir.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->level, 5);
  EXPECT_EQ(t->trial, 2);
  EXPECT_EQ(t->seed, 202u);
  EXPECT_EQ(t->outcome, TrialOutcome::kCorrectnessFail);
  ASSERT_EQ(t->failed_gates.size(), 1u);  // the switched-off gate is not a failure
  EXPECT_EQ(t->failed_gates[0], (FailedGate{"nonempty_deltas", "2 streams empty: m3, m9"}));
  EXPECT_DOUBLE_EQ(t->GatingMs(), 1712.5);
  EXPECT_DOUBLE_EQ(t->GateRatio(), 1712.5 / 2000);
  EXPECT_DOUBLE_EQ(t->ttft_ms.p95, 1712.5);
  EXPECT_TRUE(std::isnan(t->e2e_ms.p95));
  EXPECT_DOUBLE_EQ(t->itl_ms.p50, 12);
  EXPECT_EQ(t->prompt_tokens_max, 533);
  EXPECT_DOUBLE_EQ(t->tokens_per_chunk_mean, 3.25);  // what calibration reads
  EXPECT_EQ(t->server_limits.at("total_slots"), "8");
  EXPECT_EQ(t->totals.completion_tokens, 4096);
  ASSERT_EQ(t->ttft_ms_by_arrival.size(), 3u);
  EXPECT_TRUE(std::isnan(t->ttft_ms_by_arrival[1]));
  EXPECT_EQ(t->command, "capq trial --row r.yaml --concurrency 5 --trial 2");
  EXPECT_EQ(t->sha256sums, "abc  verdict.json\n");
  EXPECT_DOUBLE_EQ(t->time_scale, 50);

  // A directory a trial that could not run left behind: a verdict but no metrics.
  fs::remove(dir / "metrics.json");
  auto bare = ReadTrialDir(dir.string());
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->has_metrics);

  fs::remove(dir / "verdict.json");
  EXPECT_FALSE(ReadTrialDir(dir.string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace capq
