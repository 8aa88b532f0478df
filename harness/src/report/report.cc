#include "capq/report/report.h"

#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/qualify/recommend.h"
#include "capq/record/artifacts.h"
#include "report_internal.h"
#include "report_mix.h"
#include "report_reuse.h"
#include "report_svg.h"
#include "report_tiers.h"
#include "report_trace.h"

namespace capq {

namespace report {

namespace {

constexpr const char* kCss = R"css(
:root { --pass: #1a7f37; --fail: #c62828; --probe: #6b7280; --burst: #e07b00; --ink: #1f2328;
        --muted: #59636e; --line: #d0d7de; --bg: #ffffff; --panel: #f6f8fa; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: var(--ink);
       background: var(--bg); margin: 0 auto; max-width: 1320px; padding: 24px 32px 64px; line-height: 1.45; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 40px 0 8px; padding-top: 12px; border-top: 2px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.meta, .muted { color: var(--muted); font-size: 13px; }
.summary { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 14px; background: var(--panel);
           border-left: 4px solid var(--line); padding: 8px 12px; margin: 8px 0; white-space: pre-wrap; }
.summary.proven { border-left-color: var(--pass); }
.summary.bad { border-left-color: var(--fail); }
.summary.lowered { border-left-color: var(--burst); }
.policy { border-left: 4px dashed var(--line); padding: 2px 12px; margin: 8px 0; font-size: 13px; }
.policy p { margin: 4px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: right; }
th { background: var(--panel); font-weight: 600; }
td.l, th.l { text-align: left; }
td.pass { color: var(--pass); font-weight: 600; }
td.fail, td.bad { color: var(--fail); font-weight: 600; }
td.probe { color: var(--probe); }
figure { margin: 16px 0 24px; display: inline-block; vertical-align: top; }
figure:not(.wide) { max-width: 600px; margin-right: 12px; }
figure.wide { display: block; }
figcaption { font-size: 13px; color: var(--muted); max-width: 900px; margin-top: 4px; }
figcaption b { color: var(--ink); }
.panels { display: flex; flex-wrap: wrap; gap: 8px; }
.legend { font-size: 12px; color: var(--muted); margin: 2px 0 0 64px; }
.legend span { margin-right: 14px; white-space: nowrap; }
.sw { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 4px; vertical-align: -1px; }
svg.plot { background: #fff; font-size: 11px; }
svg .grid { stroke: #eef1f4; stroke-width: 1; }
svg .frame { fill: none; stroke: #9aa4ae; stroke-width: 1; }
svg .tickmark { stroke: #9aa4ae; }
svg .tick { fill: var(--muted); font-size: 11px; }
svg .axis-label { fill: var(--ink); font-size: 12px; }
svg .slo { stroke: var(--fail); stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .slo-label { fill: var(--fail); font-size: 11px; }
svg .pt.pass { fill: var(--pass); }
svg .pt.fail { fill: var(--fail); }
svg .pt.probe, svg .pt.baseline { fill: #fff; stroke-width: 1.8; }
svg .pt.probe.pass, svg .pt.baseline.pass { stroke: var(--pass); }
svg .pt.probe.fail, svg .pt.baseline.fail { stroke: var(--fail); }
svg .pt.other { fill: var(--probe); }
svg .pred { fill: none; stroke: #8c6bb1; stroke-width: 1.6; stroke-dasharray: 5 3; }
svg .pred-pt { fill: #8c6bb1; }
svg .aux { fill: none; stroke: var(--probe); stroke-width: 1.4; }
svg .qline { fill: none; stroke-width: 1.3; opacity: 0.8; }
svg .qline.pass { stroke: var(--pass); }
svg .qline.fail { stroke: var(--fail); }
svg .qline.server { stroke-dasharray: 4 3; }
svg path.aux.p99 { fill: #9aa4ae; stroke: none; }
svg .verdict { font-size: 12px; font-weight: 700; }
svg .verdict.pass { fill: var(--pass); }
svg .verdict.fail { fill: var(--fail); }
svg .verdict.mixed { fill: var(--burst); }
svg .band-pass { fill: rgba(26,127,55,0.12); }
svg .band-fail { fill: rgba(198,40,40,0.12); }
svg .band-pass-label { fill: var(--pass); font-size: 11px; }
svg .band-fail-label { fill: var(--fail); font-size: 11px; }
svg .burst { fill: rgba(224,123,0,0.10); }
svg .burst-label { fill: var(--burst); font-size: 11px; }
svg .req.burst { fill: var(--burst); }
svg .req.steady { fill: #3b6fb6; }
svg .req { fill-opacity: 0.75; }
svg .trace-pt { fill: #9a9a9a; fill-opacity: 0.45; }
svg .sent-pt { fill: #3b6fb6; fill-opacity: 0.8; }
svg .trace-line { fill: none; stroke: #9a9a9a; stroke-width: 1.6; }
svg .sent-line { fill: none; stroke: #3b6fb6; stroke-width: 1.2; }
svg .p95full { stroke: var(--ink); stroke-width: 1.3; stroke-dasharray: 3 3; }
svg .p95full-label { fill: var(--ink); font-size: 11px; }
svg .p95steady { stroke: #3b6fb6; stroke-width: 1.3; stroke-dasharray: 1 3; }
svg .p95steady-label { fill: #3b6fb6; font-size: 11px; }
svg .bar.baseline { fill: #8c6bb1; }
svg .bar.probe { fill: #9aa4ae; }
svg .bar.confirm.pass { fill: var(--pass); }
svg .bar.confirm.fail, svg .bar.probe.fail { fill: var(--fail); }
svg .bar.confirm { fill: var(--pass); }
svg .bar.row { fill: #3b6fb6; }
svg .bar.row.srv0, .sw.srv0 { fill: #3b6fb6; background: #3b6fb6; }
svg .bar.row.srv1, .sw.srv1 { fill: #e07b00; background: #e07b00; }
svg .bar.row.srv2, .sw.srv2 { fill: #7b4fa0; background: #7b4fa0; }
svg .bar.row.srv3, .sw.srv3 { fill: #2a9d8f; background: #2a9d8f; }
svg .bar.row.srv4, .sw.srv4 { fill: #b5563a; background: #b5563a; }
svg .bar.row.srv5, .sw.srv5 { fill: #6b7280; background: #6b7280; }
svg .bar-text { fill: #fff; font-size: 11px; font-weight: 600; }
svg .bar-label { fill: var(--ink); font-size: 12px; font-weight: 600; }
svg .panel-title { fill: var(--ink); font-size: 12px; font-weight: 600; }
details { margin: 8px 0; font-size: 12px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
)css";

std::string StatusClass(QualifyStatus s) {
  if (s == QualifyStatus::kProven) return "proven";
  if (s == QualifyStatus::kLowered || s == QualifyStatus::kNoFailUpToCap) return "lowered";
  return "bad";
}

// How a row measures: "measured max(64, 4·C)"; on a rate row its arrivals and interval,
// "poisson arrivals at 0.25 requests/s per level · measured 120 requests after a 10 s ramp".
std::string MeasuredMeta(const RowInfo& r) {
  if (!r.open_loop()) {
    return "measured max(" + std::to_string(r.min_requests) + ", " +
           std::to_string(r.per_concurrency) + "·C)";
  }
  std::string interval = r.measured_requests
                             ? std::to_string(*r.measured_requests) + " requests"
                             : FormatShortest(r.measured_duration_s.value_or(0)) + " s";
  return Esc(ArrivalKindName(r.arrival)) + " arrivals at " + FormatShortest(r.rate_step_rps) +
         " requests/s per level · measured " + interval +
         (r.ramp_s > 0 ? " after a " + FormatShortest(r.ramp_s) + " s ramp" : "");
}

// "identity.image = repo@sha256:... · slo = p95 ttft < 10000 ms"
std::string PinnedText(const std::vector<PinnedField>& pinned) {
  std::string out;
  for (const auto& p : pinned) {
    out += (out.empty() ? "" : " · ") + ("<code>" + Esc(p.field) + "</code> = " + Esc(p.value));
  }
  return out.empty() ? "—" : out;
}

// The stored recommendation; for a qualification that has none (made in memory), the one its
// trials give, as the capacity data reader does for data written without one.
Recommendation RecommendationOf(const RowQualification& q) {
  const Recommendation& r = q.recommendation;
  if (r.level || !r.reason.empty()) return r;
  return Recommend(q, RequalifyFields(q.row));
}

// The recommended operating limit, under the measured result and labelled a policy.
std::string PolicySection(const RowQualification& q) {
  const Recommendation rec = RecommendationOf(q);
  const LoadScale scale = q.row.scale();
  std::string html =
      "<h3>Operating limit (a policy, not the benchmark answer)</h3>\n<div "
      "class=\"policy\" id=\"" +
      Id("rec", q.row.id) + "\">\n";
  if (!rec.level) {
    return html + "<p>No recommended operating limit: " + Esc(rec.reason) + ".</p>\n</div>\n";
  }
  auto proven = q.proven_level();
  html +=
      "<p><b>Operate at " + scale.Label(*rec.level) + "</b>" +
      (proven ? "; the measured maximum stays " + scale.Max() + " = " + scale.Value(*proven) : "") +
      ". Rule: " + Esc(rec.rule) + ".</p>\n<p>Why: " + Esc(rec.reason) + ".</p>\n";
  html += "<p>Margin kept: " + Esc(rec.margin ? rec.margin->text : "not measured") + ".</p>\n";
  return html + "<p>Requalify when any of these change: " + PinnedText(rec.requalify_on) +
         ".</p>\n</div>\n";
}

std::string RowSection(const RowQualification& q) {
  const RowInfo& r = q.row;
  std::string html = "<section id=\"" + Id("row", r.id) + "\">\n<h2>" + Esc(r.id) +
                     (r.title.empty() ? "" : " — " + Esc(r.title)) + "</h2>\n";
  html +=
      "<div class=\"summary " + StatusClass(q.status) + "\">" + Esc(SummaryLine(q)) + "</div>\n";
  html += "<p>" + Esc(q.message) + "</p>\n";
  html += "<p class=\"meta\">engine " + Esc(r.engine) +
          (r.image.empty() ? "" : " · image " + Esc(r.image)) +
          (r.model.empty() ? "" : " · model " + Esc(r.model)) +
          (r.model_revision.empty() ? "" : "@" + Esc(r.model_revision)) +
          (r.hardware.empty() ? "" : " · " + Esc(r.hardware)) +
          (r.sim_profile.empty() ? "" : " · profile " + Esc(r.sim_profile)) + " · workload " +
          Shape(r) + " tokens · SLO " + Esc(SloText(r)) + " (" + Esc(r.percentile_method) +
          " percentiles) · warm-up " + std::to_string(r.warmup_requests) +
          " at C=" + std::to_string(r.warmup_concurrency) + " · " + MeasuredMeta(r) +
          (r.time_scale != 1 ? " · simulator time scale " + FormatFixed(r.time_scale, 0) +
                                   "×: every duration is virtual time"
                             : "") +
          (q.url.empty() ? "" : " · server " + Esc(q.url)) + "</p>\n";
  if (q.baseline.checked || !q.baseline.message.empty()) {
    html +=
        "<p class=\"meta\">" + r.scale().Label(1) + " baseline: " + Esc(q.baseline.message) +
        (q.baseline.checked ? (q.baseline.within ? " — within tolerance" : " — OUTSIDE tolerance")
                            : "") +
        "</p>\n";
  }
  html += PolicySection(q);
  html += report::TierSection(q);
  html += FigTtft(q);
  html += FigThroughput(q);
  html += "<h3>Confirmation trials</h3>\n" + TblBoundary(q);
  html += FigArrival(q);
  html += FigQueue(q);
  html += "<h3>Baseline and locator probes (navigation, not evidence)</h3>\n";
  if (q.predicted_cmax) {
    html += "<p class=\"meta\">The search started at the predicted " + r.scale().Max() + " = " +
            r.scale().Value(*q.predicted_cmax) +
            (q.prediction_note.empty() ? "" : " (" + Esc(q.prediction_note) + ")") +
            "; a prediction only chooses where to probe.</p>\n";
  }
  html += TblPrediction(q);
  html += TblLocate(q);
  html += "<h3>Qualification cost</h3>\n" + FigTimeline(q) + TblCost(q);
  html += "<details><summary>Trial directories, commands and checksums (" +
          std::to_string(q.trials.size()) +
          ")</summary>\n<table><tr><th class=\"l\">trial</th><th "
          "class=\"l\">directory</th><th class=\"l\">command</th></tr>\n";
  for (const auto& t : q.trials) {
    html += "<tr><td class=\"l\">" + std::string(PhaseName(t.phase)) + " " +
            r.scale().Label(t.level) + " #" + std::to_string(t.trial) +
            "</td><td class=\"l\"><code>" + Esc(t.dir) + "</code></td><td class=\"l\"><code>" +
            Esc(t.command) + "</code></td></tr>\n";
  }
  html += "</table>\n</details>\n</section>\n";
  return html;
}

}  // namespace

}  // namespace report

std::string RenderReportHtml(const CapacityData& d) {
  using namespace report;
  std::string title = "capq capacity report";
  if (d.rows.size() == 1) title += " — " + d.rows.front().row.id;
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>" +
      Esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
  html += "<h1>" + Esc(title) + "</h1>\n";
  html += "<p class=\"meta\">capacity data " + Esc(d.schema) + " · generated " +
          Esc(d.generated_utc) +
          (d.command.empty() ? "" : " · <code>" + Esc(d.command) + "</code>") + "</p>\n";
  html +=
      "<p>Cmax is the largest concurrency whose independent cold-cache trials all keep every "
      "SLO gate's percentile strictly below its bound with every correctness gate passing, "
      "while every trial at Cmax+1 misses at least one. Every figure names its gate: a side "
      "that passed is decided by the gate that came closest to its bound, a side that failed "
      "by the gate that failed. Probes only navigate; the confirmations carry the "
      "claim.</p>\n";
  if (AnyRateRow(d)) {
    html +=
        "<p>Rmax, for a rate row, is the largest arrival rate (a multiple of the row's step) whose "
        "independent trials all meet every SLO gate with a bounded queue and stationary latency, "
        "while every trial one step above misses an SLO gate or a stability gate; a side that met "
        "its SLO but not a stability gate is named by that gate.</p>\n";
  }
  // Summary lines are derived again from the trials, so that data written before the lines named
  // their deciding gates reads like new data; for new data they equal the stored summary_line.
  for (const auto& q : d.rows) {
    html +=
        "<div class=\"summary " + StatusClass(q.status) + "\">" + Esc(SummaryLine(q)) + "</div>\n";
    const std::string confidence = BoundaryConfidenceLine(q, BoundaryConfidence(q));
    if (!confidence.empty()) html += "<p class=\"confidence\">" + Esc(confidence) + "</p>\n";
    html += report::TierSummaries(q);
  }
  html += TblOverview(d);
  html += "<h2>Boundaries</h2>\n";
  html += FigBoundary(d);
  html += FigSurface(d);
  html += "<h3>Boundary per row</h3>\n" + TblRows(d);
  html += "<h3>Rows at their maximum passing concurrency</h3>\n" + TblMaxPass(d);
  html += "<h3>Correctness totals</h3>\n" + TblCorrectness(d);
  for (const auto& q : d.rows) {
    html += RowSection(q) + report::MixSection(d, q) + report::TraceSection(q) +
            report::ReuseSection(q);
  }
  html +=
      "<p class=\"muted\">A result for one pinned identity and one workload row; requalify "
      "when the image, checkpoint, runtime, driver, graph policy, speculative settings or "
      "workload change.</p>\n</body>\n</html>\n";
  return html;
}

Status WriteReport(const std::string& html_path, const CapacityData& data) {
  return WriteFileAtomic(html_path, RenderReportHtml(data), ParentDirs::kCreate);
}

}  // namespace capq
