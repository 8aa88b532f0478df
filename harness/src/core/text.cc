#include "capq/text.h"

#include <cmath>
#include <cstdio>

namespace capq {

std::string Fmt(const char* fmt, double v) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string FormatFixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string FormatShortest(double v) { return Fmt("%g", v); }

}  // namespace capq
