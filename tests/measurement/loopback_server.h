// A loopback HTTP/1.1 server for the load generator's tests, started by each test. It is
// deliberately small: one thread per connection, behaviour chosen by the request body
// ({"mode": "sse" | "forever" | "cut" | "stall" | "status500" | "hang", "n": chunks,
// "gap_ms": ..., "framing": "chunked" | "close", "coding": "gzip"}).
#pragma once

#include <arpa/inet.h>
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
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capq/measurement/loadgen.h"

namespace capq::loopback {

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

inline std::vector<PlannedRequest> Plan(Phase phase, int count, const std::string& body) {
  std::vector<PlannedRequest> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(
        PlannedRequest{(phase == Phase::kWarmup ? "w" : "m") + std::to_string(i), phase, i, body});
  }
  return out;
}

inline LoadSpec Spec(const LoopbackServer& s, int warmup, int measured, int c,
                     const std::string& body) {
  LoadSpec spec;
  spec.url = s.Url();
  spec.warmup = Plan(Phase::kWarmup, warmup, body);
  spec.measured = Plan(Phase::kMeasured, measured, body);
  spec.concurrency = c;
  spec.request_timeout_s = 60;
  return spec;
}

inline std::string Describe(const RawRecord& r) {
  return r.id + " status " + std::to_string(r.http_status) + " error '" + r.transport_error + "'";
}

}  // namespace capq::loopback
