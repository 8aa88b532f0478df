// Engine adapters: what a trial needs from a server besides the measured traffic (issue 4,
// server-apis.md). One interface; adapters for sglang, vllm, llamacpp, and the simulator (which
// wraps the adapter of the engine its dialect stands in for).
//
//  - Facts():          what the server says about itself; `values` holds every limit the engine
//                      reports under the engine's own names (targets/engine_limits.h);
//  - Probe():          readiness WITHOUT generating (SGLang's /health generates by default, so its
//                      adapter uses GET /v1/models); the probe used is returned and recorded;
//  - Flush():          the engine's own prefix-cache flush, retried while the server is busy;
//  - CountTokens():    the server's tokenizer, for exact prompt lengths;
//  - TemplatePrefix(): the tokens every chat prompt shares (the rendered chat template before the
//                      message), from the server's own template/tokenize endpoints: the most a
//                      cold cache can show as cached for distinct prompts;
//  - ColdHint():       what to change on this engine when measured requests show a warm cache;
//  - Metrics():        Prometheus text from /metrics (snapshots and samples during a trial);
//  - LocalIdentity():  what this side knows of the identity the server must show: a real
//                      engine's running image, the simulator's digest of the row's own profile.
//
// Thread safety: a Target is used by one thread at a time (it owns one HTTP connection).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

class HttpClient;
struct IdentityInputs;

struct TargetOptions {
  std::string base_url;  // "http://127.0.0.1:30000" (a trailing '/' is removed)
  std::string api_key;
  bool insecure_tls = false;
  double control_timeout_s = 10;  // per control request, wall seconds
};

struct ServerFacts {
  nlohmann::json documents = nlohmann::json::object();  // every info document read, by path
  // Every limit of ReportableLimits(engine) the server reported, under the engine's own names, as
  // text ("8", "true", "EAGLE"); a key it did not report is absent.
  std::map<std::string, std::string> values;
  std::vector<std::string> served_models;  // /v1/models data[].id
  std::string model_path;                  // as the server reports it ("" if it does not)
  std::string version;
  // Simulator only ("capq_sim" in /server_info).
  std::optional<std::string> sim_identity_digest;  // "sha256:<hex>"
  std::optional<double> sim_time_scale;
  std::string sim_profile;
};

struct FlushResult {
  std::string method;                  // "POST /flush_cache", ...
  int attempts = 0;                    // requests sent (retries while busy included)
  bool status_proves_nothing = false;  // vLLM: 200 even when the reset failed
  std::string note;
};

// The chat template's shared leading tokens, measured on the server.
struct TemplatePrefix {
  int64_t tokens = 0;         // the longest common prefix of two rendered, tokenized prompts
  int64_t prompt_tokens = 0;  // tokens of the first whole rendered prompt (template included)
  std::string method;         // the endpoints used, in words
};

// What a completed stream whose usage carries no cached-token count means on one engine as
// launched (Target::CacheCounter): engines that report the count only when it is above zero make
// a cold request's silence a zero, and the rule says so with its source.
struct CacheCounterRule {
  bool absent_means_zero = false;  // a stream with usage and no count hit nothing
  // ... only once some stream of the same trial reported a count: the setting that turns the count
  // on is not reported anywhere else (vLLM).
  bool only_if_any_reported = false;
  // No flush and no counter at all (engine openai): the cache is cold by construction only, every
  // prompt being one no earlier request sent; verify_cold says so rather than failing.
  bool cold_by_unique_prompts = false;
  // Every stream that finishes carries its count, zero included (llama.cpp): nothing to infer.
  bool reported_always = false;
  std::string source;       // the server's code or recording that says so ("": nothing known)
  std::string launch_hint;  // how to start the server so that it reports a count
};
nlohmann::json CacheCounterRuleToJson(const CacheCounterRule& rule);
CacheCounterRule CacheCounterRuleFromJson(const nlohmann::json& j);

struct ServerLoad {
  std::optional<double> running, waiting;  // nullopt: the server does not report it
};

