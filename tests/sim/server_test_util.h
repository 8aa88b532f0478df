// Test-only helpers for the simulator's integration tests: a tiny libcurl client, SSE frame
// splitting and temporary profile files. Not a load generator: one blocking transfer at a time.
#pragma once

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capq/sim/server.h"

namespace capq::sim::testing {

using nlohmann::json;

struct HttpResult {
  CURLcode curl_code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string headers;
  double first_byte_s = 0;  // wall seconds from the start to the first body byte (0: none)
};

struct CurlOptions {
  long timeout_ms = 20000;
  // Called with everything received so far after each read; return false to abort the transfer.
  std::function<bool(const std::string&)> on_data;
  std::string method;  // empty: GET without body, POST with body
};

namespace detail {
struct Ctx {
  HttpResult* r;
  const CurlOptions* o;
  std::chrono::steady_clock::time_point start;
};
inline size_t OnBody(char* p, size_t size, size_t n, void* arg) {
  auto* c = static_cast<Ctx*>(arg);
  if (c->r->body.empty() && size * n > 0) {
    c->r->first_byte_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c->start).count();
  }
  c->r->body.append(p, size * n);
  if (c->o->on_data && !c->o->on_data(c->r->body)) return 0;  // aborts: CURLE_WRITE_ERROR
  return size * n;
}
inline size_t OnHeader(char* p, size_t size, size_t n, void* arg) {
  static_cast<HttpResult*>(arg)->headers.append(p, size * n);
  return size * n;
}
}  // namespace detail

inline HttpResult Http(const std::string& url, const std::string* body,
                       const CurlOptions& o = CurlOptions()) {
  HttpResult r;
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  detail::Ctx ctx{&r, &o, std::chrono::steady_clock::now()};
  curl_slist* hdrs = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, o.timeout_ms);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, detail::OnBody);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &ctx);
  curl_easy_setopt(h.get(), CURLOPT_HEADERFUNCTION, detail::OnHeader);
  curl_easy_setopt(h.get(), CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, hdrs);
  if (body) {
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, body->c_str());
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(body->size()));
  }
  if (!o.method.empty()) curl_easy_setopt(h.get(), CURLOPT_CUSTOMREQUEST, o.method.c_str());
  r.curl_code = curl_easy_perform(h.get());
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(hdrs);
  return r;
}

inline HttpResult Get(const std::string& url) { return Http(url, nullptr); }
inline HttpResult Post(const std::string& url, const std::string& body,
                       const CurlOptions& o = CurlOptions()) {
  return Http(url, &body, o);
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    std::string ev = body.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

// A decoded stream: the parts a client measures.
struct Decoded {
  std::vector<json> chunks;  // every frame that parsed as JSON
  int unparsable = 0;
  bool done = false;       // saw data: [DONE]
  bool done_last = false;  // ... as the last frame
  std::string text;        // concatenated content deltas
  int content_chunks = 0;  // chunks with a string content delta (role chunk excluded)
  int empty_content_chunks = 0;
  std::string finish_reason;  // "" if none
  json usage;                 // null if none
  json error;                 // null if none
};

inline Decoded Decode(const std::string& body) {
  Decoded d;
  std::vector<std::string> frames = SseData(body);
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i] == "[DONE]") {
      d.done = true;
      d.done_last = i + 1 == frames.size();
      continue;
    }
    json j = json::parse(frames[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      ++d.unparsable;
      continue;
    }
    d.chunks.push_back(j);
    if (j.contains("error")) d.error = j["error"];
    if (j.contains("usage") && j["usage"].is_object()) d.usage = j["usage"];
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      d.finish_reason = c["finish_reason"];
    }
    const json& delta = c["delta"];
    const bool role = delta.contains("role") && delta["role"].is_string();
    if (!role && delta.contains("content") && delta["content"].is_string()) {
      ++d.content_chunks;
      std::string piece = delta["content"];
      if (piece.empty()) ++d.empty_content_chunks;
      d.text += piece;
    }
  }
  return d;
}

