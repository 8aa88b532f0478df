// Every fault class of the simulated server produces exactly its misbehaviour, and only on the
// requests its rule selects (files in tests/data/faults/).
#include <gtest/gtest.h>
#include <zlib.h>

#include "capq/sim/faults.h"
#include "conformance_util.h"
#include "server_test_util.h"

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

// Inflates what `in` adds to the gzip member `z` is reading; *rc is zlib's last answer.
std::string Inflate(z_stream* z, const std::string& in, int* rc) {
  std::string out;
  z->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z->avail_in = static_cast<uInt>(in.size());
  char buf[4096];
  do {
    z->next_out = reinterpret_cast<Bytef*>(buf);
    z->avail_out = sizeof buf;
    *rc = inflate(z, Z_SYNC_FLUSH);
    out.append(buf, sizeof buf - z->avail_out);
  } while (*rc == Z_OK && (z->avail_in > 0 || z->avail_out == 0));
  return out;
}

class ServerFaultsTest : public ::testing::Test {
 protected:
  void Start(const std::string& faults_file, double time_scale = 1000.0) {
    server_ = StartServer(TinyProfileYaml(), time_scale, Dialect::kSglang,
                          DataPath("faults/" + faults_file));
    ASSERT_NE(server_, nullptr);
    url_ = server_->url();
  }
  HttpResult Chat(const std::string& body, const CurlOptions& o = CurlOptions()) {
    return Post(url_ + "/v1/chat/completions", body, o);
  }
  // A healthy stream, to compare the faulted one with.
  void ExpectHealthy(const std::string& prompt, int max_tokens) {
    HttpResult r = Chat(ChatBody(prompt, max_tokens, true));
    EXPECT_EQ(r.curl_code, CURLE_OK);
    EXPECT_EQ(r.status, 200);
    Decoded d = Decode(r.body);
    EXPECT_TRUE(d.done_last);
    EXPECT_EQ(d.unparsable, 0);
    EXPECT_EQ(d.finish_reason, "length");
    EXPECT_EQ(Words(d.text), max_tokens);
    EXPECT_EQ(d.usage["completion_tokens"], max_tokens);
  }
  std::unique_ptr<SimServer> server_;
  std::string url_;
};

TEST_F(ServerFaultsTest, HttpStatusBeforeTheStream) {
  Start("http_status.yaml");
  HttpResult r = Chat(ChatBody("first", 5, true));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers.find("text/event-stream"), std::string::npos);
  json j = json::parse(r.body);
  EXPECT_EQ(j["code"], 503);
  EXPECT_EQ(j["object"], "error");
  EXPECT_EQ(server_->engine_stats().prompt_tokens_total, 0);  // never reached the engine
  ExpectHealthy("second", 5);
}

TEST_F(ServerFaultsTest, ErrorFrameMidStreamThenDone) {
  Start("error_frame.yaml");
  HttpResult r = Chat(ChatBody("this will boom", 10, true));
  EXPECT_EQ(r.curl_code, CURLE_OK);
  EXPECT_EQ(r.status, 200);
  Decoded d = Decode(r.body);
  EXPECT_EQ(Words(d.text), 3);
  EXPECT_EQ(d.content_chunks, 3);
  ASSERT_TRUE(d.error.is_object());
  EXPECT_EQ(d.error["code"], 500);
  EXPECT_FALSE(d.error["message"].get<std::string>().empty());
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.finish_reason, "");
  EXPECT_TRUE(d.usage.is_null());
  // Nothing is left running for the ended stream.
  EXPECT_TRUE(WaitFor([&] { return server_->engine_stats().running == 0; }));
  ExpectHealthy("no trouble here", 10);
}

