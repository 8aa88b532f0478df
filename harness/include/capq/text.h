// Small text helpers shared by the layers.
#pragma once

#include <string>

namespace capq {

// One number through a printf format with a single double conversion: Fmt("%.2f s", 1.5).
std::string Fmt(const char* fmt, double v);

}  // namespace capq
