// The chat endpoint: a request that passes its checks (chat_request.cc) and its faults becomes a
// stream, with its id, output text and stop point, and goes to the engine.
#include <event2/http.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "capq/sim/tokenizer.h"
#include "server_impl.h"

namespace capq::sim {

// json_error_200: a JSON error body under HTTP 200, where a stream was asked for.
bool SimServer::Impl::ReplyJsonError200(evhttp_request* req, const RequestFaults& f) {
  if (!f.json_error_200) return false;
  Reply(req, 200,
        ErrorBody(spec->errors, 500,
                  "simulated error under HTTP 200 (capq sim fault json_error_200)"),
        "application/json");
  return true;
}

namespace {

// The output length at which a request stops with "stop", or -1 when it runs to max_tokens: a
// point drawn from the prompt and seed past the profile's eos_min_tokens, or the early_stop fault's
// if that comes first.
int64_t EosAt(const EngineProfile& profile, bool ignore_eos, const RequestFaults& f,
              uint64_t prompt_hash, uint64_t out_seed, int64_t max_tokens) {
  int64_t eos_at = -1;
  if (!ignore_eos && profile.eos_min_tokens < max_tokens) {
    const uint64_t span = static_cast<uint64_t>(max_tokens - profile.eos_min_tokens + 1);
    const int64_t at = profile.eos_min_tokens +
                       static_cast<int64_t>(Mix64(Mix64(prompt_hash, out_seed), 0xe05) % span);
    if (at < max_tokens) eos_at = std::max<int64_t>(1, at);
  }
  if (f.early_stop_after) {
    const int64_t at =
        std::clamp<int64_t>(*f.early_stop_after, 1, std::max<int64_t>(1, max_tokens - 1));
    if (at < max_tokens && (eos_at < 0 || at < eos_at)) eos_at = at;
  }
  return eos_at;
}

}  // namespace

// A validated chat request as a stream: its id, its output text's key and stop point, the engine
// request it submits and the framing of its chunks.
std::unique_ptr<Stream> SimServer::Impl::NewStream(evhttp_request* req, int64_t index,
                                                   const ChatOptions& o, const RequestFaults& f,
                                                   std::vector<uint32_t> ids, int64_t max_tokens) {
  auto s = std::make_unique<Stream>();
  s->impl = this;
  s->req = req;
  s->conn = evhttp_request_get_connection(req);
  s->engine_id = next_engine_id++;
  s->index = index;
  char idbuf[48];
  std::snprintf(idbuf, sizeof(idbuf), "chatcmpl-%016llx%08llx",
                static_cast<unsigned long long>(Mix64(static_cast<uint64_t>(start_unix_ns), 0)),
                static_cast<unsigned long long>(index));
  s->id = idbuf;
  s->streaming = o.streaming;
  s->include_usage = o.include_usage;
  s->prompt_tokens = static_cast<int64_t>(ids.size());
  s->max_tokens = max_tokens;
  s->ignore_eos = o.ignore_eos;
  s->temperature = o.temperature;
  s->faults = f;
  const uint64_t prompt_hash = PromptHash(ids);
  // Temperature 0 is greedy: the seed cannot change the text.
  s->out_seed = o.temperature > 0 ? static_cast<uint64_t>(o.seed) : 0;
  s->out_hash = f.duplicate_of ? PromptHash(ApplyChatTemplate(*f.duplicate_of, tmpl)) : prompt_hash;
  const int64_t eos_at = EosAt(profile, o.ignore_eos, f, prompt_hash, s->out_seed, max_tokens);
  s->pending.id = s->engine_id;
  s->pending.prompt_tokens = std::move(ids);
  s->pending.max_new_tokens = max_tokens;
  s->pending.eos_at_tokens = eos_at;
  // The caches keep the ids of the words this stream sends, so the next turn of a chat, which
  // quotes them as its assistant message, finds them.
  s->pending.output_token = [hash = s->out_hash, seed = s->out_seed](int64_t i) {
    return WordTokenId(OutputWord(hash, seed, i));
  };
  s->eos_at = eos_at;
  s->eos_is_token = spec->llamacpp_stream;
  ChooseVariation(s.get());
  SetChunkHeadAndTail(s.get());
  return s;
}

void SimServer::Impl::HandleChat(evhttp_request* req) {
  const int64_t index = next_index++;
  requests_received.fetch_add(1);
  json body;
  if (!ParseBody(req, &body)) return;
  // Validation, in the order a reader of the error would want to fix things.
  std::string text, error;
  std::vector<ChatMessage> messages;
  if (!MessagesText(body.value("messages", json()), &text, &error, &messages)) {
    ReplyError(req, 400, error);
    return;
  }
  ChatOptions o;
  if (!ParseChatOptions(req, body, &o)) return;

  RequestFaults f = faults.ForRequest(index, text);
  if (f.http_status) {
    ReplyError(
        req, *f.http_status,
        std::string("simulated ") + ReasonPhrase(*f.http_status) + " (capq sim fault http_status)");
    return;
  }

  if (ReplyJsonError200(req, f)) return;
  std::vector<uint32_t> ids = ApplyChatTemplate(messages, tmpl);
  TruncatePrompt(f, &ids);
  const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
  int64_t max_tokens = o.max_tokens;
  if (!FitContext(req, prompt_tokens, &max_tokens)) return;

  std::unique_ptr<Stream> s = NewStream(req, index, o, f, std::move(ids), max_tokens);
  Stream* sp = s.get();
  streams.emplace(sp->engine_id, std::move(s));
  if (sp->conn) WatchConnection(sp);
  if (f.slow_first_byte_ms > 0) {
    DelaySubmit(sp, f.slow_first_byte_ms);
    return;
  }
  SubmitStream(sp);
}

}  // namespace capq::sim