TEST_F(ServerFaultsTest, CutConnectionMidStream) {
  Start("cut_connection.yaml");
  HttpResult r = Chat(ChatBody("cut me", 10, true));
  EXPECT_NE(r.curl_code, CURLE_OK);  // the chunked body never terminates
  EXPECT_EQ(r.status, 200);
  Decoded d = Decode(r.body);
  EXPECT_EQ(Words(d.text), 2);
  EXPECT_FALSE(d.done);
  EXPECT_EQ(d.finish_reason, "");
  // At time scale 1000 the engine may finish the request before the cut is written, so only
  // "nothing left running" is asserted here; ServerBusyTest covers cancellation on disconnect.
  EXPECT_TRUE(WaitFor([&] { return server_->engine_stats().running == 0; }));
  ExpectHealthy("fine", 10);
}

TEST_F(ServerFaultsTest, MissingDone) {
  Start("missing_done.yaml");
  HttpResult r = Chat(ChatBody("no done", 4, true));
  EXPECT_EQ(r.curl_code, CURLE_OK);  // the HTTP body ends properly
  Decoded d = Decode(r.body);
  EXPECT_FALSE(d.done);
  EXPECT_EQ(d.finish_reason, "length");
  EXPECT_EQ(d.usage["completion_tokens"], 4);
  ExpectHealthy("with done", 4);
}

// The body is one gzip member, and every HTTP chunk of it inflates to exactly one whole event:
// each event was flushed on its own, so a client that inflates as it reads sees it at once.
TEST_F(ServerFaultsTest, GzipStreamFlushesEveryEventOnItsOwn) {
  Start("gzip.yaml");
  const int port = server_->port();
  RawResponse r = RawExchange(
      port, JsonRequest("POST", "/v1/chat/completions", ChatBody("zip it", 6, true), port));
  EXPECT_EQ(r.status, 200);
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.Header("Content-Encoding"), "gzip");
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string text;
  int rc = Z_OK;
  ASSERT_GE(r.chunks.size(), 2u);
  for (size_t i = 0; i < r.chunks.size(); ++i) {
    const std::string events = Inflate(&z, r.chunks[i], &rc);
    if (i + 1 < r.chunks.size()) {
      EXPECT_EQ(rc, Z_OK) << "chunk " << i;
      EXPECT_EQ(SseData(events).size(), 1u) << "chunk " << i << ": " << events;
      EXPECT_EQ(events.substr(events.size() - std::min<size_t>(events.size(), 2)), "\n\n");
    } else {
      EXPECT_EQ(rc, Z_STREAM_END) << "the last chunk ends the gzip member";
      EXPECT_EQ(events, "");
    }
    text += events;
  }
  inflateEnd(&z);
  Decoded d = Decode(text);
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.finish_reason, "length");
  EXPECT_EQ(Words(d.text), 6);
  EXPECT_EQ(d.usage["completion_tokens"], 6);
  // Only the selected request: the next one is plain.
  HttpResult plain = Chat(ChatBody("not zipped", 3, true));
  EXPECT_EQ(plain.headers.find("Content-Encoding"), std::string::npos) << plain.headers;
  ExpectHealthy("not zipped either", 3);
}

// No chunked framing, no length: an HTTP/1.0 answer whose body the server's close ends.
TEST_F(ServerFaultsTest, CloseDelimitedBodyEndsWithTheConnection) {
  Start("close_delimited.yaml");
  const int port = server_->port();
  RawResponse r = RawExchange(
      port, JsonRequest("POST", "/v1/chat/completions", ChatBody("until close", 5, true), port));
  EXPECT_EQ(r.version, "HTTP/1.0");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.HasHeader("Transfer-Encoding"));
  EXPECT_FALSE(r.HasHeader("Content-Length"));
  EXPECT_EQ(r.Header("Connection"), "close");
  EXPECT_TRUE(r.closed) << "the body ends only when the server closes the connection";
  Decoded d = Decode(r.body);
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.unparsable, 0);
  EXPECT_EQ(Words(d.text), 5);
  EXPECT_EQ(d.usage["completion_tokens"], 5);
  ExpectHealthy("chunked again", 5);
  // The llamacpp dialect, which announces keep-alive limits on every other answer, drops them.
  auto lc = StartServer(TinyProfileYaml(), 1000.0, Dialect::kLlamacpp,
                        DataPath("faults/close_delimited.yaml"));
  ASSERT_NE(lc, nullptr);
  RawResponse l = RawExchange(
      lc->port(),
      JsonRequest("POST", "/v1/chat/completions", ChatBody("until close", 5, true), lc->port()));
  EXPECT_EQ(l.version, "HTTP/1.0");
  EXPECT_EQ(l.Header("Connection"), "close");
  EXPECT_FALSE(l.HasHeader("Keep-Alive"));
  EXPECT_TRUE(l.closed);
  EXPECT_TRUE(Decode(l.body).done_last);
}

