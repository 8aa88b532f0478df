// Load generator tests against a loopback HTTP/1.1 server started by each test. The server is
// deliberately small: one thread per connection, behaviour chosen by the request body
// ({"mode": "sse" | "forever" | "cut" | "stall" | "status500" | "hang", "n": chunks,
// "gap_ms": ..., "framing": "chunked" | "close", "coding": "gzip"}).
#include "capq/measurement/loadgen.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"

namespace capq {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

struct ServerOptions {
  bool close_after_response = false;  // close right after each response, no "Connection: close"
  int idle_close_ms = -1;             // close a connection idle this long between requests
  // Read a second request on a kept-alive connection, then close without answering: the race
  // where an idle-timeout close crosses the client's next request on the wire.
  bool drop_reused_requests = false;
};

class LoopbackServer {
 public:
  using Options = ServerOptions;

  LoopbackServer() : LoopbackServer(Options{}) {}
  explicit LoopbackServer(Options opt) : opt_(opt) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 256) != 0) {
      ADD_FAILURE() << "loopback server: bind/listen failed";
      return;
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~LoopbackServer() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> workers;
    {
      std::lock_guard<std::mutex> l(mu_);
      workers.swap(workers_);
    }
    for (auto& t : workers) t.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  std::string Url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1/chat/completions";
  }

  std::vector<std::string> Heads() {
    std::lock_guard<std::mutex> l(mu_);
    return heads_;
  }
  // Blocks until `n` streams have sent their first event (or 30 s pass).
  bool WaitFirstEvents(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] { return first_events_ >= n; });
  }

  std::atomic<int> requests{0};
  std::atomic<int> connections{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> dropped{0};

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++connections;
      std::lock_guard<std::mutex> l(mu_);
      workers_.emplace_back([this, fd] {
        Serve(fd);
        ::close(fd);
      });
    }
  }

  // Waits up to timeout_ms for readability; false on stop or timeout.
  bool Readable(int fd, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) return true;
      if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return false;
    }
    return false;
  }

  bool Send(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  bool Chunk(int fd, const std::string& payload) {
    char len[32];
    std::snprintf(len, sizeof len, "%zx\r\n", payload.size());
    return Send(fd, len + payload + "\r\n");
  }

  // One response body as the request asked for it: chunked, or ended by closing the connection
  // ("framing": "close"); as is, or gzip-coded with each piece sync-flushed ("coding": "gzip").
  class Body {
   public:
    Body(LoopbackServer* server, int fd, bool close_delimited, bool gzip)
        : server_(server), fd_(fd), close_delimited_(close_delimited), gzip_(gzip) {
      if (gzip_)
        deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    }
    ~Body() {
      if (gzip_) deflateEnd(&z_);
    }
    Body(const Body&) = delete;
    Body& operator=(const Body&) = delete;

    std::string Headers() const {
      std::string h = close_delimited_ ? "Connection: close\r\n" : "Transfer-Encoding: chunked\r\n";
      return gzip_ ? h + "Content-Encoding: gzip\r\n" : h;
    }
    bool Piece(const std::string& bytes) { return Write(Code(bytes, Z_SYNC_FLUSH)); }
    // The gzip trailer and the end of the framing; returns whether the connection may be kept.
    bool End() {
      if (gzip_ && !Write(Code("", Z_FINISH))) return false;
      return !close_delimited_ && server_->Send(fd_, "0\r\n\r\n");
    }

   private:
    std::string Code(const std::string& bytes, int flush) {
      if (!gzip_) return bytes;
      std::string out(bytes.size() + 1024, '\0');
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
      z_.avail_in = static_cast<uInt>(bytes.size());
      z_.next_out = reinterpret_cast<Bytef*>(out.data());
      z_.avail_out = static_cast<uInt>(out.size());
      deflate(&z_, flush);  // the room above holds any piece these tests send
      out.resize(out.size() - z_.avail_out);
      return out;
    }
    bool Write(const std::string& bytes) {
      if (bytes.empty()) return true;
      return close_delimited_ ? server_->Send(fd_, bytes) : server_->Chunk(fd_, bytes);
    }

    LoopbackServer* server_;
    int fd_;
    bool close_delimited_, gzip_;
    z_stream z_{};
  };

  static std::string Str(const std::string& body, const std::string& key, const std::string& dflt) {
    const std::string k = "\"" + key + "\":\"";
    const size_t at = body.find(k);
    if (at == std::string::npos) return dflt;
    const size_t end = body.find('"', at + k.size());
    return body.substr(at + k.size(), end - at - k.size());
  }
  static int Int(const std::string& body, const std::string& key, int dflt) {
    const std::string k = "\"" + key + "\":";
    const size_t at = body.find(k);
    return at == std::string::npos ? dflt : std::atoi(body.c_str() + at + k.size());
  }

  void Sleep(int ms) {
    for (int i = 0; i < ms && !stop_; i += 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  void Serve(int fd) {
    std::string buf;
    bool first_request = true;
    int served_on_connection = 0;
    while (!stop_) {
      // Read one request: head, then Content-Length bytes of body.
      size_t head_end;
      while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
        const int wait = first_request ? 5000 : opt_.idle_close_ms;
        if (!Readable(fd, wait)) return;
        char tmp[65536];
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      first_request = false;
      const std::string head = buf.substr(0, head_end);
      std::string lower = head;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t cl = lower.find("content-length:");
      const size_t body_len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15));
      while (buf.size() < head_end + 4 + body_len) {
        if (!Readable(fd, 5000)) return;
        char tmp[65536];
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string body = buf.substr(head_end + 4, body_len);
      buf.erase(0, head_end + 4 + body_len);
      if (opt_.drop_reused_requests && served_on_connection > 0) {
        ++dropped;
        return;
      }
      ++served_on_connection;
      {
        std::lock_guard<std::mutex> l(mu_);
        heads_.push_back(head + "\r\nbody-bytes: " + std::to_string(body.size()));
      }
      const int req_no = ++requests;
      const int now = ++in_flight;
      int seen = max_in_flight.load();
      while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
      }
      const bool keep = Respond(fd, body, req_no);
      --in_flight;
      if (!keep || opt_.close_after_response) return;
    }
  }

  void NoteFirstEvent() {
    std::lock_guard<std::mutex> l(mu_);
    ++first_events_;
    cv_.notify_all();
  }

  // Sends nothing more until the client closes.
  bool Hang(int fd) {
    while (Readable(fd, -1)) {
      char tmp[256];
      if (::recv(fd, tmp, sizeof tmp, 0) <= 0) return false;
    }
    return false;
  }

  // Returns whether the connection may be kept alive.
  bool Respond(int fd, const std::string& body, int req_no) {
    const std::string mode = Str(body, "mode", "sse");
    const int n = Int(body, "n", 3);
    const int gap_ms = Int(body, "gap_ms", 0);
    Sleep(Int(body, "delay_ms", 0));
    if (mode == "status500") {
      const std::string err = R"({"object":"error","message":"boom"})";
      return Send(fd,
                  "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                  "Content-Length: " +
                      std::to_string(err.size()) + "\r\n\r\n" + err);
    }
    if (mode == "hang") return Hang(fd);
    Body out(this, fd, Str(body, "framing", "chunked") == "close",
             Str(body, "coding", "") == "gzip");
    if (!Send(fd,
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + out.Headers() + "\r\n")) {
      return false;
    }
    const std::string tag = "r" + std::to_string(req_no);
    if (!out.Piece(": keep-alive\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                   "\"assistant\",\"content\":\"\"}}]}\r\n\r\n")) {
      return false;
    }
    const bool forever = mode == "forever";
    for (int i = 0; forever || i < n; ++i) {
      if (stop_) return false;
      if (i > 0) Sleep(gap_ms);
      if (!out.Piece("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + tag + "t" +
                     std::to_string(i) + " \"}}]}\n\n")) {
        return false;
      }
      if (i == 0) NoteFirstEvent();
      if (mode == "cut" && i + 1 == n / 2 + 1) return false;  // close mid-stream, no terminator
    }
    if (mode == "stall") return Hang(fd);  // n chunks, then silence on an open connection
    return out.Piece(
               "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}"
               "\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" +
               std::to_string(n) + ",\"total_tokens\":" + std::to_string(7 + n) +
               "}}\n\ndata: [DONE]\n\n") &&
           out.End();
  }

  Options opt_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  std::vector<std::string> heads_;
  int first_events_ = 0;
};

