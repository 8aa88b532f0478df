// The report's figures against load and across rows: TTFT percentiles and output throughput
// against C (or a rate row's R), the protocol timeline (Figure 4) and the boundary of every row
// (Figure 2). The capacity surface (Figure 3) is report_surface.cc.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "capq/qualify/qualify.h"
#include "report_internal.h"
#include "report_svg.h"

namespace capq::report {

namespace {

// The gate that decided a side, for captions: "itl p95", or "several gates" when its trials
// failed on different ones.
std::string SideGateName(const std::vector<const TrialSummary*>& ts) {
  SideGates s = DecideSide(ts);
  if (!s.stability_gate.empty()) return s.stability_gate;
  return s.gate ? GateName(*s.gate) : std::string("several gates");
}

// Where a level sits on a figure's x axis: C itself, or a rate row's rate in requests/s.
double LevelX(const LoadScale& scale, int level) {
  return scale.open_loop ? scale.Rate(level) : level;
}

// The x axis of the figures against load: concurrency, or a rate row's arrival rate.
Axis LoadAxis(const LoadScale& scale, int max_level) {
  if (!scale.open_loop) {
    return NiceAxis(0, max_level + 1, std::min(max_level + 1, 12), "concurrency C", true);
  }
  return NiceAxis(0, scale.Rate(max_level + 1), std::min(max_level + 1, 12),
                  "arrival rate R (requests/s)");
}

// A jitter in the x axis's unit: a step of a rate row is rate_step_rps wide.
double JitterX(const LoadScale& scale, double jitter) {
  return scale.open_loop ? jitter * scale.rate_step_rps : jitter;
}

// "C", "R": what a figure plots against, for titles and captions.
std::string Against(const LoadScale& scale) {
  return scale.open_loop ? "arrival rate" : "concurrency";
}

std::vector<const TrialSummary*> WithMetrics(const RowQualification& q) {
  std::vector<const TrialSummary*> out;
  for (const auto& t : q.trials) {
    if (t.has_metrics) out.push_back(&t);
  }
  return out;
}

// Trials grouped by the level they ran at, in level order and in their own order within a level.
std::map<int, std::vector<const TrialSummary*>> ByLevel(
    const std::vector<const TrialSummary*>& ts) {
  std::map<int, std::vector<const TrialSummary*>> by_c;
  for (const auto* t : ts) by_c[t->level].push_back(t);
  return by_c;
}

// The highest level any of the trials ran at, at least 1.
int MaxLevel(const std::vector<const TrialSummary*>& ts) {
  int max_c = 1;
  for (const auto* t : ts) max_c = std::max(max_c, t->level);
  return max_c;
}

// Where a trial's point sits on a figure against load: its level, spread from the other trials
// at that level.
double TrialX(const LoadScale& scale, int level, size_t index, size_t count) {
  return LevelX(scale, level) +
         JitterX(scale, Jitter(static_cast<int>(index), static_cast<int>(count)));
}

// The engine model's predicted curve on the TTFT figure, when it predicted the p95 TTFT gate: a
// dashed line through the predicted points inside the axis. Returns whether it drew one.
bool DrawPredictedCurve(const RowQualification& q, const Axis& x, const Unit& u, Plot* p) {
  const RowInfo& r = q.row;
  if (q.predicted_curve.empty() || r.slo.empty() || r.slo.front().metric != SloMetric::kTtft ||
      r.slo.front().percentile != 95 || r.open_loop()) {
    return false;
  }
  const PredictedPoint* last = nullptr;
  for (const PredictedPoint& pt : q.predicted_curve) {
    if (pt.level > x.max || !std::isfinite(pt.gating_ms)) break;
    const double y = pt.gating_ms / u.div;
    if (last) p->Line(last->level, last->gating_ms / u.div, pt.level, y, "pred");
    p->Circle(pt.level, y, 2.5, "pred-pt",
              "predicted " + r.scale().Label(pt.level) + ": p95 " + FormatFixed(y, u.decimals) +
                  " " + u.name + (pt.passes ? " (pass)" : " (fail)"));
    last = &pt;
  }
  return last != nullptr;
}

// The top of the TTFT figure in ms: the TTFT gate's bound, every trial's p95 and p99, and the
// predicted curve up to the highest level measured; NaN when there is none of these.
double TtftTop(const RowQualification& q, const std::vector<const TrialSummary*>& ts, int max_c) {
  const SloGate* gate = TtftGate(q.row);
  double max_y = gate ? gate->below_ms : NAN;
  for (const auto* t : ts) {
    for (double v : {t->ttft_ms.p99, t->ttft_ms.p95}) {
      if (std::isfinite(v)) max_y = std::isfinite(max_y) ? std::max(max_y, v) : v;
    }
  }
  for (const PredictedPoint& pt : q.predicted_curve) {
    if (pt.level <= max_c && std::isfinite(pt.gating_ms)) max_y = std::max(max_y, pt.gating_ms);
  }
  return max_y;
}

// One level's trials on the TTFT figure: p50 and p99 marks and the p95 point of each, and the
// level's verdict above the plot (✓, ✗, or how many of them passed).
void DrawTtftLevel(const LoadScale& scale, const Unit& u, int c,
                   const std::vector<const TrialSummary*>& list, Plot* p) {
  int pass = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const TrialSummary& t = *list[i];
    pass += t.passed();
    double xc = TrialX(scale, c, i, list.size());
    std::string what = PhaseName(t.phase) + std::string(" ") + scale.Label(c) + " trial " +
                       std::to_string(t.trial);
    p->Marker(xc, t.ttft_ms.p50 / u.div, "dash", "aux p50",
              what + ": p50 " + FormatFixed(t.ttft_ms.p50 / u.div, u.decimals) + " " + u.name);
    p->Marker(xc, t.ttft_ms.p99 / u.div, "tri", "aux p99",
              what + ": p99 " + FormatFixed(t.ttft_ms.p99 / u.div, u.decimals) + " " + u.name);
    p->Circle(xc, t.ttft_ms.p95 / u.div, 4.5, "pt " + VerdictClass(t) + " " + PhaseName(t.phase),
              what + ": p95 " + FormatFixed(t.ttft_ms.p95 / u.div, u.decimals) + " " + u.name +
                  ", " + VerdictTip(t));
  }
  std::string cls = pass == static_cast<int>(list.size()) ? "pass" : (pass == 0 ? "fail" : "mixed");
  std::string mark = cls == "pass"   ? "✓"
                     : cls == "fail" ? "✗"
                                     : std::to_string(pass) + "/" + std::to_string(list.size());
  p->TextPx(p->X(LevelX(scale, c)), p->top - 10, mark, "verdict " + cls);
}

// The TTFT figure's legend and caption.
std::string TtftLegendAndCaption(const RowInfo& r, size_t points, bool curve) {
  const LoadScale scale = r.scale();
  std::string html =
      "<div class=\"legend\"><span><i class=\"sw\" style=\"background:var(--pass)\"></i>confirm "
      "pass</span><span><i class=\"sw\" style=\"background:var(--fail)\"></i>confirm fail</span>"
      "<span><i class=\"sw\" style=\"border:2px solid var(--probe)\"></i>baseline / probe "
      "(navigation)</span><span>▲ p99 &nbsp;– p50</span><span>✓ ✗ verdict per " +
      scale.Symbol() + "</span>" +
      (curve ? "<span><i class=\"sw\" style=\"border-top:2px dashed #8c6bb1\"></i>predicted "
               "p95 (engine model)</span>"
             : "") +
      "</div>\n";
  html += "<figcaption><b>TTFT percentiles against " + scale.Symbol() + "</b> for every trial of " +
          Esc(r.id) + " (" + std::to_string(points) +
          " points). Circles are p95, triangles p99, dashes p50; " +
          (TtftGate(r) ? "the dashed line is the TTFT gate. " : "the row has no TTFT gate. ") +
          "Medians stay flat while the tail decides the boundary." +
          (r.slo.size() > 1
               ? " The colour is the trial's verdict over every gate (SLO: " + Esc(SloText(r)) +
                     "); each point's title names the gate that "
                     "decided it."
               : "") +
          "</figcaption>\n</figure>\n";
  return html;
}

}  // namespace

