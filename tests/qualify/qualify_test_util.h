// The row the qualification tests drive with fake servers: one p95 TTFT gate of 1000 ms, three
// trials with their seeds.
#pragma once

#include <cstdio>

#include "capq/measurement/gate_miss.h"
#include "capq/model/row.h"

namespace capq::testing {

inline Row FakeRow() {
  Row row;
  row.id = "fake";
  row.title = "fake row";
  row.family = "sim";
  row.workload.input_tokens = 512;
  row.workload.output_tokens = 64;
  row.slo = {SloGate{SloMetric::kTtft, 95, 1000}};
  row.trials.count = 3;
  row.trials.seeds = {101, 202, 303};
  return row;
}

// A rate trial's queue that grew: the client's in-flight count over the last third against its
// bound, with the text the trial's verdict words it in.
inline GateMiss QueueGrew(double last, double bound) {
  GateMiss m;
  m.gate = "queue_bounded";
  m.subject = "client in-flight";
  m.value = last;
  m.bound = bound;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "queue_bounded: client in-flight last third %.3g > %.3g (first third 3.1 x 1.25 + "
                "2)",
                last, bound);
  m.text = buf;
  return m;
}

}  // namespace capq::testing
