#include "capq/targets/target.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

namespace capq {
namespace {

// A one-thread loopback HTTP/1.1 server answering from a handler; Connection: close each time.
class FakeServer {
 public:
  using Handler = std::function<std::pair<int, std::string>(
      const std::string& method, const std::string& path, const std::string& body)>;
  explicit FakeServer(Handler h) : handler_(std::move(h)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 16);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }

 private:
  void Loop() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      size_t need = std::string::npos;
      while (true) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        size_t hdr = in.find("\r\n\r\n");
        if (hdr != std::string::npos) {
          size_t cl = in.find("Content-Length: ");
          size_t len =
              cl == std::string::npos ? 0 : std::strtoul(in.c_str() + cl + 16, nullptr, 10);
          need = hdr + 4 + len;
        }
        if (need != std::string::npos && in.size() >= need) break;
      }
      std::string method = in.substr(0, in.find(' '));
      size_t p0 = in.find(' ') + 1;
      std::string path = in.substr(p0, in.find(' ', p0) - p0);
      std::string body = in.substr(std::min(in.size(), in.find("\r\n\r\n") + 4));
      {
        std::lock_guard<std::mutex> l(mu_);
        seen_.push_back(method + " " + path);
      }
      auto [status, out] = handler_(method, path, body);
      std::string resp = "HTTP/1.1 " + std::to_string(status) +
                         " X\r\nContent-Length: " + std::to_string(out.size()) +
                         "\r\nConnection: close\r\n\r\n" + out;
      ssize_t w = write(c, resp.data(), resp.size());
      (void)w;
      close(c);
    }
  }
  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> seen_;
};

std::unique_ptr<Target> Make(Engine e, const std::string& url) {
  TargetOptions o;
  o.base_url = url + "/";
  o.control_timeout_s = 2;
  auto t = MakeTarget(e, o);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

MonoNs In(double s) { return NowNs() + static_cast<MonoNs>(s * 1e9); }

TEST(ParsePrometheus, SumsLabelSetsAndSkipsComments) {
  auto m = ParsePrometheus(
      "# HELP x\n# TYPE sglang:num_running_reqs gauge\n"
      "sglang:num_running_reqs{model_name=\"a\"} 3\n"
      "sglang:num_running_reqs{model_name=\"b\"} 2\nvllm:x 1.5e3\nbroken{\n");
  EXPECT_EQ(m["sglang:num_running_reqs"], 5);
  EXPECT_EQ(m["vllm:x"], 1500);
  EXPECT_EQ(m.count("broken"), 0u);
}

TEST(MakeTarget, RefusesNonHttpUrls) {
  TargetOptions o;
  o.base_url = "127.0.0.1:30000";
  auto t = MakeTarget(Engine::kSglang, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("http://"), std::string::npos);
}

TEST(SglangTarget, ProbeDoesNotTouchGeneratingHealthAndFlushRetriesWhileBusy) {
  std::atomic<int> flushes{0};
  FakeServer srv([&](const std::string&, const std::string& path, const std::string&) {
    if (path == "/v1/models") return std::pair{200, std::string(R"({"data":[{"id":"M"}]})")};
    if (path == "/flush_cache") {
      return ++flushes < 3 ? std::pair{400, std::string("busy")}
                           : std::pair{200, std::string("ok")};
    }
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kSglang, srv.url());
  auto probe = t->Probe(In(2), nullptr);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(*probe, "GET /v1/models");
  auto f = t->Flush(In(5), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 3);
  EXPECT_NE(f->note.find("2 busy refusal"), std::string::npos);
  for (const auto& s : srv.seen()) {
    EXPECT_EQ(s.find("/health"), std::string::npos) << "SGLang's /health generates: " << s;
  }
}

TEST(SglangTarget, FlushRefusedUntilTheDeadlineFails) {
  FakeServer srv([](const std::string&, const std::string&, const std::string&) {
    return std::pair{400, std::string("busy")};
  });
  auto t = Make(Engine::kSglang, srv.url());
  auto f = t->Flush(In(0.6), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("flush failed"), std::string::npos);
}

TEST(SglangTarget, FactsUseTheEffectiveRunningLimit) {
  FakeServer srv([](const std::string&, const std::string& path, const std::string&) {
    if (path == "/server_info") {
      return std::pair{200, std::string(R"({"max_running_requests":64,"max_total_num_tokens":262144,
        "context_length":262144,"chunked_prefill_size":4096,"speculative_algorithm":"EAGLE",
        "model_path":"/models/x/snapshots/2bf7f1646dc0875cff4404fdfef976cfb0ff2199",
        "internal_states":[{"effective_max_running_requests_per_dp":9}]})")};
    }
    if (path == "/v1/models") return std::pair{200, std::string(R"({"data":[{"id":"Q"}]})")};
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kSglang, srv.url());
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values["max_running_requests"], "9");
  EXPECT_EQ(f->values["speculative_algorithm"], "EAGLE");
  EXPECT_EQ(f->served_models, std::vector<std::string>{"Q"});

  Row row;
  row.identity.engine = Engine::kSglang;
  row.identity.image = "repo/img@sha256:" + std::string(64, 'a');
  row.identity.served_model_name = "Q";
  row.identity.model_revision = "2bf7f1646dc0875cff4404fdfef976cfb0ff2199";
  row.identity.server_expect = {{"max_running_requests", "9"},
                                {"max_total_num_tokens", "262144.0"},
                                {"speculative_algorithm", "EAGLE"}};
  IdentityInputs in;
  in.running_image = "sha256:" + std::string(64, 'a');
  in.image_source = "CAPQ_IMAGE_DIGEST";
  IdentityCheck ok = CheckIdentity(row, *f, in);
  EXPECT_TRUE(ok.ok()) << ok.Summary();
  row.identity.server_expect["max_running_requests"] = "8";
  in.running_image = "sha256:" + std::string(64, 'b');
  IdentityCheck bad = CheckIdentity(row, *f, in);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.Summary().find("server_expect.max_running_requests pinned 8, running 9"),
            std::string::npos)
      << bad.Summary();
  EXPECT_NE(bad.Summary().find("image pinned repo/img@sha256:aaaa"), std::string::npos);
  EXPECT_NE(bad.Summary().find("requalify"), std::string::npos);
  // A model path without a snapshot: CAPQ_MODEL_REVISION is compared instead.
  ServerFacts mounted = *f;
  mounted.model_path = "/model";
  row.identity.server_expect.clear();
  in.running_image = "sha256:" + std::string(64, 'a');
  in.model_revision = "0000000000000000000000000000000000000000";
  IdentityCheck rev = CheckIdentity(row, mounted, in);
  EXPECT_FALSE(rev.ok());
  EXPECT_NE(rev.Summary().find("model_revision pinned 2bf7f1646dc0875cff4404fdfef976cfb0ff2199"),
            std::string::npos)
      << rev.Summary();
  in.model_revision.clear();
  EXPECT_TRUE(CheckIdentity(row, mounted, in).ok()) << "unverifiable is recorded, not refused";
  // A pinned key the server does not report fails closed.
  row.identity.server_expect = {{"speculative_num_steps", "7"}};
  in.running_image = "sha256:" + std::string(64, 'a');
  IdentityCheck unknown = CheckIdentity(row, *f, in);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.Summary().find("does not report speculative_num_steps"), std::string::npos);
  // No digest source at all fails closed too.
  IdentityInputs none;
  none.image_error = "set CAPQ_IMAGE_DIGEST";
  row.identity.server_expect.clear();
  EXPECT_FALSE(CheckIdentity(row, *f, none).ok());
}

