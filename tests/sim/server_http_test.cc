// The simulated server over real loopback HTTP (sglang dialect): stream shape, usage exactness,
// prefix cache and flush, health, identity, tokenizer endpoint, metrics, disconnects, truth log.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <fstream>
#include <set>
#include <sstream>

#include "capq/engine/profile.h"
#include "conformance_util.h"
#include "server_test_util.h"

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

class ServerHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(TinyProfileYaml());
    ASSERT_NE(server_, nullptr);
    url_ = server_->url();
  }
  HttpResult Chat(const std::string& body) { return Post(url_ + "/v1/chat/completions", body); }
  std::unique_ptr<SimServer> server_;
  std::string url_;
};

TEST_F(ServerHttpTest, UrlIsLoopbackWithEphemeralPort) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(url_, "http://127.0.0.1:" + std::to_string(server_->port()));
}

TEST_F(ServerHttpTest, StreamHasSglangShapeAndExactUsage) {
  HttpResult r = Chat(ChatBody("one two three four five", 7, true));
  ASSERT_EQ(r.curl_code, CURLE_OK);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers.find("text/event-stream"), std::string::npos);
  Decoded d = Decode(r.body);
  EXPECT_EQ(d.unparsable, 0);
  ASSERT_TRUE(d.done_last);
  ASSERT_GE(d.chunks.size(), 4u);
  // Role chunk first, SGLang style: content "" and null keys present.
  const json& role = d.chunks.front();
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(role["choices"][0]["delta"]["content"], "");
  EXPECT_TRUE(role["choices"][0]["delta"].contains("reasoning_content"));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  // One id across the stream.
  std::set<std::string> ids;
  for (const json& c : d.chunks) ids.insert(c["id"].get<std::string>());
  EXPECT_EQ(ids.size(), 1u);
  // One delta per engine step: 7 tokens without speculative decoding = 7 content chunks.
  EXPECT_EQ(d.content_chunks, 7);
  EXPECT_EQ(Words(d.text), 7);
  EXPECT_EQ(d.finish_reason, "length");
  // Usage chunk: choices [] and exact counts (5 words + 10 template tokens).
  const json& usage_chunk = d.chunks.back();
  EXPECT_TRUE(usage_chunk["choices"].is_array() && usage_chunk["choices"].empty());
  EXPECT_EQ(d.usage["prompt_tokens"], 15);
  EXPECT_EQ(d.usage["completion_tokens"], 7);
  EXPECT_EQ(d.usage["total_tokens"], 22);
  // A cold request: SGLang with the cache report writes null, not {"cached_tokens": 0}
  // (usage_processor.py; recorded Qwen3.8 cold stream).
  EXPECT_TRUE(d.usage.contains("prompt_tokens_details"));
  EXPECT_TRUE(d.usage["prompt_tokens_details"].is_null());
  // The final chunk (finish_reason) comes right before the usage chunk, its delta holding only
  // the null reasoning_content (msgspec, recorded Qwen3.8).
  const json& fin = d.chunks[d.chunks.size() - 2];
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(fin["choices"][0]["delta"], json::parse(R"({"reasoning_content":null})"));
}

TEST_F(ServerHttpTest, NoUsageChunkWithoutIncludeUsage) {
  Decoded d = Decode(Chat(ChatBody("alpha beta", 3, true, true, false)).body);
  EXPECT_TRUE(d.done_last);
  EXPECT_TRUE(d.usage.is_null());
  EXPECT_EQ(d.finish_reason, "length");
}

TEST_F(ServerHttpTest, NonStreamingAnswerMatchesStreamedText) {
  HttpResult r = Chat(ChatBody("same prompt here", 6, false));
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 13);
  const std::string text = j["choices"][0]["message"]["content"];
  EXPECT_EQ(Words(text), 6);
  Decoded d = Decode(Chat(ChatBody("same prompt here", 6, true)).body);
  EXPECT_EQ(d.text, text);
}

