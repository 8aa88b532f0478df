// The report's trace section (report.cc): a mixed row's traffic file beside what a trial at its
// boundary sent: the paired lengths, and on a replay the arrivals over time. Private to the report
// layer.
#pragma once

#include <string>

#include "capq/record/capacity_data.h"

namespace capq::report {

// "" for a row without a trace, or when no trial recorded what it sent.
std::string TraceSection(const RowQualification& q);

}  // namespace capq::report