// The cached tokens a usage object reports: usage.prompt_tokens_details.cached_tokens, and 0 where
// the dialect writes the details as null or leaves them out for a request that hit nothing
// (sim/variations.h, cached_zero).
inline int64_t CachedTokens(const json& usage) {
  const json& d = usage.value("prompt_tokens_details", json());
  return d.is_object() ? d.value("cached_tokens", int64_t{0}) : 0;
}

inline int64_t Words(const std::string& s) {
  int64_t n = 0;
  bool in = false;
  for (char c : s) {
    bool sp = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (!sp && !in) ++n;
    in = !sp;
  }
  return n;
}

inline std::string ChatBody(const std::string& prompt, int max_tokens, bool stream,
                            bool ignore_eos = true, bool include_usage = true,
                            double temperature = 0.0, int seed = 0) {
  json b = {{"model", "sim-model"},
            {"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
            {"max_tokens", max_tokens},
            {"stream", stream},
            {"ignore_eos", ignore_eos},
            {"temperature", temperature},
            {"seed", seed}};
  if (stream && include_usage) b["stream_options"] = {{"include_usage", true}};
  return b.dump();
}

// A small, fast profile: 10 template tokens (3 shared), 4 running, big pool. Extra YAML lines
// override or add keys.
inline std::string TinyProfileYaml(const std::string& extra = "") {
  std::string y =
      "name: tiny\n"
      "max_total_tokens: 65536\n"
      "page_size: 16\n"
      "max_running_requests: 4\n"
      "chunked_prefill_size: 512\n"
      "context_length: 4096\n"
      "b0_s: 0.001\n"
      "b1_s_per_prefill_token: 0.00001\n"
      "b3_s_per_decode_row: 0.0001\n"
      "b4_s_per_decode_kv_token: 0\n"
      "overhead_s: 0\n"
      "chat_template_tokens: 10\n"
      "template_prefix_tokens: 3\n"
      "eos_min_tokens: 2\n";
  return y + extra;
}

// The tiny profile with one existing key set to another value.
inline std::string TinyProfileWith(const std::string& key, const std::string& value) {
  std::string y = TinyProfileYaml();
  size_t p = y.find(key + ": ");
  size_t e = y.find('\n', p);
  return y.replace(p, e - p, key + ": " + value);
}

inline std::string WriteTemp(const std::string& name, const std::string& text) {
  // One folder per process: ctest runs tests of this binary in parallel processes, and two of them
  // writing the same profile name would truncate the file under the other's reader.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("capq_sim_server_tests_" + std::to_string(::getpid()));
  // Removed when the test process exits, so runs do not pile folders up in the temp dir.
  struct RemoveAtExit {
    std::filesystem::path dir;
    ~RemoveAtExit() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static RemoveAtExit cleanup{dir};
  std::filesystem::create_directories(dir);
  std::filesystem::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// A server with the caller's options, serving `profile_yaml` (written to a temporary file).
inline std::unique_ptr<SimServer> StartServerWith(const std::string& profile_yaml,
                                                  ServerOptions o) {
  o.profile_path = WriteTemp(
      "profile_" + std::to_string(std::hash<std::string>()(profile_yaml)) + ".yaml", profile_yaml);
  auto r = SimServer::Start(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r.value());
}

inline std::unique_ptr<SimServer> StartServer(const std::string& profile_yaml,
                                              double time_scale = 1000.0,
                                              Dialect dialect = Dialect::kSglang,
                                              const std::string& faults_path = "",
                                              const std::string& truth_log = "") {
  ServerOptions o;
  o.time_scale = time_scale;
  o.dialect = dialect;
  o.faults_path = faults_path;
  o.truth_log_path = truth_log;
  return StartServerWith(profile_yaml, o);
}

// Polls `pred` every millisecond for at most `limit` (a bound for a hung server, not a timing
// check).
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

inline std::string DataPath(const std::string& rel) {
  return std::string(CAPQ_SOURCE_DIR) + "/tests/data/" + rel;
}

}  // namespace capq::sim::testing
