#include <cstdio>

#include "capq/cli/commands.h"

namespace capq::cli {

int RunValidate(const Args&) {
  std::fprintf(stderr, "capq validate: not implemented yet\n");
  return 3;
}

}  // namespace capq::cli
