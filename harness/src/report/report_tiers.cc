#include "report_tiers.h"

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/qualify/tiers.h"
#include "report_svg.h"

namespace capq::report {

namespace {

std::string TierId(const std::string& prefix, const std::string& row) {
  std::string out = prefix + "-";
  for (char c : row) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

// "p95 ttft < 2500 ms and p95 itl < 8.5 ms"
std::string GatesText(const std::vector<SloGate>& slo) {
  std::string out;
  for (const SloGate& g : slo) {
    out += (out.empty() ? "p" : " and p") + FormatShortest(g.percentile) + " " +
           SloMetricName(g.metric) + " < " + FormatShortest(g.below_ms) + " ms";
  }
  return out;
}

// The tier's verdicts on its confirmation trials at `level`, read from the trials themselves.
std::vector<TrialSummary> Views(const RowQualification& q, const TierQualification& t, int level) {
  std::vector<TrialSummary> out;
  for (const TierTrial* x : t.DecidedBy()) {
    if (x->level != level) continue;
    if (const TrialSummary* s = q.FindTrial(x->phase, x->level, x->trial)) {
      out.push_back(TierView(*s, t.slo));
    }
  }
  return out;
}

// One side of a tier's boundary: "C=3 itl p95 7.4/7.4/7.4 ms pass", coloured by its verdict.
std::string SideCell(const RowQualification& q, const TierQualification& t, int level) {
  std::vector<TrialSummary> views = Views(q, t, level);
  if (views.empty()) return "<td class=\"l\">—</td>";
  std::vector<const TrialSummary*> ts;
  int pass = 0;
  for (const auto& v : views) {
    ts.push_back(&v);
    pass += v.passed();
  }
  const char* cls = pass == static_cast<int>(ts.size()) ? "pass" : pass == 0 ? "fail" : "bad";
  return std::string("<td class=\"l ") + cls + "\">" +
         Esc(SideText(q.row.scale().Label(level), ts)) + "</td>";
}

std::string TierRow(const RowQualification& q, const TierQualification& t) {
  const std::optional<int> level = t.admitted();
  std::string admitted = level ? q.row.scale().Value(*level) : "—";
  if (level && t.status == QualifyStatus::kLowered) admitted = "(" + admitted + " operating point)";
  std::string html = "<tr><td class=\"l\">" + Esc(t.name) + "</td><td class=\"l\">" +
                     Esc(GatesText(t.slo)) + "</td><td class=\"l " +
                     (t.status == QualifyStatus::kProven ? "pass" : "bad") + "\">" +
                     Esc(QualifyStatusName(t.status)) + "</td><td>" + admitted + "</td>";
  html += level ? SideCell(q, t, *level) + SideCell(q, t, *level + 1)
                : "<td class=\"l\" colspan=\"2\">" + Esc(t.message) + "</td>";
  return html + "<td>" + std::to_string(t.trials_run) + "</td><td>" +
         std::to_string(t.trials_reused) + "</td></tr>\n";
}

std::string TierTable(const RowQualification& q) {
  const std::string max = q.row.scale().Max();
  std::string html = "<table id=\"" + TierId("tbl-tiers", q.row.id) +
                     "\"><tr><th class=\"l\">tier</th><th class=\"l\">gates</th><th "
                     "class=\"l\">result</th><th>" +
                     max + "</th><th class=\"l\">at " + max + "</th><th class=\"l\">at " + max +
                     " + 1</th><th>trials run</th><th>trials reused</th></tr>\n";
  for (const auto& t : q.tiers) html += TierRow(q, t);
  return html + "</table>\n";
}

// Each pair where one tier is at least as strict as another, with the levels they admit; a pair
// out of order is flagged.
std::string TierOrder(const RowQualification& q) {
  std::string held;
  for (const auto& strict : q.tiers) {
    for (const auto& loose : q.tiers) {
      if (&strict == &loose || !AtLeastAsStrict(strict.slo, loose.slo)) continue;
      const auto s = strict.admitted(), l = loose.admitted();
      if (!s || !l || *s > *l) continue;
      held += std::string(held.empty() ? "" : "; ") + strict.name + " " + q.row.scale().Value(*s) +
              " ≤ " + loose.name + " " + q.row.scale().Value(*l);
    }
  }
  std::string html;
  if (!held.empty()) html += "<p class=\"meta\">Order checked: " + Esc(held) + ".</p>\n";
  for (const std::string& v : TierOrderViolations(q)) {
    html += "<div class=\"summary bad\" id=\"" + TierId("tier-order", q.row.id) +
            "\">Tier order violated: " + Esc(v) +
            " — a bug or noise at the boundary; requalify with more trials.</div>\n";
  }
  return html;
}

std::string TierTrialList(const RowQualification& q) {
  std::string html = "<details><summary>Trials run for further tiers (" +
                     std::to_string(q.tier_trials.size()) +
                     ")</summary>\n<table><tr><th class=\"l\">trial</th><th "
                     "class=\"l\">directory</th><th class=\"l\">command</th></tr>\n";
  for (const auto& t : q.tier_trials) {
    html += "<tr><td class=\"l\">" + Esc(PhaseName(t.phase)) + " " + q.row.scale().Label(t.level) +
            " #" + std::to_string(t.trial) + "</td><td class=\"l\"><code>" + Esc(t.dir) +
            "</code></td><td class=\"l\"><code>" + Esc(t.command) + "</code></td></tr>\n";
  }
  return html + "</table>\n</details>\n";
}

}  // namespace

std::string TierSummaries(const RowQualification& q) {
  std::string html;
  for (size_t i = 1; i < q.tiers.size(); ++i) {
    const QualifyStatus s = q.tiers[i].status;
    const char* cls = s == QualifyStatus::kProven ? "proven"
                      : s == QualifyStatus::kLowered || s == QualifyStatus::kNoFailUpToCap
                          ? "lowered"
                          : "bad";
    html +=
        std::string("<div class=\"summary ") + cls + "\">" + Esc(TierLine(q.tiers[i])) + "</div>\n";
  }
  return html;
}

std::string TierSection(const RowQualification& q) {
  if (q.tiers.empty()) return "";
  std::string html = "<h3>SLO tiers</h3>\n";
  html +=
      "<p>Every tier is judged on the same trials: a trial measures once, each tier reads its own "
      "gates from that measurement, and a trial two tiers need at the same phase, " +
      q.row.scale().Symbol() +
      " and index runs once. Adding a gate (an ITL or end-to-end latency SLO, a higher "
      "percentile, a lower bound) can only keep or lower the admitted concurrency: a tier at "
      "least as strict as another (each of the other's gates, at a percentile as high and a bound "
      "as low) passes a trial only where the other does.</p>\n";
  html += TierTable(q) + TierOrder(q) + TierTrialList(q);
  return html;
}

}  // namespace capq::report
