#include "report_trace.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "capq/measurement/metrics.h"
#include "report_svg.h"

namespace capq::report {
namespace {

// The trial whose sent requests stand for the row: the first confirmation at the boundary, else
// the last trial that recorded them.
const TrialSummary* SentTrial(const RowQualification& q) {
  LoadLevel level = q.cmax.value_or(0);
  if (q.rmax_rps && q.row.rate_step_rps > 0) {
    level = static_cast<LoadLevel>(std::llround(*q.rmax_rps / q.row.rate_step_rps));
  }
  for (const TrialSummary* t : q.Trials(QualifyPhase::kConfirm, level)) {
    if (t->sent) return t;
  }
  const TrialSummary* last = nullptr;
  for (const TrialSummary& t : q.trials) {
    if (t.sent) last = &t;
  }
  return last;
}

double NearestRank(const std::vector<double>& v, double p) {
  return Percentile(v, p, PercentileMethod::kNearestRank);
}

std::string LengthRow(const std::string& what, const std::vector<double>& in,
                      const std::vector<double>& out) {
  return "<tr><td class=\"l\">" + Esc(what) + "</td><td>" + std::to_string(in.size()) +
         "</td><td>" + FormatFixed(NearestRank(in, 50), 0) + "</td><td>" +
         FormatFixed(NearestRank(in, 95), 0) + "</td><td>" + FormatFixed(NearestRank(out, 50), 0) +
         "</td><td>" + FormatFixed(NearestRank(out, 95), 0) + "</td></tr>\n";
}

// The trace's samples and the sent requests, as (input, output) lists.
void Pairs(const RowQualification& q, const SentRequests& sent, std::vector<double>* tin,
           std::vector<double>* tout, std::vector<double>* sin, std::vector<double>* sout) {
  for (const TracePoint& p : q.row.trace) {
    tin->push_back(static_cast<double>(p.input_tokens));
    tout->push_back(static_cast<double>(p.output_tokens));
  }
  for (const SentRequest& r : sent.requests) {
    if (r.input_tokens < 0 || r.output_tokens < 0) continue;
    sin->push_back(static_cast<double>(r.input_tokens));
    sout->push_back(static_cast<double>(r.output_tokens));
  }
}

std::string Scatter(const RowQualification& q, const TrialSummary& t,
                    const std::vector<double>& tin, const std::vector<double>& tout,
                    const std::vector<double>& sin, const std::vector<double>& sout) {
  const double xmax = std::max(*std::max_element(tin.begin(), tin.end()),
                               sin.empty() ? 0 : *std::max_element(sin.begin(), sin.end()));
  const double ymax = std::max(*std::max_element(tout.begin(), tout.end()),
                               sout.empty() ? 0 : *std::max_element(sout.begin(), sout.end()));
  Plot p(560, 320, NiceAxis(0, xmax, 7, "input tokens"), NiceAxis(0, ymax, 6, "output tokens"));
  for (size_t i = 0; i < tin.size(); ++i) {
    p.Circle(tin[i], tout[i], 1.6, "trace-pt",
             "trace: " + FormatFixed(tin[i], 0) + " in, " + FormatFixed(tout[i], 0) + " out");
  }
  for (size_t i = 0; i < sin.size(); ++i) {
    p.Circle(sin[i], sout[i], 2.4, "sent-pt",
             "sent: " + FormatFixed(sin[i], 0) + " in, " + FormatFixed(sout[i], 0) + " out");
  }
  p.TextPx(p.left, 16,
           "trace (grey) and " + q.row.scale().Label(t.level) + " trial " +
               std::to_string(t.trial) + " (blue)",
           "panel-title", "start");
  return p.Render(q.row.id + ": paired lengths of the trace and of a trial");
}

// A replay's arrivals: how many of the trial's requests were sent by each time, beside the same
// requests' trace offsets stretched to the trial's span.
std::string Arrivals(const RowQualification& q, const TrialSummary& t) {
  const SentRequests& s = *t.sent;
  std::vector<double> sent, trace;
  for (size_t j = 0; j < s.requests.size(); ++j) {
    const auto k = static_cast<size_t>(s.first_trace_index) + j;
    if (!std::isfinite(s.requests[j].send_s) || k >= q.row.trace.size()) break;
    sent.push_back(s.requests[j].send_s);
    trace.push_back(q.row.trace[k].offset_s - q.row.trace[s.first_trace_index].offset_s);
  }
  if (sent.size() < 2 || trace.back() <= 0 || !std::isfinite(trace.back())) return "";
  const double stretch = sent.back() / trace.back();
  Plot p(560, 300, NiceAxis(0, sent.back(), 7, "seconds after the first measured send (server)"),
         NiceAxis(0, static_cast<double>(sent.size()), 6, "requests sent", true));
  for (size_t j = 1; j < sent.size(); ++j) {
    p.Line(trace[j - 1] * stretch, static_cast<double>(j), trace[j] * stretch,
           static_cast<double>(j + 1), "trace-line");
    p.Line(sent[j - 1], static_cast<double>(j), sent[j], static_cast<double>(j + 1), "sent-line");
  }
  p.TextPx(p.left, 16,
           "sent (blue) and the trace's offsets for the same requests x " +
               FormatFixed(stretch, 3) + " (grey)",
           "panel-title", "start");
  return p.Render(q.row.id + ": arrivals of a trial beside the trace's");
}

}  // namespace

std::string TraceSection(const RowQualification& q) {
  const TrialSummary* t = q.row.trace.empty() ? nullptr : SentTrial(q);
  if (t == nullptr) return "";
  std::vector<double> tin, tout, sin, sout;
  Pairs(q, *t->sent, &tin, &tout, &sin, &sout);
  std::string html = "<h3>The trace beside what was sent</h3>\n<p>" + Esc(q.row.trace_file) +
                     ": every sample as the row fits it, beside the measured requests of " +
                     Esc(q.row.scale().Label(t->level)) + " trial " + std::to_string(t->trial) +
                     " as the server counted them (its prompt tokens include the chat "
                     "template).</p>\n<table id=\"tbl-trace-" +
                     Esc(q.row.id) +
                     "\"><tr><th class=\"l\"></th><th>requests</th><th>input p50</th><th>input "
                     "p95</th><th>output p50</th><th>output p95</th></tr>\n" +
                     LengthRow("trace", tin, tout) + LengthRow("sent", sin, sout) + "</table>\n";
  html += "<figure id=\"fig-trace-" + Esc(q.row.id) + "\">\n" +
          Scatter(q, *t, tin, tout, sin, sout) +
          "<figcaption><b>Paired lengths</b>: each trace sample as fitted (grey) and each measured "
          "request of the trial (blue).</figcaption>\n</figure>\n";
  const std::string arrivals = t->sent->first_trace_index >= 0 ? Arrivals(q, *t) : "";
  if (!arrivals.empty()) {
    html += "<figure id=\"fig-trace-arrivals-" + Esc(q.row.id) + "\">\n" + arrivals +
            "<figcaption><b>Arrivals over time</b>: the requests the trial had sent by each "
            "moment (blue), beside the trace's own offsets for the same requests stretched to the "
            "trial's span (grey): its bursts and lulls, kept.</figcaption>\n</figure>\n";
  }
  return html;
}

}  // namespace capq::report
