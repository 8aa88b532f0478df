// Test-only helpers for comparing the simulator with recorded real-server exchanges
// (tests/data/conformance/): a raw-socket HTTP/1.1 client that keeps the chunk framing and the
// arrival time of every chunk, a parser for recorded response bytes, and a shape comparison of
// JSON documents (types and key sets, not values).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace capq::sim::testing {

using nlohmann::json;

struct RawResponse {
  std::string version;  // of the status line: "HTTP/1.1"
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  bool chunked = false;
  std::string body;                 // de-chunked
  std::vector<std::string> chunks;  // chunked: every HTTP chunk's payload, the last empty one out
  bool complete = false;            // the framing ended (Content-Length met or the 0 chunk)
  bool closed = false;              // the server closed the connection (RawExchange only)
  // Client side, ms from the request's send (RawExchange only); sent_at_ms is the send on the
  // steady clock, so exchanges made in parallel can be put on one time line.
  double sent_at_ms = 0;
  double t_headers_ms = -1;
  std::vector<double> chunk_t_ms;
  double t_end_ms = -1;

  std::string Header(const std::string& name) const {
    for (const auto& [n, v] : headers) {
      if (strcasecmp(n.c_str(), name.c_str()) == 0) return v;
    }
    return "";
  }
  bool HasHeader(const std::string& name) const {
    for (const auto& [n, v] : headers) {
      if (strcasecmp(n.c_str(), name.c_str()) == 0) return true;
    }
    return false;
  }
};

// Parses as much of `bytes` as is there; `out->chunks` grows as chunks complete. Returns the
// offset just past the headers (0 while they are incomplete).
inline size_t ParseResponse(const std::string& bytes, RawResponse* out) {
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  *out = RawResponse{};
  std::istringstream head(bytes.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  out->version = line.substr(0, line.find(' '));
  if (line.size() > 12) out->status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    out->headers.emplace_back(line.substr(0, colon), value);
  }
  const size_t body = head_end + 4;
  out->chunked = strcasecmp(out->Header("Transfer-Encoding").c_str(), "chunked") == 0;
  if (!out->chunked) {
    const std::string cl = out->Header("Content-Length");
    const size_t want = cl.empty() ? std::string::npos : std::stoul(cl);
    out->body = bytes.substr(body, want);
    out->complete = want != std::string::npos && out->body.size() == want;
    return body;
  }
  size_t pos = body;
  for (;;) {
    const size_t eol = bytes.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t len = std::stoul(bytes.substr(pos, eol - pos), nullptr, 16);
    if (bytes.size() < eol + 2 + len + 2) break;
    if (len == 0) {
      out->complete = true;
      break;
    }
    out->chunks.push_back(bytes.substr(eol + 2, len));
    out->body += out->chunks.back();
    pos = eol + 2 + len + 2;
  }
  return body;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sends `request` (complete HTTP/1.1 bytes) on a new connection and reads until the framing is
// complete, the server closes (the end of a body with neither length nor chunks), or `timeout_ms`
// passes.
// `read_after_ms`: the client sends the request, then reads nothing for that long (a slow reader);
// then `before_read`, if given, runs before the first read.
inline RawResponse RawExchange(int port, const std::string& request, int timeout_ms = 30000,
                               int read_after_ms = 0,
                               const std::function<void()>& before_read = nullptr) {
  RawResponse r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return r;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (read_after_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(read_after_ms));
  if (before_read) before_read();
  std::string bytes;
  double t_headers = -1;
  std::vector<double> chunk_t;
  char buf[65536];
  bool closed = false;
  while (ms() < timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    closed = n == 0;
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    const double now = ms();
    RawResponse parsed;
    if (ParseResponse(bytes, &parsed) == 0) continue;
    if (t_headers < 0) t_headers = now;
    while (chunk_t.size() < parsed.chunks.size()) chunk_t.push_back(now);
    if (parsed.complete) break;
  }
  const double t_end = ms();
  close(fd);
  ParseResponse(bytes, &r);
  r.closed = closed;
  r.sent_at_ms = std::chrono::duration<double, std::milli>(t0.time_since_epoch()).count();
  r.t_end_ms = t_end;
  r.t_headers_ms = t_headers;
  r.chunk_t_ms = std::move(chunk_t);
  return r;
}

inline std::string JsonRequest(const std::string& method, const std::string& target,
                               const std::string& body, int port) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                  "\r\nUser-Agent: capq-conformance-test\r\nAccept: */*\r\n";
  if (method == "POST") {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

// The JSON type classes a client can tell apart (int and unsigned are one class).
inline std::string TypeClass(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "float";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "other";
  }
}

// Where `got` differs in shape from `want`: value types, object key sets, empty versus non-empty
// arrays (every element of `got` is compared with the element of `want` at the same index, or
// the last one), and the values of the keys in `fixed`, which name a kind rather than carry data.
inline void ShapeDiff(const json& want, const json& got, const std::string& at,
                      const std::set<std::string>& fixed, std::vector<std::string>* out) {
  if (TypeClass(want) != TypeClass(got)) {
    out->push_back(at + ": " + TypeClass(want) + " recorded, " + TypeClass(got) + " served");
    return;
  }
  if (want.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it) {
      if (!got.contains(it.key())) {
        out->push_back(at + "." + it.key() + ": missing");
        continue;
      }
      const std::string sub = at + "." + it.key();
      if (fixed.count(it.key()) && !it.value().is_structured() && it.value() != got[it.key()]) {
        out->push_back(sub + ": " + it.value().dump() + " recorded, " + got[it.key()].dump() +
                       " served");
      }
      ShapeDiff(it.value(), got[it.key()], sub, fixed, out);
    }
    for (auto it = got.begin(); it != got.end(); ++it) {
      if (!want.contains(it.key())) out->push_back(at + "." + it.key() + ": not recorded");
    }
  } else if (want.is_array()) {
    if (want.empty() != got.empty()) {
      out->push_back(at + ": " + std::to_string(want.size()) + " elements recorded, " +
                     std::to_string(got.size()) + " served");
      return;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ShapeDiff(want[std::min(i, want.size() - 1)], got[i], at + "[" + std::to_string(i) + "]",
                fixed, out);
    }
  }
}

