// Slow clients and the keep-alive timeout. A client that reads its reply late still gets every byte
// of it and a well-formed end: the server writes on for as long as the client reads, as real
// servers do, and its keep-alive idle timeout starts only once a reply has been written out; a
// connection waits for its first request without one. The clients here wait longer than that
// timeout (made short, so the tests stay quick).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "conformance_util.h"
#include "server_test_util.h"

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

constexpr double kIdleTimeoutS = 0.5;

// llama.cpp's dialect sends one chunk per token whatever the reader does (sglang and vllm merge
// what a slow reader leaves pending), so a reply's size follows from its token count.
std::unique_ptr<SimServer> SlowReaderServer() {
  ServerOptions o;
  o.dialect = Dialect::kLlamacpp;
  o.time_scale = 1000.0;
  o.idle_timeout_s = kIdleTimeoutS;
  return StartServerWith(TinyProfileWith("context_length", "65536"), o);
}

// Sends a stream request of `tokens` output tokens and reads nothing of the reply until the server
// has generated all of it and then twice its idle timeout has passed.
RawResponse ReadLate(const SimServer& server, int tokens) {
  const std::string body = ChatBody("a slow reader", tokens, true);
  const int64_t finished = server.engine_stats().requests_finished;
  auto wait = [&] {
    EXPECT_TRUE(WaitFor([&] { return server.engine_stats().requests_finished > finished; }));
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * kIdleTimeoutS));
  };
  return RawExchange(server.port(),
                     JsonRequest("POST", "/v1/chat/completions", body, server.port()),
                     /*timeout_ms=*/60000, /*read_after_ms=*/0, wait);
}

void ExpectWhole(const RawResponse& r, int tokens) {
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete) << "the reply was cut after " << r.body.size() << " bytes";
  const Decoded d = Decode(r.body);
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.usage.value("completion_tokens", 0), tokens);
}

// A stream whose last token was generated long ago may have megabytes queued behind a full socket:
// a reply of about 12 MB, more than the kernel buffers hold.
TEST(ServerSlowReader, GetsEveryByteOfALongStreamItReadsLate) {
  auto server = SlowReaderServer();
  ASSERT_NE(server, nullptr);
  const RawResponse r = ReadLate(*server, 60000);
  ExpectWhole(r, 60000);
  EXPECT_GT(r.body.size(), 6u << 20);  // more than the kernel buffers hold (4 MiB each way)
}

// How a loopback connection whose client reads nothing takes a writer's `piece`-byte writes: the
// bytes in when poll stops calling it writable, and when a write first fails (the socket is full).
struct LoopbackFill {
  size_t unwritable = 0;
  size_t full = 0;
};

LoopbackFill MeasureLoopbackFill(size_t piece) {
  LoopbackFill f;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int one = 1;
  setsockopt(listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as the server's
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return f;
  }
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as RawExchange's
  const int server = connect(client, reinterpret_cast<sockaddr*>(&addr), len) == 0
                         ? accept(listener, nullptr, nullptr)
                         : -1;
  if (server >= 0) fcntl(server, F_SETFL, O_NONBLOCK);
  const std::string bytes(piece, 'x');
  for (ssize_t n; server >= 0 && (n = send(server, bytes.data(), piece, MSG_NOSIGNAL)) > 0;) {
    f.full += static_cast<size_t>(n);
    pollfd p{server, POLLOUT, 0};
    if (f.unwritable == 0 && poll(&p, 1, 0) == 0) f.unwritable = f.full;
  }
  if (server >= 0) close(server);
  close(client);
  close(listener);
  return f;
}

// The wire bytes of a chunked body: each chunk's size line, payload and CRLF.
size_t WireBytes(const RawResponse& r) {
  size_t n = 0;
  for (const std::string& c : r.chunks) {
    char hex[32];
    n += static_cast<size_t>(std::snprintf(hex, sizeof(hex), "%zx", c.size())) + 4 + c.size();
  }
  return n;
}

