// A rate row's report: every level reads as a rate, and the queue gate that decided the side above
// Rmax is named and drawn.
#include <gtest/gtest.h>

#include <string>

#include "capq/record/capacity_data.h"
#include "capq/report/report.h"
#include "report_html.h"

namespace capq {
namespace {

using testing::Count;
using testing::Figure;
using testing::Table;

// ---- A rate row: every level reads as a rate, and the queue gate decided the side above Rmax.

RowQualification RateQualification() {
  Row row;
  row.id = "rate_row";
  row.family = "sim";
  row.workload.input_tokens = 1024;
  row.workload.output_tokens = 256;
  row.workload.arrival_kind = ArrivalKind::kPoisson;
  row.workload.open_loop.rate_step_rps = 0.25;
  row.workload.open_loop.requests = 120;
  row.workload.open_loop.ramp_s = 10;
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}};
  RowQualification q;
  q.row = RowInfoFromRow(row);
  q.status = QualifyStatus::kProven;
  q.rmax_rps = 1.25;
  q.operating_point = 5;
  q.max_level = 64;
  q.message = "every R=1.25 rps trial passed and every R=1.50 rps trial failed";
  auto trial = [&](QualifyPhase phase, int level, int k, double ttft, double queue) {
    TrialSummary t;
    t.phase = phase;
    t.level = level;
    t.rate_rps = level * 0.25;
    t.trial = k;
    t.has_metrics = true;
    t.ttft_ms.p50 = ttft / 2;
    t.ttft_ms.p95 = ttft;
    t.ttft_ms.p99 = ttft * 1.1;
    t.output_tok_s = 60.0 * level;
    t.slo = {SloCheck{"ttft", 95, 2500, ttft, ttft < 2500, {}}};
    t.correctness_pass = true;
    t.latency_pass = t.slo[0].passed;
    t.outcome = TrialOutcome::kPass;
    if (queue > 0) {
      char buf[128];
      std::snprintf(buf, sizeof buf,
                    "queue_bounded: client in-flight last third %.3g > 5.9 (first third 3.1 x 1.25 "
                    "+ 2)",
                    queue);
      t.reasons = {buf};
      GateMiss m;
      m.gate = "queue_bounded";
      m.subject = "client in-flight";
      m.value = queue;
      m.bound = 5.9;
      m.text = buf;
      t.misses = {m};
      t.outcome = TrialOutcome::kSloFail;
    }
    for (int i = 0; i < 120; ++i) t.ttft_ms_by_arrival.push_back(ttft * (0.5 + i / 240.0));
    // The queue over time: level at Rmax, growing to `queue` above it.
    for (int i = 0; i <= 10; ++i) {
      const double in_flight = queue > 0 ? 3 + (queue - 3) * i / 10.0 : 3;
      t.queue_series.push_back({i * 1.5, in_flight, in_flight - 1});
    }
    t.send_lateness_p99_ms = 0.25 * k;
    q.trials.push_back(t);
  };
  trial(QualifyPhase::kBaseline, 1, 1, 300, 0);
  trial(QualifyPhase::kProbe, 4, 1, 1500, 0);
  trial(QualifyPhase::kProbe, 8, 1, 2300, 20);
  trial(QualifyPhase::kProbe, 6, 1, 2250, 14);
  trial(QualifyPhase::kProbe, 5, 1, 2150, 0);
  const double ttft5[] = {2100, 2200, 2050};
  const double queue6[] = {14.2, 13.1, 15};
  for (int k = 1; k <= 3; ++k) {
    trial(QualifyPhase::kConfirm, 5, k, ttft5[k - 1], 0);
    trial(QualifyPhase::kConfirm, 6, k, 2250, queue6[k - 1]);
  }
  return q;
}

