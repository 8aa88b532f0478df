#include "capq/text.h"

#include <cstdio>

namespace capq {

std::string Fmt(const char* fmt, double v) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace capq