TEST_F(ServerHttpTest, OutputsDeterministicPerPromptAndSeedDistinctAcrossPrompts) {
  auto text = [&](const std::string& p, double temp, int seed) {
    return Decode(Chat(ChatBody(p, 8, true, true, false, temp, seed)).body).text;
  };
  const std::string a1 = text("prompt a", 0.7, 1);
  EXPECT_EQ(a1, text("prompt a", 0.7, 1));
  EXPECT_NE(a1, text("prompt b", 0.7, 1));
  EXPECT_NE(a1, text("prompt a", 0.7, 2));
  // Greedy: the seed cannot change the text.
  EXPECT_EQ(text("prompt a", 0.0, 1), text("prompt a", 0.0, 2));
}

TEST_F(ServerHttpTest, MaxCompletionTokensWinsOverMaxTokens) {
  json b = json::parse(ChatBody("x y", 9, false));
  b["max_completion_tokens"] = 4;
  json j = json::parse(Chat(b.dump()).body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
}

TEST_F(ServerHttpTest, WithoutIgnoreEosSomeStreamsStopEarlyAtSeededLengths) {
  int stops = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string p = "eos probe number " + std::to_string(i);
    Decoded d = Decode(Chat(ChatBody(p, 40, true, /*ignore_eos=*/false)).body);
    const int64_t n = d.usage["completion_tokens"];
    EXPECT_EQ(Words(d.text), n);
    if (d.finish_reason == "stop") {
      ++stops;
      EXPECT_GE(n, 2);  // eos_min_tokens
      EXPECT_LT(n, 40);
    } else {
      EXPECT_EQ(d.finish_reason, "length");
      EXPECT_EQ(n, 40);
    }
    // Same prompt, same seed: the same length again.
    Decoded again = Decode(Chat(ChatBody(p, 40, true, false)).body);
    EXPECT_EQ(again.usage["completion_tokens"], n);
  }
  EXPECT_GT(stops, 0);
}

TEST_F(ServerHttpTest, CacheHitThenFlushThenMiss) {
  auto cached = [&](const std::string& p) {
    Decoded d = Decode(Chat(ChatBody(p, 2, true)).body);
    return CachedTokens(d.usage);
  };
  const std::string a = "the first prompt with several words in it";
  const std::string b = "a completely different second prompt";
  EXPECT_EQ(cached(a), 0);   // cold server
  EXPECT_EQ(cached(b), 3);   // only the shared template prefix
  EXPECT_EQ(cached(a), 17);  // 8 words + 10 template - 1 (the last prompt token is recomputed)
  HttpResult f = Get(url_ + "/flush_cache");
  EXPECT_EQ(f.status, 200);
  EXPECT_NE(f.body.find("Cache flushed."), std::string::npos);
  EXPECT_EQ(cached(a), 0);  // flushed: a miss
  EXPECT_EQ(cached(b), 3);
  // POST works too.
  EXPECT_EQ(Post(url_ + "/flush_cache", "").status, 200);
  EXPECT_EQ(cached(b), 0);
}

TEST_F(ServerHttpTest, MetricsCacheHitRateResetsOnFlush) {
  Chat(ChatBody("repeat me please", 2, true));
  Chat(ChatBody("repeat me please", 2, true));
  auto hit_rate = [&] {
    std::string m = Get(url_ + "/metrics").body;
    size_t p = m.find("sglang:cache_hit_rate{");
    EXPECT_NE(p, std::string::npos);
    return std::stod(m.substr(m.find(' ', p) + 1));
  };
  EXPECT_GT(hit_rate(), 0.0);
  ASSERT_EQ(Get(url_ + "/flush_cache").status, 200);
  EXPECT_EQ(hit_rate(), 0.0);
}

TEST_F(ServerHttpTest, HealthDoesNotGenerate) {
  Chat(ChatBody("warm", 2, true));
  const engine::EngineStats before = server_->engine_stats();
  for (int i = 0; i < 5; ++i) {
    HttpResult h = Get(url_ + "/health");
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.body, "");
  }
  const engine::EngineStats after = server_->engine_stats();
  EXPECT_EQ(after.steps, before.steps);
  EXPECT_EQ(after.prompt_tokens_total, before.prompt_tokens_total);
  EXPECT_EQ(after.generated_tokens_total, before.generated_tokens_total);
}

