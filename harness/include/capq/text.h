// Small text helpers shared by the layers.
#pragma once

#include <string>

namespace capq {

// One number through a printf format with a single double conversion: Fmt("%.2f s", 1.5).
std::string Fmt(const char* fmt, double v);
// `v` with `decimals` decimals ("1.65"); "n/a" when it is not finite.
std::string FormatFixed(double v, int decimals);
// `v` as %g writes it, in its shortest form ("2500", "8.5", "99.9").
std::string FormatShortest(double v);

}  // namespace capq
