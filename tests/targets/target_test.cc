#include "capq/targets/target.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "capq/engine/profile.h"

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

// The simulator's digest is hashed from the row's own profile file, never taken from the server,
// and comes with the model name the profile serves.
TEST(SimTarget, LocalIdentityIsTheDigestOfTheRowsOwnProfile) {
  Identity id;
  id.engine = Engine::kSim;
  id.sim_profile = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/b70_twin.yaml";
  TargetOptions o;
  o.base_url = "http://127.0.0.1:1";  // never contacted
  auto t = MakeTarget(id, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<IdentityInputs> in = (*t)->LocalIdentity();
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  Result<engine::EngineProfile> profile = engine::LoadProfile(id.sim_profile);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(in->sim_profile_digest, engine::ProfileDigest(*profile));
  EXPECT_EQ(in->sim_served_model_name, "Qwen3.8-27B");
  EXPECT_TRUE(in->running_image.empty());

  id.sim_profile = "/nonexistent/profile.yaml";
  auto missing = MakeTarget(id, o);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  Result<IdentityInputs> none = (*missing)->LocalIdentity();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message().rfind("the row's simulator profile: ", 0), 0u)
      << none.status().message();
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

// The body of a recorded llama.cpp response (tests/data/conformance/llamacpp, build b9749).
std::string RecordedBody(const std::string& name) {
  std::ifstream in(std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/llamacpp/" + name,
                   std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string all = s.str();
  size_t at = all.find("\r\n\r\n");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? "" : all.substr(at + 4);
}

TEST(LlamacppTarget, FactsAreLlamacppsOwnLimitsFromTheRecordedAnswers) {
  FakeServer srv([](const std::string&, const std::string& path, const std::string&) {
    if (path == "/props") return std::pair{200, RecordedBody("04-props.resp")};
    if (path == "/v1/models") return std::pair{200, RecordedBody("03-v1-models.resp")};
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kLlamacpp, srv.url());
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::map<std::string, std::string> expect = {
      {"total_slots", "8"}, {"n_ctx", "2048"},        {"n_ctx_train", "32768"},
      {"n_vocab", "32064"}, {"n_params", "19826944"}, {"build_info", "b9749-d32676d77"}};
  EXPECT_EQ(f->values, expect);
  EXPECT_EQ(f->served_models, std::vector<std::string>{"tiny-llama"});

  Row row;
  row.identity.engine = Engine::kLlamacpp;
  row.identity.image = "local/llama-server@sha256:" + std::string(64, 'a');
  row.identity.served_model_name = "tiny-llama";
  row.identity.server_expect = {{"total_slots", "8"}, {"n_ctx", "2048"}};
  IdentityInputs in;
  in.running_image = row.identity.image;
  in.image_source = "CAPQ_IMAGE_DIGEST";
  EXPECT_TRUE(CheckIdentity(row, *f, in).ok()) << CheckIdentity(row, *f, in).Summary();
  row.identity.server_expect["n_ctx"] = "4096";
  IdentityCheck bad = CheckIdentity(row, *f, in);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.Summary().find("server_expect.n_ctx pinned 4096, running 2048"), std::string::npos)
      << bad.Summary();
}

// A llama.cpp stand-in whose /apply-template and /tokenize answer as recordings 10 and 12 do: the
// Phi-3 template around the message, BOS added by add_special, one id per word of the message.
std::pair<int, std::string> Phi3Template(const std::string& path, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body);
  if (path == "/apply-template") {
    std::string content = j["messages"][0]["content"];
    return {200,
            nlohmann::json{{"prompt", "<|user|>\n" + content + "<|end|>\n<|assistant|>\n"}}.dump()};
  }
  if (path == "/tokenize") {
    EXPECT_EQ(j.value("add_special", false), true) << "the completion path adds BOS";
    std::string text = j["content"];
    const std::string open = "<|user|>\n", close = "<|end|>\n<|assistant|>\n";
    EXPECT_EQ(text.rfind(open, 0), 0u);
    std::string message = text.substr(open.size(), text.size() - open.size() - close.size());
    std::vector<int64_t> ids = {1, 32010, 29871, 13};
    std::istringstream words(message);
    for (std::string w; words >> w;)
      ids.push_back(100 + static_cast<int64_t>(std::hash<std::string>{}(w) % 30000));
    for (int64_t id : {32007, 29871, 13, 32001, 29871, 13}) ids.push_back(id);
    return {200, nlohmann::json{{"tokens", ids}}.dump()};
  }
  return {404, ""};
}

TEST(LlamacppTarget, TemplatePrefixIsWhatTwoRenderedPromptsShare) {
  // Recording 12: the templated "hello world" starts <s> <|user|> ▁ \n (ids 1 32010 29871 13).
  nlohmann::json recorded =
      nlohmann::json::parse(RecordedBody("12-tokenize-with_pieces-chat-prefix.resp"));
  ASSERT_EQ(recorded["tokens"][3]["id"], 13);
  EXPECT_EQ(RecordedBody("10-apply-template.resp"),
            R"({"prompt":"<|user|>\nhello world<|end|>\n<|assistant|>\n"})");
  FakeServer srv([](const std::string&, const std::string& path, const std::string& body) {
    return Phi3Template(path, body);
  });
  auto t = Make(Engine::kLlamacpp, srv.url());
  auto p = t->MeasureTemplatePrefix("River stone table", "Garden window song door");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->tokens, 4);
  EXPECT_EQ(p->prompt_tokens, 4 + 3 + 6);
  EXPECT_NE(p->method.find("/apply-template"), std::string::npos);
  // The same lead word would widen the prefix: the measurement must use the prompts as given.
  auto same = t->MeasureTemplatePrefix("River stone", "River table");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->tokens, 5);
}