// Cut short, a close-delimited body ends as cleanly as a whole one: libcurl reports no error
// (unlike the chunked cut in CutConnectionMidStream), and only the missing [DONE] tells.
TEST_F(ServerFaultsTest, CloseDelimitedCutLooksLikeTheEnd) {
  Start("close_delimited_cut.yaml");
  HttpResult r = Chat(ChatBody("cut quietly", 10, true));
  EXPECT_EQ(r.curl_code, CURLE_OK);
  EXPECT_EQ(r.status, 200);
  Decoded d = Decode(r.body);
  EXPECT_EQ(Words(d.text), 2);
  EXPECT_FALSE(d.done);
  EXPECT_EQ(d.finish_reason, "");
  EXPECT_TRUE(d.usage.is_null());
  EXPECT_TRUE(WaitFor([&] { return server_->engine_stats().running == 0; }));
  ExpectHealthy("whole", 10);
}

TEST_F(ServerFaultsTest, MalformedJsonFrameOnce) {
  Start("malformed_json.yaml");
  Decoded d = Decode(Chat(ChatBody("garbled", 6, true)).body);
  EXPECT_EQ(d.unparsable, 1);
  EXPECT_EQ(Words(d.text), 6);  // every real delta is still there
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.usage["completion_tokens"], 6);
  ExpectHealthy("clean", 6);
}

TEST_F(ServerFaultsTest, UsageOffByN) {
  Start("usage_off_by.yaml");
  Decoded d = Decode(Chat(ChatBody("count wrong", 5, true)).body);
  EXPECT_EQ(Words(d.text), 5);
  EXPECT_EQ(d.usage["completion_tokens"], 7);
  EXPECT_EQ(d.usage["total_tokens"], d.usage["prompt_tokens"].get<int>() + 7);
  ExpectHealthy("count right", 5);
}

TEST_F(ServerFaultsTest, EarlyStopDespiteIgnoreEos) {
  Start("early_stop.yaml");
  Decoded d = Decode(Chat(ChatBody("stops early", 20, true, /*ignore_eos=*/true)).body);
  EXPECT_EQ(d.finish_reason, "stop");
  EXPECT_EQ(Words(d.text), 4);
  EXPECT_EQ(d.usage["completion_tokens"], 4);
  EXPECT_TRUE(d.done_last);
  ExpectHealthy("runs to length", 20);
}

TEST_F(ServerFaultsTest, EmptyDeltasOnly) {
  Start("empty_deltas.yaml");
  Decoded d = Decode(Chat(ChatBody("say nothing", 5, true)).body);
  EXPECT_EQ(d.content_chunks, 5);
  EXPECT_EQ(d.empty_content_chunks, 5);
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(d.usage["completion_tokens"], 5);
  ExpectHealthy("say something", 5);
}

TEST_F(ServerFaultsTest, DuplicateOutputAcrossPrompts) {
  Start("duplicate_output.yaml");
  auto text = [&](const std::string& p) { return Decode(Chat(ChatBody(p, 8, true)).body).text; };
  const std::string a = text("first dup prompt");
  const std::string b = text("second dup prompt, different words");
  EXPECT_EQ(Words(a), 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, text("an ordinary prompt"));
  // same_as: a copy of a named prompt's output.
  EXPECT_EQ(text("please copy it"), text("the original prompt"));
}