TEST_F(ServerHttpTest, ServerInfoCarriesProfileAndDigest) {
  json info = json::parse(Get(url_ + "/server_info").body);
  EXPECT_EQ(info["max_total_num_tokens"], 65536);
  EXPECT_EQ(info["max_running_requests"], 4);
  // null without --context-length, as SGLang reports it; the context is /v1/models max_model_len.
  EXPECT_TRUE(info["context_length"].is_null());
  EXPECT_EQ(json::parse(Get(url_ + "/v1/models").body)["data"][0]["max_model_len"], 4096);
  EXPECT_EQ(info["enable_cache_report"], true);
  EXPECT_EQ(info["enable_metrics"], true);
  EXPECT_EQ(info["chunked_prefill_size"], 512);
  EXPECT_EQ(info["page_size"], 16);
  EXPECT_TRUE(info["speculative_algorithm"].is_null());
  EXPECT_EQ(info["capq_sim"]["profile"], "tiny");
  EXPECT_EQ(info["capq_sim"]["identity_digest"], engine::ProfileDigest(server_->profile()));
  EXPECT_EQ(info["capq_sim"]["time_scale"], 1000.0);
  // The same identity in the sim-only endpoint every dialect serves.
  json sim = json::parse(Get(url_ + "/capq/sim").body);
  EXPECT_EQ(sim, info["capq_sim"]);
  EXPECT_EQ(sim["dialect"], "sglang");
  json models = json::parse(Get(url_ + "/v1/models").body);
  EXPECT_EQ(models["data"][0]["id"], "sim-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 4096);
}

TEST(ServerIdentityTest, DigestChangesWhenTheProfileChanges) {
  auto digest_of = [](const std::string& yaml) {
    auto s = StartServer(yaml);
    EXPECT_NE(s, nullptr);
    if (!s) return std::string();
    return json::parse(Get(s->url() + "/server_info").body)["capq_sim"]["identity_digest"]
        .get<std::string>();
  };
  const std::string base = digest_of(TinyProfileYaml());
  EXPECT_EQ(base.rfind("sha256:", 0), 0u);
  EXPECT_EQ(base, digest_of(TinyProfileYaml()));
  EXPECT_NE(base, digest_of(TinyProfileWith("max_running_requests", "5")));
  EXPECT_NE(base, digest_of(TinyProfileYaml("spec_draft_tokens: 2\nspec_accept_mean: 1.5\n")));
}

TEST(ServerIdentityTest, SpeculativeSettingsAppearUnderSglangNames) {
  auto s = StartServer(TinyProfileYaml("spec_draft_tokens: 3\nspec_accept_mean: 2.0\n"));
  ASSERT_NE(s, nullptr);
  json info = json::parse(Get(s->url() + "/server_info").body);
  EXPECT_EQ(info["speculative_algorithm"], "EAGLE");
  EXPECT_EQ(info["speculative_num_steps"], 3);
  EXPECT_EQ(info["speculative_num_draft_tokens"], 4);
  // With speculative decoding a delta may carry several tokens; usage still counts them all.
  Decoded d =
      Decode(Post(s->url() + "/v1/chat/completions", ChatBody("spec words", 30, true)).body);
  EXPECT_EQ(Words(d.text), 30);
  EXPECT_EQ(d.usage["completion_tokens"], 30);
  EXPECT_LT(d.content_chunks, 30);
}

TEST_F(ServerHttpTest, BadRequestsGetSglangErrors) {
  auto check = [&](const std::string& body, const std::string& fragment) {
    HttpResult r = Chat(body);
    EXPECT_EQ(r.status, 400) << body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_EQ(j["object"], "error");
    EXPECT_EQ(j["type"], "BadRequestError");
    EXPECT_EQ(j["code"], 400);
    EXPECT_TRUE(j["param"].is_null());
    EXPECT_NE(j["message"].get<std::string>().find(fragment), std::string::npos) << r.body;
  };
  check("{not json", "invalid JSON");
  check("{}", "messages");
  check(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens");
  check(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"9"})", "max_tokens");
  check(R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream");
  check(R"({"messages":[{"role":"user"}]})", "content");
  // Context 4096: a 4100-word prompt cannot fit at all; 4000 words + 200 output exceed it.
  std::string huge;
  for (int i = 0; i < 4100; ++i) huge += "w ";
  check(ChatBody(huge, 1, true), "context length");
  check(ChatBody(huge.substr(0, 8000), 200, true), "maximum context length");
}

TEST(ServerPoolTest, RequestLargerThanTheTokenPoolIs400) {
  auto small = StartServer(
      "name: pool\nmax_total_tokens: 256\npage_size: 16\nmax_running_requests: 4\n"
      "chunked_prefill_size: 512\ncontext_length: 4096\nchat_template_tokens: 10\n"
      "template_prefix_tokens: 3\n");
  ASSERT_NE(small, nullptr);
  HttpResult r = Post(small->url() + "/v1/chat/completions", ChatBody("a b c", 300, true));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("token pool"), std::string::npos);
}

TEST_F(ServerHttpTest, TokenizeCountsWordsAndTemplate) {
  json t = json::parse(Post(url_ + "/tokenize", R"({"prompt":"a  b\tc\nd"})").body);
  EXPECT_EQ(t["count"], 4);
  EXPECT_EQ(t["tokens"].size(), 4u);
  EXPECT_EQ(t["max_model_len"], 4096);
  EXPECT_EQ(t["tokens"][0], t["tokens"][0]);
  json same = json::parse(Post(url_ + "/v1/tokenize", R"({"prompt":"a"})").body);
  EXPECT_EQ(same["tokens"][0], t["tokens"][0]);
  // Messages go through the chat template: the count equals usage.prompt_tokens.
  const std::string msgs =
      R"({"messages":[{"role":"user","content":"six words are in this prompt"}]})";
  json m = json::parse(Post(url_ + "/tokenize", msgs).body);
  Decoded d = Decode(Chat(ChatBody("six words are in this prompt", 1, true)).body);
  EXPECT_EQ(m["count"], d.usage["prompt_tokens"]);
  EXPECT_EQ(m["count"], 16);
}

TEST_F(ServerHttpTest, MetricsExposeSglangNamesAndCounts) {
  Chat(ChatBody("metrics prompt", 5, true));
  std::string m = Get(url_ + "/metrics").body;
  for (const char* name : {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                           "sglang:cache_hit_rate", "sglang:time_to_first_token_seconds_bucket",
                           "sglang:time_to_first_token_seconds_count", "sglang:prompt_tokens_total",
                           "sglang:generation_tokens_total"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name;
  }
  EXPECT_NE(m.find("sglang:time_to_first_token_seconds_count{model_name=\"sim-model\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("sglang:prompt_tokens_total{model_name=\"sim-model\"} 12\n"), std::string::npos);
  EXPECT_NE(m.find("sglang:generation_tokens_total{model_name=\"sim-model\"} 5\n"),
            std::string::npos);
}

TEST_F(ServerHttpTest, UnknownPathIs404AndOtherDialectsFlushIsNotServed) {
  EXPECT_EQ(Get(url_ + "/nope").status, 404);
  EXPECT_EQ(Post(url_ + "/reset_prefix_cache", "").status, 404);
  EXPECT_EQ(Get(url_ + "/props").status, 404);
}

// A slow server (time scale 1) so a request is surely still running when the flush arrives; the
// test waits on the server's own counters, not on the clock.
TEST(ServerBusyTest, FlushRefusedWhileBusyThenAcceptedWhenIdle) {
  auto s = StartServer(TinyProfileYaml(), /*time_scale=*/1.0);
  ASSERT_NE(s, nullptr);
  const std::string url = s->url();
  std::atomic<bool> stop{false};
  HttpResult streamed;
  std::thread client([&] {
    CurlOptions o;
    o.on_data = [&](const std::string&) { return !stop.load(); };
    streamed = Post(url + "/v1/chat/completions", ChatBody("busy busy", 3000, true), o);
  });
  ASSERT_TRUE(WaitFor([&] { return s->engine_stats().running > 0; }));
  HttpResult f = Get(url + "/flush_cache");
  EXPECT_EQ(f.status, 400);
  EXPECT_NE(f.body.find("When there are running or waiting requests"), std::string::npos);
  stop = true;  // the client goes away: the engine request must be cancelled
  client.join();
  EXPECT_NE(streamed.curl_code, CURLE_OK);
  EXPECT_TRUE(WaitFor([&] {
    engine::EngineStats st = s->engine_stats();
    return st.running == 0 && st.waiting == 0 && st.requests_cancelled == 1;
  }));
  EXPECT_EQ(Get(url + "/flush_cache").status, 200);
}

TEST(ServerBusyTest, QueuedClientThatLeavesIsCancelledBeforeItsFirstByte) {
  // One running slot: the second request waits in the queue and writes nothing; its client leaves.
  auto s = StartServer(TinyProfileWith("max_running_requests", "1"), 1.0);
  ASSERT_NE(s, nullptr);
  const std::string url = s->url();
  std::atomic<bool> stop{false};
  std::thread first([&] {
    CurlOptions o;
    o.on_data = [&](const std::string&) { return !stop.load(); };
    Post(url + "/v1/chat/completions", ChatBody("first", 3000, true), o);
  });
  ASSERT_TRUE(WaitFor([&] { return s->engine_stats().running == 1; }));
  std::thread second([&] {
    CurlOptions o;
    o.timeout_ms = 300;  // gives up while queued
    Post(url + "/v1/chat/completions", ChatBody("second", 5, true), o);
  });
  ASSERT_TRUE(WaitFor([&] { return s->engine_stats().waiting == 1; }));
  second.join();
  EXPECT_TRUE(WaitFor([&] { return s->engine_stats().requests_cancelled == 1; }));
  EXPECT_EQ(s->engine_stats().waiting, 0);
  stop = true;
  first.join();
}

TEST(ServerTruthLogTest, OneLinePerFrameWithVirtualAndWallTimes) {
  const std::string log = WriteTemp("truth.jsonl", "");
  auto s = StartServer(TinyProfileYaml(), 1000.0, Dialect::kSglang, "", log);
  ASSERT_NE(s, nullptr);
  HttpResult r = Post(s->url() + "/v1/chat/completions", ChatBody("truth", 4, true));
  const size_t frames = SseData(r.body).size();  // role + 4 content + finish + usage + [DONE]
  EXPECT_EQ(frames, 8u);
  s->Stop();
  std::ifstream in(log);
  std::string line;
  std::vector<json> lines;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), frames);
  const std::string id = Decode(r.body).chunks[0]["id"];
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["request_id"], id);
    EXPECT_EQ(lines[i]["event_index"], static_cast<int64_t>(i));
    EXPECT_GE(lines[i]["wall_mono_ns"].get<int64_t>(),
              lines[i]["due_mono_ns"].get<int64_t>() - 2000);
    if (i > 0) {
      EXPECT_GE(lines[i]["virtual_ns"].get<int64_t>(), lines[i - 1]["virtual_ns"].get<int64_t>());
      EXPECT_GE(lines[i]["wall_mono_ns"].get<int64_t>(),
                lines[i - 1]["wall_mono_ns"].get<int64_t>());
    }
  }
}

