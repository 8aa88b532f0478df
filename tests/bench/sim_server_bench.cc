// The simulated server under many concurrent streams, in one process on loopback.
//
//   capq_sim_server_bench                                  # all figures
//   capq_sim_server_bench --benchmark_filter=Concurrent    # only the 2,048-connection run
//
// Figures (issue 3 targets):
//   BM_ConcurrentStreams/streams:2048/...  peak_open = streams open at once (every one had its
//   first
//       byte before any finished), completed = streams that ended with [DONE] and the terminating
//       chunk. Target: 2,048 served by one process.
//   BM_ChunkLateness/streams:512/...   late_*: lateness of every chunk against the engine
//       schedule, from the truth log (wall_mono_ns - due_mono_ns, the instant the server hands the
//       chunk to its connection): p50/p99/max in microseconds. Target: p99 <= 1 ms at 512 streams.
//       recv_late_*: the same chunks as the client saw them (its clock when the recv() holding the
//       chunk's last byte returned, minus the same due instant): what the server's socket writes
//       and the client's own reading add on top. No target; reported so neither hides the other.
// The load comes from a small epoll client on its own thread in the same process (raw HTTP/1.1,
// one connection per stream), so client and server share the machine's two cores.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/sim/server.h"

namespace {

using capq::sim::ServerOptions;
using capq::sim::SimServer;

void RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

std::string WriteProfile(const std::string& name, int max_running) {
  std::filesystem::path p = std::filesystem::temp_directory_path() /
                            ("capq_sim_bench_" + name + "_" + std::to_string(getpid()) + ".yaml");
  std::ofstream(p) << "name: bench_" << name << "\n"
                   << "max_total_tokens: 4194304\n"
                   << "page_size: 16\n"
                   << "max_running_requests: " << max_running << "\n"
                   << "chunked_prefill_size: 65536\n"
                   << "context_length: 8192\n"
                   << "b0_s: 0.010\n"  // a 10 ms step: decode-bound like a real GPU at high batch
                   << "b1_s_per_prefill_token: 0.0000001\n"
                   << "b3_s_per_decode_row: 0.000001\n"
                   << "b4_s_per_decode_kv_token: 0\n"
                   << "overhead_s: 0\n"
                   << "chat_template_tokens: 10\n"
                   << "template_prefix_tokens: 3\n";
  return p.string();
}

struct Conn {
  int fd = -1;
  std::string out;  // request bytes still to send
  size_t sent = 0;
  bool first_byte = false;
  bool done = false;
  char tail[5] = {0, 0, 0, 0, 0};
  int64_t bytes = 0;
  // Receipt of each SSE frame: frame k of a stream is the truth log's event_index k.
  std::string head;  // the answer's first bytes, until the request id is found in them
  std::string request_id;
  std::vector<capq::MonoNs> frame_recv_ns;
};

struct ClientResult {
  int completed = 0;
  int failed = 0;
  int peak_open = 0;
  double seconds = 0;
  std::vector<Conn> conns;
};

// Notes the SSE frames completed by `data` (a frame ends with a blank line; chunk-size lines and
// the HTTP head use CRLF, so "\n\n" marks frames only) and, once, the stream's request id.
void NoteFrames(Conn* c, const char* data, size_t n, capq::MonoNs now) {
  char prev = c->tail[4];
  for (size_t j = 0; j < n; ++j) {
    if (data[j] == '\n' && prev == '\n') c->frame_recv_ns.push_back(now);
    prev = data[j];
  }
  for (size_t j = n > 5 ? n - 5 : 0; j < n; ++j) {
    std::memmove(c->tail, c->tail + 1, 4);
    c->tail[4] = data[j];
  }
  if (!c->request_id.empty() || c->head.size() > 4096) return;
  c->head.append(data, n);
  const size_t at = c->head.find("\"id\":\"");
  if (at == std::string::npos) return;
  const size_t end = c->head.find('"', at + 6);
  if (end != std::string::npos) c->request_id = c->head.substr(at + 6, end - at - 6);
}

// One streaming chat request on a new non-blocking connection to 127.0.0.1:`port`, watched by `ep`
// under index `i`.
void OpenStream(int ep, const sockaddr_in& addr, int i, int max_tokens, Conn* c) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  connect(c->fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const std::string body = nlohmann::json{
      {"messages",
       {{{"role", "user"},
         {"content", "bench stream " + std::to_string(i) + " with a few more words of prompt"}}}},
      {"max_tokens", max_tokens},
      {"ignore_eos", true},
      {"temperature", 0},
      {"stream", true},
      {"stream_options",
       {{"include_usage",
         true}}}}.dump();
  c->out =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u32 = static_cast<uint32_t>(i);
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

// Sends what is left of the request; once all is sent, watches for the answer only.
void SendMore(int ep, uint32_t index, Conn* c) {
  ssize_t w = send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
  if (w > 0) c->sent += static_cast<size_t>(w);
  if (c->sent == c->out.size()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = index;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  }
}

// Reads all that is ready; the stream is done at its terminating chunk or when the peer is gone.
void ReadReady(Conn* c, std::vector<char>* buf, int* open, ClientResult* res) {
  for (;;) {
    ssize_t r = recv(c->fd, buf->data(), buf->size(), 0);
    if (r > 0) {
      if (!c->first_byte) {
        c->first_byte = true;
        res->peak_open = std::max(res->peak_open, ++*open);
      }
      c->bytes += r;
      // NoteFrames keeps the last 5 bytes: the stream is complete at the terminating chunk.
      NoteFrames(c, buf->data(), static_cast<size_t>(r), capq::NowNs());
      if (std::memcmp(c->tail, "0\r\n\r\n", 5) == 0) {
        c->done = true;
        ++res->completed;
        return;
      }
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      c->done = true;
      ++res->failed;
    }
    return;
  }
}

// Opens `streams` connections at once, sends one streaming chat request on each and reads every
// answer to its terminating chunk.
ClientResult RunClient(int port, int streams, int max_tokens) {
  ClientResult res;
  int ep = epoll_create1(0);
  std::vector<Conn>& conns = res.conns;
  conns.resize(static_cast<size_t>(streams));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  const capq::MonoNs start = capq::NowNs();
  for (int i = 0; i < streams; ++i)
    OpenStream(ep, addr, i, max_tokens, &conns[static_cast<size_t>(i)]);
  int open = 0;
  int finished = 0;
  std::vector<epoll_event> evs(1024);
  std::vector<char> buf(1 << 16);
  const capq::MonoNs deadline = start + 600LL * 1000000000LL;
  while (finished < streams && capq::NowNs() < deadline) {
    int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 1000);
    for (int k = 0; k < n; ++k) {
      const epoll_event& e = evs[static_cast<size_t>(k)];
      Conn& c = conns[e.data.u32];
      if (c.done) continue;
      if ((e.events & EPOLLOUT) && c.sent < c.out.size()) SendMore(ep, e.data.u32, &c);
      if (!(e.events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      ReadReady(&c, &buf, &open, &res);
      if (c.done) {
        if (c.first_byte) --open;
        ++finished;
        epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
        close(c.fd);
        c.fd = -1;
      }
    }
  }
  for (Conn& c : conns) {
    if (c.fd >= 0) {
      close(c.fd);
      ++res.failed;
    }
  }
  close(ep);
  res.seconds = capq::NsToS(capq::NowNs() - start);
  return res;
}

struct Lateness {
  int64_t lines = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
};

Lateness Summarize(std::vector<int64_t> late) {
  Lateness l;
  l.lines = static_cast<int64_t>(late.size());
  if (late.empty()) return l;
  std::sort(late.begin(), late.end());
  auto q = [&](double p) {
    size_t i = static_cast<size_t>(p * static_cast<double>(late.size() - 1) + 0.5);
    return static_cast<double>(late[i]) / 1000.0;
  };
  l.p50_us = q(0.50);
  l.p99_us = q(0.99);
  l.max_us = static_cast<double>(late.back()) / 1000.0;
  return l;
}

// Server-side lateness (late) from the truth log, and client-side lateness (recv_late) of the same
// chunks, matched by request id and event index. `unmatched` counts client frames the log lacks.
struct LatenessPair {
  Lateness server, client;
  int64_t unmatched = 0;
};

LatenessPair ReadLateness(const std::string& path, const std::vector<Conn>& conns) {
  std::ifstream in(path);
  std::string line;
  std::vector<int64_t> late;
  std::map<std::pair<std::string, int64_t>, capq::MonoNs> due;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    const int64_t due_ns = j["due_mono_ns"].get<int64_t>();
    late.push_back(j["wall_mono_ns"].get<int64_t>() - due_ns);
    due[{j["request_id"].get<std::string>(), j["event_index"].get<int64_t>()}] = due_ns;
  }
  LatenessPair out;
  std::vector<int64_t> recv_late;
  for (const Conn& c : conns) {
    for (size_t k = 0; k < c.frame_recv_ns.size(); ++k) {
      auto it = due.find({c.request_id, static_cast<int64_t>(k)});
      if (it == due.end()) {
        ++out.unmatched;
        continue;
      }
      recv_late.push_back(c.frame_recv_ns[k] - it->second);
    }
  }
  out.server = Summarize(std::move(late));
  out.client = Summarize(std::move(recv_late));
  return out;
}

// One run: a server with a profile whose running limit is `max_running`, `streams` clients.
void RunOnce(benchmark::State& state, int streams, int max_running, int max_tokens, bool lateness) {
  RaiseFdLimit();
  ServerOptions o;
  o.profile_path = WriteProfile(std::to_string(max_running), max_running);
  o.time_scale = 1.0;  // real time: lateness is measured against a wall schedule that matters
  if (lateness) {
    o.truth_log_path = (std::filesystem::temp_directory_path() /
                        ("capq_sim_bench_truth_" + std::to_string(getpid()) + ".jsonl"))
                           .string();
  }
  ClientResult cr;
  for (auto _ : state) {
    auto server = SimServer::Start(o);
    if (!server.ok()) {
      state.SkipWithError(server.status().ToString().c_str());
      return;
    }
    cr = RunClient((*server)->port(), streams, max_tokens);
    (*server)->Stop();
  }
  state.counters["streams"] = streams;
  state.counters["completed"] = cr.completed;
  state.counters["failed"] = cr.failed;
  state.counters["peak_open"] = cr.peak_open;
  state.counters["wall_s"] = cr.seconds;
  if (lateness) {
    LatenessPair lp = ReadLateness(o.truth_log_path, cr.conns);
    const Lateness& l = lp.server;
    state.counters["chunks"] = static_cast<double>(l.lines);
    state.counters["late_p50_us"] = l.p50_us;
    state.counters["late_p99_us"] = l.p99_us;
    state.counters["late_max_us"] = l.max_us;
    state.counters["recv_chunks"] = static_cast<double>(lp.client.lines);
    state.counters["recv_unmatched"] = static_cast<double>(lp.unmatched);
    state.counters["recv_late_p50_us"] = lp.client.p50_us;
    state.counters["recv_late_p99_us"] = lp.client.p99_us;
    // CAPQ_BENCH_KEEP_TRUTH=1 keeps the truth log for a closer look (its path is printed).
    if (std::getenv("CAPQ_BENCH_KEEP_TRUTH")) {
      std::fprintf(stderr, "truth log kept: %s\n", o.truth_log_path.c_str());
    } else {
      std::filesystem::remove(o.truth_log_path);
    }
  }
  std::filesystem::remove(o.profile_path);
}

void BM_ConcurrentStreams(benchmark::State& state) {
  RunOnce(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
          static_cast<int>(state.range(2)), /*lateness=*/true);
}
// 2,048 streams all decoding at once for 200 steps of >= 10 ms (2,048 chunks per step: more than
// two cores shared with the client can write on time, so lateness grows), and 2,048 connections
// against a running limit of 64 (the rest wait in the queue with their headers sent).
BENCHMARK(BM_ConcurrentStreams)
    ->ArgNames({"streams", "running", "max_tokens"})
    ->Args({2048, 2048, 200})
    ->Args({2048, 64, 16})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ChunkLateness(benchmark::State& state) {
  RunOnce(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
          static_cast<int>(state.range(2)), /*lateness=*/true);
}
// 512 streams, all decoding in every step (512 chunks written per step), and 512 streams against
// the b70_twin running limit (9), the rest queued (shorter outputs so the queue drains in ~15 s).
BENCHMARK(BM_ChunkLateness)
    ->ArgNames({"streams", "running", "max_tokens"})
    ->Args({512, 512, 100})
    ->Args({512, 9, 24})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