class Target {
 public:
  virtual ~Target() = default;
  virtual Engine engine() const = 0;
  const std::string& base_url() const { return options_.base_url; }
  std::string ChatUrl() const { return options_.base_url + "/v1/chat/completions"; }

  virtual Result<ServerFacts> Facts() = 0;
  // Polls the engine's generation-free readiness probe until it answers 200 or `deadline_ns`.
  // Returns the probe ("GET /v1/models"). Unavailable when the server never became ready.
  Result<std::string> Probe(MonoNs deadline_ns, const std::atomic<bool>* cancel);
  // Flushes the prefix cache, retrying while the server reports busy, until `deadline_ns`.
  virtual Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) = 0;
  // Tokens of `text` alone (no template, no special tokens). Unimplemented when the server has
  // no tokenize endpoint.
  virtual Result<int64_t> CountTokens(const std::string& text) = 0;
  // The token ids of `text` (no special tokens), where the tokenize endpoint returns them.
  virtual Result<std::vector<int64_t>> TokenIds(const std::string& text) {
    (void)text;
    return Status::Unimplemented("no token ids from this server");
  }
  // The token ids the server prefills for a single-turn user prompt with this message: its chat
  // template applied and special tokens added. Unimplemented when the server offers no endpoint
  // that renders its template.
  virtual Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) {
    (void)message;
    return Status::Unimplemented("this server has no endpoint that renders its chat template");
  }
  // How RenderedTokenIds() asks the server, in words.
  virtual std::string RenderMethod() const { return ""; }
  // The tokens two prompts with these (distinct) messages share once rendered: their common
  // prefix from RenderedTokenIds().
  Result<TemplatePrefix> MeasureTemplatePrefix(const std::string& message_a,
                                               const std::string& message_b);
  // One sentence for a verify_cold failure after this engine's flush: which server setting
  // leaves cached prompts behind and how to start the server so that its flush empties the cache.
  virtual std::string ColdHint() const { return ""; }
  // The launch flag that turns /metrics on (the server's load, read before every flush); empty
  // when the engine serves it by default.
  virtual std::string MetricsHint() const { return ""; }
  // One sentence when this engine's own cache model serves a request fewer cached tokens than a
  // reuse row declares while the server is healthy (a per-slot cache: requests that share a
  // prefix and run together take different slots); such misses are then reported, not failed,
  // and the served hit ratio judges the trial. Empty: a miss is the server's fault.
  virtual std::string MissHint() const { return ""; }
  // What a stream without a cached-token count means on this engine, configured as `facts` say.
  virtual CacheCounterRule CacheCounter(const ServerFacts& facts) const {
    (void)facts;
    return {};
  }
  // The cache settings the server reports, as "key=value": the flags among its limits
  // (engine_limits.h), and settings its info documents carry beside them.
  virtual std::vector<std::string> CacheSettings(const ServerFacts& facts) const;
  // "disable_radix_cache=true" when the server reports its prefix cache off; "" when it reports
  // it on or says nothing of it.
  virtual std::string PrefixCacheOff(const ServerFacts& facts) const {
    (void)facts;
    return "";
  }
  Result<std::string> Metrics();  // GET /metrics body; error unless 200
  // Running and queued requests from a /metrics text, under this engine's metric names.
  virtual ServerLoad ParseLoad(const std::string& metrics_text) const = 0;
  // Cumulative prefix-cache hit tokens from /metrics, when this engine counts them.
  virtual std::optional<double> ParseCachedTokens(const std::string& metrics_text) const {
    (void)metrics_text;
    return std::nullopt;
  }
  // Waits until ParseLoad() says nothing runs or waits, or `deadline_ns`. Returns a note in words
  // (also when the server has no load metrics: then the flush's busy retry is the only guard).
  Result<std::string> WaitIdle(MonoNs deadline_ns, const std::atomic<bool>* cancel);
  // What CheckIdentity compares with the server's own word, found on this side, never asked of
  // the server: for a real engine ResolveRunningImage(); for the simulator the digest of the
  // row's own profile file, with what that profile says of the model and its steps. Error when
  // the row's profile does not load.
  virtual Result<IdentityInputs> LocalIdentity() const;

 protected:
  explicit Target(TargetOptions options);
  virtual std::string ProbePath() const = 0;
  Result<nlohmann::json> GetJson(const std::string& path);
  HttpClient& client() { return *http_; }
  TargetOptions options_;

 private:
  std::shared_ptr<HttpClient> http_;
};

