// The report's cache-reuse section: declared against served hit ratio per trial, the think time a
// session row applied, and the TTFT by turn index at the boundary and one step above.
#include <gtest/gtest.h>

#include <string>

#include "capq/record/capacity_data.h"
#include "capq/report/report.h"

namespace capq {
namespace {

ClassVerdict Turn(int t, double p95) {
  ClassVerdict c;
  c.name = TurnClass(t);
  c.requests = 20;
  c.ttft_p50_ms = p95 / 2;
  c.ttft_p95_ms = p95;
  c.ttft_p99_ms = p95;
  c.gate_ms = {p95};
  c.gate_passed = {p95 < 800};
  return c;
}

TrialSummary Confirm(int c, int trial, double p95_turn4, double served) {
  TrialSummary t;
  t.phase = QualifyPhase::kConfirm;
  t.level = c;
  t.trial = trial;
  t.outcome = p95_turn4 < 800 ? TrialOutcome::kPass : TrialOutcome::kSloFail;
  t.classes = {Turn(1, 200), Turn(2, 150), Turn(3, 160), Turn(4, p95_turn4)};
  ReuseFigures f;
  f.requests = 80;
  f.declared_ratio = 0.62;
  f.served_ratio = served;
  f.think_turns = 60;
  f.think_declared_mean_s = 1.01;
  f.think_applied_mean_s = 1.04;
  t.reuse = f;
  return t;
}

CapacityData SessionData() {
  CapacityData d;
  RowQualification q;
  q.row.id = "sessions_row";
  q.row.engine = "sim";
  q.row.arrival = ArrivalKind::kSessions;
  q.row.reuse = "4 turns, +128 tokens a turn, think exponential mean 1 s";
  q.row.slo = {SloGate{SloMetric::kTtft, 95, 800}};
  q.cmax = 5;
  q.status = QualifyStatus::kProven;
  for (int k = 1; k <= 2; ++k) {
    q.trials.push_back(Confirm(5, k, 700 + k, 0.615));
    q.trials.push_back(Confirm(6, k, 900 + k, 0.611));
  }
  d.rows.push_back(q);
  return d;
}

TEST(ReportReuse, DeclaredAndServedHitRatioAndThinkTimePerTrial) {
  const std::string html = RenderReportHtml(SessionData());
  EXPECT_NE(html.find("<table id=\"tbl-reuse-sessions_row\">"), std::string::npos);
  EXPECT_NE(html.find("<td>62.0%</td><td>61.5%</td><td>60</td><td>1.01</td><td>1.04</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("4 turns, +128 tokens a turn, think exponential mean 1 s"),
            std::string::npos);
}

TEST(ReportReuse, TtftByTurnAtTheBoundaryAndOneAbove) {
  const std::string html = RenderReportHtml(SessionData());
  const size_t at = html.find("<table id=\"tbl-turns-sessions_row\">");
  ASSERT_NE(at, std::string::npos) << html;
  EXPECT_NE(html.find("TTFT p95 at C=5 (ms, mean of 2)</th><th>at C=6 (mean of 2)", at),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">turn4</td><td>701.5</td><td>901.5</td>", at),
            std::string::npos);
}

TEST(ReportReuse, ARowWithoutReuseHasNoSection) {
  CapacityData d = SessionData();
  d.rows[0].row.reuse.clear();
  EXPECT_EQ(RenderReportHtml(d).find("tbl-reuse-"), std::string::npos);
}

}  // namespace
}  // namespace capq
