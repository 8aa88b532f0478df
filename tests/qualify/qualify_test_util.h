// The row the qualification tests drive with fake servers: one p95 TTFT gate of 1000 ms, three
// trials with their seeds.
#pragma once

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

}  // namespace capq::testing
