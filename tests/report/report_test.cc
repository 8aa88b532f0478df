#include "capq/report/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "../qualify/tier_test_util.h"
#include "capq/qualify/qualify.h"
#include "capq/qualify/recommend.h"
#include "capq/record/capacity_data.h"
#include "capq/text.h"
#include "report_html.h"

namespace capq {
namespace {

using testing::Count;
using testing::Div;
using testing::Figure;
using testing::Table;

const std::string kFixture =
    std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/seed_like/capacity-data.json";

// The fixture predates recommendations: each row gets the one its trials give, as capq report does.
Result<CapacityData> ReadFixture() {
  Result<CapacityData> d = ReadCapacityData(kFixture);
  if (d.ok()) RecommendWhereNotRecorded(&*d);
  return d;
}

size_t TrialsWithMetrics(const RowQualification& q) {
  size_t n = 0;
  for (const auto& t : q.trials) n += t.has_metrics && std::isfinite(t.ttft_ms.p95);
  return n;
}

class ReportFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = ReadFixture();
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    data_ = *d;
    ASSERT_EQ(data_.rows.size(), 3u);
    html_ = RenderReportHtml(data_);
  }
  CapacityData data_;
  std::string html_;
};

TEST_F(ReportFixtureTest, TtftAndThroughputFiguresPlotEveryTrialOfEveryRow) {
  for (const auto& q : data_.rows) {
    std::string ttft = Figure(html_, "fig-ttft-" + q.row.id);
    ASSERT_FALSE(ttft.empty()) << q.row.id;
    EXPECT_EQ(Count(ttft, "<circle class=\"pt "), TrialsWithMetrics(q)) << q.row.id;
    EXPECT_EQ(Count(ttft, "class=\"aux p99\""), TrialsWithMetrics(q));
    EXPECT_EQ(Count(ttft, "class=\"slo\""), 1u);
    std::string tput = Figure(html_, "fig-throughput-" + q.row.id);
    ASSERT_FALSE(tput.empty());
    EXPECT_EQ(Count(tput, "<circle class=\"pt "), TrialsWithMetrics(q));
    EXPECT_NE(tput.find("band-pass"), std::string::npos);
    EXPECT_NE(tput.find("band-fail"), std::string::npos);
  }
}

TEST_F(ReportFixtureTest, VerdictPerConcurrencyIsShown) {
  const auto& q = data_.rows[1];  // reference row: Cmax 7
  std::string ttft = Figure(html_, "fig-ttft-" + q.row.id);
  // C = 1, 4, 6, 7 pass (✓) and C = 8 fails (✗): one mark per distinct C.
  EXPECT_EQ(Count(ttft, "class=\"verdict pass\""), 4u);
  EXPECT_EQ(Count(ttft, "class=\"verdict fail\""), 1u);
}

TEST_F(ReportFixtureTest, BoundaryFigureHasEveryConfirmationTrialOfEveryRow) {
  std::string fig = Figure(html_, "fig-boundary");
  ASSERT_FALSE(fig.empty());
  EXPECT_EQ(Count(fig, "<circle class=\"pt "), 18u);  // 3 rows x (3 + 3) trials
  EXPECT_EQ(Count(fig, "<circle class=\"pt pass"), 9u);
  EXPECT_EQ(Count(fig, "<circle class=\"pt fail"), 9u);
  EXPECT_EQ(Count(fig, "<svg "), 3u);
}

TEST_F(ReportFixtureTest, SurfaceHasOnePointPerRowInShapeOrder) {
  std::string fig = Figure(html_, "fig-surface");
  ASSERT_FALSE(fig.empty());
  EXPECT_EQ(Count(fig, "<circle class=\"pt "), 3u);
  EXPECT_EQ(Count(fig, "<rect class=\"bar row\""), 3u);
  size_t short_row = fig.find("2048 / 512"), ref = fig.find("8192 / 1024"),
         heavy = fig.find("16384 / 2048");
  ASSERT_NE(short_row, std::string::npos);
  EXPECT_LT(short_row, ref);
  EXPECT_LT(ref, heavy);
}