// Figure: p95 TTFT (with p50 and p99) against C, every trial a point, the verdict per C on top.
std::string FigTtft(const RowQualification& q) {
  const RowInfo& r = q.row;
  Unit u = TtftUnit(r);
  const SloGate* gate = TtftGate(r);
  auto ts = WithMetrics(q);
  const int max_c = MaxLevel(ts);
  const double max_y = TtftTop(q, ts, max_c);
  const LoadScale scale = r.scale();
  Axis x = LoadAxis(scale, max_c);
  Axis y =
      NiceAxis(0, (std::isfinite(max_y) ? max_y : 1) * 1.08 / u.div, 6, "TTFT (" + u.name + ")");
  Plot p(596, 360, x, y);
  p.top = 34;
  if (gate) {
    p.HLine(gate->below_ms / u.div, "slo", "SLO: " + GateSpec(*gate));
  }
  const bool curve = DrawPredictedCurve(q, x, u, &p);
  for (const auto& [c, list] : ByLevel(ts)) DrawTtftLevel(scale, u, c, list, &p);
  std::string html = "<figure id=\"" + Id("fig-ttft", r.id) + "\">\n";
  html += p.Render(r.id + ": TTFT percentiles against " + Against(scale));
  return html + TtftLegendAndCaption(r, ts.size(), curve);
}