std::vector<PlannedRequest> Plan(Phase phase, int count, const std::string& body) {
  std::vector<PlannedRequest> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(
        PlannedRequest{(phase == Phase::kWarmup ? "w" : "m") + std::to_string(i), phase, i, body});
  }
  return out;
}

LoadSpec Spec(const LoopbackServer& s, int warmup, int measured, int c, const std::string& body) {
  LoadSpec spec;
  spec.url = s.Url();
  spec.warmup = Plan(Phase::kWarmup, warmup, body);
  spec.measured = Plan(Phase::kMeasured, measured, body);
  spec.concurrency = c;
  spec.request_timeout_s = 60;
  return spec;
}

std::string Describe(const RawRecord& r) {
  return r.id + " status " + std::to_string(r.http_status) + " error '" + r.transport_error + "'";
}

TEST(RunLoad, ClosedLoopBurstWarmupFirstAndCleanStreams) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 2, 6, 2, R"({"mode":"sse","n":5,"gap_ms":10})");
  std::vector<LoadProgress> progress;
  spec.on_progress = [&](const LoadProgress& p) { progress.push_back(p); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const LoadResult& lr = *res;
  ASSERT_EQ(lr.records.size(), 8u);
  EXPECT_FALSE(lr.interrupted);
  size_t events = 0, kernel_stamped = 0;
  for (const RawRecord& r : lr.records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.content_type, "text/event-stream");
    ASSERT_EQ(r.events.size(), 9u) << Describe(r);  // role, 5 tokens, finish, usage, [DONE]
    EXPECT_EQ(r.events.back().data, "[DONE]");
    EXPECT_EQ(r.sse_comments, 1);
    EXPECT_LE(r.intended_send_ns, r.actual_send_ns);
    EXPECT_LT(r.actual_send_ns, r.first_byte_ns);
    EXPECT_LE(r.first_byte_ns, r.first_body_ns);
    EXPECT_LE(r.first_body_ns, r.events.front().arrival_ns);
    EXPECT_LE(r.events.back().arrival_ns, r.end_ns);
    // The kernel's receive stamp, where the loop proved it: after the send, never after the read.
    for (const SseEvent& ev : r.events) {
      kernel_stamped += ev.kernel_ns > 0;
      if (ev.kernel_ns == 0) continue;
      EXPECT_GT(ev.kernel_ns, r.actual_send_ns) << Describe(r);
      EXPECT_LE(ev.kernel_ns, ev.arrival_ns) << Describe(r);
      EXPECT_EQ(ev.stamp_ns(), ev.kernel_ns);
    }
    events += r.events.size();
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
    EXPECT_EQ(d.completion_tokens, 5);
    EXPECT_EQ(d.nonempty_chunks, 5);
  }
  // Warm-up first, at concurrency 1, each send after the previous completion.
  EXPECT_EQ(lr.records[0].phase, Phase::kWarmup);
  EXPECT_EQ(lr.records[1].phase, Phase::kWarmup);
  EXPECT_GE(lr.records[1].actual_send_ns, lr.records[0].end_ns);
  EXPECT_EQ(lr.records[1].intended_send_ns, lr.records[0].end_ns);
  EXPECT_LE(lr.records[1].end_ns, lr.measured_start_ns);
  // Measured burst: the first C share the burst start; each later one was intended at a completion.
  const RawRecord* m = &lr.records[2];
  EXPECT_EQ(m[0].phase, Phase::kMeasured);
  EXPECT_EQ(m[0].intended_send_ns, m[1].intended_send_ns);
  EXPECT_GE(m[0].intended_send_ns, lr.measured_start_ns);
  for (int i = 2; i < 6; ++i) {
    bool matches_a_completion = false;
    for (int j = 0; j < i; ++j) matches_a_completion |= m[i].intended_send_ns == m[j].end_ns;
    EXPECT_TRUE(matches_a_completion) << m[i].id;
  }
  // The server paces its chunks 10 ms apart, so a read rarely races a new chunk. A connection's
  // first packets may go unstamped: the kernel turns its receive stamps on a moment after the first
  // socket asks.
  EXPECT_GE(kernel_stamped * 2, events) << kernel_stamped << " of " << events;
  EXPECT_LE(server.max_in_flight.load(), 2);  // never more than C in flight
  EXPECT_EQ(server.requests.load(), 8);
  // Keep-alive: 8 requests over at most C connections (the warm-up connection is reused).
  EXPECT_LE(server.connections.load(), 2);
  EXPECT_TRUE(m[5].reused_connection);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().phase, Phase::kMeasured);
  EXPECT_EQ(progress.back().completed, 6);
  EXPECT_EQ(progress.back().failed, 0);
  // Different request texts: outputs differ per request (the server tags them).
  std::set<std::string> outs;
  for (const RawRecord& r : lr.records) outs.insert(DecodeRecord(r).output_sha256);
  EXPECT_EQ(outs.size(), 8u);
}

