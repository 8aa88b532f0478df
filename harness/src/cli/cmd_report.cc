#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunReport(const Args&) {
  std::fprintf(stderr, "capq report: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