// The adapter for a row's identity: its engine's, or for a simulator the adapter of the engine
// its dialect stands in for, wrapped so that Facts() also reads the simulator's identity
// (GET /capq/sim) and LocalIdentity() hashes the row's profile (identity.sim_profile).
Result<std::unique_ptr<Target>> MakeTarget(const Identity& identity, const TargetOptions& options);
// The same for a bare engine (a simulator speaking SGLang's dialect for Engine::kSim).
Result<std::unique_ptr<Target>> MakeTarget(Engine engine, const TargetOptions& options);

// Prometheus text -> sum of every sample of each metric name (labels ignored). Lines that do not
// parse are skipped; comments are ignored.
std::map<std::string, double> ParsePrometheus(const std::string& text);
// The labels of the first sample of `metric` (an info gauge such as vllm:cache_config_info), or
// an empty map when it is absent.
std::map<std::string, std::string> PrometheusLabels(const std::string& text,
                                                    const std::string& metric);

// ---- Identity ------------------------------------------------------------------------------

struct IdentityField {
  std::string name;       // "image", "served_model_name", "server_expect.max_running_requests", ...
  std::string pinned;     // what the row says
  std::string running;    // what the server (or docker) says; "" = not reported
  bool verified = false;  // compared (false = could not be checked, see `note`)
  bool match = false;
  // Not verified because the server never reports it by design: recorded, not refused (`note`
  // says why and where the value was taken from).
  bool unverifiable = false;
  std::string note;
  // Compared and different, or pinned and not readable (fails closed) unless unverifiable.
  bool fails() const { return verified ? !match : !pinned.empty() && !unverifiable; }
};

struct IdentityCheck {
  std::vector<IdentityField> fields;
  bool ok() const;  // every field that must match does
  // "identity mismatch: server_expect.max_running_requests pinned 9, running 8; ..." or "".
  std::string Summary() const;
  nlohmann::json ToJson() const;
};

struct IdentityInputs {
  // Real engines: the running image's digest ("sha256:<hex>" or "repo@sha256:<hex>"), or empty
  // with `image_error` saying why it is unknown.
  std::string running_image;
  std::string image_source;  // "CAPQ_IMAGE_DIGEST", "docker inspect <container>"
  std::string image_error;
  // The model snapshot when the server's model path does not name one (e.g. mounted at /model):
  // CAPQ_MODEL_REVISION, the 40-hex snapshot the deployment mounted.
  std::string model_revision;
  // Simulator rows: the digest of the row's own profile, computed locally ("sha256:<hex>").
  std::string sim_profile_digest;
  // Simulator rows: the profile's served model name (for a row that leaves it to the profile).
  std::string sim_served_model_name;
};

// Compares a row's identity and server_expect with what the server says. Numbers compare
// numerically ("262144" == "262144.0"); a pinned field the server does not report fails closed.
IdentityCheck CheckIdentity(const Row& row, const ServerFacts& facts, const IdentityInputs& in);

// The running image digest for a real engine: CAPQ_IMAGE_DIGEST if set, else docker's (or
// podman's) inspect of CAPQ_CONTAINER (run without a shell). Fills running_image/image_source or
// image_error, and model_revision from CAPQ_MODEL_REVISION.
IdentityInputs ResolveRunningImage();
// The repo digest ("repo@sha256:<hex>") of the image container `container` runs, from docker
// inspect, else podman inspect; NotFound naming each command that failed (neither runtime on PATH,
// no such container, no digest).
Result<std::string> ContainerImageDigest(const std::string& container);

// Runs argv[0] (looked up in PATH) with no shell; returns its stdout. Error on spawn failure,
// non-zero exit or `timeout_s`.
Result<std::string> RunCapture(const std::vector<std::string>& argv, double timeout_s);

}  // namespace capq
