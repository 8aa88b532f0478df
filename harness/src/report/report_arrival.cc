// The confirmation trials over their measured interval: TTFT by arrival order at the boundary and
// one level above, with the share of the slowest requests the opening burst holds, and on a rate
// row the queue over time behind the queue_bounded gate.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "capq/qualify/qualify.h"
#include "report_internal.h"
#include "report_svg.h"

namespace capq::report {

namespace {

struct ArrivalStats {
  double p95_full = NAN, p95_steady = NAN;
  int tail = 0, tail_in_burst = 0;
};

// `burst`: the opening burst's size, the first C requests of a closed loop (0 on a rate row, whose
// ramp is not measured).
ArrivalStats ArrivalOf(const TrialSummary& t, int burst) {
  ArrivalStats s;
  s.p95_full = t.ttft_ms.p95;
  s.p95_steady = t.ttft_p95_steady_ms;
  std::vector<std::pair<double, int>> v;
  for (size_t i = 0; i < t.ttft_ms_by_arrival.size(); ++i) {
    if (std::isfinite(t.ttft_ms_by_arrival[i])) v.push_back({t.ttft_ms_by_arrival[i], (int)i});
  }
  std::sort(v.rbegin(), v.rend());
  // The requests at or above p95: with 64 requests the four slowest decide it.
  s.tail = static_cast<int>(std::ceil(v.size() * 0.05));
  for (int i = 0; i < s.tail && i < static_cast<int>(v.size()); ++i) {
    s.tail_in_burst += v[i].second < burst;
  }
  return s;
}

std::string FigArrivalPanel(const RowQualification& q, int c, const Unit& u, double y_max) {
  auto ts = q.Trials(QualifyPhase::kConfirm, c);
  const LoadScale scale = q.row.scale();
  const int burst = scale.open_loop ? 0 : c;
  size_t n = 0;
  for (const auto* t : ts) n = std::max(n, t->ttft_ms_by_arrival.size());
  Axis x = NiceAxis(0, std::max<size_t>(n, 1) + 1, 8, "arrival order (measured requests)", true);
  Axis y = NiceAxis(0, y_max * 1.08 / u.div, 6, "TTFT (" + u.name + ")");
  Plot p(560, 320, x, y);
  if (burst > 0) p.Band(0.5, burst + 0.5, "burst", "burst: first " + std::to_string(burst));
  if (const SloGate* gate = TtftGate(q.row)) {
    p.HLine(gate->below_ms / u.div, "slo", "TTFT SLO", "start");
  }
  std::vector<double> full, steady;
  int k = 0;
  for (const auto* t : ts) {
    ++k;
    for (size_t i = 0; i < t->ttft_ms_by_arrival.size(); ++i) {
      double v = t->ttft_ms_by_arrival[i];
      bool in_burst = static_cast<int>(i) < burst;
      p.Circle(static_cast<double>(i + 1) + Jitter(k - 1, static_cast<int>(ts.size()), 0.2),
               v / u.div, 2.4, std::string("req ") + (in_burst ? "burst" : "steady"),
               "trial " + std::to_string(t->trial) + ", request " + std::to_string(i + 1) + ": " +
                   FormatFixed(v / u.div, u.decimals) + " " + u.name);
    }
    full.push_back(t->ttft_ms.p95);
    steady.push_back(t->ttft_p95_steady_ms);
  }
  auto median = [](std::vector<double> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](double d) { return !std::isfinite(d); }),
            v.end());
    if (v.empty()) return static_cast<double>(NAN);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mf = median(full), ms = median(steady);
  p.HLine(mf / u.div, "p95full", "full p95 " + FormatFixed(mf / u.div, u.decimals) + " " + u.name);
  // Centred, so it does not sit on the full-p95 label when the two lines coincide.
  p.HLine(ms / u.div, "p95steady",
          "steady p95 " + FormatFixed(ms / u.div, u.decimals) + " " + u.name, "middle");
  std::string title = scale.Label(c) + " (" + std::to_string(ts.size()) + " trials)";
  p.TextPx(p.left, 16, title, "panel-title", "start");
  return p.Render(q.row.id + ": TTFT by arrival order at " + scale.Label(c));
}