// Open loop: each request leaves at its scheduled time whatever is in flight, so more streams are
// open at once than any closed loop of C = 1 would allow.
TEST(RunLoad, ScheduledArrivalsSendOnTimeWhateverIsInFlight) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 1, 6, 1, R"({"mode":"sse","n":4,"gap_ms":40})");
  const std::vector<MonoNs> offsets = {0,          20'000'000, 40'000'000,
                                       60'000'000, 80'000'000, 100'000'000};
  spec.measured_arrivals = [&] { return ScheduledArrivals(offsets); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const RawRecord* m = &res->records[1];
  const MonoNs start = m[0].intended_send_ns;
  EXPECT_GE(start, res->measured_start_ns);
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(m[i].http_status, 200) << Describe(m[i]);
    EXPECT_EQ(m[i].intended_send_ns - start, offsets[i]) << m[i].id;
    EXPECT_GE(m[i].actual_send_ns, m[i].intended_send_ns) << m[i].id;
  }
  // Each stream lasts ~160 ms while one starts every 20 ms: several are open together.
  EXPECT_GE(server.max_in_flight.load(), 3);
  // The warm-up still ran first, alone.
  EXPECT_LE(res->records[0].end_ns, res->measured_start_ns);
}

// Past 64 streams the connection pool is kept in shards (loadgen.cc, ShardConnections): a closed
// loop's freed slot still reuses its own connection, so C slots never need more than C of them.
TEST(RunLoad, ShardedConnectionPoolKeepsClosedLoopReuse) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 600, 150, R"({"mode":"sse","n":2,"gap_ms":5})");
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  int reused = 0;
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    reused += r.reused_connection;
  }
  EXPECT_LE(server.connections.load(), 150);
  EXPECT_EQ(reused, 600 - server.connections.load());
}

