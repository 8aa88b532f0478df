// The server a command that needs one talks to: --url, else CAPQ_URL; --insecure where the
// command takes it; CAPQ_API_KEY as the bearer token (never written anywhere).
#pragma once

#include "capq/cli/args.h"
#include "capq/status.h"
#include "capq/targets/target.h"

namespace capq::cli {

// InvalidArgument when neither --url nor CAPQ_URL names a server.
Result<TargetOptions> RequiredServer(const ArgParser& p);

}  // namespace capq::cli
