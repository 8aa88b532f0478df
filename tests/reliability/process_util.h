// Black-box helpers for the reliability tests: the real `capq` binary as a child process, a
// watchdog on every wait, a minimal loopback HTTP GET, and a recording loopback TCP proxy.
// Everything listens on or connects to 127.0.0.1 only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capq/measurement/raw_evidence.h"

namespace capq::reliability {

namespace fs = std::filesystem;

inline double WallS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The binary under test: the one this build made, or CAPQ_TEST_EXE (e.g. an installed capq).
inline std::string Exe() {
  const char* e = std::getenv("CAPQ_TEST_EXE");
  return e && *e ? e : CAPQ_EXE;
}
inline std::string SourcePath(const std::string& rel) {
  return std::string(CAPQ_SOURCE_DIR) + "/" + rel;
}
inline std::string DataPath(const std::string& name) {
  return SourcePath("tests/data/reliability/" + name);
}

inline std::string Scratch(const std::string& name) {
  std::string d = std::string(CAPQ_BINARY_DIR) + "/test-scratch/reliability-" + name + "-" +
                  std::to_string(::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline nlohmann::json ReadJson(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  return j;
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A random marker nobody could produce by accident.
inline std::string RandomMarker(const std::string& prefix) {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid()));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%08x", static_cast<unsigned long long>(g()),
                static_cast<unsigned>(g()));
  return prefix + buf;
}

// A child process with stdout and stderr in files. It runs in its own process group so the
// destructor can remove it and anything it spawned; signals from the test go to the pid alone,
// like a `kill PID` from an operator.
class Child {
 public:
  static std::unique_ptr<Child> Start(
      const std::vector<std::string>& argv, const std::string& out_path,
      const std::string& err_path,
      const std::vector<std::pair<std::string, std::string>>& env = {}) {
    pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return nullptr;
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      // Own process group (for the destructor), but never outliving a test binary that was
      // killed before its destructors could run.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() == 1) ::_exit(125);
      int in = ::open("/dev/null", O_RDONLY);
      int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      // The tests decide every option: nothing from the caller's environment may leak in.
      if (std::none_of(env.begin(), env.end(),
                       [](const auto& kv) { return kv.first == "CAPQ_URL"; }))
        ::unsetenv("CAPQ_URL");
      if (std::none_of(env.begin(), env.end(),
                       [](const auto& kv) { return kv.first == "CAPQ_API_KEY"; }))
        ::unsetenv("CAPQ_API_KEY");
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so a signal cannot race the child's own call
    auto c = std::unique_ptr<Child>(new Child());
    c->pid_ = pid;
    c->out_path_ = out_path;
    c->err_path_ = err_path;
    c->started_s_ = WallS();
    return c;
  }

  ~Child() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(-pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig) { ::kill(pid_, sig); }

  // The exit code (128 + signal when killed by one), or nullopt if it is still running after
  // `timeout_s`. The watchdog of every test: nothing waits forever.
  std::optional<int> WaitFor(double timeout_s) {
    if (exit_code_) return exit_code_;
    const double end = WallS() + timeout_s;
    while (true) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ended_s_ = WallS();
        return exit_code_;
      }
      if (WallS() > end) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  double RunTimeS() const { return (exit_code_ ? ended_s_ : WallS()) - started_s_; }
  double EndedAtS() const { return ended_s_; }
  std::string Out() const { return ReadFile(out_path_); }
  std::string Err() const { return ReadFile(err_path_); }

