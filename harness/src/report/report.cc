#include "capq/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/qualify/recommend.h"
#include "capq/record/artifacts.h"
#include "report_internal.h"
#include "report_mix.h"
#include "report_reuse.h"
#include "report_svg.h"
#include "report_tiers.h"

namespace capq {

namespace report {

namespace {

constexpr const char *kCss = R"css(
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
svg .bar-text { fill: #fff; font-size: 11px; font-weight: 600; }
svg .bar-label { fill: var(--ink); font-size: 12px; font-weight: 600; }
svg .panel-title { fill: var(--ink); font-size: 12px; font-weight: 600; }
details { margin: 8px 0; font-size: 12px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
)css";

std::string StatusClass(QualifyStatus s) {
  if (s == QualifyStatus::kProven)
    return "proven";
  if (s == QualifyStatus::kLowered || s == QualifyStatus::kNoFailUpToCap)
    return "lowered";
  return "bad";
}

// The gate that decided a side, for captions: "itl p95", or "several gates"
// when its trials failed on different ones.
std::string SideGateName(const std::vector<const TrialSummary *> &ts) {
  SideGates s = DecideSide(ts);
  if (!s.stability_gate.empty())
    return s.stability_gate;
  return s.gate ? GateName(*s.gate) : std::string("several gates");
}

// Where a level sits on a figure's x axis: C itself, or a rate row's rate in
// requests/s.
double LevelX(const LoadScale &scale, int level) {
  return scale.open_loop ? scale.Rate(level) : level;
}

// The x axis of the figures against load: concurrency, or a rate row's arrival
// rate.
Axis LoadAxis(const LoadScale &scale, int max_level) {
  if (!scale.open_loop) {
    return NiceAxis(0, max_level + 1, std::min(max_level + 1, 12),
                    "concurrency C", true);
  }
  return NiceAxis(0, scale.Rate(max_level + 1), std::min(max_level + 1, 12),
                  "arrival rate R (requests/s)");
}

// A jitter in the x axis's unit: a step of a rate row is rate_step_rps wide.
double JitterX(const LoadScale &scale, double jitter) {
  return scale.open_loop ? jitter * scale.rate_step_rps : jitter;
}

// "C", "R": what a figure plots against, for titles and captions.
std::string Against(const LoadScale &scale) {
  return scale.open_loop ? "arrival rate" : "concurrency";
}

std::vector<const TrialSummary *> WithMetrics(const RowQualification &q) {
  std::vector<const TrialSummary *> out;
  for (const auto &t : q.trials) {
    if (t.has_metrics)
      out.push_back(&t);
  }
  return out;
}

// The engine model's predicted curve on the TTFT figure, when it predicted the
// p95 TTFT gate: a dashed line through the predicted points inside the axis.
// Returns whether it drew one.
bool DrawPredictedCurve(const RowQualification &q, const Axis &x, const Unit &u,
                        Plot *p) {
  const RowInfo &r = q.row;
  if (q.predicted_curve.empty() || r.slo.empty() ||
      r.slo.front().metric != SloMetric::kTtft ||
      r.slo.front().percentile != 95 || r.open_loop()) {
    return false;
  }
  const PredictedPoint *last = nullptr;
  for (const PredictedPoint &pt : q.predicted_curve) {
    if (pt.level > x.max || !std::isfinite(pt.gating_ms))
      break;
    const double y = pt.gating_ms / u.div;
    if (last)
      p->Line(last->level, last->gating_ms / u.div, pt.level, y, "pred");
    p->Circle(pt.level, y, 2.5, "pred-pt",
              "predicted " + r.scale().Label(pt.level) + ": p95 " +
                  F(y, u.decimals) + " " + u.name +
                  (pt.passes ? " (pass)" : " (fail)"));
    last = &pt;
  }
  return last != nullptr;
}

// Figure: p95 TTFT (with p50 and p99) against C, every trial a point, the
// verdict per C on top.
std::string FigTtft(const RowQualification &q) {
  const RowInfo &r = q.row;
  Unit u = TtftUnit(r);
  const SloGate *gate = TtftGate(r);
  auto ts = WithMetrics(q);
  int max_c = 1;
  double max_y = gate ? gate->below_ms : NAN;
  for (const auto *t : ts) {
    max_c = std::max(max_c, t->concurrency);
    for (double v : {t->ttft_ms.p99, t->ttft_ms.p95}) {
      if (std::isfinite(v))
        max_y = std::isfinite(max_y) ? std::max(max_y, v) : v;
    }
  }
  for (const PredictedPoint &pt : q.predicted_curve) {
    if (pt.level <= max_c && std::isfinite(pt.gating_ms))
      max_y = std::max(max_y, pt.gating_ms);
  }
  const LoadScale scale = r.scale();
  Axis x = LoadAxis(scale, max_c);
  Axis y = NiceAxis(0, (std::isfinite(max_y) ? max_y : 1) * 1.08 / u.div, 6,
                    "TTFT (" + u.name + ")");
  Plot p(596, 360, x, y);
  p.top = 34;
  if (gate) {
    p.HLine(gate->below_ms / u.div, "slo", "SLO: " + GateSpec(*gate));
  }
  const bool curve = DrawPredictedCurve(q, x, u, &p);
  std::map<int, std::vector<const TrialSummary *>> by_c;
  for (const auto *t : ts)
    by_c[t->concurrency].push_back(t);
  for (const auto &[c, list] : by_c) {
    int pass = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const TrialSummary &t = *list[i];
      pass += t.passed();
      double xc = LevelX(scale, c) +
                  JitterX(scale, Jitter(static_cast<int>(i),
                                        static_cast<int>(list.size())));
      std::string what =
          t.phase + " " + scale.Label(c) + " trial " + std::to_string(t.trial);
      p.Marker(xc, t.ttft_ms.p50 / u.div, "dash", "aux p50",
               what + ": p50 " + F(t.ttft_ms.p50 / u.div, u.decimals) + " " +
                   u.name);
      p.Marker(xc, t.ttft_ms.p99 / u.div, "tri", "aux p99",
               what + ": p99 " + F(t.ttft_ms.p99 / u.div, u.decimals) + " " +
                   u.name);
      p.Circle(xc, t.ttft_ms.p95 / u.div, 4.5,
               "pt " + VerdictClass(t) + " " + t.phase,
               what + ": p95 " + F(t.ttft_ms.p95 / u.div, u.decimals) + " " +
                   u.name + ", " + VerdictTip(t));
    }
    std::string cls = pass == static_cast<int>(list.size())
                          ? "pass"
                          : (pass == 0 ? "fail" : "mixed");
    std::string mark = cls == "pass"   ? "✓"
                       : cls == "fail" ? "✗"
                                       : std::to_string(pass) + "/" +
                                             std::to_string(list.size());
    p.TextPx(p.X(LevelX(scale, c)), p.top - 10, mark, "verdict " + cls);
  }
  std::string html = "<figure id=\"" + Id("fig-ttft", r.id) + "\">\n";
  html += p.Render(r.id + ": TTFT percentiles against " + Against(scale));
  html += "<div class=\"legend\"><span><i class=\"sw\" "
          "style=\"background:var(--pass)\"></i>confirm "
          "pass</span><span><i class=\"sw\" "
          "style=\"background:var(--fail)\"></i>confirm fail</span>"
          "<span><i class=\"sw\" style=\"border:2px solid "
          "var(--probe)\"></i>baseline / probe "
          "(navigation)</span><span>▲ p99 &nbsp;– p50</span><span>✓ ✗ verdict "
          "per " +
          scale.Symbol() + "</span>" +
          (curve ? "<span><i class=\"sw\" style=\"border-top:2px dashed "
                   "#8c6bb1\"></i>predicted "
                   "p95 (engine model)</span>"
                 : "") +
          "</div>\n";
  html += "<figcaption><b>TTFT percentiles against " + scale.Symbol() +
          "</b> for every trial of " + Esc(r.id) + " (" +
          std::to_string(ts.size()) +
          " points). Circles are p95, triangles p99, dashes p50; " +
          (gate ? "the dashed line is the TTFT gate. "
                : "the row has no TTFT gate. ") +
          "Medians stay flat while the tail decides the boundary." +
          (r.slo.size() > 1
               ? " The colour is the trial's verdict over every gate (SLO: " +
                     Esc(SloText(r)) +
                     "); each point's title names the gate that "
                     "decided it."
               : "") +
          "</figcaption>\n</figure>\n";
  return html;
}

// Figure 1: output throughput against C; the Cmax and Cmax+1 ranges drawn as
// bands.
std::string FigThroughput(const RowQualification &q) {
  const RowInfo &r = q.row;
  auto ts = WithMetrics(q);
  int max_c = 1;
  double max_y = 0;
  for (const auto *t : ts) {
    max_c = std::max(max_c, t->concurrency);
    if (std::isfinite(t->output_tok_s))
      max_y = std::max(max_y, t->output_tok_s);
  }
  const LoadScale scale = r.scale();
  Axis x = LoadAxis(scale, max_c);
  Axis y =
      NiceAxis(0, std::max(1.0, max_y * 1.1), 6, "output tok/s (all streams)");
  Plot p(596, 360, x, y);
  std::string caption;
  if (auto b = Boundary(q)) {
    auto side = [&](int c, const std::string &cls, const std::string &anchor) {
      double lo = INFINITY, hi = -INFINITY;
      for (const auto *t : q.Trials("confirm", c)) {
        if (!std::isfinite(t->output_tok_s))
          continue;
        lo = std::min(lo, t->output_tok_s);
        hi = std::max(hi, t->output_tok_s);
      }
      if (std::isfinite(lo)) {
        // Unlabelled: the caption and the legend carry the numbers, the points
        // stay readable.
        p.HBand(lo, hi, cls, "", anchor);
      }
      return std::make_pair(lo, hi);
    };
    auto a = side(*b, "band-pass", "start");
    auto c = side(*b + 1, "band-fail", "end");
    if (std::isfinite(a.first) && std::isfinite(c.first)) {
      bool overlap = a.first <= c.second && c.first <= a.second;
      caption =
          " At the boundary " + scale.Label(*b) + " emitted " + F(a.first, 1) +
          "–" + F(a.second, 1) + " tok/s and " + scale.Label(*b + 1) + " " +
          F(c.first, 1) + "–" + F(c.second, 1) + " tok/s: the ranges " +
          (overlap ? "<b>overlap</b>" : "do not overlap") + ", while the " +
          (scale.open_loop ? "SLO and stability gates give" : "SLO gives") +
          " the pass/fail decision (" + scale.Label(*b) + " on " +
          Esc(SideGateName(q.Trials("confirm", *b))) + ", " +
          scale.Label(*b + 1) + " on " +
          Esc(SideGateName(q.Trials("confirm", *b + 1))) + ").";
    }
  }
  std::map<int, std::vector<const TrialSummary *>> by_c;
  for (const auto *t : ts)
    by_c[t->concurrency].push_back(t);
  for (const auto &[c, list] : by_c) {
    for (size_t i = 0; i < list.size(); ++i) {
      const TrialSummary &t = *list[i];
      double xc = LevelX(scale, c) +
                  JitterX(scale, Jitter(static_cast<int>(i),
                                        static_cast<int>(list.size())));
      p.Circle(xc, t.output_tok_s, 4.5, "pt " + VerdictClass(t) + " " + t.phase,
               t.phase + " " + scale.Label(c) + " trial " +
                   std::to_string(t.trial) + ": " + F(t.output_tok_s, 1) +
                   " tok/s, " + VerdictTip(t));
    }
  }
  std::string html = "<figure id=\"" + Id("fig-throughput", r.id) + "\">\n";
  html += p.Render(r.id + ": output throughput against " + Against(scale));
  if (auto b = Boundary(q)) {
    html += "<div class=\"legend\"><span><i class=\"sw\" "
            "style=\"background:rgba(26,127,55,0.35)\">"
            "</i>range of the " +
            scale.Label(*b) +
            " trials</span><span><i class=\"sw\" "
            "style=\"background:rgba(198,40,40,0.35)\"></i>range of the " +
            scale.Label(*b + 1) + " trials</span></div>\n";
  }
  html += "<figcaption><b>Figure 1 — output throughput against " +
          scale.Symbol() + "</b> (" + std::to_string(ts.size()) + " trials)." +
          caption +
          " Throughput describes completed work, not "
          "admission.</figcaption>\n</figure>\n";
  return html;
}

struct ArrivalStats {
  double p95_full = NAN, p95_steady = NAN;
  int tail = 0, tail_in_burst = 0;
};

// `burst`: the opening burst's size, the first C requests of a closed loop (0
// on a rate row, whose ramp is not measured).
ArrivalStats ArrivalOf(const TrialSummary &t, int burst) {
  ArrivalStats s;
  s.p95_full = t.ttft_ms.p95;
  s.p95_steady = t.ttft_p95_steady_ms;
  std::vector<std::pair<double, int>> v;
  for (size_t i = 0; i < t.ttft_ms_by_arrival.size(); ++i) {
    if (std::isfinite(t.ttft_ms_by_arrival[i]))
      v.push_back({t.ttft_ms_by_arrival[i], (int)i});
  }
  std::sort(v.rbegin(), v.rend());
  // The requests at or above p95: with 64 requests the four slowest decide it.
  s.tail = static_cast<int>(std::ceil(v.size() * 0.05));
  for (int i = 0; i < s.tail && i < static_cast<int>(v.size()); ++i) {
    s.tail_in_burst += v[i].second < burst;
  }
  return s;
}

std::string FigArrivalPanel(const RowQualification &q, int c, const Unit &u,
                            double y_max) {
  auto ts = q.Trials("confirm", c);
  const LoadScale scale = q.row.scale();
  const int burst = scale.open_loop ? 0 : c;
  size_t n = 0;
  for (const auto *t : ts)
    n = std::max(n, t->ttft_ms_by_arrival.size());
  Axis x = NiceAxis(0, std::max<size_t>(n, 1) + 1, 8,
                    "arrival order (measured requests)", true);
  Axis y = NiceAxis(0, y_max * 1.08 / u.div, 6, "TTFT (" + u.name + ")");
  Plot p(560, 320, x, y);
  if (burst > 0)
    p.Band(0.5, burst + 0.5, "burst", "burst: first " + std::to_string(burst));
  if (const SloGate *gate = TtftGate(q.row)) {
    p.HLine(gate->below_ms / u.div, "slo", "TTFT SLO", "start");
  }
  std::vector<double> full, steady;
  int k = 0;
  for (const auto *t : ts) {
    ++k;
    for (size_t i = 0; i < t->ttft_ms_by_arrival.size(); ++i) {
      double v = t->ttft_ms_by_arrival[i];
      bool in_burst = static_cast<int>(i) < burst;
      p.Circle(static_cast<double>(i + 1) +
                   Jitter(k - 1, static_cast<int>(ts.size()), 0.2),
               v / u.div, 2.4,
               std::string("req ") + (in_burst ? "burst" : "steady"),
               "trial " + std::to_string(t->trial) + ", request " +
                   std::to_string(i + 1) + ": " + F(v / u.div, u.decimals) +
                   " " + u.name);
    }
    full.push_back(t->ttft_ms.p95);
    steady.push_back(t->ttft_p95_steady_ms);
  }
  auto median = [](std::vector<double> v) {
    v.erase(std::remove_if(v.begin(), v.end(),
                           [](double d) { return !std::isfinite(d); }),
            v.end());
    if (v.empty())
      return static_cast<double>(NAN);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mf = median(full), ms = median(steady);
  p.HLine(mf / u.div, "p95full",
          "full p95 " + F(mf / u.div, u.decimals) + " " + u.name);
  // Centred, so it does not sit on the full-p95 label when the two lines
  // coincide.
  p.HLine(ms / u.div, "p95steady",
          "steady p95 " + F(ms / u.div, u.decimals) + " " + u.name, "middle");
  std::string title =
      scale.Label(c) + " (" + std::to_string(ts.size()) + " trials)";
  p.TextPx(p.left, 16, title, "panel-title", "start");
  return p.Render(q.row.id + ": TTFT by arrival order at " + scale.Label(c));
}

// One side of the queue figure: every confirmation trial at `level`, the
// client's in-flight count as a solid line and the server's queue gauge dashed,
// over the measured interval.
std::string FigQueuePanel(const RowQualification &q, int level, double t_max,
                          double y_max) {
  const LoadScale scale = q.row.scale();
  const auto ts = q.Trials("confirm", level);
  Plot p(596, 300,
         NiceAxis(0, t_max, 6, "seconds into the measured interval (wall)"),
         NiceAxis(0, y_max * 1.08, 6, "requests"));
  for (const TrialSummary *t : ts) {
    const std::string cls = t->passed() ? "qline pass" : "qline fail";
    for (size_t i = 1; i < t->queue_series.size(); ++i) {
      const auto &a = t->queue_series[i - 1], &b = t->queue_series[i];
      p.Line(a.t_s, a.in_flight, b.t_s, b.in_flight, cls);
      if (a.server_waiting >= 0 && b.server_waiting >= 0) {
        p.Line(a.t_s, a.server_waiting, b.t_s, b.server_waiting,
               cls + " server");
      }
    }
  }
  std::string lateness;
  for (const TrialSummary *t : ts) {
    lateness += (lateness.empty() ? "" : "/") + F(t->send_lateness_p99_ms, 2);
  }
  p.TextPx(p.left, 16,
           scale.Label(level) + " (" + std::to_string(ts.size()) +
               " trials; send lateness p99 " + lateness + " ms)",
           "panel-title", "start");
  return p.Render(q.row.id + ": queue over time at " + scale.Label(level));
}

// Rate rows: bounded versus ever-growing, the picture behind the queue_bounded
// gate.
std::string FigQueue(const RowQualification &q) {
  auto b = Boundary(q);
  if (!b || !q.row.open_loop())
    return "";
  double t_max = 1, y_max = 1;
  bool any = false;
  for (int level : {*b, *b + 1}) {
    for (const TrialSummary *t : q.Trials("confirm", level)) {
      for (const auto &pt : t->queue_series) {
        any = true;
        t_max = std::max(t_max, pt.t_s);
        y_max = std::max({y_max, pt.in_flight, pt.server_waiting});
      }
    }
  }
  if (!any)
    return "";
  const LoadScale scale = q.row.scale();
  return "<figure class=\"wide\" id=\"" + Id("fig-queue", q.row.id) +
         "\">\n<div class=\"panels\">\n" + FigQueuePanel(q, *b, t_max, y_max) +
         FigQueuePanel(q, *b + 1, t_max, y_max) +
         "</div>\n<div class=\"legend\"><span>— the client's requests in "
         "flight</span><span>- - "
         "the server's queued requests (its /metrics "
         "gauge)</span></div>\n<figcaption><b>Queue "
         "over time at " +
         scale.Label(*b) + " and " + scale.Label(*b + 1) +
         "</b>, every confirmation trial. At Rmax the queue stays level; one "
         "step above it grows "
         "through the interval. The queue_bounded gate compares the last "
         "third's mean with the "
         "first third's; the panel titles give each trial's send lateness p99 "
         "(the schedule_held "
         "gate).</figcaption>\n</figure>\n";
}

std::string FigArrival(const RowQualification &q) {
  auto b = Boundary(q);
  if (!b)
    return "";
  Unit u = TtftUnit(q.row);
  const LoadScale scale = q.row.scale();
  double y_max = TtftGate(q.row) ? TtftGate(q.row)->below_ms : 0;
  int requests = 0;
  for (int c : {*b, *b + 1}) {
    for (const auto *t : q.Trials("confirm", c)) {
      for (double v : t->ttft_ms_by_arrival) {
        if (std::isfinite(v))
          y_max = std::max(y_max, v);
        ++requests;
      }
    }
  }
  std::string html = "<figure class=\"wide\" id=\"" +
                     Id("fig-arrival", q.row.id) +
                     "\">\n<div class=\"panels\">\n";
  html += FigArrivalPanel(q, *b, u, y_max);
  html += FigArrivalPanel(q, *b + 1, u, y_max);
  html += "</div>\n";
  if (scale.open_loop) {
    // A rate row sends on a schedule: no opening burst, and its ramp is sent
    // but not measured.
    html += "<div class=\"legend\"><span><i class=\"sw\" "
            "style=\"background:#3b6fb6\"></i>measured "
            "requests in the order they were scheduled</span><span>- - full "
            "p95</span></div>\n";
    html +=
        "<figcaption><b>TTFT by arrival order at " + scale.Label(*b) + " and " +
        scale.Label(*b + 1) + "</b> (" + std::to_string(requests) +
        " measured requests, after the ramp). A queue that grows shows as TTFT "
        "that climbs "
        "with the arrival order; a bounded one as a flat band.</figcaption>\n";
  } else {
    html += "<div class=\"legend\"><span><i class=\"sw\" "
            "style=\"background:var(--burst)\"></i>opening "
            "burst (the first C requests, sent together, queue for "
            "prefill)</span><span><i "
            "class=\"sw\" "
            "style=\"background:#3b6fb6\"></i>steady state</span><span>- - "
            "full p95</span><span>· · "
            "steady-state p95 (requests after the first C)</span></div>\n";
    html += "<figcaption><b>TTFT by arrival order at C=" + std::to_string(*b) +
            " and C=" + std::to_string(*b + 1) + "</b> (" +
            std::to_string(requests) +
            " measured requests). With few measured requests the slowest "
            "handful decide p95; the "
            "table below says how many of them belong to the opening burst and "
            "what p95 would be "
            "without it.</figcaption>\n";
  }
  // Per-trial burst share.
  html +=
      "<table id=\"" + Id("tbl-arrival", q.row.id) + "\"><tr><th>" +
      (scale.open_loop ? "R (rps)" : "C") +
      "</th><th>trial</th><th>requests</th><th>full p95</th><th>steady p95" +
      (scale.open_loop ? "" : " (after first C)") +
      "</th><th>slowest 5% in opening burst</th><th>verdict</th><th "
      "class=\"l\">decided by</th></tr>\n";
  for (int c : {*b, *b + 1}) {
    for (const auto *t : q.Trials("confirm", c)) {
      ArrivalStats s = ArrivalOf(*t, scale.open_loop ? 0 : c);
      html += "<tr><td>" + scale.Figure(c) + "</td><td>" +
              std::to_string(t->trial) + "</td><td>" +
              std::to_string(t->ttft_ms_by_arrival.size()) + "</td><td>" +
              F(s.p95_full / u.div, u.decimals) + " " + u.name + "</td><td>" +
              F(s.p95_steady / u.div, u.decimals) + " " + u.name + "</td><td>" +
              (scale.open_loop ? std::string("—")
                               : std::to_string(s.tail_in_burst) + " of " +
                                     std::to_string(s.tail)) +
              "</td><td class=\"" + VerdictClass(*t) + "\">" + VerdictWord(*t) +
              "</td><td class=\"l\">" + Esc(DecidedBy(*t)) + "</td></tr>\n";
    }
  }
  html += "</table>\n</figure>\n";
  return html;
}

// Figure 4: the protocol timeline, one lane per phase, one bar per trial.
std::string FigTimeline(const RowQualification &q) {
  double end = std::max(q.wall_s, 1e-3);
  for (const auto &t : q.trials)
    end = std::max(end, t.start_offset_s + t.wall_s);
  Axis x = NiceAxis(0, end, 8, "wall time since the qualification started (s)");
  Axis y;
  y.min = -0.6;
  y.max = 2.6;
  y.ticks = {0, 1, 2};
  y.tick_labels = {"confirm", "locate", "baseline"};
  y.label = "";
  Plot p(1000, 190, x, y);
  p.left = 80;
  auto lane = [](const std::string &phase) {
    return phase == "baseline" ? 2.0 : phase == "probe" ? 1.0 : 0.0;
  };
  for (const auto &t : q.trials) {
    double l = lane(t.phase);
    p.Rect(t.start_offset_s, l - 0.32,
           t.start_offset_s + std::max(t.wall_s, end * 0.002), l + 0.32,
           "bar " + t.phase + " " + VerdictClass(t),
           t.phase + " " + q.row.scale().Label(t.concurrency) + " trial " +
               std::to_string(t.trial) + ": " + VerdictTip(t) + ", " +
               F(t.wall_s, 1) + " s");
    if (t.wall_s > end * 0.035) {
      // A rate label is wider: the bar must be too.
      if (!q.row.open_loop() || t.wall_s > end * 0.08) {
        p.Text(t.start_offset_s + t.wall_s / 2, l - 0.12,
               q.row.scale().Label(t.concurrency), "bar-text");
      }
    }
  }
  std::string costs;
  for (const auto &ph : q.phases) {
    if (!costs.empty())
      costs += " · ";
    std::string unit = ph.name == "locate" ? "probe" : "trial";
    costs += ph.name + " " + std::to_string(ph.trials) + " " + unit +
             (ph.trials == 1 ? "" : "s") + " " + F(ph.wall_s, 1) + " s";
  }
  std::string html =
      "<figure class=\"wide\" id=\"" + Id("fig-timeline", q.row.id) + "\">\n";
  html += p.Render(q.row.id + ": protocol timeline");
  html += "<figcaption><b>Figure 4 — protocol timeline</b> (" +
          std::to_string(q.trials.size()) + " trials, " + F(q.wall_s, 1) +
          " s): " + Esc(costs) +
          ". The locator saves test time; the adjacent confirmations carry the "
          "claim.</figcaption>\n"
          "</figure>\n";
  return html;
}

// Figure 2: every row's boundary with its trials on both sides.
std::string FigBoundary(const CapacityData &d) {
  std::string panels;
  int points = 0;
  for (const auto &q : d.rows) {
    auto b = Boundary(q);
    if (!b)
      continue;
    auto low = q.Trials("confirm", *b);
    auto high = q.Trials("confirm", *b + 1);
    SideGates gl = DecideSide(low), gh = DecideSide(high);
    const LoadScale scale = q.row.scale();
    // One gate decided both sides: its values against its bound. Otherwise each
    // trial's deciding gate as a share of its own bound, so that the line at
    // 100% is every gate's bound.
    const SloCheck *one =
        gl.gate && (high.empty() || (gh.gate && SameGate(*gl.gate, *gh.gate)))
            ? gl.gate
            : nullptr;
    Unit u = one ? UnitFor(one->below_ms) : Unit{};
    auto value = [&](const SloCheck &g) {
      return one ? g.measured_ms / u.div : 100.0 * GateRatio(g);
    };
    double y_max = one ? one->below_ms / u.div : 100.0;
    // A trial a stability gate decided sits at its last third as a share of its
    // bound.
    auto stability_value = [](const std::string *f) {
      return f ? 100.0 * StabilityRatio(*f) : static_cast<double>(NAN);
    };
    for (const auto &[list, side] :
         {std::make_pair(&low, &gl), std::make_pair(&high, &gh)}) {
      for (size_t k = 0; k < list->size(); ++k) {
        int i = side->per_trial[k];
        double v = i >= 0 ? value((*list)[k]->slo[i])
                          : stability_value(side->stability[k]);
        if (std::isfinite(v))
          y_max = std::max(y_max, v);
      }
    }
    auto tick = [&](int c, const SideGates &s) {
      return scale.Label(c) + " " +
             (s.gate ? GateName(*s.gate)
                     : (!s.stability_gate.empty() ? s.stability_gate
                                                  : std::string("(mixed)")));
    };
    Axis x;
    x.min = -0.6;
    x.max = 1.6;
    x.ticks = {0, 1};
    x.tick_labels = {tick(*b, gl), tick(*b + 1, gh)};
    x.label = Shape(q.row) + " tokens";
    Axis y = NiceAxis(0, y_max * 1.1, 5,
                      one ? GateName(*one) + " (" + u.name + ")"
                          : "deciding gate, % of its bound");
    Plot p(300, 320, x, y);
    p.HLine(one ? one->below_ms / u.div : 100.0, "slo", one ? "SLO" : "bound");
    int side_x = 0;
    for (const auto &[list, side] :
         {std::make_pair(&low, &gl), std::make_pair(&high, &gh)}) {
      for (size_t k = 0; k < list->size(); ++k) {
        const TrialSummary &t = *(*list)[k];
        int i = side->per_trial[k];
        if (i < 0) {
          const std::string *f = side->stability[k];
          double v = stability_value(f);
          if (!std::isfinite(v))
            continue;
          p.Circle(side_x + Jitter(static_cast<int>(k),
                                   static_cast<int>(list->size()), 0.16),
                   v, 5, "pt " + VerdictClass(t) + " confirm",
                   scale.Label(t.concurrency) + " trial " +
                       std::to_string(t.trial) + ": " + *f + " (" + F(v, 0) +
                       "% of the bound), " + VerdictWord(t));
          ++points;
          continue;
        }
        const SloCheck &g = t.slo[i];
        p.Circle(
            side_x + Jitter(static_cast<int>(k), static_cast<int>(list->size()),
                            0.16),
            value(g), 5, "pt " + VerdictClass(t) + " confirm",
            scale.Label(t.concurrency) + " trial " + std::to_string(t.trial) +
                ": " + GateVerdictText(g) +
                (one ? ""
                     : " (" + F(100.0 * GateRatio(g), 0) + "% of the bound)") +
                ", " + VerdictWord(t));
        ++points;
      }
      ++side_x;
    }
    p.TextPx(p.left, 16,
             q.row.id + (q.status == QualifyStatus::kLowered ? " (noisy)" : ""),
             "panel-title", "start");
    panels += p.Render(q.row.id + ": boundary trials");
  }
  if (panels.empty())
    return "";
  return "<figure class=\"wide\" id=\"fig-boundary\">\n<div "
         "class=\"panels\">\n" +
         panels +
         "</div>\n<figcaption><b>Figure 2 — the boundary of every row</b> (" +
         std::to_string(points) +
         " confirmation trials): independent cold-cache trials at Cmax (left) "
         "and Cmax+1 "
         "(right), or at Rmax and Rmax + one step on a rate row, each at the "
         "value of the gate "
         "that decided its side, named under the side. When different gates "
         "decided, every point "
         "is its gate's value as a share of that gate's bound (a stability "
         "gate's last third "
         "against its bound).</figcaption>\n</figure>\n";
}

// Figure 3: the capacity surface across rows.
std::string FigSurface(const CapacityData &d) {
  // Concurrency across shapes: a rate row's boundary is another quantity and
  // stays out of it.
  std::vector<const RowQualification *> rows;
  for (const auto &q : d.rows) {
    if (!q.row.open_loop())
      rows.push_back(&q);
  }
  if (rows.size() < 2)
    return "";
  std::stable_sort(rows.begin(), rows.end(), [](const auto *a, const auto *b) {
    return a->row.input_tokens + a->row.output_tokens <
           b->row.input_tokens + b->row.output_tokens;
  });
  int max_c = 1;
  for (const auto *q : rows) {
    if (auto b = Boundary(*q))
      max_c = std::max(max_c, *b);
  }
  Axis x;
  x.min = -0.6;
  x.max = rows.size() - 0.4;
  for (size_t i = 0; i < rows.size(); ++i) {
    x.ticks.push_back(static_cast<double>(i));
    x.tick_labels.push_back(Shape(rows[i]->row));
  }
  x.label = "request shape (input / output tokens)";
  Axis y = NiceAxis(0, max_c * 1.15 + 1, 6, "max passing concurrency", true);
  Plot p(std::max(420, 210 * static_cast<int>(rows.size()) + 120), 320, x, y);
  int points = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto b = Boundary(*rows[i]);
    if (!b) {
      p.Text(static_cast<double>(i), y.max * 0.1, "no boundary", "tick");
      continue;
    }
    p.Rect(i - 0.3, 0, i + 0.3, *b, "bar row",
           rows[i]->row.id + ": " + std::to_string(*b) +
               (rows[i]->status == QualifyStatus::kLowered ? " (noisy, lowered)"
                                                           : ""));
    p.Circle(static_cast<double>(i), *b, 4, "pt pass confirm", rows[i]->row.id);
    p.Text(static_cast<double>(i), *b + y.max * 0.04,
           std::to_string(*b) + " — " + rows[i]->row.id, "bar-label");
    ++points;
  }
  return "<figure id=\"fig-surface\">\n" +
         p.Render("capacity surface across rows") +
         "<figcaption><b>Figure 3 — capacity across request shapes</b> (" +
         std::to_string(points) +
         " rows with an operating point). The maxima are alternatives, not "
         "quantities to add: "
         "a mixed queue needs its own experiment.</figcaption>\n</figure>\n";
}

// How a row measures: "measured max(64, 4·C)"; on a rate row its arrivals and
// interval, "poisson arrivals at 0.25 requests/s per level · measured 120
// requests after a 10 s ramp".
std::string MeasuredMeta(const RowInfo &r) {
  if (!r.open_loop()) {
    return "measured max(" + std::to_string(r.min_requests) + ", " +
           std::to_string(r.per_concurrency) + "·C)";
  }
  std::string interval =
      r.measured_requests ? std::to_string(*r.measured_requests) + " requests"
                          : G(r.measured_duration_s.value_or(0)) + " s";
  return Esc(r.arrival) + " arrivals at " + G(r.rate_step_rps) +
         " requests/s per level · measured " + interval +
         (r.ramp_s > 0 ? " after a " + G(r.ramp_s) + " s ramp" : "");
}

// "identity.image = repo@sha256:... · slo = p95 ttft < 10000 ms"
std::string PinnedText(const std::vector<PinnedField> &pinned) {
  std::string out;
  for (const auto &p : pinned) {
    out += (out.empty() ? "" : " · ") +
           ("<code>" + Esc(p.field) + "</code> = " + Esc(p.value));
  }
  return out.empty() ? "—" : out;
}

// The stored recommendation; for a qualification that has none (made in
// memory), the one its trials give, as the capacity data reader does for data
// written without one.
Recommendation RecommendationOf(const RowQualification &q) {
  const Recommendation &r = q.recommendation;
  if (r.level || !r.reason.empty())
    return r;
  return Recommend(q, RequalifyFields(q.row));
}

// The recommended operating limit, under the measured result and labelled a
// policy.
std::string PolicySection(const RowQualification &q) {
  const Recommendation rec = RecommendationOf(q);
  const LoadScale scale = q.row.scale();
  std::string html =
      "<h3>Operating limit (a policy, not the benchmark answer)</h3>\n<div "
      "class=\"policy\" id=\"" +
      Id("rec", q.row.id) + "\">\n";
  if (!rec.level) {
    return html + "<p>No recommended operating limit: " + Esc(rec.reason) +
           ".</p>\n</div>\n";
  }
  auto proven = q.proven_level();
  html += "<p><b>Operate at " + scale.Label(*rec.level) + "</b>" +
          (proven ? "; the measured maximum stays " + scale.Max() + " = " +
                        scale.Value(*proven)
                  : "") +
          ". Rule: " + Esc(rec.rule) + ".</p>\n<p>Why: " + Esc(rec.reason) +
          ".</p>\n";
  html +=
      "<p>Margin kept: " + Esc(rec.margin ? rec.margin->text : "not measured") +
      ".</p>\n";
  return html + "<p>Requalify when any of these change: " +
         PinnedText(rec.requalify_on) + ".</p>\n</div>\n";
}

std::string RowSection(const RowQualification &q) {
  const RowInfo &r = q.row;
  std::string html = "<section id=\"" + Id("row", r.id) + "\">\n<h2>" +
                     Esc(r.id) + (r.title.empty() ? "" : " — " + Esc(r.title)) +
                     "</h2>\n";
  html += "<div class=\"summary " + StatusClass(q.status) + "\">" +
          Esc(SummaryLine(q)) + "</div>\n";
  html += "<p>" + Esc(q.message) + "</p>\n";
  html += "<p class=\"meta\">engine " + Esc(r.engine) +
          (r.image.empty() ? "" : " · image " + Esc(r.image)) +
          (r.model.empty() ? "" : " · model " + Esc(r.model)) +
          (r.model_revision.empty() ? "" : "@" + Esc(r.model_revision)) +
          (r.hardware.empty() ? "" : " · " + Esc(r.hardware)) +
          (r.sim_profile.empty() ? "" : " · profile " + Esc(r.sim_profile)) +
          " · workload " + Shape(r) + " tokens · SLO " + Esc(SloText(r)) +
          " (" + Esc(r.percentile_method) + " percentiles) · warm-up " +
          std::to_string(r.warmup_requests) +
          " at C=" + std::to_string(r.warmup_concurrency) + " · " +
          MeasuredMeta(r) +
          (r.time_scale != 1 ? " · simulator time scale " + F(r.time_scale, 0) +
                                   "×: every duration is virtual time"
                             : "") +
          (q.url.empty() ? "" : " · server " + Esc(q.url)) + "</p>\n";
  if (q.baseline.checked || !q.baseline.message.empty()) {
    html += "<p class=\"meta\">" + r.scale().Label(1) +
            " baseline: " + Esc(q.baseline.message) +
            (q.baseline.checked ? (q.baseline.within ? " — within tolerance"
                                                     : " — OUTSIDE tolerance")
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
    html +=
        "<p class=\"meta\">The search started at the predicted " +
        r.scale().Max() + " = " + r.scale().Value(*q.predicted_cmax) +
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
  for (const auto &t : q.trials) {
    html += "<tr><td class=\"l\">" + t.phase + " " +
            r.scale().Label(t.concurrency) + " #" + std::to_string(t.trial) +
            "</td><td class=\"l\"><code>" + Esc(t.dir) +
            "</code></td><td class=\"l\"><code>" + Esc(t.command) +
            "</code></td></tr>\n";
  }
  html += "</table>\n</details>\n</section>\n";
  return html;
}

} // namespace

} // namespace report

std::string RenderReportHtml(const CapacityData &d) {
  using namespace report;
  std::string title = "capq capacity report";
  if (d.rows.size() == 1)
    title += " — " + d.rows.front().row.id;
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, "
      "initial-scale=1\">\n"
      "<title>" +
      Esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
  html += "<h1>" + Esc(title) + "</h1>\n";
  html += "<p class=\"meta\">capacity data " + Esc(d.schema) + " · generated " +
          Esc(d.generated_utc) +
          (d.command.empty() ? "" : " · <code>" + Esc(d.command) + "</code>") +
          "</p>\n";
  html += "<p>Cmax is the largest concurrency whose independent cold-cache "
          "trials all keep every "
          "SLO gate's percentile strictly below its bound with every "
          "correctness gate passing, "
          "while every trial at Cmax+1 misses at least one. Every figure names "
          "its gate: a side "
          "that passed is decided by the gate that came closest to its bound, "
          "a side that failed "
          "by the gate that failed. Probes only navigate; the confirmations "
          "carry the "
          "claim.</p>\n";
  if (AnyRateRow(d)) {
    html += "<p>Rmax, for a rate row, is the largest arrival rate (a multiple "
            "of the row's step) whose "
            "independent trials all meet every SLO gate with a bounded queue "
            "and stationary latency, "
            "while every trial one step above misses an SLO gate or a "
            "stability gate; a side that met "
            "its SLO but not a stability gate is named by that gate.</p>\n";
  }
  // Summary lines are derived again from the trials, so that data written
  // before the lines named their deciding gates reads like new data; for new
  // data they equal the stored summary_line.
  for (const auto &q : d.rows) {
    html += "<div class=\"summary " + StatusClass(q.status) + "\">" +
            Esc(SummaryLine(q)) + "</div>\n";
    html += report::TierSummaries(q);
  }
  html += TblOverview(d);
  html += "<h2>Boundaries</h2>\n";
  html += FigBoundary(d);
  html += FigSurface(d);
  html += "<h3>Boundary per row</h3>\n" + TblRows(d);
  html +=
      "<h3>Rows at their maximum passing concurrency</h3>\n" + TblMaxPass(d);
  html += "<h3>Correctness totals</h3>\n" + TblCorrectness(d);
  for (const auto &q : d.rows) {
    html += RowSection(q) + report::MixSection(d, q) + report::ReuseSection(q);
  }
  html += "<p class=\"muted\">A result for one pinned identity and one "
          "workload row; requalify "
          "when the image, checkpoint, runtime, driver, graph policy, "
          "speculative settings or "
          "workload change.</p>\n</body>\n</html>\n";
  return html;
}

Status WriteReport(const std::string &html_path, const CapacityData &data) {
  return WriteFileAtomic(html_path, RenderReportHtml(data),
                         ParentDirs::kCreate);
}

} // namespace capq
