// The report's tables: one row's confirmation trials, prediction, locator probes and cost, and
// the tables across rows (overview, boundary per row, rows at their maximum, correctness totals).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "report_internal.h"
#include "report_svg.h"

namespace capq::report {

namespace {

std::string Range(double lo, double hi, int decimals) {
  if (!std::isfinite(lo)) return "n/a";
  if (std::fabs(hi - lo) < std::pow(10.0, -decimals) / 2) return FormatFixed(lo, decimals);
  return FormatFixed(lo, decimals) + " to " + FormatFixed(hi, decimals);
}

template <typename Fn>
std::string RangeOf(const std::vector<const TrialSummary*>& ts, Fn fn, int decimals,
                    double div = 1) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* t : ts) {
    double v = fn(*t);
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v / div);
    hi = std::max(hi, v / div);
  }
  return Range(lo, hi, decimals);
}

std::string Int(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  std::string out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out += ',';
    out += *it;
    ++n;
  }
  if (v < 0) out += '-';
  return std::string(out.rbegin(), out.rend());
}

std::string TrialRowCells(const TrialSummary& t, const Unit& u) {
  // A trial decided early has no percentile of its own: only the deciding gate's bound (the least
  // the percentile could have ended at), shown as one; the rest stopped unmeasured.
  auto cell = [&](double p, double ms) {
    if (!t.decided) return "<td>" + FormatFixed(ms / u.div, u.decimals + 1) + "</td>";
    const EarlyDecision& d = *t.decided;
    if (d.gate.metric != SloMetric::kTtft || d.gate.percentile != p)
      return std::string("<td>-</td>");
    return "<td>&ge; " + FormatFixed(d.lowest_reachable_ms / u.div, u.decimals + 1) + "</td>";
  };
  return cell(50, t.ttft_ms.p50) + cell(95, t.ttft_ms.p95) + cell(99, t.ttft_ms.p99);
}

// "4 / 4": the most cached prompt tokens a measured request showed against the template prefix
// verify_cold allowed (the evidence that the trial ran cold).
std::string CachedCell(const TrialSummary& t) {
  auto n = [](int64_t v) { return v < 0 ? std::string("-") : std::to_string(v); };
  return n(t.max_cached_tokens) + " / " + n(t.cold_allowed_tokens);
}

CorrectnessTotals Sum(const std::vector<const TrialSummary*>& ts) {
  CorrectnessTotals s;
  for (const auto* t : ts) {
    s.streams += t->totals.streams;
    s.completion_tokens += t->totals.completion_tokens;
    s.nonempty_chunks += t->totals.nonempty_chunks;
    s.utf8_bytes += t->totals.utf8_bytes;
    s.unique_output_hashes += t->totals.unique_output_hashes;
    s.warmup_prompts += t->totals.warmup_prompts;
    s.measured_prompts += t->totals.measured_prompts;
  }
  return s;
}

std::vector<const TrialSummary*> Confirmations(const RowQualification& q) {
  std::vector<const TrialSummary*> out;
  for (const auto& t : q.trials) {
    if (t.phase == QualifyPhase::kConfirm) out.push_back(&t);
  }
  return out;
}

int CountCorrect(const std::vector<const TrialSummary*>& ts) {
  int ok = 0;
  for (const auto* t : ts) ok += t->correctness_pass;
  return ok;
}