TEST(ServerLifecycleTest, StopCutsStreamsAndIsIdempotent) {
  auto s = StartServer(TinyProfileYaml(), 1.0);
  ASSERT_NE(s, nullptr);
  const std::string url = s->url();
  HttpResult r;
  std::thread client([&] { r = Post(url + "/v1/chat/completions", ChatBody("long", 3000, true)); });
  ASSERT_TRUE(WaitFor([&] { return s->engine_stats().running == 1; }));
  s->Stop();
  s->Stop();
  client.join();
  EXPECT_NE(r.curl_code, CURLE_OK);  // cut: no terminating chunk
  EXPECT_FALSE(Decode(r.body).done);
}

TEST(ServerLifecycleTest, StartFailsOnBadProfileOrOptions) {
  ServerOptions o;
  o.profile_path = "/nonexistent/profile.yaml";
  EXPECT_FALSE(SimServer::Start(o).ok());
  o.profile_path = WriteTemp("ok.yaml", TinyProfileYaml());
  o.time_scale = 0;
  EXPECT_EQ(SimServer::Start(o).status().code(), Status::Code::kInvalidArgument);
  o.time_scale = 1;
  o.idle_timeout_s = 0;
  EXPECT_EQ(SimServer::Start(o).status().code(), Status::Code::kInvalidArgument);
  o.idle_timeout_s = 5;
  o.faults_path = "/nonexistent/faults.yaml";
  EXPECT_FALSE(SimServer::Start(o).ok());
}

}  // namespace
}  // namespace capq::sim

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