namespace {

// The range of output tok/s over the confirmation trials at `level`, drawn as a band; lo is
// +infinity when no trial measured any (then nothing is drawn).
std::pair<double, double> ThroughputBand(const RowQualification& q, int level,
                                         const std::string& cls, const std::string& anchor,
                                         Plot* p) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* t : q.Trials(QualifyPhase::kConfirm, level)) {
    if (!std::isfinite(t->output_tok_s)) continue;
    lo = std::min(lo, t->output_tok_s);
    hi = std::max(hi, t->output_tok_s);
  }
  if (std::isfinite(lo)) {
    // Unlabelled: the caption and the legend carry the numbers, the points stay readable.
    p->HBand(lo, hi, cls, "", anchor);
  }
  return std::make_pair(lo, hi);
}

// The bands of the boundary and the level above it; returns the caption's sentence on them
// (whether the two ranges overlap, and the gates that decided instead), empty without both.
std::string DrawThroughputBands(const RowQualification& q, Plot* p) {
  auto b = Boundary(q);
  if (!b) return "";
  const LoadScale scale = q.row.scale();
  auto a = ThroughputBand(q, *b, "band-pass", "start", p);
  auto c = ThroughputBand(q, *b + 1, "band-fail", "end", p);
  if (!std::isfinite(a.first) || !std::isfinite(c.first)) return "";
  bool overlap = a.first <= c.second && c.first <= a.second;
  return " At the boundary " + scale.Label(*b) + " emitted " + FormatFixed(a.first, 1) + "–" +
         FormatFixed(a.second, 1) + " tok/s and " + scale.Label(*b + 1) + " " +
         FormatFixed(c.first, 1) + "–" + FormatFixed(c.second, 1) + " tok/s: the ranges " +
         (overlap ? "<b>overlap</b>" : "do not overlap") + ", while the " +
         (scale.open_loop ? "SLO and stability gates give" : "SLO gives") +
         " the pass/fail decision (" + scale.Label(*b) + " on " +
         Esc(SideGateName(q.Trials(QualifyPhase::kConfirm, *b))) + ", " + scale.Label(*b + 1) +
         " on " + Esc(SideGateName(q.Trials(QualifyPhase::kConfirm, *b + 1))) + ").";
}

