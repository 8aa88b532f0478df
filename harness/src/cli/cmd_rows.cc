#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunRows(const Args&) {
  std::fprintf(stderr, "capq rows: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