// An open loop over shards: a release takes an idle connection of whichever shard has one, so a
// burst after a warm-up of as many streams connects nothing new.
TEST(RunLoad, ShardedConnectionPoolReusesIdleConnectionsOpenLoop) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 40, 40, 200, R"({"mode":"sse","n":2,"gap_ms":5})");
  spec.warmup_concurrency = 40;
  spec.measured_arrivals = [] { return ScheduledArrivals(std::vector<MonoNs>(40, 0)); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  for (const RawRecord& r : res->records) EXPECT_EQ(r.http_status, 200) << Describe(r);
  for (size_t i = 40; i < 80; ++i) EXPECT_TRUE(res->records[i].reused_connection) << i;
  EXPECT_EQ(server.connections.load(), 40);
}

// The in-flight cap holds a due release back until a completion; the release keeps its intended
// time, so the wait shows as lateness, never as a shorter latency.
TEST(RunLoad, InFlightCapDelaysReleasesAndKeepsTheirIntendedTime) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 3, 1, R"({"mode":"sse","n":3,"gap_ms":30})");
  spec.measured_arrivals = [] { return ScheduledArrivals({0, 0, 0}); };
  spec.max_in_flight = 1;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const std::vector<RawRecord>& m = res->records;
  EXPECT_LE(server.max_in_flight.load(), 1);
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_EQ(m[i].intended_send_ns, m[0].intended_send_ns) << m[i].id;
    EXPECT_GE(m[i].actual_send_ns, m[i - 1].end_ns) << m[i].id;
  }
}

// A schedule shorter than its phase cannot release the rest: the run stops and says so, and the
// requests left are marked unsent, not silently dropped.
TEST(RunLoad, ArrivalModelThatRunsDryStopsTheRun) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 3, 1, R"({"mode":"sse","n":1,"gap_ms":1})");
  spec.measured_arrivals = [] { return ScheduledArrivals({0}); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_THAT(res->stop_reason, HasSubstr("released nothing more"));
  EXPECT_EQ(res->records[0].http_status, 200);
  EXPECT_EQ(res->records[2].actual_send_ns, 0);
  EXPECT_TRUE(res->records[2].cancelled);
}