// Each gate's confidence of its side from this trial's requests: "ttft 0.87 below"; "-" when no
// gate has one (data written before trials stated it).
std::string ConfidenceCell(const TrialSummary& t) {
  std::string out;
  for (const SloCheck& c : t.slo) {
    if (c.confidence.requests <= 0 || std::isnan(c.confidence.confidence)) continue;
    out += (out.empty() ? "" : ", ") + c.metric + " " + FormatFixed(c.confidence.confidence, 2) +
           (c.confidence.pass_side ? " below" : " at or above");
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string TblBoundary(const RowQualification& q) {
  Unit u = TtftUnit(q.row);
  const LoadScale scale = q.row.scale();
  std::string html =
      "<table id=\"" + Id("tbl-boundary", q.row.id) + "\"><tr><th>" +
      (scale.open_loop ? "rate (rps)" : "concurrency") +
      "</th><th>trial</th><th>seed</th><th "
      "class=\"l\">corpus</th><th>cached max / allowed</th><th>TTFT p50 (" +
      u.name +
      ")</th><th>TTFT p95</th><th>TTFT p99</th><th>steady p95</th><th>ITL "
      "p50 (ms)</th><th>ITL p95 (ms)</th><th>output tok/s</th><th>req/s</th><th "
      "class=\"l\">verdict</th><th class=\"l\">decided by</th><th class=\"l\">confidence "
      "(this trial)</th></tr>\n";
  std::vector<const TrialSummary*> ts;
  for (const auto& t : q.trials) {
    if (t.phase == QualifyPhase::kConfirm) ts.push_back(&t);
  }
  std::stable_sort(ts.begin(), ts.end(), [](const auto* a, const auto* b) {
    return a->level != b->level ? a->level < b->level : a->trial < b->trial;
  });
  for (const auto* t : ts) {
    std::string verdict = VerdictWord(*t);
    if (!t->failed_gates.empty()) verdict += ": " + t->failed_gates.front().Text();
    if (t->decided) verdict += " (decided early, " + FormatFixed(t->decided->after_s, 1) + " s in)";
    // A decided trial's figures cover only what finished before the decision: none is shown.
    const auto fig = [t](double v, int decimals) {
      return t->decided ? std::string("-") : FormatFixed(v, decimals);
    };
    html += "<tr><td>" + scale.Figure(t->level) + "</td><td>" + std::to_string(t->trial) +
            "</td><td>" + std::to_string(t->seed) + "</td><td class=\"l\">" + Esc(t->corpus) +
            "</td><td>" + CachedCell(*t) + "</td>" + TrialRowCells(*t, u) + "<td>" +
            fig(t->ttft_p95_steady_ms / u.div, u.decimals + 1) + "</td><td>" +
            fig(t->itl_ms.p50, 3) + "</td><td>" + fig(t->itl_ms.p95, 3) + "</td><td>" +
            fig(t->output_tok_s, 1) + "</td><td>" + fig(t->request_per_s, 3) +
            "</td><td class=\"l " + VerdictClass(*t) + "\">" + Esc(verdict) +
            "</td><td class=\"l\">" + Esc(DecidedBy(*t)) + "</td><td class=\"l\">" +
            Esc(ConfidenceCell(*t)) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

namespace {

// "+12% (3 trials)": the prediction's error at `level` against its trials' median; "—" when no
// trial measured it.
std::string PredictionErrorText(const RowQualification& q, int level) {
  for (const PredictionCheck& c : q.prediction_checks) {
    if (c.level != level || !std::isfinite(c.error_pct)) continue;
    return std::string(c.error_pct >= 0 ? "+" : "−") + FormatFixed(std::fabs(c.error_pct), 0) +
           "% (" + std::to_string(c.trials) + (c.trials == 1 ? " trial)" : " trials)");
  }
  return "—";
}

}  // namespace

// The prediction beside the outcome: per predicted level the predicted gating value, the
// trials' measured p95 and the prediction's error against their median, then how each
// engine-model parameter was obtained.
std::string TblPrediction(const RowQualification& q) {
  if (q.predicted_curve.empty()) return "";
  const LoadScale scale = q.row.scale();
  const std::optional<int> proven = q.proven_level();
  std::string html =
      "<p class=\"meta\" id=\"" + Id("prediction", q.row.id) + "\">Prediction (" +
      Esc(q.prediction_source) + "): " + scale.Max() + " " +
      (q.predicted_cmax ? scale.Value(*q.predicted_cmax) : std::string("none")) +
      (q.refined_cmax ? ", refined to " + scale.Value(*q.refined_cmax) + " by a probe's ITL"
                      : std::string()) +
      "; measured " + (proven ? scale.Value(*proven) : std::string("not proven")) +
      (proven && q.predicted_cmax ? " (" + std::string(*proven >= *q.predicted_cmax ? "+" : "") +
                                        std::to_string(*proven - *q.predicted_cmax) + " levels)"
                                  : "") +
      ".</p>\n<table><tr><th>" + scale.Symbol() +
      "</th><th>predicted</th><th>measured (every trial)</th><th>error vs median</th></tr>\n";
  const Unit u = TtftUnit(q.row);
  for (const PredictedPoint& pt : q.predicted_curve) {
    std::string measured;
    for (const auto& t : q.trials) {
      if (t.level != pt.level || !t.has_metrics) continue;
      measured += (measured.empty() ? "" : ", ") + FormatFixed(t.GatingMs() / u.div, u.decimals);
    }
    html += "<tr><td>" + scale.Figure(pt.level) + "</td><td>" +
            FormatFixed(pt.gating_ms / u.div, u.decimals) + " " + u.name +
            (pt.passes ? " pass" : " fail") + "</td><td>" +
            (measured.empty() ? "—" : measured + " " + u.name) + "</td><td>" +
            PredictionErrorText(q, pt.level) + "</td></tr>\n";
  }
  html += "</table>\n";
  if (q.prediction_parameters.empty()) return html;
  html += "<details><summary>Engine-model parameters (" +
          std::to_string(q.prediction_parameters.size()) +
          ")</summary>\n<table><tr><th class=\"l\">parameter</th><th>value</th><th "
          "class=\"l\">basis</th><th class=\"l\">how</th></tr>\n";
  for (const engine::Parameter& x : q.prediction_parameters) {
    html += "<tr><td class=\"l\">" + Esc(x.name) + "</td><td>" + FormatShortest(x.value) +
            "</td><td class=\"l\">" + engine::BasisName(x.basis) + "</td><td class=\"l\">" +
            Esc(x.how) + "</td></tr>\n";
  }
  return html + "</table>\n</details>\n";
}

std::string TblLocate(const RowQualification& q) {
  Unit u = TtftUnit(q.row);
  const LoadScale scale = q.row.scale();
  std::string html = "<table id=\"" + Id("tbl-locate", q.row.id) + "\"><tr><th>phase</th><th>" +
                     (scale.open_loop ? "R (rps)" : "C") + "</th><th>TTFT p50 (" + u.name +
                     ")</th><th>TTFT p95</th><th>TTFT p99</th><th>output tok/s</th><th "
                     "class=\"l\">verdict</th><th class=\"l\">decided by</th><th "
                     "class=\"l\">chosen by</th><th "
                     "class=\"l\">corpus</th><th>cached max / allowed</th></tr>\n";
  for (const auto& t : q.trials) {
    if (t.phase == QualifyPhase::kConfirm) continue;
    html += "<tr><td class=\"l\">" + std::string(PhaseName(t.phase)) + "</td><td>" +
            scale.Figure(t.level) + "</td>" + TrialRowCells(t, u) + "<td>" +
            (t.decided ? std::string("-") : FormatFixed(t.output_tok_s, 1)) +
            "</td><td class=\"l " + VerdictClass(t) + "\">" + VerdictWord(t) +
            (t.decided ? " (decided early)" : "") + "</td><td class=\"l\">" + Esc(DecidedBy(t)) +
            "</td><td class=\"l\">" + Esc(t.move) + "</td><td class=\"l\">" + Esc(t.corpus) +
            "</td><td>" + CachedCell(t) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

std::string TblCost(const RowQualification& q) {
  std::string html = "<table id=\"" + Id("tbl-cost", q.row.id) +
                     "\"><tr><th class=\"l\">phase</th><th>trials</th><th>wall time (s)</th><th>"
                     "share</th></tr>\n";
  int total = 0;
  for (const auto& p : q.phases) {
    total += p.trials;
    html += "<tr><td class=\"l\">" + Esc(p.name) + "</td><td>" + std::to_string(p.trials) +
            "</td><td>" + FormatFixed(p.wall_s, 1) + "</td><td>" +
            FormatFixed(q.wall_s > 0 ? 100.0 * p.wall_s / q.wall_s : NAN, 0) + "%</td></tr>\n";
  }
  html += "<tr><th class=\"l\">total</th><th>" + std::to_string(total) + "</th><th>" +
          FormatFixed(q.wall_s, 1) + "</th><th></th></tr>\n</table>\n";
  if (q.probe_budget > 0) {
    html += "<p class=\"muted\">Locate used " + std::to_string(q.probes) +
            " probes; the budget ⌈log2 " + (q.row.open_loop() ? "(Rmax / step)" : "Cmax") +
            "⌉ + 2 is " + std::to_string(q.probe_budget) + " (" +
            (q.probes <= q.probe_budget ? "met" : "exceeded") + ").</p>\n";
  }
  return html;
}

std::string TblCorrectness(const CapacityData& d) {
  std::string html =
      "<table id=\"tbl-correctness\"><tr><th class=\"l\">row</th><th>confirmation "
      "trials</th><th>correct</th><th>measured streams</th><th>completion tokens</th><th>non-empty "
      "chunks</th><th>UTF-8 bytes</th><th>unique output hashes</th><th>warm-up prompts (absent "
      "from measured)</th></tr>\n";
  std::vector<const TrialSummary*> all;
  auto line = [&](const std::string& name, const std::vector<const TrialSummary*>& ts, bool bold) {
    CorrectnessTotals s = Sum(ts);
    const int ok = CountCorrect(ts);
    std::string td = bold ? "th" : "td";
    return "<tr><" + td + " class=\"l\">" + Esc(name) + "</" + td + "><" + td + ">" +
           std::to_string(ts.size()) + "</" + td + "><" + td +
           (ok == (int)ts.size() ? "" : " class=\"bad\"") + ">" + std::to_string(ok) + "</" + td +
           "><" + td + ">" + Int(s.streams) + "</" + td + "><" + td + ">" +
           Int(s.completion_tokens) + "</" + td + "><" + td + ">" + Int(s.nonempty_chunks) + "</" +
           td + "><" + td + ">" + Int(s.utf8_bytes) + "</" + td + "><" + td + ">" +
           Int(s.unique_output_hashes) + "</" + td + "><" + td + ">" + Int(s.warmup_prompts) +
           "</" + td + "></tr>\n";
  };
  for (const auto& q : d.rows) {
    auto ts = Confirmations(q);
    all.insert(all.end(), ts.begin(), ts.end());
    html += line(q.row.id, ts, false);
  }
  if (d.rows.size() > 1) html += line("all rows", all, true);
  html += "</table>\n";
  CorrectnessTotals s = Sum(all);
  const int ok = CountCorrect(all);
  html +=
      "<p>Across all " + std::to_string(all.size()) +
      " boundary confirmations, the validator checked " + Int(s.streams) +
      " measured streams and " + Int(s.completion_tokens) + " server-counted completion tokens; " +
      std::to_string(ok) + " of " + std::to_string(all.size()) +
      " trials passed every correctness gate. The raw streams contained " + Int(s.nonempty_chunks) +
      " non-empty generated-text chunks and " + Int(s.utf8_bytes) + " UTF-8 bytes.</p>\n";
  return html;
}

std::string TblRows(const CapacityData& d) {
  // With rate rows in the data a boundary is a concurrency or a rate: the cells say which.
  const std::string what = AnyRateRow(d) ? "C or R" : "C";
  std::string html =
      "<table id=\"tbl-rows\"><tr><th class=\"l\">row</th><th>shape (in / out)</th><th>server "
      "prompt range</th><th>maximum passing " +
      what +
      "</th><th class=\"l\">deciding gate, passing "
      "trials</th><th>first failing " +
      what +
      "</th><th class=\"l\">deciding gate, failing "
      "trials</th><th class=\"l\">result</th></tr>\n";
  for (const auto& q : d.rows) {
    const LoadScale scale = q.row.scale();
    auto b = Boundary(q);
    int64_t pmin = 0, pmax = 0;
    for (const auto& t : q.trials) {
      if (t.phase != QualifyPhase::kConfirm || t.prompt_tokens_max == 0) continue;
      pmin = pmin == 0 ? t.prompt_tokens_min : std::min(pmin, t.prompt_tokens_min);
      pmax = std::max(pmax, t.prompt_tokens_max);
    }
    html += "<tr><td class=\"l\">" + Esc(q.row.id) + "</td><td>" + Shape(q.row) + "</td><td>" +
            (pmax ? Int(pmin) + " to " + Int(pmax) : "n/a") + "</td>";
    if (b) {
      auto cell = [&](int level) {
        return scale.open_loop ? scale.Label(level) : std::to_string(level);
      };
      html += "<td>" + cell(*b) + "</td><td class=\"l\">" +
              Esc(SideFigures(q.Trials(QualifyPhase::kConfirm, *b))) + "</td><td>" + cell(*b + 1) +
              "</td><td class=\"l\">" + Esc(SideFigures(q.Trials(QualifyPhase::kConfirm, *b + 1))) +
              "</td>";
    } else {
      html += "<td>n/a</td><td></td><td>n/a</td><td></td>";
    }
    html += "<td class=\"l\">" + Esc(QualifyStatusName(q.status)) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

std::string TblMaxPass(const CapacityData& d) {
  std::string html =
      "<table id=\"tbl-maxpass\"><tr><th class=\"l\">shape at " +
      std::string(AnyRateRow(d) ? "Cmax or Rmax" : "Cmax") +
      "</th><th>request/s</th><th>"
      "aggregate output tok/s</th><th>ITL p50 (ms)</th><th>ITL p95 (ms)</th><th>ITL p99 "
      "(ms)</th><th>request-latency p95</th></tr>\n";
  for (const auto& q : d.rows) {
    auto b = Boundary(q);
    if (!b) continue;
    auto ts = q.Trials(QualifyPhase::kConfirm, *b);
    Unit u = UnitFor(Slo(q.row));
    html += "<tr><td class=\"l\">" + Esc(q.row.id) + " " + Shape(q.row) + " at " +
            q.row.scale().Label(*b) + "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.request_per_s; }, 3) +
            "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.output_tok_s; }, 1) +
            "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.itl_ms.p50; }, 3) +
            "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.itl_ms.p95; }, 3) +
            "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.itl_ms.p99; }, 3) +
            "</td><td>" +
            RangeOf(
                ts, [](const TrialSummary& t) { return t.e2e_ms.p95; }, u.decimals + 1, u.div) +
            " " + u.name + "</td></tr>\n";
  }
  html +=
      "</table>\n<p class=\"muted\">ITL is the spacing one streaming user sees between "
      "tokens, not 1000 / aggregate throughput.</p>\n";
  return html;
}

std::string TblOverview(const CapacityData& d) {
  std::string html =
      "<table id=\"tbl-overview\"><tr><th class=\"l\">row</th><th>shape</th><th "
      "class=\"l\">SLO</th><th class=\"l\">result</th><th>" +
      std::string(AnyRateRow(d) ? "Cmax or Rmax" : "Cmax") +
      "</th><th>probes (budget)</th><th>"
      "trials</th><th>wall (s)</th></tr>\n";
  for (const auto& q : d.rows) {
    auto b = Boundary(q);
    const LoadScale scale = q.row.scale();
    auto proven = q.proven_level();
    std::string cmax =
        proven ? scale.Value(*proven) : (b ? "(" + scale.Value(*b) + " operating point)" : "—");
    html += "<tr><td class=\"l\"><a href=\"#" + Id("row", q.row.id) + "\">" + Esc(q.row.id) +
            "</a></td><td>" + Shape(q.row) + "</td><td class=\"l\">" + Esc(SloText(q.row)) +
            "</td><td class=\"l " + (q.status == QualifyStatus::kProven ? "pass" : "bad") + "\">" +
            Esc(QualifyStatusName(q.status)) + "</td><td>" + cmax + "</td><td>" +
            std::to_string(q.probes) +
            (q.probe_budget ? " (" + std::to_string(q.probe_budget) + ")" : "") + "</td><td>" +
            std::to_string(q.trials.size()) + "</td><td>" + FormatFixed(q.wall_s, 1) +
            "</td></tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace capq::report
