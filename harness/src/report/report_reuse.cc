#include "report_reuse.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "report_svg.h"

namespace capq::report {
namespace {

std::vector<const TrialSummary*> ReuseTrials(const RowQualification& q) {
  std::vector<const TrialSummary*> ts;
  for (const TrialSummary& t : q.trials) {
    if (t.reuse) ts.push_back(&t);
  }
  std::stable_sort(ts.begin(), ts.end(), [](const auto* a, const auto* b) {
    return a->level != b->level ? a->level < b->level : a->trial < b->trial;
  });
  return ts;
}

std::string HitRow(const TrialSummary& t, bool sessions) {
  const ReuseFigures& f = *t.reuse;
  std::string html = "<tr><td>" + std::to_string(t.level) + "</td><td class=\"l\">" +
                     Esc(PhaseName(t.phase)) + " #" + std::to_string(t.trial) + "</td><td>" +
                     std::to_string(f.requests) + "</td><td>" +
                     FormatFixed(f.declared_ratio * 100, 1) + "%</td><td>" +
                     FormatFixed(f.served_ratio * 100, 1) + "%</td>";
  if (sessions) {
    html += "<td>" + std::to_string(f.think_turns) + "</td><td>" +
            FormatFixed(f.think_declared_mean_s, 2) + "</td><td>" +
            FormatFixed(f.think_applied_mean_s, 2) + "</td>";
  }
  const bool ok = t.outcome != TrialOutcome::kCorrectnessFail;
  return html + "<td class=\"l " + (ok ? "pass" : "fail") + "\">" +
         Esc(TrialOutcomeName(t.outcome)) + "</td></tr>\n";
}

std::string HitTable(const RowQualification& q, bool sessions) {
  std::string html = "<table id=\"tbl-reuse-" + Esc(q.row.id) + "\"><tr><th>" +
                     Esc(q.row.scale().Symbol()) +
                     "</th><th class=\"l\">trial</th><th>requests</th><th>hit ratio "
                     "declared</th><th>served</th>";
  if (sessions) {
    html += "<th>later turns</th><th>think declared mean (s)</th><th>think applied mean (s)</th>";
  }
  html += "<th class=\"l\">outcome</th></tr>\n";
  for (const TrialSummary* t : ReuseTrials(q)) html += HitRow(*t, sessions);
  return html + "</table>\n";
}

// p95 TTFT per turn at `c`: the mean over its confirmation trials (NaN when none).
std::map<std::string, double> TurnTails(const RowQualification& q, int c, int* trials) {
  std::map<std::string, double> sum;
  std::map<std::string, int> n;
  *trials = 0;
  for (const TrialSummary& t : q.trials) {
    if (t.level != c || t.phase != QualifyPhase::kConfirm || t.classes.empty()) continue;
    ++*trials;
    for (const ClassVerdict& k : t.classes) {
      if (!std::isfinite(k.ttft_p95_ms)) continue;
      sum[k.name] += k.ttft_p95_ms;
      ++n[k.name];
    }
  }
  for (auto& [name, v] : sum) v /= n[name];
  return sum;
}

std::string TurnTable(const RowQualification& q) {
  if (!q.cmax) return "<p>No boundary was proven, so no turn-by-turn tails are shown.</p>\n";
  const int c = *q.cmax;
  int at_trials = 0, above_trials = 0;
  const auto at = TurnTails(q, c, &at_trials), above = TurnTails(q, c + 1, &above_trials);
  std::string html = "<table id=\"tbl-turns-" + Esc(q.row.id) +
                     "\"><tr><th class=\"l\">turn</th><th>TTFT p95 at C=" + std::to_string(c) +
                     " (ms, mean of " + std::to_string(at_trials) +
                     ")</th><th>at C=" + std::to_string(c + 1) + " (mean of " +
                     std::to_string(above_trials) + ")</th></tr>\n";
  for (int t = 1;; ++t) {  // every turn index, or turn 1 and the later turns together
    std::string name = TurnClass(t);
    if (t == 2 && (at.count(kLaterTurnsClass) || above.count(kLaterTurnsClass))) {
      name = kLaterTurnsClass;
    }
    const auto a = at.find(name), b = above.find(name);
    if (a == at.end() && b == above.end()) break;
    html += "<tr><td class=\"l\">" + name + "</td><td>" +
            FormatFixed(a == at.end() ? NAN : a->second, 1) + "</td><td>" +
            FormatFixed(b == above.end() ? NAN : b->second, 1) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace

std::string ReuseSection(const RowQualification& q) {
  if (q.row.reuse.empty()) return "";
  const bool sessions = q.row.arrival == ArrivalKind::kSessions;
  std::string html = "<h3>Cache reuse: declared and served</h3>\n<p>" +
                     Esc(sessions                                ? "Sessions: "
                         : q.row.arrival == ArrivalKind::kReplay ? "Trace prefix blocks: "
                                                                 : "Prefix groups: ") +
                     Esc(q.row.reuse) +
                     ". Every trial is gated on the hit ratio it was served (cache_reuse); a "
                     "cache that is off, evicted or split across replicas fails it.</p>\n";
  html += HitTable(q, sessions);
  if (sessions) html += "<h3>TTFT by turn index</h3>\n" + TurnTable(q);
  return html;
}

}  // namespace capq::report