TEST(VllmTarget, FlushWithoutDevModeIsAClearError) {
  FakeServer srv([](const std::string&, const std::string&, const std::string&) {
    return std::pair{404, std::string("{}")};
  });
  auto t = Make(Engine::kVllm, srv.url());
  auto f = t->Flush(In(1), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("VLLM_SERVER_DEV_MODE=1"), std::string::npos);
}

TEST(VllmTarget, A200FlushIsMarkedAsProvingNothing) {
  FakeServer srv([](const std::string&, const std::string&, const std::string&) {
    return std::pair{200, std::string()};
  });
  auto t = Make(Engine::kVllm, srv.url());
  auto f = t->Flush(In(1), nullptr);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->status_proves_nothing);
}

TEST(LlamacppTarget, ErasesEverySlotAndExplainsA501) {
  std::atomic<bool> refuse{false};
  FakeServer srv([&](const std::string&, const std::string& path, const std::string& body) {
    if (path == "/props") return std::pair{200, std::string(R"({"total_slots":3})")};
    if (path == "/tokenize") {
      EXPECT_NE(body.find("\"add_special\":false"), std::string::npos);
      return std::pair{200, std::string(R"({"tokens":[1,2,3,4]})")};
    }
    if (path.rfind("/slots/", 0) == 0) {
      return refuse ? std::pair{501, std::string("{}")} : std::pair{200, std::string("{}")};
    }
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kLlamacpp, srv.url());
  auto f = t->Flush(In(2), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 3);
  int erases = 0;
  for (const auto& s : srv.seen()) erases += s.find("?action=erase") != std::string::npos;
  EXPECT_EQ(erases, 3);
  EXPECT_EQ(*t->CountTokens("a b c d"), 4);
  refuse = true;
  auto r = t->Flush(In(2), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--slot-save-path"), std::string::npos);
}

TEST(Target, ProbeGivesUpAtTheDeadlineWhenRefused) {
  int port;
  {
    FakeServer srv([](const std::string&, const std::string&, const std::string&) {
      return std::pair{200, std::string()};
    });
    port = std::stoi(srv.url().substr(17));
  }
  auto t = Make(Engine::kVllm, "http://127.0.0.1:" + std::to_string(port));
  const MonoNs t0 = NowNs();
  auto p = t->Probe(In(0.5), nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(p.status().message().find("not ready"), std::string::npos);
  EXPECT_LT(NsToS(NowNs() - t0), 15.0);
}

TEST(RunCapture, RunsWithoutAShellAndReportsFailures) {
  auto out = RunCapture({"printf", "%s", "a;b $(x)"}, 5);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "a;b $(x)");  // no shell: nothing was expanded
  EXPECT_FALSE(RunCapture({"false"}, 5).ok());
  EXPECT_FALSE(RunCapture({"capq-no-such-program-xyz"}, 5).ok());
}

TEST(ResolveRunningImage, PrefersCapqImageDigest) {
  setenv("CAPQ_IMAGE_DIGEST", "repo@sha256:abc", 1);
  IdentityInputs in = ResolveRunningImage();
  EXPECT_EQ(in.running_image, "repo@sha256:abc");
  EXPECT_EQ(in.image_source, "CAPQ_IMAGE_DIGEST");
  unsetenv("CAPQ_IMAGE_DIGEST");
  unsetenv("CAPQ_CONTAINER");
  IdentityInputs none = ResolveRunningImage();
  EXPECT_TRUE(none.running_image.empty());
  EXPECT_NE(none.image_error.find("CAPQ_CONTAINER"), std::string::npos);
}

}  // namespace
}  // namespace capq
