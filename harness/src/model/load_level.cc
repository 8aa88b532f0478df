#include "capq/model/load_level.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace capq {

double LoadScale::Rate(LoadLevel level) const { return open_loop ? level * rate_step_rps : 0; }

double LoadScale::RoundedRate(LoadLevel level) const {
  const double unit = std::pow(10.0, Decimals());
  return std::round(Rate(level) * unit) / unit;
}

int LoadScale::Decimals() const {
  if (!open_loop || !(rate_step_rps > 0) || !std::isfinite(rate_step_rps)) return 0;
  double scaled = rate_step_rps;
  int d = 0;
  while (d < 6 && std::fabs(scaled - std::round(scaled)) > 1e-9 * std::max(1.0, scaled)) {
    scaled *= 10;
    ++d;
  }
  return d;
}

std::string LoadScale::Figure(LoadLevel level) const {
  if (!open_loop) return std::to_string(level);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", Decimals(), Rate(level));
  return buf;
}

std::string LoadScale::Value(LoadLevel level) const {
  return open_loop ? Figure(level) + " rps" : Figure(level);
}

std::string LoadScale::Label(LoadLevel level) const { return Symbol() + "=" + Value(level); }

std::string LoadScale::Symbol() const { return open_loop ? "R" : "C"; }

std::string LoadScale::Max() const { return Symbol() + "max"; }

std::string LoadScale::Slug(LoadLevel level) const {
  std::string out = open_loop ? "r" : "c";
  for (char c : Figure(level)) {
    if (c == '.') {
      out += 'p';
    } else if (c == '-') {
      out += 'm';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace capq