// A fleet's merge (capq report DIR... --out FILE): the same rows qualified on a second server
// stand beside the first server's, one bar per server, each server named in the legend.
TEST_F(ReportFixtureTest, MergedServersStandSideBySideOnTheSurface) {
  CapacityData fleet = data_;
  for (size_t i = 0; i + 1 < data_.rows.size(); ++i) {
    RowQualification other = data_.rows[i];
    other.url = "http://127.0.0.1:30001";
    other.row.image = "rahulunair/sglang-xpu@sha256:0123456789abcdef0123";
    other.cmax = *other.cmax - 1;
    other.operating_point = other.cmax;
    fleet.rows.push_back(other);
  }
  std::string fig = Figure(RenderReportHtml(fleet), "fig-surface");
  ASSERT_FALSE(fig.empty());
  EXPECT_EQ(Count(fig, "<rect class=\"bar row srv0\""), 3u);
  EXPECT_EQ(Count(fig, "<rect class=\"bar row srv1\""), 2u);
  EXPECT_EQ(Count(fig, "<rect class=\"bar row\""), 0u) << "a merged surface colours by server";
  EXPECT_NE(fig.find("and 2 servers"), std::string::npos);
  EXPECT_NE(fig.find("sglang-xpu@sha256:0123456789ab… · 4 x Intel Arc Pro B70 at "
                     "http://127.0.0.1:30001"),
            std::string::npos);
  EXPECT_NE(fig.find("at http://127.0.0.1:30000"), std::string::npos);
  // Each server's bar of a row stands at that server's level: the second is one below.
  const RowQualification& first = data_.rows[0];
  EXPECT_NE(fig.find(first.row.id + ": " + std::to_string(*first.cmax) + " on "),
            std::string::npos);
  EXPECT_NE(fig.find(first.row.id + ": " + std::to_string(*first.cmax - 1) + " on "),
            std::string::npos);
}

TEST_F(ReportFixtureTest, ArrivalFigureShowsEveryMeasuredRequestAndTheBurst) {
  for (const auto& q : data_.rows) {
    int b = *q.cmax;
    size_t requests = 0, burst = 0;
    for (int c : {b, b + 1}) {
      for (const auto* t : q.Trials(QualifyPhase::kConfirm, c)) {
        requests += t->ttft_ms_by_arrival.size();
        burst += std::min<size_t>(t->ttft_ms_by_arrival.size(), c);
      }
    }
    std::string fig = Figure(html_, "fig-arrival-" + q.row.id);
    ASSERT_FALSE(fig.empty()) << q.row.id;
    EXPECT_EQ(Count(fig, "<circle class=\"req "), requests);
    EXPECT_EQ(Count(fig, "<circle class=\"req burst\""), burst);
    EXPECT_EQ(Count(fig, "class=\"p95steady\""), 2u);
    EXPECT_EQ(Count(fig, "class=\"p95full\""), 2u);
    EXPECT_NE(fig.find("steady p95"), std::string::npos);
  }
}

TEST_F(ReportFixtureTest, TimelineHasOneBarPerTrialAndThePhaseCosts) {
  for (const auto& q : data_.rows) {
    std::string fig = Figure(html_, "fig-timeline-" + q.row.id);
    ASSERT_FALSE(fig.empty());
    EXPECT_EQ(Count(fig, "<rect class=\"bar "), q.trials.size());
    EXPECT_NE(fig.find("locate " + std::to_string(q.probes) + " probes"), std::string::npos);
  }
}

