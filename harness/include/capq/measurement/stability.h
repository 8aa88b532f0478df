// Stability of an open-loop trial as gates (issue 13): a rate passes only if, besides its SLO and
// every correctness gate, the queue stayed bounded, latency stayed stationary and the client kept
// its schedule. Pure functions of the decoded results and the server's load samples; no I/O.
//
// The measured interval (by intended send time) is cut into thirds; "first" and "last" are its
// first and last third, and each check compares the last against the first by the row's rule
// (row.h, Stability):
//   queue_bounded  the client's in-flight count (time-weighted mean over the third: requests due
//                  and not yet ended, ramp requests included since they hold server slots too) and
//                  the server's own queued-requests gauge (mean of its samples in the third):
//                  last <= first * (1 + queue_growth_pct / 100) + queue_slack.
//   stationary     each SLO gate's percentile over the requests intended in the last third <=
//                  latency_drift_factor * the same over the first third.
//   schedule_held  the p99 of send lateness (actual - intended send, wall ms, ramp included) is
//                  below max_send_lateness_ms; else the trial could not run (the client fell
//                  behind), which is never a pass and never an SLO failure either.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/gate_miss.h"
#include "capq/model/row.h"

namespace capq {

// One sample of the server's own load gauges (its /metrics), taken during the load.
struct ServerLoadSample {
  MonoNs t_ns = 0;
  double running = -1;  // -1 = not reported
  double waiting = -1;
};

// One check of a third against the first.
struct ThirdsCheck {
  std::string name;    // "client_in_flight", "server_queue", "ttft p95"
  bool known = false;  // false: nothing to compare (e.g. the server reports no queue gauge)
  double first = 0, last = 0, bound = 0;
  bool passed = false;
};

struct StabilityInputs {
  // Every request of the scheduled phase (ramp and measured) and which of them are measured,
  // counted from the intended send (CountFromIntendedSend, decode.h): start_ns is when each was
  // meant to leave, so a request belongs to the third its schedule put it in, and the in-flight
  // count is what the schedule put in flight; scheduling_lag_ns still holds each one's lateness.
  std::vector<const RequestResult*> scheduled;
  std::vector<const RequestResult*> measured;
  std::vector<ServerLoadSample> server;
  MonoNs interval_start_ns = 0, interval_end_ns = 0;  // the measured interval, wall, by intent
  Stability rule;
  std::vector<SloGate> slo;
  PercentileMethod method = PercentileMethod::kLinear;
  double time_scale = 1;  // latencies in the server's time, as the SLO is
};

struct StabilityVerdict {
  ThirdsCheck client_in_flight, server_queue;
  std::vector<ThirdsCheck> latency;  // one per SLO gate
  double send_lateness_p50_ms = 0, send_lateness_p99_ms = 0, send_lateness_max_ms = 0;
  double send_lateness_bound_ms = 0;
  bool schedule_held = false;
  // The queue over the measured interval, for the report's picture of bounded versus ever-growing:
  // at each server sample (or 60 even steps when there are none), seconds since the interval
  // start (wall), the client's in-flight count then, and the server's queue gauge (-1: none).
  struct Point {
    double t_s = 0, in_flight = 0, server_waiting = -1;
  };
  std::vector<Point> series;
  bool queue_bounded() const;
  bool stationary() const;
  // One per failed check, schedule first, each with its figures and its text: "queue_bounded:
  // client in-flight last third 14.2 > 5.9 (first third 3.1 x 1.25 + 2)".
  std::vector<GateMiss> Misses() const;
  // The texts of Misses().
  std::vector<std::string> Failures() const;
};

StabilityVerdict JudgeStability(const StabilityInputs& in);

// The client's in-flight count at `t`: sent at or before it and not yet ended.
int InFlightAt(const std::vector<const RequestResult*>& requests, MonoNs t);
// The client's in-flight count over [t0, t1): time-weighted mean, from the send and end stamps.
double MeanInFlight(const std::vector<const RequestResult*>& requests, MonoNs t0, MonoNs t1);

// verdict.json "stability": the writer and its one reader. The reader throws nlohmann::json
// exceptions on a wrong type; a figure written as null reads as NaN.
nlohmann::json StabilityToJson(const StabilityVerdict& v);
StabilityVerdict StabilityFromJson(const nlohmann::json& j);

}  // namespace capq
