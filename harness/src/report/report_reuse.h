// The report's cache-reuse section (report.cc): a prefix or session row's declared and served hit
// ratio per trial, the think time a session row's load applied, and a session row's TTFT by turn
// index at its boundary and one step above. Private to the report layer.
#pragma once

#include <string>

#include "capq/record/capacity_data.h"

namespace capq::report {

// "" for a row without reuse.
std::string ReuseSection(const RowQualification& q);

}  // namespace capq::report