TEST_F(ReportFixtureTest, TablesLikeTheSeeds) {
  for (const char* id : {"tbl-overview", "tbl-rows", "tbl-maxpass", "tbl-correctness"}) {
    EXPECT_NE(html_.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  for (const auto& q : data_.rows) {
    EXPECT_NE(html_.find("id=\"tbl-boundary-" + q.row.id + "\""), std::string::npos);
    EXPECT_NE(html_.find("id=\"tbl-locate-" + q.row.id + "\""), std::string::npos);
    EXPECT_NE(html_.find("id=\"tbl-cost-" + q.row.id + "\""), std::string::npos);
    EXPECT_NE(html_.find(q.summary_line.substr(0, q.summary_line.find(" — "))), std::string::npos);
  }
  // 18 confirmations x (64 + 64 + 64 + 64 + 64 + 64 ...) streams: the totals line sums them.
  int64_t streams = 0;
  for (const auto& q : data_.rows) {
    for (const auto& t : q.trials)
      streams += t.phase == QualifyPhase::kConfirm ? t.totals.streams : 0;
  }
  std::string s = std::to_string(streams);
  if (s.size() > 3) s.insert(s.size() - 3, ",");
  EXPECT_NE(html_.find("Across all 18 boundary confirmations, the validator checked " + s),
            std::string::npos);
}

TEST_F(ReportFixtureTest, SelfContained) {
  EXPECT_EQ(html_.find("<script"), std::string::npos);
  EXPECT_EQ(html_.find("<link"), std::string::npos);
  EXPECT_EQ(html_.find("@import"), std::string::npos);
  EXPECT_EQ(html_.find("url("), std::string::npos);
  EXPECT_EQ(html_.find("src="), std::string::npos);
  EXPECT_EQ(html_.find("href=\"http"), std::string::npos);
}

TEST_F(ReportFixtureTest, EachRowShowsItsOperatingLimitAsAPolicyUnderItsCmax) {
  for (const auto& q : data_.rows) {
    std::string rec = Div(html_, "rec-" + q.row.id);
    ASSERT_FALSE(rec.empty()) << q.row.id;
    ASSERT_TRUE(q.recommendation.level.has_value());
    EXPECT_NE(rec.find("<b>Operate at C=" + std::to_string(*q.recommendation.level) +
                       "</b>; the measured maximum stays Cmax = " + std::to_string(*q.cmax)),
              std::string::npos)
        << rec;
    EXPECT_NE(rec.find("Rule: " + q.recommendation.rule), std::string::npos) << rec;
    EXPECT_NE(rec.find("Margin kept: " + q.recommendation.margin->text), std::string::npos);
    EXPECT_NE(rec.find("Requalify when any of these change: <code>identity.engine</code> = "
                       "sglang · <code>identity.image</code> = " +
                       q.row.image),
              std::string::npos)
        << rec;
    // The benchmark answer stays the headline: the row's summary line comes first.
    size_t section = html_.find("<section id=\"row-" + q.row.id + "\"");
    EXPECT_LT(html_.find("<div class=\"summary", section), html_.find("rec-" + q.row.id));
    EXPECT_NE(html_.find("Operating limit (a policy, not the benchmark answer)", section),
              std::string::npos);
  }
  std::string heavy = Div(html_, "rec-b70_qwen38_27b_16k2k");
  EXPECT_NE(heavy.find("<b>Operate at C=3</b>"), std::string::npos) << heavy;
  EXPECT_NE(heavy.find("two steps below the proven Cmax (1 default + 1 thin margin)"),
            std::string::npos);
}

TEST(ReportTest, ARowWithoutABoundaryHasNoOperatingLimitAndSaysWhy) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  RowQualification& q = one.rows[0];
  q.status = QualifyStatus::kNoFailUpToCap;
  q.cmax.reset();
  q.max_level = 16;
  q.recommendation = Recommendation{};  // as a qualification made in memory has it
  std::string rec = Div(RenderReportHtml(one), "rec-" + q.row.id);
  EXPECT_NE(rec.find("No recommended operating limit: no proven Cmax: every probe up to C=16 "
                     "passed"),
            std::string::npos)
      << rec;
  EXPECT_EQ(rec.find("Operate at"), std::string::npos);
}

TEST(ReportTest, OneRowHasNoSurfaceButEveryOtherFigure) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  std::string html = RenderReportHtml(one);
  EXPECT_TRUE(Figure(html, "fig-surface").empty());
  EXPECT_FALSE(Figure(html, "fig-boundary").empty());
  EXPECT_EQ(Count(Figure(html, "fig-boundary"), "<circle class=\"pt "), 6u);
}

