// A loopback HTTP/1.1 server that answers with recorded response bytes, verbatim.
//
// Each exchange is a recorded .req/.resp pair (tests/data/conformance/<engine>/): the request line
// of the .req names the method and target the answer belongs to, and the .resp bytes (status line,
// headers, body as framed on the wire, chunk-size lines included) are written back unchanged. So
// an adapter under test reads exactly what the real server sent, keep-alive, `Connection: close`
// and chunked framing included.
//
// Several exchanges may share a method and target: they answer in the order given and the last one
// repeats (a 503 while loading, then 200 for every later probe). A request no exchange matches gets
// a 404 and is listed in unmatched(), so a test can insist that the adapter asked only for what the
// recordings cover.
//
// Thread safety: the constructor and destructor run on the test thread; one thread per connection
// serves requests; seen() and unmatched() may be called from the test thread at any time.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace capq::replay {

struct RecordedExchange {
  std::string name;      // "04-props"
  std::string method;    // from the .req request line
  std::string target;    // path and query, "/slots/0?action=erase"
  std::string request;   // the recorded .req bytes
  std::string response;  // the recorded .resp bytes, written back as they are
};

inline std::string ReadRecordedFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Loads <dir>/<name>.req and <dir>/<name>.resp.
inline RecordedExchange LoadExchange(const std::string& dir, const std::string& name) {
  RecordedExchange e;
  e.name = name;
  e.request = ReadRecordedFile(dir + "/" + name + ".req");
  e.response = ReadRecordedFile(dir + "/" + name + ".resp");
  const size_t sp1 = e.request.find(' ');
  const size_t sp2 = e.request.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    throw std::runtime_error(name + ".req has no request line");
  }
  e.method = e.request.substr(0, sp1);
  e.target = e.request.substr(sp1 + 1, sp2 - sp1 - 1);
  return e;
}

// The recorded request's body (after the blank line).
inline std::string RecordedRequestBody(const RecordedExchange& e) {
  const size_t p = e.request.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : e.request.substr(p + 4);
}

// The recorded response's body, de-chunked when it was sent chunked.
inline std::string RecordedResponseBody(const RecordedExchange& e) {
  const size_t p = e.response.find("\r\n\r\n");
  if (p == std::string::npos) return "";
  std::string head = e.response.substr(0, p);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = e.response.substr(p + 4);
  if (head.find("transfer-encoding: chunked") == std::string::npos) return body;
  std::string out;
  size_t i = 0;
  while (i < body.size()) {
    const size_t eol = body.find("\r\n", i);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(body.c_str() + i, nullptr, 16);
    if (n == 0) break;
    out.append(body, eol + 2, n);
    i = eol + 2 + n + 2;
  }
  return out;
}

struct SeenRequest {
  std::string method, target, body;
};

class ReplayServer {
 public:
  explicit ReplayServer(std::vector<RecordedExchange> exchanges) {
    for (auto& e : exchanges) script_[e.method + " " + e.target].push_back(std::move(e));
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 16) != 0) {
      throw std::runtime_error("replay server: cannot listen on loopback");
    }
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~ReplayServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    close(fd_);
    {
      std::lock_guard<std::mutex> l(mu_);
      for (int c : open_) shutdown(c, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
  }

  ReplayServer(const ReplayServer&) = delete;
  ReplayServer& operator=(const ReplayServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Every request received, in arrival order.
  std::vector<SeenRequest> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  // "METHOD target" of each request no exchange matched.
  std::vector<std::string> unmatched() {
    std::lock_guard<std::mutex> l(mu_);
    return unmatched_;
  }
  // How many times each "METHOD target" was asked for.
  int count(const std::string& method_target) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = served_.find(method_target);
    return it == served_.end() ? 0 : it->second;
  }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      open_.push_back(c);
      workers_.emplace_back([this, c] { Serve(c); });
    }
  }

  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  // A response the client can only delimit by EOF (or one that asks for it) ends the connection.
  static bool ClosesConnection(const std::string& response) {
    const size_t p = response.find("\r\n\r\n");
    const std::string head = Lower(response.substr(0, p));
    if (head.find("\r\nconnection: close") != std::string::npos) return true;
    if (head.find("\r\ncontent-length:") != std::string::npos) return false;
    if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
      return response.size() < 5 || response.compare(response.size() - 5, 5, "0\r\n\r\n") != 0;
    }
    return true;
  }

  void Serve(int c) {
    std::string in;
    char buf[8192];
    while (true) {
      // One request: headers, then Content-Length bytes of body.
      size_t hdr;
      while ((hdr = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) return Finish(c);
        in.append(buf, static_cast<size_t>(n));
      }
      const std::string head = Lower(in.substr(0, hdr));
      size_t body_len = 0;
      if (size_t cl = head.find("\r\ncontent-length:"); cl != std::string::npos) {
        body_len = std::strtoul(head.c_str() + cl + 17, nullptr, 10);
      }
      if (head.find("\r\nexpect: 100-continue") != std::string::npos) {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (write(c, kContinue, sizeof kContinue - 1) < 0) return Finish(c);
      }
      while (in.size() < hdr + 4 + body_len) {
        const ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) return Finish(c);
        in.append(buf, static_cast<size_t>(n));
      }
      SeenRequest req;
      const size_t sp1 = in.find(' ');
      const size_t sp2 = in.find(' ', sp1 + 1);
      req.method = in.substr(0, sp1);
      req.target = in.substr(sp1 + 1, sp2 - sp1 - 1);
      req.body = in.substr(hdr + 4, body_len);
      in.erase(0, hdr + 4 + body_len);
      const std::string key = req.method + " " + req.target;
      std::string response;
      {
        std::lock_guard<std::mutex> l(mu_);
        seen_.push_back(req);
        auto it = script_.find(key);
        if (it == script_.end()) {
          unmatched_.push_back(key);
          response = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        } else {
          const int k = served_[key]++;
          const auto& list = it->second;
          response = list[std::min<size_t>(static_cast<size_t>(k), list.size() - 1)].response;
        }
      }
      for (size_t off = 0; off < response.size();) {
        const ssize_t n = write(c, response.data() + off, response.size() - off);
        if (n <= 0) return Finish(c);
        off += static_cast<size_t>(n);
      }
      if (ClosesConnection(response)) return Finish(c);
    }
  }

  void Finish(int c) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = open_.begin(); it != open_.end(); ++it) {
      if (*it == c) {
        open_.erase(it);
        break;
      }
    }
    close(c);
  }

  std::map<std::string, std::vector<RecordedExchange>> script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::vector<int> open_;
  std::vector<SeenRequest> seen_;
  std::vector<std::string> unmatched_;
  std::map<std::string, int> served_;
};

}  // namespace capq::replay
