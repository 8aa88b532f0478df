// Logging goes through spdlog. The default level is "warn" so a command's own output stays
// readable; CAPQ_LOG_LEVEL (trace|debug|info|warn|error|off) or --verbose raises it. Logs go to
// stderr.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace capq {

// Sets up the process-wide logger once; reads CAPQ_LOG_LEVEL. Safe to call more than once.
void InitLogging();
void SetLogLevel(const std::string& level);

}  // namespace capq
