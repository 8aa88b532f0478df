#include "capq/cli/server_flags.h"

#include <cstdlib>

namespace capq::cli {

Result<TargetOptions> RequiredServer(const ArgParser& p) {
  std::optional<std::string> url = p.Get("url");
  if (!url) {
    if (const char* e = std::getenv("CAPQ_URL")) url = e;
  }
  if (!url) return Status::InvalidArgument("--url is required (or set CAPQ_URL)");
  TargetOptions o;
  o.base_url = *url;
  o.insecure_tls = p.Has("insecure");
  if (const char* key = std::getenv("CAPQ_API_KEY")) o.api_key = key;
  return o;
}

}  // namespace capq::cli
