// A simulator in its own process for the benchmarks: `capq sim ARGS...` spawned without a shell,
// its output in DIR/sim.out, its URL read from the "listening on" line. Benchmarks only.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace capq::bench {

struct SimChild {
  pid_t pid = -1;
  std::string url;
  rusage usage{};  // the child's CPU, once Stop() reaped it
  void Stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    int st = 0;
    ::wait4(pid, &st, 0, &usage);
    pid = -1;
  }
  ~SimChild() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Starts `exe sim ARGS...`; false when it could not be spawned or named no URL within 5 s.
inline bool StartSimProcess(const std::string& exe, const std::string& dir,
                            const std::vector<std::string>& sim_args, SimChild* sim) {
  const std::string out = dir + "/sim.out";
  std::vector<std::string> args = {exe, "sim"};
  args.insert(args.end(), sim_args.begin(), sim_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&sim->pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  for (int i = 0; i < 200 && sim->url.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) {
      const std::string key = "listening on ";
      const size_t at = line.find(key);
      if (at == std::string::npos) continue;
      const size_t from = at + key.size();
      sim->url = line.substr(from, line.find(' ', from) - from);
    }
  }
  return !sim->url.empty();
}

}  // namespace capq::bench