TEST(ReportTest, ThePredictedCurveIsDrawnOverTheMeasuredPointsAndTabledBesideThem) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  RowQualification& q = one.rows[0];
  ASSERT_TRUE(q.proven_level());
  const int cmax = *q.proven_level();
  EXPECT_EQ(Count(RenderReportHtml(one), "class=\"pred-pt\""), 0u) << "no prediction, no curve";
  q.predicted_cmax = cmax - 1;
  q.prediction_source = "baseline calibration on baseline trial b/c1-t1";
  for (int c = 1; c <= cmax; ++c) q.predicted_curve.push_back({c, 100.0 * c, c < cmax});
  q.prediction_parameters = {{"b1_s_per_prefill_token", 2.5e-4, engine::Basis::kMeasured, "TTFT"}};
  std::string html = RenderReportHtml(one);
  const std::string fig = Figure(html, "fig-ttft-" + q.row.id);
  ASSERT_FALSE(fig.empty());
  EXPECT_EQ(Count(fig, "class=\"pred-pt\""), static_cast<size_t>(cmax));
  EXPECT_EQ(Count(fig, "class=\"pred\""), static_cast<size_t>(cmax - 1));
  EXPECT_NE(html.find("measured " + std::to_string(cmax) + " (+1 levels)"), std::string::npos);
  EXPECT_NE(html.find("b1_s_per_prefill_token</td><td>0.00025</td><td class=\"l\">measured"),
            std::string::npos);
  // Each predicted level a trial measured states the prediction's error against their median.
  q.prediction_checks = PredictionChecks(q);
  ASSERT_FALSE(q.prediction_checks.empty());
  const PredictionCheck& at_cmax = q.prediction_checks.back();
  EXPECT_EQ(at_cmax.level, cmax);
  EXPECT_GT(at_cmax.trials, 0);
  EXPECT_NEAR(at_cmax.error_pct,
              (at_cmax.predicted_ms - at_cmax.measured_ms) / at_cmax.measured_ms * 100, 1e-9);
  html = RenderReportHtml(one);
  const std::string sign = at_cmax.error_pct >= 0 ? "+" : "−";
  EXPECT_NE(html.find("<td>" + sign + FormatFixed(std::fabs(at_cmax.error_pct), 0) + "% (" +
                      std::to_string(at_cmax.trials) + " trial"),
            std::string::npos);
  CapacityData back_in = one;
  auto back = CapacityDataFromJson(CapacityDataToJson(back_in));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows[0].prediction_checks.size(), q.prediction_checks.size());
  EXPECT_NEAR(back->rows[0].prediction_checks.back().measured_ms, at_cmax.measured_ms, 1e-3);
}

TEST(ReportTest, RowWithoutBoundaryStillRendersItsTrialsAndSaysWhy) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  RowQualification& q = one.rows[0];
  q.status = QualifyStatus::kCorrectnessFail;
  q.cmax.reset();
  q.operating_point.reset();
  q.message = "correctness gate nonempty_deltas failed at C=12 (confirm trial 2)";
  q.summary_line = q.row.id + ": qualification failed — " + q.message;
  std::string html = RenderReportHtml(one);
  EXPECT_TRUE(Figure(html, "fig-boundary").empty());
  EXPECT_TRUE(Figure(html, "fig-arrival-" + q.row.id).empty());
  EXPECT_EQ(Count(Figure(html, "fig-ttft-" + q.row.id), "<circle class=\"pt "),
            TrialsWithMetrics(q));
  EXPECT_NE(html.find("nonempty_deltas"), std::string::npos);
}

TEST(ReportTest, EscapesRowText) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  one.rows[0].row.title = "<b>bold</b> & \"quoted\"";
  std::string html = RenderReportHtml(one);
  EXPECT_EQ(html.find("<b>bold</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"), std::string::npos);
}

