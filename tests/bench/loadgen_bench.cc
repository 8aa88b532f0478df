// Load generator at scale against the simulated server, run in a child process so the figures
// below are the harness's alone:
//   - 1,024 concurrent streams from one process: peak RSS (VmHWM) must stay <= 128 MB;
//   - fidelity at C = 256: harness arrival time of each chunk minus the server's own write time
//     (truth log, same CLOCK_MONOTONIC), for the TTFT chunk and for every chunk; scheduling lag.
// Prints figures only when every stream ended whole (else only why); it is not a test. Usage:
// capq_loadgen_bench [max_tokens=64] [time_scale=100]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/metrics.h"
#include "capq/sim/server.h"

namespace {

std::string StatusField(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return line;
  }
  return std::string(key) + " ?";
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// small.yaml with room for 1,024 running requests.
std::string BenchProfile() {
  std::string y = ReadFile(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml");
  y = std::regex_replace(y, std::regex("\nname: [^\n]*"), "\nname: bench1024");
  y = std::regex_replace(y, std::regex("\nmax_total_tokens: [^\n]*"),
                         "\nmax_total_tokens: 1048576");
  y = std::regex_replace(y, std::regex("\nmax_running_requests: [^\n]*"),
                         "\nmax_running_requests: 1100");
  return y;
}

struct Child {
  pid_t pid = -1;
  int port = 0;
  int keepalive_fd = -1;  // the child stops its server when this pipe closes
};

// Starts the simulator in a child process and returns its port.
Child StartSimChild(const std::string& profile_path, const std::string& truth_path, double scale) {
  int port_pipe[2], life_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(life_pipe) != 0) std::exit(2);
  const pid_t pid = fork();
  if (pid == 0) {
    close(port_pipe[0]);
    close(life_pipe[1]);
    capq::sim::ServerOptions o;
    o.profile_path = profile_path;
    o.time_scale = scale;
    o.truth_log_path = truth_path;
    auto server = capq::sim::SimServer::Start(o);
    int port = server.ok() ? (*server)->port() : -1;
    if (!server.ok()) std::fprintf(stderr, "sim: %s\n", server.status().ToString().c_str());
    (void)!write(port_pipe[1], &port, sizeof port);
    char c;
    while (read(life_pipe[0], &c, 1) > 0) {
    }
    if (server.ok()) (*server)->Stop();
    _exit(0);
  }
  close(port_pipe[1]);
  close(life_pipe[0]);
  Child ch;
  ch.pid = pid;
  ch.keepalive_fd = life_pipe[1];
  if (read(port_pipe[0], &ch.port, sizeof ch.port) != sizeof ch.port || ch.port <= 0) {
    std::fprintf(stderr, "simulator did not start\n");
    std::exit(2);
  }
  close(port_pipe[0]);
  return ch;
}

void StopChild(Child* ch) {
  close(ch->keepalive_fd);
  int st = 0;
  waitpid(ch->pid, &st, 0);
}

capq::LoadSpec Spec(int port, int n, int c, int max_tokens, const std::string& tag) {
  capq::LoadSpec spec;
  spec.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions";
  spec.concurrency = c;
  spec.request_timeout_s = 300;
  for (int i = 0; i < n; ++i) {
    nlohmann::json body = {
        {"model", "sim-small"},
        {"messages",
         {{{"role", "user"},
           {"content", tag + " request " + std::to_string(i) +
                           " asks about rivers mountains lakes forests deserts and plains"}}}},
        {"max_tokens", max_tokens},
        {"temperature", 0},
        {"seed", 1},
        {"ignore_eos", true},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}}};
    spec.measured.push_back({"m" + std::to_string(i), capq::Phase::kMeasured, i, body.dump()});
  }
  return spec;
}

struct Lateness {
  std::vector<double> ttft_chunk_ms, every_chunk_ms;
};

// Harness arrival minus server write time, per event, matched by (chunk id, frame index).
Lateness Compare(const capq::LoadResult& lr, const std::string& truth_path) {
  std::map<std::pair<std::string, int64_t>, int64_t> truth;
  std::ifstream f(truth_path);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    truth[{j.value("request_id", ""), j.value("event_index", int64_t{-1})}] =
        j.value("wall_mono_ns", int64_t{0});
  }
  Lateness out;
  for (const capq::RawRecord& r : lr.records) {
    if (r.events.empty()) continue;
    auto first = nlohmann::json::parse(r.events.front().data, nullptr, false);
    if (first.is_discarded() || !first.contains("id")) continue;
    const std::string id = first["id"].get<std::string>();
    // The TTFT event: the first one whose delta carries text.
    size_t ttft_index = r.events.size();
    for (size_t i = 0; i < r.events.size() && ttft_index == r.events.size(); ++i) {
      capq::RawRecord one;
      one.actual_send_ns = 1;
      one.events = {r.events[i]};
      if (capq::DecodeRecord(one).nonempty_chunks > 0) ttft_index = i;
    }
    for (size_t i = 0; i < r.events.size(); ++i) {
      auto it = truth.find({id, static_cast<int64_t>(i)});
      if (it == truth.end()) continue;
      const double late_ms = static_cast<double>(r.events[i].arrival_ns - it->second) / 1e6;
      out.every_chunk_ms.push_back(late_ms);
      if (i == ttft_index) out.ttft_chunk_ms.push_back(late_ms);
    }
  }
  return out;
}