size_t AppendTo(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

// Streams end with evhttp's terminating chunk after frames the server appends itself: the
// connection must stay usable for the next request (keep-alive), as clients reuse it.
TEST(ServerConnectionTest, KeepAliveConnectionServesSeveralStreams) {
  auto s = StartServer(TinyProfileYaml());
  ASSERT_NE(s, nullptr);
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  const std::string url = s->url() + "/v1/chat/completions";
  for (int i = 0; i < 3; ++i) {
    std::string body = ChatBody("keep alive " + std::to_string(i), 4, true);
    std::string out;
    curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, AppendTo);
    curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, 20000L);
    ASSERT_EQ(curl_easy_perform(h.get()), CURLE_OK);
    long new_connections = -1;
    curl_easy_getinfo(h.get(), CURLINFO_NUM_CONNECTS, &new_connections);
    EXPECT_EQ(new_connections, i == 0 ? 1 : 0) << "request " << i;
    Decoded d = Decode(out);
    EXPECT_TRUE(d.done_last);
    EXPECT_EQ(d.usage["completion_tokens"], 4);
  }
}

// Trials open hundreds of streams at once. The accept queue must hold them all: a client whose SYN
// finds it full is dropped and retries a second later, and that second would land in its TTFT.
TEST(ServerConnectionTest, AcceptQueueHoldsABurstOfConnectingClients) {
  auto s = StartServer(TinyProfileYaml());
  ASSERT_NE(s, nullptr);
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_GT(somaxconn, 0);
  EXPECT_EQ(s->listen_backlog(), std::min(4096, somaxconn));

  // A burst of connects completes in the kernel whether or not the loop has accepted them yet;
  // with a short queue the overflow would still be waiting for its SYN retry.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  const int burst =
      static_cast<int>(std::min<rlim_t>(600, rl.rlim_cur > 64 ? rl.rlim_cur - 64 : 0));
  ASSERT_GE(burst, 200) << "open file limit too low for the burst";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s->port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::vector<pollfd> fds;
  for (int i = 0; i < burst; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fds.push_back({fd, POLLOUT, 0});
  }
  // Well under the one-second SYN retry; not a speed check.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(900);
  int connected = 0;
  while (connected < burst && std::chrono::steady_clock::now() < deadline) {
    poll(fds.data(), fds.size(), 50);
    connected = 0;
    for (pollfd& p : fds) {
      if (p.revents & POLLOUT) p.events = 0;  // connected: stop asking
      if (p.events == 0) ++connected;
    }
  }
  for (pollfd& p : fds) close(p.fd);
  EXPECT_EQ(connected, burst);
}

// An HTTP/1.0 client gets no chunked encoding: the body is the SSE text and ends with the
// connection.
TEST(ServerConnectionTest, Http10ClientGetsAPlainBody) {
  auto s = StartServer(TinyProfileYaml());
  ASSERT_NE(s, nullptr);
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  const std::string url = s->url() + "/v1/chat/completions";
  std::string body = ChatBody("old client", 5, true);
  std::string out;
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_0);
  curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, AppendTo);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, 20000L);
  ASSERT_EQ(curl_easy_perform(h.get()), CURLE_OK);
  Decoded d = Decode(out);
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.unparsable, 0);
  EXPECT_EQ(Words(d.text), 5);
  EXPECT_EQ(out.rfind("data: ", 0), 0u);  // no chunk-size line in front
}

}  // namespace
}  // namespace capq::sim