// One side of the queue figure: every confirmation trial at `level`, the client's in-flight count
// as a solid line and the server's queue gauge dashed, over the measured interval.
std::string FigQueuePanel(const RowQualification& q, int level, double t_max, double y_max) {
  const LoadScale scale = q.row.scale();
  const auto ts = q.Trials(QualifyPhase::kConfirm, level);
  Plot p(596, 300, NiceAxis(0, t_max, 6, "seconds into the measured interval (wall)"),
         NiceAxis(0, y_max * 1.08, 6, "requests"));
  for (const TrialSummary* t : ts) {
    const std::string cls = t->passed() ? "qline pass" : "qline fail";
    for (size_t i = 1; i < t->queue_series.size(); ++i) {
      const auto &a = t->queue_series[i - 1], &b = t->queue_series[i];
      p.Line(a.t_s, a.in_flight, b.t_s, b.in_flight, cls);
      if (a.server_waiting >= 0 && b.server_waiting >= 0) {
        p.Line(a.t_s, a.server_waiting, b.t_s, b.server_waiting, cls + " server");
      }
    }
  }
  std::string lateness;
  for (const TrialSummary* t : ts) {
    lateness += (lateness.empty() ? "" : "/") + FormatFixed(t->send_lateness_p99_ms, 2);
  }
  p.TextPx(p.left, 16,
           scale.Label(level) + " (" + std::to_string(ts.size()) + " trials; send lateness p99 " +
               lateness + " ms)",
           "panel-title", "start");
  return p.Render(q.row.id + ": queue over time at " + scale.Label(level));
}

}  // namespace

// Rate rows: bounded versus ever-growing, the picture behind the queue_bounded gate.
std::string FigQueue(const RowQualification& q) {
  auto b = Boundary(q);
  if (!b || !q.row.open_loop()) return "";
  double t_max = 1, y_max = 1;
  bool any = false;
  for (int level : {*b, *b + 1}) {
    for (const TrialSummary* t : q.Trials(QualifyPhase::kConfirm, level)) {
      for (const auto& pt : t->queue_series) {
        any = true;
        t_max = std::max(t_max, pt.t_s);
        y_max = std::max({y_max, pt.in_flight, pt.server_waiting});
      }
    }
  }
  if (!any) return "";
  const LoadScale scale = q.row.scale();
  return "<figure class=\"wide\" id=\"" + Id("fig-queue", q.row.id) +
         "\">\n<div class=\"panels\">\n" + FigQueuePanel(q, *b, t_max, y_max) +
         FigQueuePanel(q, *b + 1, t_max, y_max) +
         "</div>\n<div class=\"legend\"><span>— the client's requests in flight</span><span>- - "
         "the server's queued requests (its /metrics gauge)</span></div>\n<figcaption><b>Queue "
         "over time at " +
         scale.Label(*b) + " and " + scale.Label(*b + 1) +
         "</b>, every confirmation trial. At Rmax the queue stays level; one step above it grows "
         "through the interval. The queue_bounded gate compares the last third's mean with the "
         "first third's; the panel titles give each trial's send lateness p99 (the schedule_held "
         "gate).</figcaption>\n</figure>\n";
}