TEST(RunLoad, HeadersAndApiKeyGoOnlyInTheRequest) {
  LoopbackServer server;
  LoadSpec spec =
      Spec(server, 0, 1, 1, R"({"mode":"sse","n":1,"pad":")" + std::string(100000, 'p') + "\"}");
  spec.api_key = "sk-secret-test-key";
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(server.Heads().size(), 1u);
  const std::string head = server.Heads()[0];
  EXPECT_THAT(head, HasSubstr("Authorization: Bearer sk-secret-test-key"));
  EXPECT_THAT(head, HasSubstr("Content-Type: application/json"));
  EXPECT_THAT(head, HasSubstr("Accept: text/event-stream"));
  EXPECT_THAT(head, Not(HasSubstr("Expect:")));  // no 100-continue round trip on large prompts
  EXPECT_THAT(head, HasSubstr("body-bytes: " + std::to_string(spec.measured[0].body.size())));
  EXPECT_EQ(res->records[0].http_status, 200);
  EXPECT_THAT(RawRecordToJson(res->records[0]).dump(), Not(HasSubstr("sk-secret")));

  LoopbackServer bare;
  ASSERT_TRUE(RunLoad(Spec(bare, 0, 1, 1, R"({"n":1})")).ok());
  EXPECT_THAT(bare.Heads().at(0), Not(HasSubstr("Authorization")));
}

TEST(RunLoad, HttpErrorIsDataNotFailure) {
  LoopbackServer server;
  Result<LoadResult> res = RunLoad(Spec(server, 0, 2, 1, R"({"mode":"status500"})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 500);
    EXPECT_EQ(r.body, R"({"object":"error","message":"boom"})");
    EXPECT_TRUE(r.events.empty());
    EXPECT_FALSE(r.cancelled);
    EXPECT_EQ(r.transport_error, "");
    EXPECT_THAT(DecodeRecord(r).errors.at(0), HasSubstr("HTTP status 500: {\"object\":\"error\""));
  }
}

TEST(RunLoad, CutStreamKeepsWhatArrivedAndIsCancelled) {
  LoopbackServer server;
  Result<LoadResult> res = RunLoad(Spec(server, 0, 2, 1, R"({"mode":"cut","n":6})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.transport_error, "");
    EXPECT_EQ(r.events.size(), 5u);  // role + 4 tokens before the cut
    RequestResult d = DecodeRecord(r);
    EXPECT_EQ(d.nonempty_chunks, 4);
    EXPECT_FALSE(d.saw_done);
    EXPECT_THAT(d.errors.at(0), HasSubstr("transport error"));
  }
}

// capq asks for no content coding, and still reads a gzip stream that a server sends anyway:
// libcurl inflates each sync-flushed piece as it arrives, and the record keeps the server's
// Content-Encoding. Without CURLOPT_ACCEPT_ENCODING libcurl would hand over the gzip bytes.
TEST(RunLoad, AsksForIdentityAndDecodesAGzipStreamAsItArrives) {
  LoopbackServer server;
  Result<LoadResult> res =
      RunLoad(Spec(server, 0, 2, 1, R"({"mode":"sse","n":4,"gap_ms":50,"coding":"gzip"})"));
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(server.Heads().size(), 2u);
  EXPECT_THAT(server.Heads()[0], HasSubstr("Accept-Encoding: identity"));
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_THAT(r.response_headers, Contains("Content-Encoding: gzip"));
    ASSERT_EQ(r.events.size(), 8u) << Describe(r);  // role, 4 tokens, finish, usage, [DONE]
    EXPECT_EQ(r.events.back().data, "[DONE]");
    // The first token's event came when its piece did, 150 ms before the last token's.
    EXPECT_LT(r.events[1].arrival_ns, r.events[4].arrival_ns);
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
    EXPECT_EQ(d.nonempty_chunks, 4);
  }
}

// A body with neither chunked framing nor a length ends when the server closes the connection
// (RFC 9112 section 6.3, rule 8). Complete, it reads as a clean stream; cut short, it ends just as
// cleanly for libcurl, and only the missing [DONE] tells.
TEST(RunLoad, CloseDelimitedBodyEndsAtTheClose) {
  LoopbackServer server;
  Result<LoadResult> res =
      RunLoad(Spec(server, 0, 2, 1, R"({"mode":"sse","n":4,"framing":"close"})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled);
    EXPECT_FALSE(r.reused_connection);  // the close ended the previous body, so a new connection
    EXPECT_THAT(r.response_headers, Contains("Connection: close"));
    ASSERT_EQ(r.events.size(), 8u) << Describe(r);
    EXPECT_EQ(r.events.back().data, "[DONE]");
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  }
  EXPECT_EQ(server.connections.load(), 2);

  LoopbackServer cut;
  res = RunLoad(Spec(cut, 0, 1, 1, R"({"mode":"cut","n":6,"framing":"close"})"));
  ASSERT_TRUE(res.ok());
  const RawRecord& r = res->records.at(0);
  EXPECT_EQ(r.transport_error, "") << Describe(r);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.events.size(), 5u);  // role + 4 tokens before the close
  RequestResult d = DecodeRecord(r);
  EXPECT_FALSE(d.saw_done);
  EXPECT_THAT(d.errors, Contains(HasSubstr("the stream ended without data: [DONE]")));
}

TEST(RunLoad, RequestTimeoutCancelsAHungRequest) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 2, 2, R"({"mode":"hang"})");
  spec.request_timeout_s = 0.3;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_TRUE(r.timed_out) << Describe(r);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.http_status, 0);
    EXPECT_THAT(r.transport_error, HasSubstr("timed out"));
    EXPECT_GE(r.end_ns - r.actual_send_ns, 300'000'000);
  }
}

