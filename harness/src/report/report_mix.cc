#include "report_mix.h"

#include <algorithm>
#include <cmath>

#include "report_svg.h"

namespace capq::report {
namespace {

bool SameIdentity(const RowInfo& a, const RowInfo& b) {
  return a.engine == b.engine && a.image == b.image && a.model == b.model &&
         a.model_revision == b.model_revision && a.sim_profile == b.sim_profile;
}

std::string BoundaryText(const RowQualification& q) {
  if (q.cmax) return std::to_string(*q.cmax);
  if (q.row.expected_cmax) return std::to_string(*q.row.expected_cmax) + " (claimed)";
  return "unproven";
}

std::string SharesText(const RowInfo& r) {
  std::string s;
  for (const MixClass& c : r.mix) {
    s += (s.empty() ? "" : " : ") + c.name + " " + std::to_string(c.share);
  }
  return s;
}

std::vector<const TrialSummary*> MixedTrials(const RowQualification& q) {
  std::vector<const TrialSummary*> ts;
  for (const TrialSummary& t : q.trials) {
    if (!t.classes.empty()) ts.push_back(&t);
  }
  std::stable_sort(ts.begin(), ts.end(), [](const auto* a, const auto* b) {
    return a->level != b->level ? a->level < b->level : a->trial < b->trial;
  });
  return ts;
}

std::string ClassRow(const TrialSummary& t, const ClassVerdict& c, int total) {
  const double pct = total > 0 ? 100.0 * c.requests / total : NAN;
  return "<tr><td>" + std::to_string(t.level) + "</td><td class=\"l\">" + Esc(PhaseName(t.phase)) +
         " #" + std::to_string(t.trial) + "</td><td class=\"l\">" + Esc(c.name) + "</td><td>" +
         std::to_string(c.requests) + " (" + FormatFixed(pct, 1) + "%)</td><td>" +
         FormatFixed(c.ttft_p50_ms, 1) + "</td><td>" + FormatFixed(c.ttft_p95_ms, 1) + "</td><td>" +
         FormatFixed(c.ttft_p99_ms, 1) + "</td><td class=\"l " + (c.passed() ? "pass" : "fail") +
         "\">" + (c.passed() ? "met" : "MISSED") + "</td></tr>\n";
}

std::string ClassTable(const RowQualification& q) {
  std::string html =
      "<table id=\"tbl-mix-" + Esc(q.row.id) +
      "\"><tr><th>C</th><th class=\"l\">trial</th><th class=\"l\">class</th><th>sent "
      "(share)</th><th>TTFT p50 (ms)</th><th>TTFT p95</th><th>TTFT p99</th><th "
      "class=\"l\">class gates</th></tr>\n";
  for (const TrialSummary* t : MixedTrials(q)) {
    int total = 0;
    for (const ClassVerdict& c : t->classes) total += c.requests;
    for (const ClassVerdict& c : t->classes) html += ClassRow(*t, c, total);
  }
  return html + "</table>\n";
}

}  // namespace

std::string MixBesideIsolated(const CapacityData& d, const RowQualification& q) {
  std::string alone;
  for (const RowQualification& o : d.rows) {
    if (&o == &q || !o.row.mix.empty() || !SameIdentity(o.row, q.row)) continue;
    alone += (alone.empty() ? "" : " or ") + o.row.id + " " + BoundaryText(o);
  }
  const std::string mixed = BoundaryText(q) + " mixed at " + SharesText(q.row);
  return alone.empty() ? mixed + " (no isolated row of this identity in this data)"
                       : alone + " alone; " + mixed;
}

std::string MixSection(const CapacityData& d, const RowQualification& q) {
  if (q.row.mix.empty()) return "";
  return "<h3>Mixed replay: per-class tails</h3>\n<p>" + Esc(MixBesideIsolated(d, q)) +
         ". The isolated maxima are alternatives, not a sum; every SLO gate holds over all "
         "measured requests and over each class's own, so the class with the heaviest tail "
         "sets the mixed boundary.</p>\n" +
         ClassTable(q);
}

}  // namespace capq::report
