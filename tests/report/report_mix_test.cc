// The report's mixed-replay section: per-class tails, the mix sent, and the isolated rows beside.
#include <gtest/gtest.h>

#include <string>

#include "capq/record/capacity_data.h"
#include "capq/report/report.h"

namespace capq {
namespace {

RowQualification Isolated(const std::string& id, int cmax) {
  RowQualification q;
  q.row.id = id;
  q.row.engine = "sim";
  q.row.sim_profile = "/rows/sim/profiles/small.yaml";
  q.row.slo = {SloGate{SloMetric::kTtft, 95, 1200}};
  q.cmax = cmax;
  q.status = QualifyStatus::kProven;
  return q;
}

ClassVerdict Class(const std::string& name, int n, double p95, bool passed) {
  ClassVerdict c;
  c.name = name;
  c.requests = n;
  c.ttft_p50_ms = p95 / 2;
  c.ttft_p95_ms = p95;
  c.ttft_p99_ms = p95 + 10;
  c.gate_ms = {p95};
  c.gate_passed = {passed};
  return c;
}

CapacityData Data() {
  CapacityData d;
  d.rows = {Isolated("short_row", 6), Isolated("heavy_row", 4), Isolated("mixed_row", 6)};
  RowQualification& m = d.rows[2];
  for (auto [name, share] : {std::pair<const char*, int>{"short", 3}, {"heavy", 1}}) {
    MixClass c;
    c.name = name;
    c.share = share;
    m.row.mix.push_back(c);
  }
  TrialSummary t;
  t.phase = QualifyPhase::kConfirm;
  t.level = 7;
  t.trial = 2;
  t.outcome = TrialOutcome::kSloFail;
  t.classes = {Class("short", 90, 1100, true), Class("heavy", 30, 1903.4, false)};
  m.trials.push_back(t);
  return d;
}

TEST(ReportMix, MixedBoundaryBesideTheIsolatedRowsOfItsIdentity) {
  CapacityData d = Data();
  d.rows.push_back(Isolated("other_identity", 9));
  d.rows.back().row.sim_profile = "/elsewhere.yaml";
  const std::string html = RenderReportHtml(d);
  EXPECT_NE(html.find("short_row 6 or heavy_row 4 alone; 6 mixed at short 3 : heavy 1"),
            std::string::npos);
  EXPECT_EQ(html.find("other_identity 9 or"), std::string::npos);
}

TEST(ReportMix, PerClassTailsAndTheMixSentAreTabled) {
  const std::string html = RenderReportHtml(Data());
  const auto at = html.find("id=\"tbl-mix-mixed_row\"");
  ASSERT_NE(at, std::string::npos);
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  EXPECT_NE(
      table.find("<td class=\"l\">heavy</td><td>30 (25.0%)</td><td>951.7</td><td>1903.4</td>"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("MISSED"), std::string::npos);
  EXPECT_NE(table.find("90 (75.0%)"), std::string::npos);
  EXPECT_EQ(RenderReportHtml(CapacityData{}).find("Mixed replay"), std::string::npos);
}

TEST(ReportMix, CapacityDataKeepsTheMixAndTheClasses) {
  const CapacityData d = Data();
  auto back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const RowQualification& m = back->rows[2];
  ASSERT_EQ(m.row.mix.size(), 2u);
  EXPECT_EQ(m.row.mix[1].name, "heavy");
  EXPECT_EQ(m.row.mix[1].share, 1);
  ASSERT_EQ(m.trials.size(), 1u);
  ASSERT_EQ(m.trials[0].classes.size(), 2u);
  EXPECT_EQ(m.trials[0].classes[1].requests, 30);
  EXPECT_FALSE(m.trials[0].classes[1].passed());
  EXPECT_TRUE(back->rows[0].row.mix.empty());
}

}  // namespace
}  // namespace capq