TEST(RunLoad, CancelFlagCutsInFlightAndSkipsTheRest) {
  LoopbackServer server;
  std::atomic<bool> cancel{false};
  LoadSpec spec = Spec(server, 0, 5, 2, R"({"mode":"forever","gap_ms":5})");
  spec.cancel = &cancel;
  std::thread canceller([&] {
    server.WaitFirstEvents(2);
    cancel = true;
  });
  Result<LoadResult> res = RunLoad(spec);
  canceller.join();
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->interrupted);
  ASSERT_EQ(res->records.size(), 5u);
  for (int i = 0; i < 2; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.actual_send_ns, 0);
    EXPECT_GE(r.events.size(), 2u) << Describe(r);  // what it had is kept
    EXPECT_EQ(r.transport_error, "cancelled: run interrupted");
  }
  for (int i = 2; i < 5; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.actual_send_ns, 0);
    EXPECT_EQ(r.transport_error, "not sent: run interrupted");
  }
}

TEST(RunLoad, CompletionCheckStopsTheRunWithoutInterrupting) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 6, 2, R"({"mode":"forever","gap_ms":5})");
  spec.measured[0].body = R"({"mode":"sse","n":2})";
  std::mutex mu;
  std::vector<std::string> checked;
  spec.on_complete_check = [&](const RawRecord& r,
                               const RequestResult&) -> std::optional<std::string> {
    std::lock_guard<std::mutex> l(mu);
    checked.push_back(r.id);
    return r.id == "m0" ? std::optional<std::string>("m0 is broken") : std::nullopt;
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_FALSE(res->interrupted);
  EXPECT_EQ(res->stopped_by, "m0");
  EXPECT_EQ(res->stop_reason, "m0 is broken");
  EXPECT_EQ(checked, std::vector<std::string>{"m0"});  // cut streams are not asked about
  const RawRecord& m0 = res->records[0];
  EXPECT_FALSE(m0.cancelled) << Describe(m0);
  EXPECT_EQ(m0.cancelled_by_harness, "");
  // m1 was in flight at the stop; m2 may have taken m0's slot while the check ran. Both are cut,
  // the rest never sent.
  EXPECT_NE(res->records[1].actual_send_ns, 0);
  for (int i = 1; i < 6; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.cancelled_by_harness, "fail_fast after m0");
    EXPECT_EQ(r.transport_error, r.actual_send_ns == 0
                                     ? "not sent: fail_fast after m0"
                                     : "cancelled by the harness: fail_fast after m0");
    if (i >= 3) {
      EXPECT_EQ(r.actual_send_ns, 0) << Describe(r);
    }
  }
  EXPECT_LE(server.requests.load(), 3);
}

