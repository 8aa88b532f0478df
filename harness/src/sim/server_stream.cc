// The streaming of a chat reply: the framing a stream draws, its tokens as content chunks (held
// back while its variation says so), the mid-stream faults that act on them, the finish and usage
// chunks, and a non-streamed request's one answer.
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include <charconv>
#include <cstring>
#include <memory>
#include <string>

#include "capq/clock.h"
#include "server_impl.h"

namespace capq::sim {
namespace {

void OnCutWritten(evhttp_connection* conn, void*) {
  // The last chunk before the cut is on the wire: close without the terminating chunk.
  evhttp_connection_free(conn);
}

}  // namespace

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  out->append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

// ---------------------------------------------------------------------------------------------
// Framing

// The dialect's own framing, and what its usage says of cached tokens when the engine was launched
// without reporting them: SGLang null (recorded Hunyuan, cache report off), vLLM no key.
void SimServer::Impl::ChooseFraming() {
  dialect_var = DialectVariation(spec->dialect, profile);
  parts = BuildChunkParts(*spec, dialect_var);
  switch (spec->dialect) {
    case Dialect::kSglang:
      counts_reported = profile.cache_report;
      unreported_form = CachedZero::kNull;
      break;
    case Dialect::kVllm:
      counts_reported = profile.prompt_tokens_details;
      unreported_form = CachedZero::kAbsent;
      break;
    case Dialect::kLlamacpp:
      counts_reported = true;
      break;
  }
}

void SimServer::Impl::ChooseVariation(Stream* s) {
  s->var = opts.varied ? DrawVariation(opts.variation_seed, s->index) : dialect_var;
  s->parts = &parts;
  if (s->var == dialect_var) return;
  s->own_parts = std::make_unique<ChunkParts>(BuildChunkParts(*spec, s->var));
  s->parts = s->own_parts.get();
}

void SimServer::Impl::SetChunkHeadAndTail(Stream* s) const {
  const std::string shown_id = s->var.empty_id ? "" : s->id;
  std::string created;
  AppendInt(&created, start_unix_ns / 1000000000 + VirtNow() / 1000000000);
  if (spec->llamacpp_stream) {
    s->head = "{\"choices\":[";
    s->tail = "],\"created\":" + created + ",\"id\":\"" + shown_id +
              "\",\"model\":" + std::string(ChunkModelJson(s)) + ",\"system_fingerprint\":\"" +
              kSimFingerprint + "\",\"object\":\"chat.completion.chunk\"";
    return;
  }
  s->head = "{\"id\":\"" + shown_id +
            "\",\"object\":\"chat.completion.chunk\",\"created\":" + created +
            ",\"model\":" + std::string(ChunkModelJson(s)) + ",\"choices\":[";
  s->tail = "]";
}

// ---------------------------------------------------------------------------------------------
// Tokens

void SimServer::Impl::CountFirstToken(Stream* s, VirtNs t) {
  if (s->first_token_v >= 0) return;
  s->first_token_v = t;
  const double ttft_s = static_cast<double>(t - s->arrival_v) / 1e9;
  size_t b = 0;
  while (b < kTtftBuckets && ttft_s > kTtftBucketsS[b]) ++b;
  ++ttft_counts[b];
  ttft_sum_s += ttft_s;
  ++ttft_count;
}

void SimServer::Impl::OnTokens(Stream* s, const EngineEvent& e) {
  const int64_t first = s->emitted;
  const int64_t n = e.tokens;
  s->emitted = first + n;
  CountFirstToken(s, e.t);
  if (s->stalled || !s->req) return;
  if (!s->streaming) {
    // llama.cpp writes no text for a sampled EOS (conformance 60, 61).
    const bool eos_here = s->eos_is_token && s->eos_at > first && s->eos_at <= first + n;
    if (!s->faults.empty_deltas) {
      AppendOutputWords(s->out_hash, s->out_seed, first, eos_here ? n - 1 : n, &s->content);
    }
    return;
  }
  if (s->held == 0) s->held_first = first;
  s->held += n;
  if (!HoldBack(s)) SendHeld(s, e.t, FinishKind::kNone);
}

// Whether the tokens produced so far wait for a later chunk (variations.h): the first token always
// goes out at once; then a stream interval waits for its count, a slow reader's stream merges
// what is pending while its socket still holds unsent bytes, and the last text waits for the
// finish chunk.
bool SimServer::Impl::HoldBack(const Stream* s) const {
  const StreamVariation& v = s->var;
  if (v.last_text_on_finish &&
      (s->emitted >= s->max_tokens || (s->eos_at > 0 && s->emitted >= s->eos_at))) {
    return true;
  }
  if (s->held_first == 0) return false;
  if (s->held < v.tokens_per_chunk) return true;
  return v.merge_when_slow && s->bev && evbuffer_get_length(bufferevent_get_output(s->bev)) > 0;
}

void SimServer::Impl::BeginRoleFrame(Stream* s) {
  s->role_sent = true;
  BeginFrame().append(s->head).append(s->parts->role_choice).append(s->tail);
  AppendChunkClose(s, &frame);
}

void SimServer::Impl::SendRole(Stream* s, VirtNs v) {
  if (s->role_sent || !s->req) return;
  if (!s->headers_sent) StartReply(s);
  BeginRoleFrame(s);
  SendFrame(s, v);
}

bool SimServer::Impl::SendHeld(Stream* s, VirtNs v, FinishKind finish) {
  const int64_t first = s->held_first;
  const int64_t n = s->held;
  s->held_first += n;
  s->held = 0;
  // llama.cpp counts a sampled EOS as a completion token but writes no text for it, so a natural
  // stop has one content delta fewer than completion_tokens (conformance 60, 61).
  const bool eos_here = s->eos_is_token && s->eos_at > first && s->eos_at <= first + n;
  const int64_t words = eos_here ? n - 1 : n;
  if (!s->headers_sent) StartReply(s);
  bool role_pending = false;
  if (!s->role_sent) {
    BeginRoleFrame(s);
    // llama.cpp writes the role chunk with the first content delta (ts/server-task.cpp:1160-1166).
    // A fault with after_tokens 0 acts right after the role chunk, before any content.
    role_pending = spec->llamacpp_stream && words > 0 && !FaultDue(s->faults, first);
    if (!role_pending && !SendAndApplyFaults(s, first, v)) return false;
  }
  const int64_t text_words = HollowWords(s->faults, first, words);
  if (text_words == 0 && finish == FinishKind::kNone) {
    if (role_pending) return SendAndApplyFaults(s, first, v);
    return true;
  }
  std::string& f = role_pending ? NextFrame() : BeginFrame();
  f.append(s->head).append(ContentOpen(s, first, words, finish));
  if (!s->faults.empty_deltas) AppendOutputWords(s->out_hash, s->out_seed, first, text_words, &f);
  const bool split = AppendSplitUtf8(s, first, words, &f);
  f.append(s->parts->content_close[static_cast<int>(finish)]);
  AppendFaultChoices(s, first, words, &f);
  f.append(s->tail);
  AppendChunkClose(s, &f);
  if (split) {
    SendSplitFrame(s, v);
    return true;
  }
  return SendAndApplyFaults(s, first + n, v);
}

// ---------------------------------------------------------------------------------------------
// Mid-stream faults

// Whether a mid-stream fault acts once `count` output tokens are out.
bool FaultDue(const RequestFaults& f, int64_t count) {
  auto due = [count](const std::optional<int64_t>& at) { return at && count >= *at; };
  return due(f.error_frame_after) || due(f.cut_after) || due(f.stall_after) ||
         due(f.malformed_after);
}

// Sends the frame built in `frame` for a stream whose `count` output tokens are now out, then acts
// on the mid-stream faults whose threshold `count` reached. Returns false if the stream is gone or
// silent.
bool SimServer::Impl::SendAndApplyFaults(Stream* s, int64_t count, VirtNs v) {
  const RequestFaults& f = s->faults;
  const bool error_now = f.error_frame_after && count >= *f.error_frame_after;
  const bool cut_now = !error_now && f.cut_after && count >= *f.cut_after;
  // The cut waits until this chunk is on the wire, so the client sees exactly what came before.
  SendFrame(s, v, cut_now ? OnCutWritten : nullptr);
  if (error_now) {
    SendErrorFrameAndEnd(s, 500, "simulated mid-stream error (capq sim fault error_frame)", v);
    return false;
  }
  if (cut_now) {
    Forget(s);
    return false;
  }
  if (f.stall_after && count >= *f.stall_after) {
    s->stalled = true;
    return false;
  }
  if (f.malformed_after && !s->malformed_sent && count >= *f.malformed_after) {
    s->malformed_sent = true;
    WriteFrame(s, s->head + "{\"index\":0,\"delta\":{\"content\":\"trunc", v);
  }
  return true;
}

void SimServer::Impl::SendErrorFrameAndEnd(Stream* s, int status, const std::string& message,
                                           VirtNs v) {
  std::string payload = json{{"error", ErrorInner(spec->errors, status, message)}}.dump();
  WriteFrame(s, payload, v);
  WriteFrame(s, "[DONE]", v);
  EndReply(s);
}

// ---------------------------------------------------------------------------------------------
// The end of a request

void SimServer::Impl::OnFinished(Stream* s, const EngineEvent& e) {
  const char* reason = e.finish_reason ? e.finish_reason : "length";
  if (s->stalled) return;  // stays open and silent until the client leaves or the server stops
  if (!s->req) {
    Forget(s);
    return;
  }
  if (!s->streaming) {
    AnswerWhole(s, reason, e.t);
    return;
  }
  if (!SendFinishAndUsage(s, reason, e.t)) return;
  if (!s->faults.missing_done) WriteFrame(s, "[DONE]", e.t);
  SendAfterDone(s, e.t);
  // Ending a reply (terminating chunk, connection bookkeeping) waits until every stream's frames
  // of this step are handed over: it is not on any client's schedule, their chunks are.
  finished.push_back(s);
}

// The held text and the finish chunk, then the usage chunk when it was asked for. False if a
// fault ended the stream on the held text.
bool SimServer::Impl::SendFinishAndUsage(Stream* s, const char* reason, VirtNs t) {
  if (!s->headers_sent) StartReply(s);
  const FinishKind kind =
      std::strcmp(reason, "stop") == 0 ? FinishKind::kStop : FinishKind::kLength;
  if (s->var.last_text_on_finish) {
    // The held text rides on the finish chunk (vLLM), then the usage chunk on its own.
    if (!SendHeld(s, t, kind)) return false;
    if (s->include_usage) {
      BeginFrame();
      AppendUsageChunk(s, t);
      SendFrame(s, t);
    }
    return true;
  }
  if (s->held > 0 && !SendHeld(s, t, FinishKind::kNone)) return false;
  std::string& fin = BeginFrame();
  fin.append(s->head).append(s->parts->finish_choice[static_cast<int>(kind)]).append(s->tail);
  // Without a usage chunk llama.cpp puts the timings on the finish chunk (recording 16).
  if (spec->usage_timings && !s->include_usage) {
    fin.append(",\"timings\":").append(TimingsJson(s, t));
  }
  AppendChunkClose(s, &fin);
  if (s->include_usage) {
    // llama.cpp writes the finish and usage chunks together (recording 14).
    if (!spec->llamacpp_stream) {
      SendFrame(s, t);
      BeginFrame();
    } else {
      NextFrame();
    }
    AppendUsageChunk(s, t);
  }
  SendFrame(s, t);
  return true;
}

// The usage chunk in `frame`, after whatever it holds: choices [] and the usage (llama.cpp: and
// the timings).
void SimServer::Impl::AppendUsageChunk(Stream* s, VirtNs t) {
  frame.append(s->head).append(s->tail).append(",\"usage\":").append(UsageJson(s));
  if (spec->usage_timings) frame.append(",\"timings\":").append(TimingsJson(s, t));
  frame.append("}");
}

std::string SimServer::Impl::UsageJson(const Stream* s) const {
  const int64_t completion = s->emitted + s->faults.usage_off_by;
  std::string u = "{\"prompt_tokens\":";
  AppendInt(&u, s->prompt_tokens);
  u += ",\"total_tokens\":";
  AppendInt(&u, s->prompt_tokens + completion);
  u += ",\"completion_tokens\":";
  AppendInt(&u, completion);
  AppendPromptDetails(s, &u);
  if (spec->null_keys) u += ",\"reasoning_tokens\":0";
  u += '}';
  return u;
}

// llama.cpp's per-request timings, in virtual milliseconds: the prompt from the slot's start to
// the first token, the prediction from there to the end (ts/server-task.cpp:530-546). With a
// single predicted token llama.cpp reports 0.001 ms, hence 1e6 tokens/s.
std::string SimServer::Impl::TimingsJson(const Stream* s, VirtNs finish_v) const {
  const VirtNs start = s->admitted_v >= 0 ? s->admitted_v : s->arrival_v;
  const bool first = s->first_token_v >= 0;
  const double prompt_ms = first ? static_cast<double>(s->first_token_v - start) / 1e6 : 0;
  double predicted_ms = first ? static_cast<double>(finish_v - s->first_token_v) / 1e6 : 0;
  if (s->emitted > 0 && predicted_ms <= 0) predicted_ms = 0.001;
  const int64_t prompt_n = s->prompt_tokens - s->cached_tokens;
  const json t = {
      {"cache_n", s->cached_tokens},
      {"prompt_n", prompt_n},
      {"prompt_ms", prompt_ms},
      {"prompt_per_token_ms", prompt_n > 0 ? prompt_ms / static_cast<double>(prompt_n) : 0.0},
      {"prompt_per_second",
       prompt_ms > 0 ? static_cast<double>(prompt_n) * 1000.0 / prompt_ms : 0.0},
      {"predicted_n", s->emitted},
      {"predicted_ms", predicted_ms},
      {"predicted_per_token_ms",
       s->emitted > 0 ? predicted_ms / static_cast<double>(s->emitted) : 0.0},
      {"predicted_per_second",
       predicted_ms > 0 ? static_cast<double>(s->emitted) * 1000.0 / predicted_ms : 0.0}};
  return t.dump();
}

// A non-streamed request's one answer, as its faults shape it.
void SimServer::Impl::AnswerWhole(Stream* s, const char* reason, VirtNs t) {
  const RequestFaults& f = s->faults;
  if (f.cut_after) {
    CutNow(s);
    return;
  }
  if (f.stall_after) {
    s->stalled = true;
    return;
  }
  evhttp_request* req = s->req;
  if (f.error_frame_after) {
    Forget(s);
    Reply(req, 500, ErrorBody(spec->errors, 500, "simulated error (capq sim fault error_frame)"),
          "application/json");
    return;
  }
  std::string body = NonStreamBody(s, reason, t);
  if (f.malformed_after) body.resize(body.size() / 2);
  if (truth.is_open()) truth.Append(s->id, s->frame_index, t, NowNs(), DueMono(t));
  Forget(s);
  Reply(req, 200, body, "application/json");
}

std::string SimServer::Impl::NonStreamBody(const Stream* s, const char* finish_reason,
                                           VirtNs finish_v) const {
  json msg = {{"role", "assistant"}, {"content", s->content}};
  if (spec->null_keys) {
    msg["reasoning_content"] = nullptr;
    msg["tool_calls"] = nullptr;
  }
  json choice = {{"index", 0}, {"message", msg}, {"finish_reason", finish_reason}};
  if (spec->logprobs_key) choice["logprobs"] = nullptr;
  if (spec->null_keys) choice["matched_stop"] = nullptr;
  json body = {{"id", s->id},
               {"object", "chat.completion"},
               {"created", start_unix_ns / 1000000000 + s->arrival_v / 1000000000},
               {"model", profile.served_model_name},
               {"choices", json::array({choice})}};
  if (spec->llamacpp_stream) body["system_fingerprint"] = kSimFingerprint;
  std::string out = body.dump();
  out.pop_back();
  out += ",\"usage\":";
  out += UsageJson(s);
  if (spec->usage_timings) out += ",\"timings\":" + TimingsJson(s, finish_v);
  out += '}';
  return out;
}

void SimServer::Impl::OnRejected(Stream* s, const EngineEvent& e) {
  const std::string message = std::string("request can never be scheduled: ") +
                              (e.finish_reason ? e.finish_reason : "too_long") + " (prompt " +
                              std::to_string(s->prompt_tokens) + " + max_tokens " +
                              std::to_string(s->max_tokens) + " tokens; token pool " +
                              std::to_string(profile.max_total_tokens) + ", context " +
                              std::to_string(profile.context_length) + ")";
  if (!s->req || s->stalled) {
    Forget(s);
    return;
  }
  if (s->headers_sent) {
    SendErrorFrameAndEnd(s, 400, message, e.t);
    return;
  }
  evhttp_request* req = s->req;
  Forget(s);
  ReplyError(req, 400, message);
}

}  // namespace capq::sim
