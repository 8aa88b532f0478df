// The report's mixed-replay section (report.cc): per-class TTFT tails against total C, the class
// mix actually sent, and the mixed boundary beside the isolated rows of the same identity.
// Private to the report layer.
#pragma once

#include <string>

#include "capq/record/capacity_data.h"

namespace capq::report {

// "" for a row without a mix.
std::string MixSection(const CapacityData& d, const RowQualification& q);

// "sim_small_short 6 or sim_small_reference 6 or sim_small_heavy 4 alone; 6 mixed at short 3 :
// reference 2 : heavy 1", from the rows of `d` with q's identity and no mix.
std::string MixBesideIsolated(const CapacityData& d, const RowQualification& q);

}  // namespace capq::report