// A proven row with a TTFT and an ITL gate whose C=7 trials fail on ITL while their TTFT (1.93 s)
// is well below its bound: every place the report shows a verdict figure must say which gate.
RowQualification TwoGateQualification() {
  RowQualification q;
  q.row.id = "two_gates";
  q.row.input_tokens = 1024;
  q.row.output_tokens = 256;
  q.row.slo = {SloGate{SloMetric::kTtft, 95, 2500}, SloGate{SloMetric::kItl, 95, 50}};
  q.status = QualifyStatus::kProven;
  q.cmax = 6;
  q.operating_point = 6;
  q.message = "every C=6 trial passed and every C=7 trial failed";
  auto trial = [&](QualifyPhase phase, int c, int k, double ttft, double itl) {
    TrialSummary t;
    t.phase = phase;
    t.level = c;
    t.trial = k;
    t.has_metrics = true;
    t.ttft_ms.p50 = ttft / 2;
    t.ttft_ms.p95 = ttft;
    t.ttft_ms.p99 = ttft * 1.1;
    t.itl_ms.p95 = itl;
    t.output_tok_s = 100.0 * c;
    t.slo = {SloCheck{"ttft", 95, 2500, ttft, ttft < 2500, {}},
             SloCheck{"itl", 95, 50, itl, itl < 50, {}}};
    t.latency_pass = t.slo[0].passed && t.slo[1].passed;
    t.correctness_pass = true;
    t.outcome = t.latency_pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    for (int i = 0; i < 64; ++i) t.ttft_ms_by_arrival.push_back(ttft * (0.5 + i / 128.0));
    q.trials.push_back(t);
  };
  trial(QualifyPhase::kBaseline, 1, 1, 300, 30);
  trial(QualifyPhase::kProbe, 4, 1, 1100, 30);
  trial(QualifyPhase::kProbe, 8, 1, 2200, 60);
  trial(QualifyPhase::kProbe, 6, 1, 1650, 30);
  trial(QualifyPhase::kProbe, 7, 1, 1925, 53);
  const double itl7[] = {52, 55, 51};
  for (int k = 1; k <= 3; ++k) {
    trial(QualifyPhase::kConfirm, 6, k, 1650, 30);
    trial(QualifyPhase::kConfirm, 7, k, 1925, itl7[k - 1]);
  }
  // As the capacity data of a version that did not name gates would have kept it.
  q.summary_line = "two_gates: Cmax = 6 — C=6 p95 1.65/1.65/1.65 s pass, C=7 1.93/1.93/1.93 s fail";
  return q;
}

TEST(ReportTierTest, EveryTierSideBySideWithItsBoundary) {
  CapacityData d;
  d.rows.push_back(testing::FakeTieredQualification());
  std::string html = RenderReportHtml(d);
  std::string table = Table(html, "tbl-tiers-tiered");
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(Count(table, "<tr>"), 4u);  // a header and one line per tier
  for (const char* cell :
       {"<td class=\"l\">primary</td><td class=\"l\">p95 ttft &lt; 1000 ms</td>",
        "<td class=\"l\">ttft_itl</td><td class=\"l\">p95 ttft &lt; 1000 ms and p95 itl &lt; 16 "
        "ms</td>",
        "<td class=\"l\">ttft_p99</td><td class=\"l\">p99 ttft &lt; 1000 ms</td>",
        "C=4 ttft p95 0.80/0.80/0.80 s pass", "C=5 ttft p95 1.00/1.00/1.00 s fail",
        "C=3 itl p95 15.0/15.0/15.0 ms pass", "C=4 itl p95 20.0/20.0/20.0 ms fail",
        "C=3 ttft p99 0.78/0.78/0.78 s pass", "C=4 ttft p99 1.04/1.04/1.04 s fail"}) {
    EXPECT_NE(table.find(cell), std::string::npos) << cell << "\n" << table;
  }
  EXPECT_NE(html.find("can only keep or lower the admitted concurrency"), std::string::npos);
  EXPECT_NE(html.find("Order checked: ttft_itl 3 ≤ primary 4; ttft_p99 3 ≤ primary 4."),
            std::string::npos);
  EXPECT_EQ(html.find("tier-order-tiered"), std::string::npos);
  EXPECT_EQ(Count(html, "Trials run for further tiers (" +
                            std::to_string(d.rows[0].tier_trials.size()) + ")"),
            1u);
}

TEST(ReportTierTest, AStricterTierAdmittingMoreIsFlagged) {
  CapacityData d;
  d.rows.push_back(testing::FakeTieredQualification());
  TierQualification& itl = d.rows[0].tiers[1];
  ASSERT_EQ(itl.name, "ttft_itl");
  itl.cmax = itl.operating_point = 5;
  std::string html = RenderReportHtml(d);
  EXPECT_NE(html.find("id=\"tier-order-tiered\">Tier order violated: tier ttft_itl is at least "
                      "as strict as tier primary but admits C=5 &gt; C=4"),
            std::string::npos);
}

TEST(ReportTierTest, ARowWithoutTiersHasNoTierTable) {
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok());
  std::string html = RenderReportHtml(*d);
  EXPECT_EQ(html.find("tbl-tiers-"), std::string::npos);
  EXPECT_EQ(html.find("SLO tiers"), std::string::npos);
}

