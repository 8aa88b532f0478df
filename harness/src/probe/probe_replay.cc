// Recorded answers served back on loopback, verbatim (probe_internal.h): keep-alive,
// `Connection: close` and chunk framing as the server sent them, so that an adapter reads exactly
// what the real server wrote.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "probe_internal.h"

namespace capq::probe {

struct ReplayServer::State {
  int fd = -1;
  int port = 0;
  std::atomic<bool> stop{false};
  std::thread acceptor;
  mutable std::mutex mu;
  std::map<std::string, std::vector<std::string>> answers;  // "METHOD target" -> responses
  std::map<std::string, size_t> served;
  std::vector<std::string> misses;
  std::vector<std::thread> workers;
  std::vector<int> open;
};

namespace {

constexpr char kNotFound[] =
    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

// An answer the client can delimit only by the close (or that asks for it) ends the connection.
bool ClosesConnection(const std::string& response) {
  const ParsedResponse r = ParseResponse(response);
  if (strcasecmp(r.Header("Connection").c_str(), "close") == 0) return true;
  if (r.chunked) return !r.complete;
  return !r.HasHeader("Content-Length");
}

// Reads until `in` holds one whole request; returns its length (0 when the peer is gone).
size_t ReadRequest(ReplayServer::State& s, int c, std::string* in) {
  char buf[8192];
  for (;;) {
    const size_t head = in->find("\r\n\r\n");
    if (head != std::string::npos) {
      const ParsedRequest r = ParseRequest(in->substr(0, head + 4));
      const size_t want = head + 4 + std::strtoul(r.Header("Content-Length").c_str(), nullptr, 10);
      if (in->size() >= want) return want;
    }
    pollfd p{c, POLLIN, 0};
    if (s.stop || poll(&p, 1, 100) < 0) return 0;
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    const ssize_t n = read(c, buf, sizeof buf);
    if (n <= 0) return 0;
    in->append(buf, static_cast<size_t>(n));
  }
}

std::string Answer(ReplayServer::State& s, const ParsedRequest& r) {
  const std::string key = r.method + " " + r.target;
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.answers.find(key);
  if (it == s.answers.end()) {
    s.misses.push_back(key);
    return kNotFound;
  }
  const size_t k = s.served[key]++;
  return it->second[std::min(k, it->second.size() - 1)];
}

void Serve(ReplayServer::State& s, int c) {
  std::string in;
  for (;;) {
    const size_t len = ReadRequest(s, c, &in);
    if (len == 0) break;
    const std::string response = Answer(s, ParseRequest(in.substr(0, len)));
    in.erase(0, len);
    bool failed = false;
    for (size_t off = 0; off < response.size() && !failed;) {
      const ssize_t n = send(c, response.data() + off, response.size() - off, MSG_NOSIGNAL);
      failed = n <= 0;
      if (!failed) off += static_cast<size_t>(n);
    }
    if (failed || ClosesConnection(response)) break;
  }
  std::lock_guard<std::mutex> l(s.mu);
  s.open.erase(std::remove(s.open.begin(), s.open.end(), c), s.open.end());
  close(c);
}

void Accept(ReplayServer::State* s) {
  while (!s->stop) {
    pollfd p{s->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int c = accept(s->fd, nullptr, nullptr);
    if (c < 0) continue;
    std::lock_guard<std::mutex> l(s->mu);
    s->open.push_back(c);
    s->workers.emplace_back([s, c] { Serve(*s, c); });
  }
}

}  // namespace

Result<std::unique_ptr<ReplayServer>> ReplayServer::Start(std::vector<RecordedAnswer> answers) {
  auto s = std::make_unique<State>();
  for (RecordedAnswer& a : answers) {
    s->answers[a.method + " " + a.target].push_back(std::move(a.response_bytes));
  }
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (s->fd < 0 || bind(s->fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(s->fd, 64) != 0 || getsockname(s->fd, reinterpret_cast<sockaddr*>(&addr), &len)) {
    if (s->fd >= 0) close(s->fd);
    return Status::Unavailable("cannot listen on loopback to serve the recorded answers");
  }
  s->port = ntohs(addr.sin_port);
  State* raw = s.get();
  s->acceptor = std::thread([raw] { Accept(raw); });
  return std::unique_ptr<ReplayServer>(new ReplayServer(std::move(s)));
}

ReplayServer::ReplayServer(std::unique_ptr<State> s) : state_(std::move(s)) {}

ReplayServer::~ReplayServer() {
  state_->stop = true;
  state_->acceptor.join();
  close(state_->fd);
  {
    std::lock_guard<std::mutex> l(state_->mu);
    for (int c : state_->open) shutdown(c, SHUT_RDWR);
  }
  // Workers end once their connection is shut; none is added after the acceptor joined.
  for (std::thread& t : state_->workers) t.join();
}

std::string ReplayServer::url() const { return "http://127.0.0.1:" + std::to_string(state_->port); }

std::vector<std::string> ReplayServer::misses() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->misses;
}

}  // namespace capq::probe