// Every trial's output tok/s, a point per trial.
void DrawThroughputTrials(const LoadScale& scale, const std::vector<const TrialSummary*>& ts,
                          Plot* p) {
  for (const auto& [c, list] : ByLevel(ts)) {
    for (size_t i = 0; i < list.size(); ++i) {
      const TrialSummary& t = *list[i];
      p->Circle(TrialX(scale, c, i, list.size()), t.output_tok_s, 4.5,
                "pt " + VerdictClass(t) + " " + PhaseName(t.phase),
                PhaseName(t.phase) + std::string(" ") + scale.Label(c) + " trial " +
                    std::to_string(t.trial) + ": " + FormatFixed(t.output_tok_s, 1) + " tok/s, " +
                    VerdictTip(t));
    }
  }
}

// The legend of the two bands; empty without a boundary.
std::string ThroughputLegend(const RowQualification& q) {
  auto b = Boundary(q);
  if (!b) return "";
  const LoadScale scale = q.row.scale();
  return "<div class=\"legend\"><span><i class=\"sw\" style=\"background:rgba(26,127,55,0.35)\">"
         "</i>range of the " +
         scale.Label(*b) +
         " trials</span><span><i class=\"sw\" "
         "style=\"background:rgba(198,40,40,0.35)\"></i>range of the " +
         scale.Label(*b + 1) + " trials</span></div>\n";
}

}  // namespace

// Figure 1: output throughput against C; the Cmax and Cmax+1 ranges drawn as bands.
std::string FigThroughput(const RowQualification& q) {
  const RowInfo& r = q.row;
  auto ts = WithMetrics(q);
  double max_y = 0;
  for (const auto* t : ts) {
    if (std::isfinite(t->output_tok_s)) max_y = std::max(max_y, t->output_tok_s);
  }
  const LoadScale scale = r.scale();
  Axis x = LoadAxis(scale, MaxLevel(ts));
  Axis y = NiceAxis(0, std::max(1.0, max_y * 1.1), 6, "output tok/s (all streams)");
  Plot p(596, 360, x, y);
  const std::string caption = DrawThroughputBands(q, &p);
  DrawThroughputTrials(scale, ts, &p);
  std::string html = "<figure id=\"" + Id("fig-throughput", r.id) + "\">\n";
  html += p.Render(r.id + ": output throughput against " + Against(scale));
  html += ThroughputLegend(q);
  html += "<figcaption><b>Figure 1 — output throughput against " + scale.Symbol() + "</b> (" +
          std::to_string(ts.size()) + " trials)." + caption +
          " Throughput describes completed work, not admission.</figcaption>\n</figure>\n";
  return html;
}