TEST(LlamacppTarget, AFlushIsNoProofAndTheHintNamesTheHostCacheFlag) {
  FakeServer srv([](const std::string&, const std::string& path, const std::string&) {
    if (path == "/props") return std::pair{200, RecordedBody("04-props.resp")};
    if (path.rfind("/slots/", 0) == 0)
      return std::pair{200, std::string(R"({"id_slot":0,"n_erased":0})")};
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kLlamacpp, srv.url());
  auto f = t->Flush(In(2), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 8);
  EXPECT_TRUE(f->status_proves_nothing);
  EXPECT_NE(t->ColdHint().find("--cache-ram 0"), std::string::npos) << t->ColdHint();
}

TEST(VllmTarget, TheKvPoolComesFromTheCacheConfigInfoLabels) {
  FakeServer srv([](const std::string&, const std::string& path, const std::string& body) {
    if (path == "/v1/models") {
      return std::pair{200,
                       std::string(R"({"data":[{"id":"M","max_model_len":32768,"root":"/m"}]})")};
    }
    if (path == "/version") return std::pair{200, std::string(R"({"version":"0.11.0"})")};
    if (path == "/metrics") {
      return std::pair{
          200,
          std::string("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\","
                      "enable_prefix_caching=\"True\",num_cpu_blocks=\"None\",num_gpu_blocks="
                      "\"4096\"} 1.0\n")};
    }
    if (path == "/tokenize") {
      nlohmann::json j = nlohmann::json::parse(body);
      EXPECT_TRUE(j.contains("messages"));
      EXPECT_EQ(j.value("add_generation_prompt", false), true);
      std::string m = j["messages"][0]["content"];
      std::vector<int64_t> ids = {151644, 872, 198, m[0] == 'R' ? 1001 : 1002, 151645};
      return std::pair{200, nlohmann::json{{"count", ids.size()}, {"tokens", ids}}.dump()};
    }
    return std::pair{404, std::string()};
  });
  auto t = Make(Engine::kVllm, srv.url());
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values["max_model_len"], "32768");
  EXPECT_EQ(f->values["num_gpu_blocks"], "4096");
  EXPECT_EQ(f->values["block_size"], "16");
  EXPECT_EQ(f->values["enable_prefix_caching"], "true");
  EXPECT_EQ(f->values["version"], "0.11.0");
  EXPECT_EQ(f->values.count("num_cpu_blocks"), 0u);
  auto p = t->MeasureTemplatePrefix("River a", "Table b");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->tokens, 3);
}

TEST(PrometheusLabels, ReadsTheLabelsOfAnInfoGauge) {
  auto l = PrometheusLabels("x 1\nm{a=\"1\",b=\"x,\\\"y\\\"\"} 1\nm{a=\"2\"} 1\n", "m");
  EXPECT_EQ(l["a"], "1");
  EXPECT_EQ(l["b"], "x,\"y\"");
  EXPECT_TRUE(PrometheusLabels("x 1\n", "m").empty());
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
