// The simulated engine's OpenAI-compatible HTTP server (`capq sim`): the pure engine model
// (capq/engine/engine.h) driven by a libevent loop in wall time, speaking one server dialect's
// endpoint names, chunk shapes and metrics (server-apis.md).
//
// Endpoints (all dialects): POST /v1/chat/completions (stream true|false), GET /health,
// GET /v1/models, GET /metrics (Prometheus text), POST /tokenize, and GET /capq/sim:
// {"profile","identity_digest","time_scale","dialect"}, the simulator's identity, which no real
// server has (so the real servers' own documents stay as they are).
//   sglang:   GET /server_info (/get_server_info, /model_info; also carries "capq_sim"),
//             GET|POST /flush_cache, POST /v1/tokenize; sglang:* metrics.
//   vllm:     GET /version, POST /reset_prefix_cache (always 200); vllm:* metrics.
//   llamacpp: GET /props, GET /slots, POST /slots/{id}?action=erase, POST /apply-template,
//             GET /v1/health; llamacpp:* metrics; shapes as recorded from llama-server b9749
//             (conformance/llamacpp/, server_llamacpp.cc).
// POST /tokenize with "messages" (sglang, vllm) or /apply-template then /tokenize with
// add_special (llamacpp) give a chat prompt's token ids, so a client can measure the template
// prefix two prompts share from the server itself (tokenizer.h).
// Each dialect's chunk shapes, error bodies and names are in dialect.h/.cc.
//
// Requests: prompt_tokens = words of every message's content + chat_template_tokens
// (tokenizer.h). max_completion_tokens wins over max_tokens; without either, 128 (SGLang's default
// max_new_tokens). With ignore_eos the output runs to max_tokens ("length"); without it, it stops
// ("stop") at a length seeded by (prompt, seed) in [eos_min_tokens, max_tokens]. Temperature 0 is
// greedy: the seed does not change the text. A prompt + max_tokens that cannot fit the context or
// the token pool is a 400 before any stream byte (llama.cpp caps max_tokens to the context
// instead, as the real server does, and refuses only a prompt that fills the slot's context).
//
// Threading: Start() spawns one event-loop thread that owns every connection, the engine and the
// timers; nothing else touches them. The public methods may be called from any thread.
// Virtual time: wall = t0 + virtual / time_scale, where t0 is the moment Start() returned. Every
// value the server reports (timings, metrics, server_info) is virtual.
#pragma once

#include <memory>
#include <string>

#include "capq/engine/engine.h"
#include "capq/model/row.h"
#include "capq/status.h"

namespace capq::sim {

enum class Dialect { kSglang, kVllm, kLlamacpp };

// "sglang" | "vllm" | "llamacpp"
Result<Dialect> ParseDialect(const std::string& name);
const char* DialectName(Dialect d);
// The dialect that stands in for `engine` (the row's identity.sim_dialect); SGLang's for an engine
// with no dialect of its own.
Dialect DialectFor(capq::Engine engine);
// The profile of the shipped simulator rows that a dialect's corpus is checked against by default
// (capq probe --check): a llama.cpp server's slots and context are the tiny profile's.
const char* ReferenceProfile(Dialect d);

struct ServerOptions {
  std::string profile_path;  // a profile YAML (rows/sim/profiles/*.yaml)
  std::string host = "127.0.0.1";
  int port = 0;                // 0 = ephemeral
  double time_scale = 1.0;     // virtual seconds per wall second
  std::string truth_log_path;  // empty = none
  std::string faults_path;     // empty = none
  Dialect dialect = Dialect::kSglang;
  // Varied: every chat request draws its framing among every known benign variation of real
  // servers (variations.h), from this seed and its index; otherwise the dialect's own.
  bool varied = false;
  uint64_t variation_seed = 1;
  // The build of the dialect's engine whose shapes it sends, where builds differ (recorded). The
  // llamacpp dialect's /props and /v1/models: below 10587, b9749's
  // (tests/data/conformance/llamacpp: meta.vocab_type an integer); from 10587, b10587's
  // (tests/data/conformance/llamacpp_b10587: vocab_type a bool,
  // chat_template_caps.supports_reasoning_effort). capq probe --check sets the corpus's.
  int engine_build = 9749;
  // A keep-alive connection that waits for its next request is closed after this long: Uvicorn's
  // 5 s (SGLang, vLLM); clients must reconnect. It starts once the last reply has been written
  // out, never while a reader that lags still has bytes of it to take, and a new connection waits
  // for its first request without it.
  double idle_timeout_s = 5.0;
};

// The simulator a sim row names: its profile, time scale and dialect (identity.sim_dialect).
ServerOptions ServerOptionsForRow(const Row& row);

class SimServer {
 public:
  // Loads the profile and the faults file, binds, and starts the loop thread. Listening when it
  // returns. Errors: InvalidArgument (profile, faults, options), Unavailable (bind failed).
  static Result<std::unique_ptr<SimServer>> Start(const ServerOptions& options);

  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT"
  const engine::EngineProfile& profile() const;
  std::string identity_digest() const;  // engine::ProfileDigest(profile())

  // A snapshot of the engine's counters, taken on the loop thread after its last activity (it lags
  // the loop by at most one callback). For tests: e.g. /health must leave them unchanged.
  engine::EngineStats engine_stats() const;
  // Chat completion requests received so far (any outcome), in arrival order.
  int64_t requests_received() const;
  // Connections the kernel queues for accept on the listening socket (what it granted: the
  // server asks for 4,096, net.core.somaxconn caps it). Clients beyond this many connecting at
  // once have their SYN dropped and retry a second later, a second that lands in their TTFT.
  int listen_backlog() const;

  // Idempotent; joins the loop thread. In-flight streams are cut; the truth log is flushed.
  void Stop();
  ~SimServer();

  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  struct Impl;  // public so the loop's C callbacks can reach it; defined in server_impl.h only

 private:
  explicit SimServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace capq::sim
