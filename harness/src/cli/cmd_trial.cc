#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunTrial(const Args&) {
  std::fprintf(stderr, "capq trial: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
