#include "capq/protocol/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "capq/protocol/capacity_data.h"

namespace capq {
namespace {

const std::string kFixture =
    std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/seed_like/capacity-data.json";

// The text of <figure id="ID" ...> ... </figure>; empty when absent.
std::string Figure(const std::string& html, const std::string& id) {
  size_t start = html.find("<figure id=\"" + id + "\"");
  if (start == std::string::npos) start = html.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  size_t end = html.find("</figure>", start);
  return html.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) ++n;
  return n;
}

size_t TrialsWithMetrics(const RowQualification& q) {
  size_t n = 0;
  for (const auto& t : q.trials) n += t.has_metrics && std::isfinite(t.ttft_ms.p95);
  return n;
}

class ReportFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = ReadCapacityData(kFixture);
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

TEST_F(ReportFixtureTest, ArrivalFigureShowsEveryMeasuredRequestAndTheBurst) {
  for (const auto& q : data_.rows) {
    int b = *q.cmax;
    size_t requests = 0, burst = 0;
    for (int c : {b, b + 1}) {
      for (const auto* t : q.Trials("confirm", c)) {
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
    for (const auto& t : q.trials) streams += t.phase == "confirm" ? t.totals.streams : 0;
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

TEST(ReportTest, OneRowHasNoSurfaceButEveryOtherFigure) {
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  std::string html = RenderReportHtml(one);
  EXPECT_TRUE(Figure(html, "fig-surface").empty());
  EXPECT_FALSE(Figure(html, "fig-boundary").empty());
  EXPECT_EQ(Count(Figure(html, "fig-boundary"), "<circle class=\"pt "), 6u);
}

TEST(ReportTest, RowWithoutBoundaryStillRendersItsTrialsAndSaysWhy) {
  auto d = ReadCapacityData(kFixture);
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
  auto d = ReadCapacityData(kFixture);
  ASSERT_TRUE(d.ok());
  CapacityData one = *d;
  one.rows.resize(1);
  one.rows[0].row.title = "<b>bold</b> & \"quoted\"";
  std::string html = RenderReportHtml(one);
  EXPECT_EQ(html.find("<b>bold</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"), std::string::npos);
}

}  // namespace
}  // namespace capq