// A reply the socket took whole but for its terminating chunk: the client had read nothing, and
// the stream ended while the kernel's send queue was past the point where poll stops calling the
// socket writable (two thirds of its buffer, Linux) yet short of full. The server's last frames
// went in at once, and only the terminating chunk waits until the reader has read a third of the
// buffer. A keep-alive timeout armed at the reply's end would time that write out and cut the
// stream, every token sent, without its end. The reply's size is put in the middle of that band, as
// a loopback connection like the client's measures it.
TEST(ServerSlowReader, GetsTheEndOfAReplyWhoseLastChunkWaitsForTheSocket) {
  auto server = SlowReaderServer();
  ASSERT_NE(server, nullptr);
  const int sample_tokens = 1000;
  const RawResponse sample = RawExchange(
      server->port(), JsonRequest("POST", "/v1/chat/completions",
                                  ChatBody("a sample", sample_tokens, true), server->port()));
  ExpectWhole(sample, sample_tokens);
  const double bytes_per_token = static_cast<double>(WireBytes(sample)) / sample_tokens;
  const LoopbackFill fill = MeasureLoopbackFill(static_cast<size_t>(bytes_per_token));
  ASSERT_GT(fill.unwritable, 0u);
  ASSERT_GT(fill.full, fill.unwritable);
  const int tokens =
      static_cast<int>(static_cast<double>(fill.unwritable + fill.full) / 2 / bytes_per_token);
  ASSERT_LT(tokens, 60000) << "the tiny profile's context holds 65,536 tokens";
  ExpectWhole(ReadLate(*server, tokens), tokens);
}

// A client connection to the server on `port`; -1 if it could not connect.
int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  close(fd);
  return -1;
}

// Sends `request` on `fd` and reads its reply until the framing is complete or the server closes.
RawResponse Exchange(int fd, const std::string& request) {
  RawResponse r;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return r;
  }
  std::string bytes;
  char buf[65536];
  for (ssize_t n; !r.complete && (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
    bytes.append(buf, static_cast<size_t>(n));
    ParseResponse(bytes, &r);
  }
  return r;
}

// Seconds from the end of a whole reply until the server closes `fd`; -1 if it stays open for
// `limit_s`.
double SecondsToClose(int fd, double limit_s) {
  const auto end = std::chrono::steady_clock::now();
  pollfd p{fd, POLLIN, 0};
  char c;
  if (poll(&p, 1, static_cast<int>(limit_s * 1000)) != 1 || recv(fd, &c, 1, 0) != 0) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - end).count();
}

std::string ChatRequest(const SimServer& server, bool stream) {
  return JsonRequest("POST", "/v1/chat/completions", ChatBody("idle", 8, stream), server.port());
}

// The keep-alive timeout still closes a connection that waits for its next request, counted from
// the end of its last reply, streamed or not (a chat connection has no timeout while it streams).
TEST(ServerKeepAlive, ClosesAConnectionIdleForTheTimeoutAfterItsReply) {
  auto server = SlowReaderServer();
  ASSERT_NE(server, nullptr);
  for (bool stream : {true, false}) {
    const int fd = ConnectTo(server->port());
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(Exchange(fd, ChatRequest(*server, stream)).complete);
    const double s = SecondsToClose(fd, /*limit_s=*/5.0);
    close(fd);
    EXPECT_GE(s, kIdleTimeoutS / 2) << (stream ? "streamed" : "whole");
    EXPECT_LT(s, kIdleTimeoutS + 2.0) << (stream ? "streamed" : "whole");
  }
}

// A connection has no timeout before its first request, as Uvicorn arms its keep-alive timer only
// once a response is complete: a client that connects well before it sends (a load generator
// opening thousands of connections at once), or a server loop busy for longer than the timeout
// before it reads a request already sent, must not cost the request.
TEST(ServerKeepAlive, AnswersTheFirstRequestOfAConnectionHoweverLateItIsSent) {
  auto server = SlowReaderServer();
  ASSERT_NE(server, nullptr);
  const int fd = ConnectTo(server->port());
  ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::duration<double>(2 * kIdleTimeoutS));
  const RawResponse r = Exchange(fd, ChatRequest(*server, true));
  close(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(Decode(r.body).done_last);
}

}  // namespace
}  // namespace capq::sim
