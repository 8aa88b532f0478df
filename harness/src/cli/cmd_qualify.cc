#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunQualify(const Args&) {
  std::fprintf(stderr, "capq qualify: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