TEST(ReportTwoGateTest, EveryVerdictFigureNamesItsGate) {
  CapacityData d;
  d.rows.push_back(TwoGateQualification());
  std::string html = RenderReportHtml(d);
  // The summary line is derived from the trials: it names ITL on the failing side and TTFT, the
  // gate nearest its bound, on the passing side, even though the stored line did not.
  const std::string line =
      "two_gates: Cmax = 6 — C=6 ttft p95 1.65/1.65/1.65 s pass, C=7 itl p95 52.0/55.0/51.0 ms "
      "fail";
  EXPECT_EQ(Count(html, "<div class=\"summary proven\">" + line + "</div>"), 2u) << line;
  EXPECT_EQ(html.find("C=7 1.93/1.93/1.93 s fail"), std::string::npos);

  // Boundary per row: the deciding gate and its values on each side.
  std::string rows = Table(html, "tbl-rows");
  EXPECT_NE(rows.find("ttft p95 1.65/1.65/1.65 s"), std::string::npos) << rows;
  EXPECT_NE(rows.find("itl p95 52.0/55.0/51.0 ms"), std::string::npos) << rows;

  // Confirmation trials: each row says which gate decided it, against its bound.
  std::string boundary = Table(html, "tbl-boundary-two_gates");
  EXPECT_NE(boundary.find("decided by"), std::string::npos);
  EXPECT_EQ(Count(boundary, "ttft p95 1.65 s &lt; 2.50 s"), 3u) << boundary;
  for (const char* v : {"52.0", "55.0", "51.0"}) {
    EXPECT_EQ(Count(boundary, std::string("itl p95 ") + v + " ms &gt;= 50.0 ms"), 1u) << v;
  }
  EXPECT_EQ(boundary.find("ttft p95 1.93"), std::string::npos)
      << "a passing TTFT must not stand for a failure decided by ITL";

  // Probes too.
  std::string locate = Table(html, "tbl-locate-two_gates");
  EXPECT_NE(locate.find("itl p95 53.0 ms &gt;= 50.0 ms"), std::string::npos) << locate;
  EXPECT_NE(locate.find("itl p95 60.0 ms &gt;= 50.0 ms"), std::string::npos) << locate;

  // The arrival table beside the TTFT panels says the fails were ITL's.
  std::string arrival = Table(html, "tbl-arrival-two_gates");
  EXPECT_EQ(Count(arrival, "itl p95 5"), 3u) << arrival;

  // Figure 2 puts each side at its own deciding gate, named under it; with two gates deciding,
  // the values are shares of each gate's bound.
  std::string fig = Figure(html, "fig-boundary");
  EXPECT_NE(fig.find("C=6 ttft p95"), std::string::npos);
  EXPECT_NE(fig.find("C=7 itl p95"), std::string::npos);
  EXPECT_NE(fig.find("C=7 trial 2: itl p95 55.0 ms &gt;= 50.0 ms (110% of the bound), fail"),
            std::string::npos);
  EXPECT_EQ(Count(fig, "<circle class=\"pt fail"), 3u);

  // The TTFT figure draws the TTFT gate's bound, and its failing points say ITL decided.
  std::string ttft = Figure(html, "fig-ttft-two_gates");
  EXPECT_NE(ttft.find("SLO: p95 ttft &lt; 2500 ms"), std::string::npos);
  EXPECT_NE(ttft.find("fail (itl p95 52.0 ms &gt;= 50.0 ms)"), std::string::npos);
  // Figure 1 says which gate decided each side.
  EXPECT_NE(Figure(html, "fig-throughput-two_gates").find("C=6 on ttft p95, C=7 on itl p95"),
            std::string::npos);
}

