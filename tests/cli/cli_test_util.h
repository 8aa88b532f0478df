// What the command tests share: capq run as a user runs it, a fresh scratch folder, a file's text,
// and the embedded simulator started in process at time scale 10.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../capq_process.h"
#include "capq/sim/server.h"

namespace capq::testing {

inline int Capq(const std::vector<std::string>& args, std::string* out) {
  return RunCapqCapturing(args, out);
}

// $TMPDIR/<prefix><name>_<pid>, emptied.
inline std::filesystem::path FreshDir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::unique_ptr<sim::SimServer> StartSim(const std::string& profile, sim::Dialect dialect) {
  sim::ServerOptions o;
  o.profile_path = profile;
  o.dialect = dialect;
  o.time_scale = 10;
  auto s = sim::SimServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

}  // namespace capq::testing