// Figure 4: the protocol timeline, one lane per phase, one bar per trial.
std::string FigTimeline(const RowQualification& q) {
  double end = std::max(q.wall_s, 1e-3);
  for (const auto& t : q.trials) end = std::max(end, t.start_offset_s + t.wall_s);
  Axis x = NiceAxis(0, end, 8, "wall time since the qualification started (s)");
  Axis y;
  y.min = -0.6;
  y.max = 2.6;
  y.ticks = {0, 1, 2};
  y.tick_labels = {"confirm", "locate", "baseline"};
  y.label = "";
  Plot p(1000, 190, x, y);
  p.left = 80;
  auto lane = [](QualifyPhase phase) {
    return phase == QualifyPhase::kBaseline ? 2.0 : phase == QualifyPhase::kProbe ? 1.0 : 0.0;
  };
  for (const auto& t : q.trials) {
    double l = lane(t.phase);
    p.Rect(t.start_offset_s, l - 0.32, t.start_offset_s + std::max(t.wall_s, end * 0.002), l + 0.32,
           "bar " + std::string(PhaseName(t.phase)) + " " + VerdictClass(t),
           PhaseName(t.phase) + std::string(" ") + q.row.scale().Label(t.level) + " trial " +
               std::to_string(t.trial) + ": " + VerdictTip(t) + ", " + FormatFixed(t.wall_s, 1) +
               " s");
    if (t.wall_s > end * 0.035) {
      // A rate label is wider: the bar must be too.
      if (!q.row.open_loop() || t.wall_s > end * 0.08) {
        p.Text(t.start_offset_s + t.wall_s / 2, l - 0.12, q.row.scale().Label(t.level), "bar-text");
      }
    }
  }
  std::string costs;
  for (const auto& ph : q.phases) {
    if (!costs.empty()) costs += " · ";
    std::string unit = ph.name == "locate" ? "probe" : "trial";
    costs += ph.name + " " + std::to_string(ph.trials) + " " + unit + (ph.trials == 1 ? "" : "s") +
             " " + FormatFixed(ph.wall_s, 1) + " s";
  }
  std::string html = "<figure class=\"wide\" id=\"" + Id("fig-timeline", q.row.id) + "\">\n";
  html += p.Render(q.row.id + ": protocol timeline");
  html +=
      "<figcaption><b>Figure 4 — protocol timeline</b> (" + std::to_string(q.trials.size()) +
      " trials, " + FormatFixed(q.wall_s, 1) + " s): " + Esc(costs) +
      ". The locator saves test time; the adjacent confirmations carry the claim.</figcaption>\n"
      "</figure>\n";
  return html;
}

namespace {

// One row's boundary panel: the confirmation trials at the boundary (low) and one level above
// (high), the gate that decided each side, and the scale their points share.
struct BoundarySides {
  std::vector<const TrialSummary*> low, high;
  SideGates gl, gh;
  // One gate decided both sides: its values against its bound. Otherwise each trial's deciding
  // gate as a share of its own bound, so that the line at 100% is every gate's bound.
  const SloCheck* one = nullptr;
  Unit u;

  BoundarySides(const RowQualification& q, int b)
      : low(q.Trials(QualifyPhase::kConfirm, b)), high(q.Trials(QualifyPhase::kConfirm, b + 1)) {
    gl = DecideSide(low);
    gh = DecideSide(high);
    one =
        gl.gate && (high.empty() || (gh.gate && SameGate(*gl.gate, *gh.gate))) ? gl.gate : nullptr;
    u = one ? UnitFor(one->below_ms) : Unit{};
  }