inline std::vector<std::string> ShapeDiff(const json& want, const json& got,
                                          const std::set<std::string>& fixed = {
                                              "object", "finish_reason", "role", "type"}) {
  std::vector<std::string> out;
  ShapeDiff(want, got, "$", fixed, &out);
  return out;
}

// One SSE frame's kind: R role, C content, F finish, U usage, D [DONE], ? anything else.
inline char FrameKind(const std::string& data) {
  if (data == "[DONE]") return 'D';
  const json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return '?';
  if (j["choices"].empty()) return j.contains("usage") ? 'U' : '?';
  const json& c = j["choices"][0];
  if (c.contains("finish_reason") && !c["finish_reason"].is_null()) return 'F';
  const json& d = c.value("delta", json::object());
  if (d.contains("role")) return 'R';
  if (d.contains("content")) return 'C';
  return '?';
}

// The `data:` payloads of one HTTP chunk (or of a whole de-chunked body).
inline std::vector<std::string> SseFrames(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    std::string ev = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

// A stream's HTTP-chunk grouping as text, runs of identical groups folded: "RC C*63 FU D".
inline std::string ChunkPattern(const RawResponse& r) {
  std::vector<std::string> groups;
  for (const std::string& chunk : r.chunks) {
    std::string g;
    for (const std::string& f : SseFrames(chunk)) g += FrameKind(f);
    groups.push_back(g);
  }
  std::string out;
  for (size_t i = 0; i < groups.size();) {
    size_t j = i;
    while (j < groups.size() && groups[j] == groups[i]) ++j;
    if (!out.empty()) out += ' ';
    out += groups[i];
    if (j - i > 1) out += "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

}  // namespace capq::sim::testing