TEST(RunLoad, StallBoundCutsASilentStreamLongBeforeTheRequestTimeout) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 4, 2, R"({"mode":"stall","n":2})");
  spec.request_timeout_s = 60;
  spec.stall_timeout_s = 0.3;
  const MonoNs start = NowNs();
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_LT(NsToS(NowNs() - start), 5.0);
  EXPECT_FALSE(res->interrupted);
  int stalled = 0;
  for (const RawRecord& r : res->records) {
    if (!r.stalled) continue;
    ++stalled;
    EXPECT_EQ(res->stopped_by, r.id);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.cancelled_by_harness, "") << "a stall is the server's failure";
    EXPECT_EQ(r.events.size(), 3u) << "what arrived before the silence is kept";
    EXPECT_THAT(r.transport_error, HasSubstr("stalled: no byte for 0."));
    EXPECT_GE(r.end_ns - r.last_byte_ns, 300'000'000);
  }
  EXPECT_EQ(stalled, 1);
  EXPECT_THAT(res->stop_reason, HasSubstr("stalled"));
  EXPECT_EQ(res->records[3].cancelled_by_harness, "fail_fast after " + res->stopped_by);
}

// Before the first body byte the wait is the request's TTFT (a queue, a long prefill): an SLO
// matter for the request timeout, not a stall.
TEST(RunLoad, StallBoundWaitsForTheStreamToBegin) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 1, 1, R"({"mode":"hang"})");
  spec.request_timeout_s = 0.8;
  spec.stall_timeout_s = 0.2;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->stopped_by, "");
  EXPECT_FALSE(res->records[0].stalled);
  EXPECT_TRUE(res->records[0].timed_out) << Describe(res->records[0]);
}

TEST(RunLoad, CancelledBeforeStartSendsNothing) {
  LoopbackServer server;
  std::atomic<bool> cancel{true};
  LoadSpec spec = Spec(server, 1, 2, 1, R"({"n":1})");
  spec.cancel = &cancel;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->interrupted);
  EXPECT_EQ(server.requests.load(), 0);
  for (const RawRecord& r : res->records) EXPECT_EQ(r.actual_send_ns, 0);
}

// Servers close keep-alive connections right after a response (or when idle): the next request
// must go out on a fresh connection without an error.
TEST(RunLoad, ServerClosingKeptAliveConnectionsIsNotAnError) {
  LoopbackServer server(LoopbackServer::Options{.close_after_response = true});
  Result<LoadResult> res = RunLoad(Spec(server, 2, 8, 2, R"({"n":2})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled);
  }
  EXPECT_EQ(server.requests.load(), 10);
}

TEST(RunLoad, ReusedConnectionClosedUnderTheRequestIsRetriedCleanly) {
  LoopbackServer server(LoopbackServer::Options{.drop_reused_requests = true});
  Result<LoadResult> res = RunLoad(Spec(server, 0, 4, 1, R"({"n":2})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.events.size(), 6u) << Describe(r);
  }
  EXPECT_EQ(server.dropped.load(), 3);  // requests 2..4 each met a closing connection first
  EXPECT_EQ(server.requests.load(), 4);
}

TEST(RunLoad, IdleKeepAliveClosedBetweenPhasesReconnects) {
  LoopbackServer server(LoopbackServer::Options{.idle_close_ms = 30});
  LoadSpec spec = Spec(server, 1, 2, 1, R"({"n":2})");
  // Hold the loop after the warm-up so the server closes the idle connection first.
  spec.on_progress = [](const LoadProgress& p) {
    if (p.phase == Phase::kWarmup && p.completed == p.total) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
  }
  EXPECT_FALSE(res->records[1].reused_connection);
  EXPECT_EQ(server.connections.load(), 2);
}

TEST(RunLoad, ConnectionRefusedIsPerRequestData) {
  int port;
  {
    LoopbackServer gone;
    port = std::stoi(gone.Url().substr(17));  // "http://127.0.0.1:" is 17 characters
  }
  LoadSpec spec;
  spec.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions";
  spec.measured = Plan(Phase::kMeasured, 2, "{}");
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 0);
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.transport_error, "");
  }
}

TEST(RunLoad, SetupErrors) {
  LoadSpec spec;
  EXPECT_EQ(RunLoad(spec).status().code(), Status::Code::kInvalidArgument);
  spec.url = "ftp://127.0.0.1/x";
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("http:// or https://"));
  spec.url = "http://127.0.0.1:1/x";
  spec.concurrency = 0;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("concurrency"));
}

TEST(RunLoad, TlsVerificationIsOnByDefault) {
  // A plain-HTTP loopback port spoken to as https fails the handshake; what matters here is that
  // the default spec does not turn verification off.
  LoadSpec spec;
  EXPECT_FALSE(spec.insecure_tls);
}

}  // namespace
}  // namespace capq
