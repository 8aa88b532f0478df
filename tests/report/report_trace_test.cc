// The report's trace section: a mixed row's traffic file beside what a trial at its boundary sent,
// as paired lengths and, on a replay, arrivals over time; kept in the capacity data.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "capq/model/row_loader.h"
#include "capq/record/capacity_data.h"
#include "capq/report/report.h"

namespace capq {
namespace {

size_t Count(const std::string& html, const std::string& what) {
  size_t n = 0;
  for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
  return n;
}

TrialSummary Confirm(int level, int trial, bool replay) {
  TrialSummary t;
  t.phase = QualifyPhase::kConfirm;
  t.level = level;
  t.trial = trial;
  t.outcome = TrialOutcome::kPass;
  SentRequests s;
  for (int i = 0; i < 4; ++i) {  // the server counts 51 template tokens on top
    s.requests.push_back({151 + 100 * i, 10 + i, 2.0 * i});
  }
  s.requests.push_back({-1, -1, NAN});  // never sent
  if (replay) s.first_trace_index = 1;
  t.sent = s;
  return t;
}

CapacityData TraceData(bool replay) {
  CapacityData d;
  RowQualification q;
  q.row.id = "trace_row";
  q.row.engine = "sim";
  q.row.arrival = replay ? ArrivalKind::kReplay : ArrivalKind::kClosedLoop;
  q.row.rate_step_rps = replay ? 0.5 : 0;
  q.row.slo = {SloGate{SloMetric::kTtft, 95, 800}};
  q.row.trace_file = "trace.jsonl";
  for (int i = 0; i < 10; ++i) q.row.trace.push_back({100 * (i + 1), 10 + i, 1.0 * i});
  if (replay) {
    q.rmax_rps = 1.0;
  } else {
    q.cmax = 2;
  }
  q.status = QualifyStatus::kProven;
  q.trials.push_back(Confirm(2, 1, replay));
  q.trials.push_back(Confirm(3, 1, replay));
  d.rows.push_back(q);
  return d;
}

TEST(ReportTrace, TheTraceBesideTheBoundaryTrialsRequests) {
  const std::string html = RenderReportHtml(TraceData(true));
  const size_t at = html.find("<table id=\"tbl-trace-trace_row\">");
  ASSERT_NE(at, std::string::npos) << html;
  // Nearest rank: the trace's 10 inputs 100..1000 (p50 500, p95 1000); the 4 sent 151..451.
  EXPECT_NE(html.find("<td class=\"l\">trace</td><td>10</td><td>500</td><td>1000</td><td>14</td>"
                      "<td>19</td>",
                      at),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">sent</td><td>4</td><td>251</td><td>451</td><td>11</td>"
                      "<td>13</td>",
                      at),
            std::string::npos);
  EXPECT_EQ(Count(html, "class=\"trace-pt\""), 10u);
  EXPECT_EQ(Count(html, "class=\"sent-pt\""), 4u);
  // Arrivals: sent at 0, 2, 4, 6 s; the trace's samples 1..4 at 1..4 s, stretched x2.
  EXPECT_NE(html.find("fig-trace-arrivals-trace_row"), std::string::npos);
  EXPECT_NE(html.find("same requests x 2.000"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"sent-line\""), 3u);
  EXPECT_NE(html.find("R=1.0 rps trial 1"), std::string::npos);  // the boundary, not R=1.5
}

TEST(ReportTrace, AClosedLoopMixHasLengthsButNoArrivals) {
  const std::string html = RenderReportHtml(TraceData(false));
  EXPECT_NE(html.find("tbl-trace-trace_row"), std::string::npos);
  EXPECT_EQ(html.find("fig-trace-arrivals-"), std::string::npos);
  EXPECT_NE(html.find("C=2 trial 1"), std::string::npos);
}

TEST(ReportTrace, NoTraceOrNothingSentMeansNoSection) {
  CapacityData d = TraceData(true);
  d.rows[0].row.trace.clear();
  EXPECT_EQ(RenderReportHtml(d).find("tbl-trace-"), std::string::npos);
  d = TraceData(true);
  for (TrialSummary& t : d.rows[0].trials) t.sent.reset();
  EXPECT_EQ(RenderReportHtml(d).find("tbl-trace-"), std::string::npos);
}

TEST(ReportTrace, TheTraceAndWhatWasSentSurviveTheCapacityData) {
  const CapacityData d = TraceData(true);
  Result<CapacityData> back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const RowQualification& q = back->rows[0];
  EXPECT_EQ(q.row.trace_file, "trace.jsonl");
  ASSERT_EQ(q.row.trace.size(), 10u);
  EXPECT_EQ(q.row.trace[9].input_tokens, 1000);
  EXPECT_EQ(q.row.trace[9].output_tokens, 19);
  EXPECT_DOUBLE_EQ(q.row.trace[9].offset_s, 9);
  ASSERT_TRUE(q.trials[0].sent);
  const SentRequests& s = *q.trials[0].sent;
  EXPECT_EQ(s.first_trace_index, 1);
  ASSERT_EQ(s.requests.size(), 5u);
  EXPECT_EQ(s.requests[3].input_tokens, 451);
  EXPECT_DOUBLE_EQ(s.requests[3].send_s, 6);
  EXPECT_EQ(s.requests[4].input_tokens, -1);
  EXPECT_TRUE(std::isnan(s.requests[4].send_s));
  EXPECT_EQ(RenderReportHtml(*back), RenderReportHtml(d));
}

// A trajectory sent as whole recorded prompts keeps its turns as the trace: every turn of the
// file, in file order, as the row fits it.
TEST(ReportTrace, AWholePromptTrajectoryIsATrace) {
  Result<Row> row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_weka_agent.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  const RowInfo info = RowInfoFromRow(*row);
  EXPECT_EQ(info.trace_file, "weka_sessions.jsonl");
  ASSERT_EQ(info.trace.size(), 130u);
  // trace_0001 turn 1: 71,175 tokens = 139 groups of 512 and 7 more (7 / 32 rounds to none).
  EXPECT_EQ(info.trace[0].input_tokens, 139 * 16);
  EXPECT_EQ(info.trace[0].output_tokens, 5);  // 169 / 32
  EXPECT_TRUE(std::isnan(info.trace[0].offset_s));
  Result<Row> history = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_agent.yaml");
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(RowInfoFromRow(*history).trace.empty()) << "a resent history is no trace's prompt";
}

}  // namespace
}  // namespace capq
