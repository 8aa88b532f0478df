// Rate rows: a qualification over rate levels against a fake server, the start from a closed-loop
// result by Little's law, and the row file spliced with its Rmax.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/file_io.h"
#include "capq/model/row_loader.h"
#include "capq/qualify/qualify.h"
#include "capq/record/capacity_data.h"
#include "qualify_test_util.h"

namespace capq {
namespace {

using testing::FakeRow;
using testing::QueueGrew;

// ---- Rate rows: the same protocol over rate levels (level L sends L * rate_step_rps).

Row RateRow() {
  Row row = FakeRow();
  row.id = "fake_rate";
  row.workload.arrival_kind = ArrivalKind::kPoisson;
  row.workload.open_loop.rate_step_rps = 0.25;
  row.workload.open_loop.requests = 120;
  row.workload.open_loop.ramp_s = 10;
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}};
  row.warmup.requests = 4;
  return row;
}

// A rate server: TTFT grows with the rate and stays below its 2.5 s bound up to 1.75 rps, but from
// 1.50 rps (level 6) on the queue grows without bound, so only the queue gate can fail there.
struct RateServer {
  std::vector<TrialRequest> calls;
  TrialSummary operator()(const Row& row, const TrialRequest& r) {
    calls.push_back(r);
    TrialSummary t;
    const double at5[] = {2100, 2200, 2050};
    double p95 = r.level == 5 ? at5[(r.trial - 1) % 3] : 350.0 * r.level;
    if (r.level > 6) p95 = 2300;
    t.has_metrics = true;
    t.ttft_ms.p50 = p95 / 2;
    t.ttft_ms.p95 = p95;
    t.e2e_ms.mean = 4000;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, p95, p95 < row.slo[0].below_ms, {}}};
    t.latency_pass = t.slo[0].passed;
    t.correctness_pass = true;
    t.outcome = t.latency_pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    if (r.level >= 6) {
      const double grew[] = {14.2, 13.1, 15.0};
      t.misses = {QueueGrew(grew[(r.trial - 1) % 3], 5.9)};
      t.reasons = {t.misses[0].text};
      t.outcome = TrialOutcome::kSloFail;
    }
    return t;
  }
};