TEST_F(ServerFaultsTest, SlowFirstByte) {
  // 2000 virtual ms at time scale 10 = at least 200 wall ms before any byte; a healthy request is
  // a few virtual ms. Only a lower bound is asserted: a delay cannot be shorter than its timer.
  Start("slow_first_byte.yaml", 10.0);
  HttpResult slow = Chat(ChatBody("slow", 2, true));
  EXPECT_EQ(slow.curl_code, CURLE_OK);
  EXPECT_GE(slow.first_byte_s, 0.2);
  Decoded d = Decode(slow.body);
  EXPECT_TRUE(d.done_last);
  EXPECT_EQ(d.usage["completion_tokens"], 2);
  ExpectHealthy("fast", 2);
}

TEST_F(ServerFaultsTest, StallKeepsTheConnectionOpenAndSilent) {
  Start("stall.yaml");
  CurlOptions o;
  o.timeout_ms = 1500;  // the client's own request timeout is what ends a stalled stream
  HttpResult r = Chat(ChatBody("stall", 10, true), o);
  EXPECT_EQ(r.curl_code, CURLE_OPERATION_TIMEDOUT);
  Decoded d = Decode(r.body);
  EXPECT_EQ(Words(d.text), 2);
  EXPECT_FALSE(d.done);
  EXPECT_EQ(d.finish_reason, "");
  ExpectHealthy("not stalled", 10);
}

TEST_F(ServerFaultsTest, LyingFlushKeepsTheCache) {
  Start("lying_flush.yaml");
  auto cached = [&](const std::string& p) {
    return CachedTokens(Decode(Chat(ChatBody(p, 2, true)).body).usage);
  };
  EXPECT_EQ(cached("remember this prompt"), 0);
  HttpResult f = Get(url_ + "/flush_cache");
  EXPECT_EQ(f.status, 200);
  EXPECT_NE(f.body.find("Cache flushed."), std::string::npos);
  EXPECT_EQ(cached("remember this prompt"), 12);  // 3 words + 10 - 1: still cached
}

TEST_F(ServerFaultsTest, Health503ForTheFirstSeconds) {
  // 30 virtual seconds at time scale 1: the check below runs long before they pass.
  Start("health_503.yaml", 1.0);
  HttpResult h = Get(url_ + "/health");
  EXPECT_EQ(h.status, 503);
  // The same window at time scale 1000 is 30 wall ms: health turns 200.
  auto fast =
      StartServer(TinyProfileYaml(), 1000.0, Dialect::kSglang, DataPath("faults/health_503.yaml"));
  ASSERT_NE(fast, nullptr);
  EXPECT_TRUE(WaitFor([&] { return Get(fast->url() + "/health").status == 200; }));
  EXPECT_EQ(fast->engine_stats().steps, 0);
}

TEST_F(ServerFaultsTest, ProbabilitySelectsTheRequestsThePlanSays) {
  Start("probability.yaml");
  Result<FaultPlan> plan = FaultPlan::Load(DataPath("faults/probability.yaml"));
  ASSERT_TRUE(plan.ok());
  int faulted = 0;
  for (int i = 0; i < 24; ++i) {
    HttpResult r = Chat(ChatBody("p " + std::to_string(i), 1, false));
    const bool expect_fault =
        plan->ForRequest(i, "p " + std::to_string(i) + "\n").http_status.has_value();
    EXPECT_EQ(r.status, expect_fault ? 500 : 200) << "request " << i;
    faulted += expect_fault;
  }
  EXPECT_GT(faulted, 0);
  EXPECT_LT(faulted, 24);
}

TEST_F(ServerFaultsTest, NonStreamingFaults) {
  Start("usage_off_by.yaml");
  json j = json::parse(Chat(ChatBody("plain", 3, false)).body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(Words(j["choices"][0]["message"]["content"].get<std::string>()), 3);
}

}  // namespace
}  // namespace capq::sim
