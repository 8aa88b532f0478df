#include "capq/measurement/stability.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "capq/measurement/json_figure.h"
#include "capq/measurement/metrics.h"
#include "capq/text.h"

namespace capq {
namespace {

// last <= first * factor + slack
ThirdsCheck Compare(std::string name, double first, double last, double factor, double slack) {
  ThirdsCheck c;
  c.name = std::move(name);
  c.known = std::isfinite(first) && std::isfinite(last);
  c.first = first;
  c.last = last;
  c.bound = first * factor + slack;
  c.passed = c.known && last <= c.bound;
  return c;
}

double MeanServerWaiting(const std::vector<ServerLoadSample>& s, MonoNs t0, MonoNs t1) {
  double sum = 0;
  int n = 0;
  for (const ServerLoadSample& x : s) {
    if (x.t_ns < t0 || x.t_ns >= t1 || x.waiting < 0) continue;
    sum += x.waiting;
    ++n;
  }
  return n > 0 ? sum / n : NAN;
}

std::vector<const RequestResult*> IntendedIn(const std::vector<const RequestResult*>& rs, MonoNs t0,
                                             MonoNs t1) {
  std::vector<const RequestResult*> out;
  for (const RequestResult* r : rs) {
    if (r->start_ns != 0 && r->start_ns >= t0 && r->start_ns < t1) out.push_back(r);
  }
  return out;
}

std::vector<StabilityVerdict::Point> Series(const StabilityInputs& in) {
  std::vector<StabilityVerdict::Point> out;
  const auto add = [&](MonoNs t, double waiting) {
    out.push_back({static_cast<double>(t - in.interval_start_ns) / 1e9,
                   static_cast<double>(InFlightAt(in.scheduled, t)), waiting});
  };
  for (const ServerLoadSample& s : in.server) {
    if (s.t_ns >= in.interval_start_ns && s.t_ns < in.interval_end_ns) add(s.t_ns, s.waiting);
  }
  if (out.empty() && in.interval_end_ns > in.interval_start_ns) {
    const MonoNs step = (in.interval_end_ns - in.interval_start_ns) / 60;
    for (int i = 0; i < 60; ++i) add(in.interval_start_ns + i * step, -1);
  }
  return out;
}

std::string Fig(double v) { return Fmt("%.4g", v); }

GateMiss Describe(const char* gate, const ThirdsCheck& c, const char* rule, bool in_ms) {
  GateMiss m;
  m.gate = gate;
  m.subject = c.name;
  m.in_ms = in_ms;
  if (!c.known) {
    m.text = std::string(gate) + ": " + c.name + " has no value in the first or last third";
    return m;
  }
  m.value = c.last;
  m.bound = c.bound;
  m.text = std::string(gate) + ": " + c.name + " last third " + Fig(c.last) + " > " + Fig(c.bound) +
           " (first third " + Fig(c.first) + rule + ")";
  return m;
}

}  // namespace

int InFlightAt(const std::vector<const RequestResult*>& requests, MonoNs t) {
  int n = 0;
  for (const RequestResult* r : requests) {
    n += r->start_ns != 0 && r->start_ns <= t && (r->end_ns == 0 || t < r->end_ns) ? 1 : 0;
  }
  return n;
}

double MeanInFlight(const std::vector<const RequestResult*>& requests, MonoNs t0, MonoNs t1) {
  if (t1 <= t0) return NAN;
  double covered = 0;
  for (const RequestResult* r : requests) {
    if (r->start_ns == 0) continue;
    const MonoNs end = r->end_ns > 0 ? r->end_ns : t1;
    const MonoNs a = std::max(r->start_ns, t0), b = std::min(end, t1);
    if (b > a) covered += static_cast<double>(b - a);
  }
  return covered / static_cast<double>(t1 - t0);
}

StabilityVerdict JudgeStability(const StabilityInputs& in) {
  StabilityVerdict v;
  const MonoNs span = in.interval_end_ns - in.interval_start_ns;
  const MonoNs first_end = in.interval_start_ns + span / 3;
  const MonoNs last_start = in.interval_end_ns - span / 3;
  const double growth = 1 + in.rule.queue_growth_pct / 100;

  v.client_in_flight = Compare(
      "client in-flight", MeanInFlight(in.scheduled, in.interval_start_ns, first_end),
      MeanInFlight(in.scheduled, last_start, in.interval_end_ns), growth, in.rule.queue_slack);
  v.server_queue = Compare(
      "server queue", MeanServerWaiting(in.server, in.interval_start_ns, first_end),
      MeanServerWaiting(in.server, last_start, in.interval_end_ns), growth, in.rule.queue_slack);

  const auto first = IntendedIn(in.measured, in.interval_start_ns, first_end);
  const auto last = IntendedIn(in.measured, last_start, in.interval_end_ns);
  const TrialMetrics mf = ComputeMetricsOf(first, 0, in.time_scale, in.method);
  const TrialMetrics ml = ComputeMetricsOf(last, 0, in.time_scale, in.method);
  for (const SloGate& g : in.slo) {
    char name[48];
    std::snprintf(name, sizeof name, "%s p%g", SloMetricName(g.metric), g.percentile);
    v.latency.push_back(
        Compare(name, SloValueMs(mf, g), SloValueMs(ml, g), in.rule.latency_drift_factor, 0));
  }

  std::vector<double> lateness;
  for (const RequestResult* r : in.scheduled) {
    if (r->start_ns != 0) lateness.push_back(static_cast<double>(r->scheduling_lag_ns) / 1e6);
  }
  v.send_lateness_p50_ms = Percentile(lateness, 50, PercentileMethod::kLinear);
  v.send_lateness_p99_ms = Percentile(lateness, 99, PercentileMethod::kLinear);
  v.send_lateness_max_ms =
      lateness.empty() ? NAN : *std::max_element(lateness.begin(), lateness.end());
  v.send_lateness_bound_ms = in.rule.max_send_lateness_ms;
  v.schedule_held = std::isfinite(v.send_lateness_p99_ms) &&
                    v.send_lateness_p99_ms < in.rule.max_send_lateness_ms;
  v.series = Series(in);
  return v;
}

// A gauge the server does not report cannot fail; the client's count always decides too.
bool StabilityVerdict::queue_bounded() const {
  return client_in_flight.passed && (!server_queue.known || server_queue.passed);
}

// A third with nothing measured is not stationary: NaN never passes.
bool StabilityVerdict::stationary() const {
  return std::all_of(latency.begin(), latency.end(), [](const ThirdsCheck& c) { return c.passed; });
}

std::vector<GateMiss> StabilityVerdict::Misses() const {
  std::vector<GateMiss> out;
  if (!schedule_held) {
    GateMiss m;
    m.gate = "schedule_held";
    m.subject = "send lateness p99";
    m.value = send_lateness_p99_ms;
    m.in_ms = true;
    m.text = "schedule_held: the client fell behind: send lateness p99 " +
             Fig(send_lateness_p99_ms) + " ms is not below " + Fig(send_lateness_bound_ms) +
             " ms (max " + Fig(send_lateness_max_ms) + " ms)";
    out.push_back(std::move(m));
  }
  if (!client_in_flight.passed) {
    out.push_back(Describe("queue_bounded", client_in_flight, " x growth + slack", false));
  }
  if (server_queue.known && !server_queue.passed) {
    out.push_back(Describe("queue_bounded", server_queue, " x growth + slack", false));
  }
  for (const ThirdsCheck& c : latency) {
    if (!c.passed) out.push_back(Describe("stationary", c, " x drift factor", true));
  }
  return out;
}

std::vector<std::string> StabilityVerdict::Failures() const {
  std::vector<std::string> out;
  for (GateMiss& m : Misses()) out.push_back(std::move(m.text));
  return out;
}

nlohmann::json StabilityToJson(const StabilityVerdict& v) {
  auto check = [&](const ThirdsCheck& c) {
    return nlohmann::json{{"name", c.name},
                          {"known", c.known},
                          {"first", FigureToJson(c.first)},
                          {"last", FigureToJson(c.last)},
                          {"bound", FigureToJson(c.bound)},
                          {"passed", c.passed}};
  };
  nlohmann::json lat = nlohmann::json::array();
  for (const ThirdsCheck& c : v.latency) lat.push_back(check(c));
  // [t_s, in_flight, server_waiting or null], compact: one short array a sample.
  nlohmann::json series = nlohmann::json::array();
  for (const auto& p : v.series) {
    series.push_back({p.t_s, p.in_flight,
                      p.server_waiting >= 0 ? nlohmann::json(p.server_waiting) : nlohmann::json()});
  }
  return nlohmann::json{
      {"queue_bounded", v.queue_bounded()},
      {"stationary", v.stationary()},
      {"schedule_held", v.schedule_held},
      {"client_in_flight", check(v.client_in_flight)},
      {"server_queue", check(v.server_queue)},
      {"latency", std::move(lat)},
      {"send_lateness_ms",
       {{"p50", FigureToJson(v.send_lateness_p50_ms)},
        {"p99", FigureToJson(v.send_lateness_p99_ms)},
        {"max", FigureToJson(v.send_lateness_max_ms)},
        {"bound", FigureToJson(v.send_lateness_bound_ms)}}},
      {"failures", v.Failures()},
      {"series", std::move(series)},
  };
}

namespace {

ThirdsCheck CheckFromJson(const nlohmann::json& j) {
  ThirdsCheck c;
  c.name = j.at("name").get<std::string>();
  c.known = j.at("known").get<bool>();
  c.first = FigureAt(j, "first");
  c.last = FigureAt(j, "last");
  c.bound = FigureAt(j, "bound");
  c.passed = j.at("passed").get<bool>();
  return c;
}

}  // namespace

StabilityVerdict StabilityFromJson(const nlohmann::json& j) {
  StabilityVerdict v;
  v.client_in_flight = CheckFromJson(j.at("client_in_flight"));
  v.server_queue = CheckFromJson(j.at("server_queue"));
  for (const auto& c : j.at("latency")) v.latency.push_back(CheckFromJson(c));
  const nlohmann::json& late = j.at("send_lateness_ms");
  v.send_lateness_p50_ms = FigureAt(late, "p50");
  v.send_lateness_p99_ms = FigureAt(late, "p99");
  v.send_lateness_max_ms = FigureAt(late, "max");
  v.send_lateness_bound_ms = FigureAt(late, "bound");
  v.schedule_held = j.at("schedule_held").get<bool>();
  for (const auto& p : j.value("series", nlohmann::json::array())) {
    v.series.push_back({p.at(0).get<double>(), p.at(1).get<double>(),
                        p.at(2).is_null() ? -1.0 : p.at(2).get<double>()});
  }
  return v;
}

}  // namespace capq