TEST(ReportRateTest, EveryLevelReadsAsARateAndTheQueueGateIsNamed) {
  CapacityData d;
  d.rows.push_back(RateQualification());
  const std::string html = RenderReportHtml(d);
  const std::string line =
      "rate_row: Rmax = 1.25 rps — R=1.25 rps ttft p95 2.10/2.20/2.05 s pass, R=1.50 rps "
      "queue_bounded client in-flight 14.2 &gt; 5.9, 13.1 &gt; 5.9, 15 &gt; 5.9 fail";
  EXPECT_EQ(Count(html, "<div class=\"summary proven\">" + line + "</div>"), 2u) << html;
  // No level is written as a concurrency (the warm-up's concurrency is one).
  EXPECT_EQ(Count(html, "C="), Count(html, "at C=1 · "));
  EXPECT_NE(html.find("poisson arrivals at 0.25 requests/s per level · measured 120 requests "
                      "after a 10 s ramp"),
            std::string::npos);
  std::string ttft = Figure(html, "fig-ttft-rate_row");
  EXPECT_NE(ttft.find("arrival rate R (requests/s)"), std::string::npos);
  EXPECT_NE(ttft.find("confirm R=1.50 rps trial 2: p95 2.25 s, fail (queue_bounded: client "
                      "in-flight last third 13.1 &gt; 5.9"),
            std::string::npos)
      << ttft;
  std::string boundary = Table(html, "tbl-boundary-rate_row");
  EXPECT_NE(boundary.find("<th>rate (rps)</th>"), std::string::npos);
  EXPECT_EQ(Count(boundary, "<tr><td>1.50</td>"), 3u) << boundary;
  EXPECT_EQ(Count(boundary, "queue_bounded: client in-flight last third"), 3u);
  EXPECT_NE(Table(html, "tbl-locate-rate_row").find("<th>R (rps)</th>"), std::string::npos);
  std::string rows = Table(html, "tbl-rows");
  EXPECT_NE(rows.find("<td>R=1.25 rps</td>"), std::string::npos) << rows;
  EXPECT_NE(rows.find("<td>R=1.50 rps</td><td class=\"l\">queue_bounded client in-flight 14.2"),
            std::string::npos)
      << rows;
  EXPECT_NE(Table(html, "tbl-overview").find("<td>1.25 rps</td>"), std::string::npos);
  // Figure 2 plots the side above Rmax at its queue against the bound, and names the gate.
  std::string fig = Figure(html, "fig-boundary");
  EXPECT_EQ(Count(fig, "<circle class=\"pt "), 6u) << fig;
  EXPECT_NE(fig.find("R=1.50 rps queue_bounded client in-flight"), std::string::npos);
  EXPECT_NE(fig.find("(241% of the bound), fail"), std::string::npos) << fig;
  EXPECT_NE(Figure(html, "fig-throughput-rate_row")
                .find("R=1.25 rps on ttft p95, R=1.50 rps on queue_bounded client in-flight"),
            std::string::npos);
  // The arrival figure has no opening burst on a schedule.
  std::string arrival = Figure(html, "fig-arrival-rate_row");
  ASSERT_FALSE(arrival.empty());
  EXPECT_EQ(arrival.find("burst: first"), std::string::npos);
}

// Bounded versus ever-growing: both sides' queues over time, each trial's send lateness beside.
TEST(ReportRateTest, TheQueueFigureDrawsBothSidesOverTime) {
  CapacityData d;
  d.rows.push_back(RateQualification());
  const std::string html = RenderReportHtml(d);
  const std::string fig = Figure(html, "fig-queue-rate_row");
  ASSERT_FALSE(fig.empty());
  EXPECT_NE(fig.find("R=1.25 rps (3 trials; send lateness p99 0.25/0.50/0.75 ms)"),
            std::string::npos);
  EXPECT_NE(fig.find("R=1.50 rps (3 trials"), std::string::npos);
  // 3 trials x 10 segments x (client + server) per side.
  size_t lines = 0;
  for (size_t at = fig.find("class=\"qline"); at != std::string::npos;
       at = fig.find("class=\"qline", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u * 3 * 10 * 2);
  EXPECT_NE(fig.find("qline fail server"), std::string::npos);
  // A closed-loop row has no such figure.
  CapacityData closed;
  closed.rows.push_back(RateQualification());
  closed.rows[0].row.arrival = ArrivalKind::kClosedLoop;
  EXPECT_TRUE(Figure(RenderReportHtml(closed), "fig-queue-rate_row").empty());
}

}  // namespace
}  // namespace capq
