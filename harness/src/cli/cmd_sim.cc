#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunSim(const Args&) {
  std::fprintf(stderr, "capq sim: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
