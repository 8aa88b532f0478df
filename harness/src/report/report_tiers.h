// The report's SLO tier section (report.cc's row sections): every tier of a row side by side with
// the trials that decided it, and the order a stricter tier must keep. Private to the report
// layer.
#pragma once

#include <string>

#include "capq/record/capacity_data.h"

namespace capq::report {

// Empty for a row without tiers.
std::string TierSection(const RowQualification& q);
// Each further tier's summary line with its cost, for the page's summary at the top; empty for a
// row without tiers.
std::string TierSummaries(const RowQualification& q);

}  // namespace capq::report
