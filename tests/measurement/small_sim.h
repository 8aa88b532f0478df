// What the load generator tests that drive a real simulator share: the `small` profile's
// simulator at time scale 10 on a free port, and a scratch path per test binary and process.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "capq/sim/server.h"

namespace capq {

inline std::unique_ptr<sim::SimServer> StartSmallSim() {
  sim::ServerOptions o;
  o.profile_path = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml";
  o.time_scale = 10;
  auto s = sim::SimServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// `name` under a directory of this process's named after `suite`.
inline std::string TempPath(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / (suite + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace capq
