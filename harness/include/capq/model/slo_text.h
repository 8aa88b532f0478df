// An SLO as a person types it on a command line: "ttft p95 < 10s", "itl p99 < 50ms", several gates
// joined by commas or "and" ("ttft p95 < 2.5s, itl p95 < 60ms"). Units: ms or s. The bound is
// strict, as every gate of a row is.
#pragma once

#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

// InvalidArgument naming the part that could not be read and what was expected there.
Result<std::vector<SloGate>> ParseSloText(const std::string& text);

}  // namespace capq