  double Value(const SloCheck& g) const {
    return one ? g.measured_ms / u.div : 100.0 * GateRatio(g);
  }
  // The bound's line: the one gate's bound, else 100% of every gate's.
  double Bound() const { return one ? one->below_ms / u.div : 100.0; }
  // Each side with its trials, low first.
  std::vector<std::pair<const std::vector<const TrialSummary*>*, const SideGates*>> Sides() const {
    return {std::make_pair(&low, &gl), std::make_pair(&high, &gh)};
  }
};

// A trial a stability gate decided sits at its last third as a share of its bound.
double StabilityValue(const GateMiss* m) {
  return m ? 100.0 * StabilityRatio(*m) : static_cast<double>(NAN);
}

// The top of a boundary panel: the bound and every point drawn.
double BoundaryTop(const BoundarySides& s) {
  double y_max = s.Bound();
  for (const auto& [list, side] : s.Sides()) {
    for (size_t k = 0; k < list->size(); ++k) {
      int i = side->per_trial[k];
      double v = i >= 0 ? s.Value((*list)[k]->slo[i]) : StabilityValue(side->stability[k]);
      if (std::isfinite(v)) y_max = std::max(y_max, v);
    }
  }
  return y_max;
}

// The two sides across the x axis, each named by its level and the gate that decided it.
Axis BoundaryXAxis(const RowQualification& q, int b, const BoundarySides& s) {
  const LoadScale scale = q.row.scale();
  auto tick = [&](int c, const SideGates& g) {
    return scale.Label(c) + " " +
           (g.gate ? GateName(*g.gate)
                   : (!g.stability_gate.empty() ? g.stability_gate : std::string("(mixed)")));
  };
  Axis x;
  x.min = -0.6;
  x.max = 1.6;
  x.ticks = {0, 1};
  x.tick_labels = {tick(b, s.gl), tick(b + 1, s.gh)};
  x.label = Shape(q.row) + " tokens";
  return x;
}

// One point per trial of one side at x = side_x; returns how many it drew.
int DrawBoundarySide(const LoadScale& scale, const BoundarySides& s,
                     const std::vector<const TrialSummary*>& list, const SideGates& side,
                     int side_x, Plot* p) {
  int points = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const TrialSummary& t = *list[k];
    const double x = side_x + Jitter(static_cast<int>(k), static_cast<int>(list.size()), 0.16);
    const std::string what = scale.Label(t.level) + " trial " + std::to_string(t.trial);
    int i = side.per_trial[k];
    if (i < 0) {
      const GateMiss* m = side.stability[k];
      double v = StabilityValue(m);
      if (!std::isfinite(v)) continue;
      p->Circle(
          x, v, 5, "pt " + VerdictClass(t) + " confirm",
          what + ": " + m->text + " (" + FormatFixed(v, 0) + "% of the bound), " + VerdictWord(t));
      ++points;
      continue;
    }
    const SloCheck& g = t.slo[i];
    p->Circle(x, s.Value(g), 5, "pt " + VerdictClass(t) + " confirm" + (g.at_least ? " bound" : ""),
              what + ": " + GateVerdictText(g) +
                  (s.one ? "" : " (" + FormatFixed(100.0 * GateRatio(g), 0) + "% of the bound)") +
                  ", " + VerdictWord(t));
    ++points;
  }
  return points;
}

// One row's panel of Figure 2; adds the points it drew to `points`.
std::string BoundaryPanel(const RowQualification& q, int b, int* points) {
  const BoundarySides s(q, b);
  Axis y =
      NiceAxis(0, BoundaryTop(s) * 1.1, 5,
               s.one ? GateName(*s.one) + " (" + s.u.name + ")" : "deciding gate, % of its bound");
  Plot p(300, 320, BoundaryXAxis(q, b, s), y);
  p.HLine(s.Bound(), "slo", s.one ? "SLO" : "bound");
  int side_x = 0;
  for (const auto& [list, side] : s.Sides()) {
    *points += DrawBoundarySide(q.row.scale(), s, *list, *side, side_x, &p);
    ++side_x;
  }
  p.TextPx(p.left, 16, q.row.id + (q.status == QualifyStatus::kLowered ? " (noisy)" : ""),
           "panel-title", "start");
  return p.Render(q.row.id + ": boundary trials");
}

}  // namespace

// Figure 2: every row's boundary with its trials on both sides.
std::string FigBoundary(const CapacityData& d) {
  std::string panels;
  int points = 0;
  for (const auto& q : d.rows) {
    if (auto b = Boundary(q)) panels += BoundaryPanel(q, *b, &points);
  }
  if (panels.empty()) return "";
  return "<figure class=\"wide\" id=\"fig-boundary\">\n<div class=\"panels\">\n" + panels +
         "</div>\n<figcaption><b>Figure 2 — the boundary of every row</b> (" +
         std::to_string(points) +
         " confirmation trials): independent cold-cache trials at Cmax (left) and Cmax+1 "
         "(right), or at Rmax and Rmax + one step on a rate row, each at the value of the gate "
         "that decided its side, named under the side. When different gates decided, every point "
         "is its gate's value as a share of that gate's bound (a stability gate's last third "
         "against its bound). A trial decided early sits at the least its percentile could have "
         "ended at, a bound and not a measurement.</figcaption>\n</figure>\n";
}

}  // namespace capq::report
