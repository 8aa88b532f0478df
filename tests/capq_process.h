// Runs a program the way the tests run capq: argv without a shell, stdout to one file and stderr
// to another (or the same, interleaved). Returns the exit code, 128 + signal when killed, -1 when
// it could not start.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace capq::testing {

inline int RunProcess(std::vector<std::string> argv, const std::string& out,
                      const std::string& err) {
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (err == out) {
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, c.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs the built capq (CAPQ_BINARY_DIR/harness/capq) with `args`; its stdout and stderr,
// interleaved, go to `*output`. Returns RunProcess's code.
inline int RunCapqCapturing(const std::vector<std::string>& args, std::string* output) {
  namespace fs = std::filesystem;
  const fs::path log = fs::temp_directory_path() / ("capq_output_" + std::to_string(getpid()));
  std::vector<std::string> argv = {std::string(CAPQ_BINARY_DIR) + "/harness/capq"};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = RunProcess(argv, log.string(), log.string());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  *output = ss.str();
  fs::remove(log);
  return rc;
}

}  // namespace capq::testing