void Report(const char* name, int c, const capq::LoadResult& lr, double wall_s,
            const Lateness& late, double scale) {
  using capq::PercentileMethod;
  std::vector<capq::RequestResult> results;
  int64_t events = 0, bytes = 0, errors = 0, failed = 0;
  for (const auto& r : lr.records) {
    results.push_back(capq::DecodeRecord(r));
    events += static_cast<int64_t>(r.events.size());
    bytes += r.body_bytes;
    errors += results.back().errors.empty() ? 0 : 1;
    failed += (r.http_status != 200 || r.cancelled) ? 1 : 0;
  }
  for (const auto& r : results) {
    if (r.errors.empty()) continue;
    std::printf("   first failure %s: %s\n", r.id.c_str(), r.errors.front().c_str());
    break;
  }
  if (failed > 0 || errors > 0) {  // a run that did not do what it claims gives no figure
    std::printf("== %s: C=%d: no figure: %lld of %zu streams failed, %lld with errors\n", name, c,
                static_cast<long long>(failed), lr.records.size(), static_cast<long long>(errors));
    return;
  }
  const capq::TrialMetrics m = capq::ComputeMetrics(results, c, 1.0, PercentileMethod::kLinear);
  auto pct = [](const std::vector<double>& v, double p) {
    return capq::Percentile(v, p, PercentileMethod::kLinear);
  };
  std::printf("== %s: C=%d, %zu streams, wall %.2f s (sim time_scale %.0f)\n", name, c,
              lr.records.size(), wall_s, scale);
  std::printf("   failed %lld, with errors %lld, events %lld, body bytes %lld\n",
              static_cast<long long>(failed), static_cast<long long>(errors),
              static_cast<long long>(events), static_cast<long long>(bytes));
  std::printf(
      "   TTFT wall ms p50 %.2f p99 %.2f max %.2f; scheduling lag ms p50 %.4f p99 %.4f max %.4f\n",
      m.ttft_ms.p50, m.ttft_ms.p99, m.ttft_ms.max, m.scheduling_lag_ms.p50, m.scheduling_lag_ms.p99,
      m.scheduling_lag_ms.max);
  // Completion -> next send only (the opening burst's C sends are in the figure above).
  std::vector<double> refill_lag_ms;
  const capq::MonoNs burst_ns = lr.records.empty() ? 0 : lr.records.front().intended_send_ns;
  for (const auto& r : lr.records) {
    if (r.intended_send_ns != burst_ns && r.actual_send_ns != 0) {
      refill_lag_ms.push_back(static_cast<double>(r.actual_send_ns - r.intended_send_ns) / 1e6);
    }
  }
  std::printf("   completion -> next send lag (n=%zu): p50 %.4f p99 %.4f max %.4f ms\n",
              refill_lag_ms.size(), pct(refill_lag_ms, 50), pct(refill_lag_ms, 99),
              pct(refill_lag_ms, 100));
  std::printf(
      "   harness minus server write time, TTFT chunk (n=%zu): p50 %.3f p99 %.3f max %.3f ms\n",
      late.ttft_chunk_ms.size(), pct(late.ttft_chunk_ms, 50), pct(late.ttft_chunk_ms, 99),
      pct(late.ttft_chunk_ms, 100));
  std::printf(
      "   harness minus server write time, every chunk (n=%zu): p50 %.3f p99 %.3f max %.3f ms\n",
      late.every_chunk_ms.size(), pct(late.every_chunk_ms, 50), pct(late.every_chunk_ms, 99),
      pct(late.every_chunk_ms, 100));
  std::printf("   %s   %s\n", StatusField("VmHWM").c_str(), StatusField("VmRSS").c_str());
}

void RunScenario(const char* name, int n, int c, int max_tokens, double scale,
                 const std::string& dir) {
  const std::string profile = dir + "/profile.yaml";
  const std::string truth = dir + "/truth-" + std::to_string(c) + ".jsonl";
  std::ofstream(profile) << BenchProfile();
  Child ch = StartSimChild(profile, truth, scale);
  capq::LoadSpec spec = Spec(ch.port, n, c, max_tokens, name);
  const double cpu0 = CpuSeconds();
  const capq::MonoNs t0 = capq::NowNs();
  auto res = capq::RunLoad(spec);
  const double wall_s = capq::NsToS(capq::NowNs() - t0);
  const double cpu_s = CpuSeconds() - cpu0;
  StopChild(&ch);  // flushes the truth log
  if (!res.ok()) {
    std::fprintf(stderr, "%s\n", res.status().ToString().c_str());
    std::exit(1);
  }
  Report(name, c, *res, wall_s, Compare(*res, truth), scale);
  int64_t events = 0;
  for (const auto& r : res->records) events += static_cast<int64_t>(r.events.size());
  std::printf("   harness CPU %.3f s for %lld events: %.2f us per event (user + system)\n", cpu_s,
              static_cast<long long>(events),
              events > 0 ? cpu_s * 1e6 / static_cast<double>(events) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int max_tokens = argc > 1 ? std::atoi(argv[1]) : 64;
  const double scale = argc > 2 ? std::atof(argv[2]) : 100;
  char tmpl[] = "/tmp/capq-loadgen-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  const std::string dir = tmpl;
  std::printf("capq_loadgen_bench: max_tokens %d, results below (RSS targets: VmHWM <= 128 MB)\n",
              max_tokens);
  std::printf("   at start: %s\n", StatusField("VmHWM").c_str());
  RunScenario("fidelity", 512, 256, max_tokens, scale, dir);
  RunScenario("scale", 1024, 1024, max_tokens, scale, dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