// Each confirmation states the confidence of its gates' sides, and each side of the boundary the
// same over all its trials together, under the row's summary; data without them shows a dash.
TEST(ReportTwoGateTest, EveryTrialAndEachSideShowItsConfidence) {
  RowQualification q = TwoGateQualification();
  for (auto& t : q.trials) {
    if (t.phase != QualifyPhase::kConfirm) continue;
    t.slo[0].confidence = ClaimConfidence(64, 0, 95, true);
    t.slo[1].confidence = ClaimConfidence(64, t.level == 6 ? 1 : 9, 95, t.level == 6);
  }
  CapacityData d;
  d.rows.push_back(q);
  std::string html = RenderReportHtml(d);
  std::string boundary = Table(html, "tbl-boundary-two_gates");
  EXPECT_NE(boundary.find("confidence (this trial)"), std::string::npos) << boundary;
  EXPECT_EQ(Count(boundary, "itl " + FormatFixed(PassConfidence(64, 1, 95), 2) + " below"), 3u)
      << boundary;
  EXPECT_EQ(Count(boundary, "itl " + FormatFixed(FailConfidence(64, 9, 95), 2) + " at or above"),
            3u)
      << boundary;
  EXPECT_NE(html.find("<p class=\"confidence\">confidence, each side&#39;s trials together: C=6 "
                      "ttft p95 vs 2500 ms: confidence"),
            std::string::npos);
  EXPECT_NE(
      html.find("C=7 itl p95 vs 50 ms: confidence " + FormatFixed(FailConfidence(192, 27, 95), 2) +
                " at or above (192 requests, "
                "27 at or over"),
      std::string::npos);
  // C=7 failed on ITL alone: its TTFT, with no miss, makes no fail claim.
  EXPECT_EQ(html.find("C=7 ttft p95 vs 2500 ms"), std::string::npos);
  // Older data: no figure to show, a dash and no side line.
  CapacityData old;
  old.rows.push_back(TwoGateQualification());
  std::string plain = RenderReportHtml(old);
  EXPECT_EQ(plain.find("<p class=\"confidence\">"), std::string::npos);
  EXPECT_NE(Table(plain, "tbl-boundary-two_gates").find("<td class=\"l\">-</td>"),
            std::string::npos);
}

TEST(ReportTwoGateTest, OneGateDecidingBothSidesIsPlottedInItsOwnUnit) {
  CapacityData d;
  d.rows.push_back(TwoGateQualification());
  // ITL at C=6 now nears its bound (0.98, TTFT 0.66): ITL decided both sides.
  for (auto& t : d.rows[0].trials) {
    if (t.phase == QualifyPhase::kConfirm && t.level == 6) t.slo[1].measured_ms = 49;
  }
  std::string fig = Figure(RenderReportHtml(d), "fig-boundary");
  EXPECT_NE(fig.find("itl p95 (ms)"), std::string::npos) << fig;
  EXPECT_NE(fig.find("C=6 trial 1: itl p95 49.0 ms &lt; 50.0 ms, pass"), std::string::npos);
}

TEST(ReportTest, DataWrittenBeforeGatesWereNamedStillReadsAndNamesThem) {
  // seed_like was written when summary lines said "C=7 p95 ..." without the gate.
  auto d = ReadFixture();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->rows[1].summary_line.find("ttft"), std::string::npos);
  std::string html = RenderReportHtml(*d);
  EXPECT_NE(html.find("b70_qwen38_27b_8k1k: Cmax = 7 — C=7 ttft p95 9.23/9.30/9.31 s pass, C=8 "
                      "ttft p95 10.56/10.48/10.45 s fail"),
            std::string::npos);
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

// A trial decided early has no percentile of its own: the boundary table shows its deciding
// gate's bound as one (>=), leaves its other figures empty and says it was decided; the boundary
// figure's point says "at least".
TEST_F(ReportFixtureTest, ADecidedTrialShowsItsBoundNeverAMeasurement) {
  RowQualification q = data_.rows.front();
  const int above = *q.proven_level() + 1;
  for (TrialSummary& t : q.trials) {
    if (t.phase != QualifyPhase::kConfirm || t.level != above) continue;
    EarlyDecision d;
    d.gate = SloGate{SloMetric::kTtft, 95, q.row.slo.front().below_ms};
    d.lowest_reachable_ms = q.row.slo.front().below_ms * 1.25;
    d.after_s = 41.5;
    t.decided = d;
    t.slo.front().measured_ms = d.lowest_reachable_ms;
    t.slo.front().at_least = true;
  }
  CapacityData one;
  one.rows.push_back(q);
  const std::string html = RenderReportHtml(one);
  const std::string table = Table(html, "tbl-boundary-" + q.row.id);
  // One bound per decided trial, in its TTFT p95 cell (its p50 and p99 stay empty).
  const size_t decided = q.Trials(QualifyPhase::kConfirm, above).size();
  ASSERT_GT(decided, 0u);
  EXPECT_EQ(Count(table, "<td>&ge; "), decided) << table;
  EXPECT_EQ(Count(table, "decided early, 41.5 s in"), decided);
  EXPECT_NE(Figure(html, "fig-boundary").find("at least"), std::string::npos);
}

}  // namespace
}  // namespace capq