TEST(QualifyRateTest, ARateRowProvesRmaxAndEveryLineReadsAsARate) {
  Row row = RateRow();
  RateServer server;
  std::vector<std::string> progress;
  QualifyOptions opt;
  opt.max_level = 64;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, std::ref(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_FALSE(q.cmax.has_value());
  ASSERT_TRUE(q.rmax_rps.has_value());
  EXPECT_DOUBLE_EQ(*q.rmax_rps, 1.25);
  EXPECT_EQ(q.proven_level(), 5);
  // The side above Rmax met its SLO: the queue gate decided it, with its figures.
  EXPECT_EQ(q.summary_line,
            "fake_rate: Rmax = 1.25 rps — R=1.25 rps ttft p95 2.10/2.20/2.05 s pass, R=1.50 rps "
            "queue_bounded client in-flight 14.2 > 5.9, 13.1 > 5.9, 15 > 5.9 fail");
  EXPECT_EQ(q.message, "every R=1.25 rps trial passed and every R=1.50 rps trial failed");
  auto said = [&](const std::string& needle) {
    for (const auto& l : progress) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(
      said("baseline: R=0.25 rps with 4 warm-ups, 120 measured requests after a 10 s ramp"));
  EXPECT_TRUE(
      said("confirm: R=1.50 rps trial 2 slo_fail queue_bounded: client in-flight last "
           "third 13.1 > 5.9"));
  EXPECT_TRUE(said("confirm: R=1.25 rps trial 1 pass ttft p95 2.10 s < 2.50 s"));
  EXPECT_TRUE(said("locate: adjacent pair R=1.25 rps pass, R=1.50 rps fail"));
  for (const auto& l : progress) EXPECT_EQ(l.find("C="), std::string::npos) << l;
  EXPECT_NE(CostLine(q).find("locate budget ceil(log2 Rmax/step)+2"), std::string::npos)
      << CostLine(q);
  // Every trial keeps its level and its rate, and the stability failure that decided it.
  for (const auto& t : q.trials) {
    EXPECT_DOUBLE_EQ(t.rate_rps, t.level * 0.25);
    EXPECT_EQ(t.misses.empty(), t.level < 6);
  }

  // The capacity data records the arrival, the rate result and each trial's rate beside its level.
  nlohmann::json j = RowQualificationToJson(q);
  EXPECT_EQ(j["row"]["arrival"]["kind"], "poisson");
  EXPECT_EQ(j["row"]["arrival"]["rate_step_rps"], 0.25);
  EXPECT_TRUE(j["result"]["cmax"].is_null());
  EXPECT_EQ(j["result"]["rmax_rps"], 1.25);
  EXPECT_EQ(j["result"]["operating_point"], 5);
  EXPECT_EQ(j["locate"]["max_rps"], 16);
  const nlohmann::json& last = j["trials"].back();
  EXPECT_EQ(last["level"], 6);
  EXPECT_EQ(last["rate_rps"], 1.5);
  EXPECT_FALSE(last.contains("concurrency"));
  ASSERT_EQ(last["misses"].size(), 1u);
  EXPECT_EQ(last["misses"][0]["gate"], "queue_bounded");
  CapacityData d;
  d.rows.push_back(q);
  Result<CapacityData> back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const RowQualification& b = back->rows.at(0);
  EXPECT_EQ(b.rmax_rps, q.rmax_rps);
  EXPECT_EQ(b.proven_level(), 5);
  EXPECT_EQ(b.Trials(QualifyPhase::kConfirm, 6).size(), 3u);
  EXPECT_EQ(SummaryLine(b), q.summary_line);
  EXPECT_EQ(CapacityDataToJson(*back), CapacityDataToJson(d));

  // The row written back claims the rate, with the deciding gates' margins.
  Row updated = RowWithQualification(row, q, "2026-12-02", "out/capacity-data.json");
  EXPECT_FALSE(updated.expect.cmax.has_value());
  ASSERT_TRUE(updated.expect.rmax_rps.has_value());
  EXPECT_EQ(*updated.expect.rmax_rps, 1.25);
  EXPECT_NE(updated.provenance.notes.find("Margins: R=1.25 rps ttft p95 2.05-2.20 s over 3 trials"),
            std::string::npos)
      << updated.provenance.notes;
  EXPECT_NE(updated.provenance.notes.find("R=1.50 rps queue_bounded client in-flight 14.2 > 5.9, "
                                          "13.1 > 5.9, 15 > 5.9 (last third against its bound)"),
            std::string::npos)
      << updated.provenance.notes;
}

TEST(QualifyRateTest, ASideThatHeldItsQueueOnSomeTrialsIsNotProven) {
  Row row = RateRow();
  RateServer inner;
  // Level 6, trial 2: the queue held, so the sides overlap and the result is the lower point.
  TrialRunner runner = [&](const Row& r, const TrialRequest& req) {
    TrialSummary t = inner(r, req);
    if (req.level == 6 && req.trial == 2) {
      t.reasons.clear();
      t.misses.clear();
      t.outcome = TrialOutcome::kPass;
    }
    return t;
  };
  RowQualification q = Qualify(row, runner, QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kLowered);
  EXPECT_FALSE(q.rmax_rps.has_value());
  EXPECT_EQ(q.operating_point, 5);
  EXPECT_NE(q.message.find("R=1.50 rps passed 1 of 6"), std::string::npos) << q.message;
  EXPECT_NE(q.summary_line.find("operating point R = 1.25 rps (not a proven Rmax)"),
            std::string::npos)
      << q.summary_line;
  EXPECT_NE(q.summary_line.find("R=1.50 rps queue_bounded client in-flight 14.2 > 5.9, held, "),
            std::string::npos)
      << q.summary_line;
}

// A closed-loop qualification of `row`'s identity and shape: Cmax 6, mean E2E 3.84 s at C=6.
CapacityData ClosedLoopData(const Row& rate_row) {
  Row closed = rate_row;
  closed.id = "fake_closed";
  closed.workload.arrival_kind = ArrivalKind::kClosedLoop;
  closed.workload.open_loop = OpenLoop{};
  RowQualification q;
  q.row = RowInfoFromRow(closed);
  q.status = QualifyStatus::kProven;
  q.cmax = 6;
  q.operating_point = 6;
  for (int c : {6, 7}) {
    for (int k = 1; k <= 3; ++k) {
      TrialSummary t;
      t.phase = QualifyPhase::kConfirm;
      t.level = c;
      t.trial = k;
      t.has_metrics = true;
      t.e2e_ms.mean = c == 6 ? 3800 + 20.0 * k : 5000;  // 3.84 s on average at C=6
      q.trials.push_back(t);
    }
  }
  CapacityData d;
  d.rows.push_back(q);
  return d;
}

TEST(QualifyRateTest, LittlesLawOnTheClosedLoopResultStartsTheSearchAndIsRecorded) {
  Row row = RateRow();
  CapacityData closed = ClosedLoopData(row);
  std::string note;
  Result<int> level = PredictLevelFromClosedLoop(row, closed, "ref/capacity-data.json", &note);
  ASSERT_TRUE(level.ok()) << level.status().ToString();
  EXPECT_EQ(*level, 6);  // floor(6 / 3.84 s / 0.25 rps) = floor(6.25)
  EXPECT_EQ(note,
            "Little's law on fake_closed (ref/capacity-data.json): Cmax 6 / mean E2E 3.84 s at "
            "C=6 = 1.56 rps, floored to a multiple of 0.25 rps: R=1.50 rps (level 6)");

  RateServer server;
  QualifyOptions opt;
  opt.predicted_cmax = *level;
  opt.prediction_note = note;
  std::vector<std::string> progress;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, std::ref(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_DOUBLE_EQ(*q.rmax_rps, 1.25);
  // The first probe is the prediction, then its neighbour: two probes find the pair.
  ASSERT_GE(server.calls.size(), 3u);
  EXPECT_EQ(server.calls[0].phase, QualifyPhase::kBaseline);
  EXPECT_EQ(server.calls[1].phase, QualifyPhase::kProbe);
  EXPECT_EQ(server.calls[1].level, 6);
  EXPECT_EQ(server.calls[2].level, 5);
  EXPECT_EQ(q.probes, 2);
  EXPECT_EQ(q.trials[1].move, "predicted Rmax");
  EXPECT_EQ(q.trials[2].move, "predicted Rmax - 1");
  EXPECT_EQ(q.predicted_cmax, 6);
  EXPECT_EQ(q.prediction_note, note);
  EXPECT_NE(progress.at(2).find("locate: predicted Rmax = 1.50 rps (Little's law on fake_closed"),
            std::string::npos)
      << progress.at(2);
  nlohmann::json j = RowQualificationToJson(q);
  EXPECT_EQ(j["locate"]["predicted_level"], 6);
  EXPECT_EQ(j["locate"]["predicted_rps"], 1.5);
  EXPECT_EQ(j["locate"]["prediction"], note);
  EXPECT_FALSE(j["locate"].contains("predicted_cmax"));
}

TEST(QualifyRateTest, AClosedLoopResultOfAnotherIdentityOrShapeIsRefused) {
  Row row = RateRow();
  CapacityData closed = ClosedLoopData(row);
  Row other = row;
  other.workload.input_tokens = 2048;
  Result<int> level = PredictLevelFromClosedLoop(other, closed, "ref/capacity-data.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("ref/capacity-data.json cannot start fake_rate: "
                                          "fake_closed is another identity or shape: "
                                          "input_tokens 512, not 2048"),
            std::string::npos)
      << level.status().message();
  other = row;
  other.identity.model = "another/model";
  level = PredictLevelFromClosedLoop(other, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("model '', not 'another/model'"), std::string::npos)
      << level.status().message();
  // A rate qualification is no closed loop, and an unproven one has no Cmax.
  closed.rows[0].row.arrival = ArrivalKind::kPoisson;
  closed.rows[0].row.rate_step_rps = 0.25;
  level = PredictLevelFromClosedLoop(row, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("a rate qualification"), std::string::npos);
  closed = ClosedLoopData(row);
  closed.rows[0].status = QualifyStatus::kLowered;
  closed.rows[0].cmax.reset();
  level = PredictLevelFromClosedLoop(row, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("no proven Cmax (lowered)"), std::string::npos);
  // And a closed-loop row cannot be started from one.
  EXPECT_FALSE(PredictLevelFromClosedLoop(FakeRow(), ClosedLoopData(row), "x.json", nullptr).ok());
}

TEST(QualifyRateTest, TheEngineModelDoesNotGuessARateRow) {
  Result<Row> row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_rate.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_FALSE(PredictFromProfile(*row, 64).ok());
}

// The row file gets expect.rmax_rps (the rate as the labels write it) and loads back with it.
TEST(QualifyRateTest, SpliceWritesRmaxAndTheRowLoadsBack) {
  const std::string path =
      std::string(CAPQ_SOURCE_DIR) + "/tests/data/rows_good/ratefam/rate_constant.yaml";
  Result<Row> row = LoadRow(path);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_EQ(row->workload.open_loop.rate_step_rps, 0.1);
  // Level 3 passes, level 4 fails: Rmax = 3 x 0.1 rps, which binary writes 0.30000000000000004.
  TrialRunner runner = [](const Row& r, const TrialRequest& req) {
    TrialSummary t;
    double itl = 10.0 * req.level;
    t.slo = {SloCheck{"itl", 95, r.slo[0].below_ms, itl, itl < r.slo[0].below_ms, {}}};
    t.outcome = t.slo[0].passed ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    t.correctness_pass = true;
    return t;
  };
  RowQualification q = Qualify(*row, runner, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.summary_line.rfind("rate_constant: Rmax = 0.3 rps — R=0.3 rps itl p95 30.0 ms pass, "
                                 "R=0.4 rps itl p95 40.0 ms fail",
                                 0),
            0u)
      << q.summary_line;
  Row updated = RowWithQualification(*row, q, "2026-12-02", "out/capacity-data.json");
  ASSERT_TRUE(updated.expect.rmax_rps.has_value());
  EXPECT_EQ(*updated.expect.rmax_rps, 0.3);
  Result<std::string> text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const std::string original = *text;
  Result<std::string> spliced = SpliceRowExpectation(original, updated, path);
  ASSERT_TRUE(spliced.ok()) << spliced.status().ToString();
  EXPECT_NE(spliced->find("expect:\n  rmax_rps: 0.3\n"), std::string::npos) << *spliced;
  EXPECT_EQ(spliced->find("cmax"), std::string::npos);
  // Everything before the expectation is kept as written, comments included.
  EXPECT_EQ(spliced->substr(0, spliced->find("expect:")),
            original.substr(0, original.find("expect:")));
  Result<Row> back = LoadRowFromString(*spliced, path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->expect.rmax_rps, 0.3);
  EXPECT_EQ(LevelAtRate(*back, *back->expect.rmax_rps), 3);
  EXPECT_EQ(back->provenance.qualified_on, "2026-12-02");
  // A concurrency claim on a rate row does not load, so it is never written.
  Row wrong = updated;
  wrong.expect.rmax_rps.reset();
  wrong.expect.cmax = 3;
  Result<std::string> refused = SpliceRowExpectation(original, wrong, path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("expect.rmax_rps"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace capq