 private:
  Child() = default;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string out_path_, err_path_;
  double started_s_ = 0, ended_s_ = 0;
};

// Runs to completion under a watchdog; fails the test (and kills the child) on timeout.
struct RunResult {
  int exit_code = -1;
  std::string out, err;
  double wall_s = 0;
  bool timed_out = false;
};
inline RunResult RunProcess(const std::vector<std::string>& argv, const std::string& log_prefix,
                            double timeout_s,
                            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  RunResult r;
  auto c = Child::Start(argv, log_prefix + ".out", log_prefix + ".err", env);
  if (!c) return r;
  auto code = c->WaitFor(timeout_s);
  r.timed_out = !code;
  EXPECT_TRUE(code) << argv[1] << " still running after the " << timeout_s << " s watchdog";
  r.exit_code = code.value_or(-1);
  r.wall_s = c->RunTimeS();
  c.reset();
  r.out = ReadFile(log_prefix + ".out");
  r.err = ReadFile(log_prefix + ".err");
  return r;
}

// `capq sim` as a process; its URL comes from the one line it prints when listening.
struct SimProcess {
  std::unique_ptr<Child> child;
  std::string url;
  int port = 0;
};
inline SimProcess StartSim(const std::string& dir, double time_scale,
                           const std::string& faults_path = "",
                           const std::string& profile = "rows/sim/profiles/small.yaml") {
  SimProcess s;
  std::vector<std::string> argv = {
      Exe(), "sim", "--profile", SourcePath(profile), "--time-scale", std::to_string(time_scale)};
  if (!faults_path.empty()) {
    argv.push_back("--faults");
    argv.push_back(faults_path);
  }
  s.child = Child::Start(argv, dir + "/sim.out", dir + "/sim.err");
  if (!s.child) return s;
  static const std::regex kListening(R"(listening on (http://127\.0\.0\.1:([0-9]+)))");
  const double end = WallS() + 20;
  while (WallS() < end) {
    std::smatch m;
    std::string out = s.child->Out();
    if (std::regex_search(out, m, kListening)) {
      s.url = m[1];
      s.port = std::stoi(m[2]);
      return s;
    }
    if (s.child->WaitFor(0)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "capq sim printed no 'listening on' line: " << s.child->Out() << s.child->Err();
  return s;
}

// A port nothing listens on: bound to learn a free number, then closed again.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// GET on 127.0.0.1:port with a 2 s bound; the whole response, or "" on any failure.
inline std::string HttpGet(int port, const std::string& path) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string resp;
  const double end = WallS() + 2;
  char buf[8192];
  while (WallS() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return resp;
}

// Output tokens the simulator has generated so far (its Prometheus counter), or -1.
inline double SimGeneratedTokens(int port) {
  std::string m = HttpGet(port, "/metrics");
  static const std::regex kGen(R"(sglang:generation_tokens_total\{[^}]*\} ([0-9.eE+]+))");
  std::smatch sm;
  if (!std::regex_search(m, sm, kGen)) return -1;
  return std::stod(sm[1]);
}

// Waits until the simulator has generated at least `tokens` output tokens.
inline bool WaitForGeneratedTokens(int port, double tokens, double timeout_s) {
  const double end = WallS() + timeout_s;
  while (WallS() < end) {
    if (SimGeneratedTokens(port) >= tokens) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Every regular file under `dir`, recursively.
inline std::vector<fs::path> FilesUnder(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file()) out.push_back(it->path());
  }
  return out;
}

// Measured records of a raw evidence file that completed with HTTP 200 and were not cancelled.
inline int CompletedMeasuredRecords(const std::string& raw_path) {
  capq::Result<capq::RawEvidenceFile> raw = capq::ReadRawRecords(raw_path);
  EXPECT_TRUE(raw.ok()) << raw.status().ToString();
  if (!raw.ok()) return 0;
  int n = 0;
  for (const capq::RawRecord& r : raw->records) {
    n += r.phase == capq::Phase::kMeasured && r.http_status == 200 && !r.cancelled &&
         !r.timed_out && r.transport_error.empty();
  }
  return n;
}

inline const nlohmann::json* FindGate(const nlohmann::json& verdict, const std::string& name) {
  if (!verdict.contains("correctness") || !verdict["correctness"].contains("gates")) return nullptr;
  for (const auto& g : verdict["correctness"]["gates"]) {
    if (g.value("name", "") == name) return &g;
  }
  return nullptr;
}

// A loopback TCP proxy in front of the simulator that keeps a copy of every byte the client sent,
// so a test can see exactly which headers reached "the configured server".
class RecordingProxy {
 public:
  explicit RecordingProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 256) != 0) {
      ADD_FAILURE() << "proxy: cannot listen: " << std::strerror(errno);
      return;
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    for (auto& t : conns_) t.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  RecordingProxy(const RecordingProxy&) = delete;
  RecordingProxy& operator=(const RecordingProxy&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string client_bytes() {
    std::lock_guard<std::mutex> l(mu_);
    return sent_;
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      conns_.emplace_back([this, c] { Pump(c); });
    }
  }
  void Pump(int client) {
    int up = ConnectLoopback(upstream_port_);
    if (up < 0) {
      ::close(client);
      return;
    }
    char buf[16384];
    bool open = true;
    while (open && !stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2 && open; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) {
          open = false;
          break;
        }
        if (i == 0) {
          std::lock_guard<std::mutex> l(mu_);
          sent_.append(buf, static_cast<size_t>(n));
        }
        int to = i == 0 ? up : client;
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) {
            open = false;
            break;
          }
          off += w;
        }
      }
    }
    ::close(up);
    ::close(client);
  }

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> conns_;  // touched by the acceptor thread only until it is joined
  std::mutex mu_;
  std::string sent_;
};

// capq trial against `url`, writing to `out`; extra flags appended.
inline std::vector<std::string> TrialArgv(const std::string& row, const std::string& url,
                                          const std::string& out,
                                          const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {Exe(),
                                "trial",
                                "--row",
                                DataPath("rows/" + row),
                                "--concurrency",
                                "1",
                                "--trial",
                                "1",
                                "--url",
                                url,
                                "--out",
                                out,
                                "--skip-quiet-period",
                                "--no-progress"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace capq::reliability