namespace {

// The figure's legend and caption: a rate row's requests in the order they were scheduled; a
// closed loop's opening burst apart from its steady state.
std::string ArrivalLegendAndCaption(const RowQualification& q, int b, int requests) {
  const LoadScale scale = q.row.scale();
  std::string html;
  if (scale.open_loop) {
    // A rate row sends on a schedule: no opening burst, and its ramp is sent but not measured.
    html +=
        "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#3b6fb6\"></i>measured "
        "requests in the order they were scheduled</span><span>- - full p95</span></div>\n";
    html += "<figcaption><b>TTFT by arrival order at " + scale.Label(b) + " and " +
            scale.Label(b + 1) + "</b> (" + std::to_string(requests) +
            " measured requests, after the ramp). A queue that grows shows as TTFT that climbs "
            "with the arrival order; a bounded one as a flat band.</figcaption>\n";
  } else {
    html +=
        "<div class=\"legend\"><span><i class=\"sw\" style=\"background:var(--burst)\"></i>opening "
        "burst (the first C requests, sent together, queue for prefill)</span><span><i "
        "class=\"sw\" "
        "style=\"background:#3b6fb6\"></i>steady state</span><span>- - full p95</span><span>· · "
        "steady-state p95 (requests after the first C)</span></div>\n";
    html += "<figcaption><b>TTFT by arrival order at C=" + std::to_string(b) +
            " and C=" + std::to_string(b + 1) + "</b> (" + std::to_string(requests) +
            " measured requests). With few measured requests the slowest handful decide p95; the "
            "table below says how many of them belong to the opening burst and what p95 would be "
            "without it.</figcaption>\n";
  }
  return html;
}

// Per-trial burst share: each confirmation trial at the boundary and one level above, its full and
// steady-state p95 and how many of its slowest requests the opening burst holds.
std::string TblArrival(const RowQualification& q, int b, const Unit& u) {
  const LoadScale scale = q.row.scale();
  std::string html = "<table id=\"" + Id("tbl-arrival", q.row.id) + "\"><tr><th>" +
                     (scale.open_loop ? "R (rps)" : "C") +
                     "</th><th>trial</th><th>requests</th><th>full p95</th><th>steady p95" +
                     (scale.open_loop ? "" : " (after first C)") +
                     "</th><th>slowest 5% in opening burst</th><th>verdict</th><th "
                     "class=\"l\">decided by</th></tr>\n";
  for (int c : {b, b + 1}) {
    for (const auto* t : q.Trials(QualifyPhase::kConfirm, c)) {
      ArrivalStats s = ArrivalOf(*t, scale.open_loop ? 0 : c);
      html +=
          "<tr><td>" + scale.Figure(c) + "</td><td>" + std::to_string(t->trial) + "</td><td>" +
          std::to_string(t->ttft_ms_by_arrival.size()) + "</td><td>" +
          FormatFixed(s.p95_full / u.div, u.decimals) + " " + u.name + "</td><td>" +
          FormatFixed(s.p95_steady / u.div, u.decimals) + " " + u.name + "</td><td>" +
          (scale.open_loop ? std::string("—")
                           : std::to_string(s.tail_in_burst) + " of " + std::to_string(s.tail)) +
          "</td><td class=\"" + VerdictClass(*t) + "\">" + VerdictWord(*t) +
          "</td><td class=\"l\">" + Esc(DecidedBy(*t)) + "</td></tr>\n";
    }
  }
  return html + "</table>\n";
}

}  // namespace

std::string FigArrival(const RowQualification& q) {
  auto b = Boundary(q);
  if (!b) return "";
  Unit u = TtftUnit(q.row);
  double y_max = TtftGate(q.row) ? TtftGate(q.row)->below_ms : 0;
  int requests = 0;
  for (int c : {*b, *b + 1}) {
    for (const auto* t : q.Trials(QualifyPhase::kConfirm, c)) {
      for (double v : t->ttft_ms_by_arrival) {
        if (std::isfinite(v)) y_max = std::max(y_max, v);
        ++requests;
      }
    }
  }
  std::string html = "<figure class=\"wide\" id=\"" + Id("fig-arrival", q.row.id) +
                     "\">\n<div class=\"panels\">\n";
  html += FigArrivalPanel(q, *b, u, y_max);
  html += FigArrivalPanel(q, *b + 1, u, y_max);
  html += "</div>\n";
  html += ArrivalLegendAndCaption(q, *b, requests);
  html += TblArrival(q, *b, u);
  html += "</figure>\n";
  return html;
}

}  // namespace capq::report
