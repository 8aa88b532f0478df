#include "capq/measurement/decode.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "chunk_scan.h"

namespace capq {
namespace {

// A short, printable, valid-UTF-8 rendering of server bytes for error messages.
std::string Excerpt(std::string_view s, size_t max_bytes = 120) {
  std::string out;
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

std::string Ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

const nlohmann::json* Field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> IntField(const nlohmann::json& j, const char* key) {
  const nlohmann::json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_unsigned()) return static_cast<int64_t>(v->get<uint64_t>());
  if (v->is_number_float()) return static_cast<int64_t>(v->get<double>());
  return std::nullopt;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// A response with neither a Content-Length nor chunked framing ends its body by closing the
// connection (RFC 9112 section 6.3, rule 8), so a stream cut short ends as cleanly as a whole one.
bool CloseDelimited(const RawRecord& r) {
  if (r.response_headers.empty()) return false;  // nothing recorded to tell
  for (const std::string& h : r.response_headers) {
    if (StartsWithNoCase(h, "content-length:")) return false;
    if (StartsWithNoCase(h, "transfer-encoding:")) return false;
  }
  return true;
}

// What a body built at release carried (RawRecord::request_body): each message's role and the
// SHA-256 of its content.
void ReadSentMessages(const std::string& body, RequestResult* out) {
  if (body.empty()) return;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) {
    out->sent_messages_error = "the body sent is not a chat with messages";
    return;
  }
  for (const auto& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      out->sent_messages_error = "a message sent has no string role and content";
      return;
    }
    out->sent_messages.push_back(m["role"].get<std::string>() + ":" +
                                 Sha256Hex(m["content"].get<std::string>()));
  }
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) {
      return false;  // overlong
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  return LowerHex(std::string_view(reinterpret_cast<const char*>(md), len));
}

std::string LowerHex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  }
  return out;
}

StreamDecoder::StreamDecoder(MonoNs start_ns, Keep keep) : start_ns_(start_ns), keep_(keep) {}

// One event of the stream: its text, usage and errors. Errors name the event by number and time.
void StreamDecoder::Feed(const SseEvent& ev) {
  ++events_;
  // The kernel's stamp where it was proven, else the read's own; never before the bytes (loadgen.h:
  // the wake stamp may be).
  const MonoNs t = ev.stamp_ns();
  if (events_ == 1) out_.first_event_ns = t - start_ns_;
  const auto where = [&] { return Where(t); };
  if (out_.saw_done) {
    event_errors_.push_back(where() + ": data after [DONE]: " + Excerpt(ev.data));
    return;
  }
  if (ev.data == "[DONE]") {
    out_.saw_done = true;
    return;
  }
  if (ev.truncated) {
    event_errors_.push_back(where() + ": truncated at " + std::to_string(ev.data.size()) +
                            " bytes");
    return;
  }
  int64_t text_bytes = 0;
  if (!FeedScanned(ev.data, &text_bytes) && !FeedParsed(ev, t, &text_bytes)) return;
  ++out_.chunks;
  if (text_bytes > 0) {
    ++out_.nonempty_chunks;
    if (!out_.ttft_ns) {
      out_.ttft_ns = t - start_ns_;
      out_.first_token_arrival_ns = ev.arrival_ns;
    }
    if (last_text_ns_ != 0 && keep_ == Keep::kAll) {
      out_.text_gaps_ms.push_back(static_cast<float>(NsToMs(t - last_text_ns_)));
    }
    last_text_ns_ = t;
  }
}

bool StreamDecoder::FeedScanned(std::string_view data, int64_t* text_bytes) {
  // Reused from chunk to chunk: the decoders of one thread (the recorder's, the read-back's) run
  // one at a time.
  thread_local internal::ChunkScratch scratch;
  internal::ChunkFacts f;
  if (!internal::ScanChunk(data, &scratch, &f)) return false;
  NoteModel(f.model);
  for (size_t i = 0; i < 3; ++i) {
    if (f.texts[i].empty()) continue;
    *text_bytes += static_cast<int64_t>(f.texts[i].size());
    AppendText(f.texts[i], /*content=*/i == 2);
  }
  if (f.finish_reason) out_.finish_reason.assign(*f.finish_reason);
  if (f.usage) {
    usage_seen_ = true;
    if (f.prompt_tokens) out_.prompt_tokens = f.prompt_tokens;
    if (f.completion_tokens) out_.completion_tokens = f.completion_tokens;
    if (f.cached_tokens) out_.cached_tokens = f.cached_tokens;
  }
  if (f.cache_n && !out_.cached_tokens) out_.cached_tokens = f.cache_n;
  return true;
}

bool StreamDecoder::FeedParsed(const SseEvent& ev, MonoNs t, int64_t* text_bytes) {
  const auto where = [&] { return Where(t); };
  nlohmann::json j = nlohmann::json::parse(ev.data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    event_errors_.push_back(where() + ": " +
                            (j.is_discarded() ? "malformed JSON" : "not a JSON object") + " (" +
                            std::to_string(ev.data.size()) + " bytes): " + Excerpt(ev.data));
    return false;
  }
  if (const nlohmann::json* err = Field(j, "error")) {
    std::string msg;
    if (const nlohmann::json* m = Field(*err, "message"); m != nullptr && m->is_string()) {
      msg = m->get<std::string>();
    } else {
      msg = err->dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    }
    event_errors_.push_back(where() + ": error frame: " + Excerpt(msg, 300));
    return false;
  }
  const nlohmann::json* model = Field(j, "model");
  NoteModel(model && model->is_string() ? std::string_view(model->get_ref<const std::string&>())
                                        : std::string_view());
  *text_bytes = FeedChoices(j, t);
  FeedUsage(j);
  return true;
}

void StreamDecoder::NoteModel(std::string_view named) {
  if (std::find(out_.models.begin(), out_.models.end(), named) == out_.models.end()) {
    out_.models.emplace_back(named);
  }
}

void StreamDecoder::AppendText(std::string_view s, bool content) {
  (content ? out_.content_bytes : out_.reasoning_bytes) += static_cast<int64_t>(s.size());
  digest_.Append(s);
  if (content) content_digest_.Append(s);
  if (keep_ == Keep::kAll) {
    text_ += s;
    if (content) content_ += s;
  }
}

std::string StreamDecoder::Where(MonoNs arrival_ns) const {
  return "event #" + std::to_string(events_) + " at +" + Ms(arrival_ns - start_ns_);
}

// The chunk's choices: its text (returned: bytes of content and reasoning) and finish reason.
int64_t StreamDecoder::FeedChoices(const nlohmann::json& j, MonoNs arrival_ns) {
  const auto where = [&] { return Where(arrival_ns); };
  const nlohmann::json* choices = Field(j, "choices");
  if (choices != nullptr && !choices->is_array()) {
    event_errors_.push_back(where() + ": 'choices' is not an array");
    return 0;
  }
  if (choices == nullptr) return 0;
  // One completion was asked for (n = 1): a second choice or another index is not its text.
  if (choices->size() > 1) {
    event_errors_.push_back(where() + ": " + std::to_string(choices->size()) +
                            " choices in one chunk (one was asked for)");
  }
  int64_t text_bytes = 0;
  for (const nlohmann::json& choice : *choices) {
    if (auto index = IntField(choice, "index"); index && *index != 0) {
      event_errors_.push_back(where() + ": choice index " + std::to_string(*index) + " (want 0)");
    }
    const nlohmann::json* delta = Field(choice, "delta");
    if (delta != nullptr && delta->is_object()) {
      // reasoning_content (SGLang, older vLLM), reasoning (newer vLLM), then content.
      for (const char* key : {"reasoning_content", "reasoning", "content"}) {
        const nlohmann::json* v = Field(*delta, key);
        if (v == nullptr) continue;
        if (!v->is_string()) {
          event_errors_.push_back(where() + ": delta." + key + " is not a string");
          continue;
        }
        const std::string& s = v->get_ref<const std::string&>();
        if (s.empty()) continue;
        text_bytes += static_cast<int64_t>(s.size());
        AppendText(s, /*content=*/key[0] == 'c');
      }
    }
    if (const nlohmann::json* fr = Field(choice, "finish_reason")) {
      if (fr->is_string()) {
        out_.finish_reason = fr->get<std::string>();
      } else {
        event_errors_.push_back(where() + ": finish_reason is not a string");
      }
    }
  }
  return text_bytes;
}

void StreamDecoder::FeedUsage(const nlohmann::json& j) {
  if (const nlohmann::json* usage = Field(j, "usage"); usage != nullptr && usage->is_object()) {
    // With continuous usage stats every chunk carries usage: the last one is the total.
    usage_seen_ = true;
    if (auto v = IntField(*usage, "prompt_tokens")) out_.prompt_tokens = v;
    if (auto v = IntField(*usage, "completion_tokens")) out_.completion_tokens = v;
    if (const nlohmann::json* d = Field(*usage, "prompt_tokens_details")) {
      if (auto v = IntField(*d, "cached_tokens")) out_.cached_tokens = v;
    }
  }
  if (const nlohmann::json* timings = Field(j, "timings"); timings != nullptr) {
    // llama.cpp: prompt tokens served from the slot's cache.
    if (auto v = IntField(*timings, "cache_n"); v && !out_.cached_tokens) out_.cached_tokens = v;
  }
}

// The record's own facts (status, transport, framing) first, then what the events said.
RequestResult StreamDecoder::Finish(const RawRecord& r) {
  RequestResult out = std::move(out_);
  ReadSentMessages(r.request_body, &out);
  out.id = r.id;
  out.phase = r.phase;
  out.index = r.index;
  out.http_status = r.http_status;
  out.cancelled = r.cancelled;
  out.timed_out = r.timed_out;
  out.stalled = r.stalled;
  out.cancelled_by_harness = r.cancelled_by_harness;
  out.transport_error = r.transport_error;
  out.start_ns = r.actual_send_ns;
  out.end_ns = r.end_ns;
  if (r.actual_send_ns == 0) {
    out.errors.push_back("never sent: " + (r.transport_error.empty() ? std::string("no send time")
                                                                     : Excerpt(r.transport_error)));
    out.output_sha256 = Sha256Hex("");
    out.content_sha256 = out.output_sha256;
    return out;
  }
  out.scheduling_lag_ns = r.actual_send_ns - r.intended_send_ns;
  if (r.first_byte_ns > 0) out.ttfb_ns = r.first_byte_ns - r.actual_send_ns;
  if (r.end_ns > 0) out.e2e_ns = r.end_ns - r.actual_send_ns;
  if (!r.transport_error.empty()) {
    out.errors.push_back((r.timed_out ? "timed out: " : "transport error: ") +
                         Excerpt(r.transport_error, 300));
  }
  if (r.http_status != 200) {
    std::string msg = "HTTP status " + std::to_string(r.http_status);
    if (!r.body.empty()) msg += ": " + Excerpt(r.body, 300);
    out.errors.push_back(msg);
  }
  const bool is_sse = r.content_type.rfind("text/event-stream", 0) == 0 ||
                      r.content_type.rfind("Text/Event-Stream", 0) == 0 || events_ > 0;
  if (r.http_status == 200 && !is_sse) {
    out.errors.push_back("response is not an SSE stream (content-type '" + Excerpt(r.content_type) +
                         "', " + std::to_string(r.body_bytes) + " body bytes)");
  }
  if (r.sse_overflow) out.errors.push_back("an SSE event or line exceeded the framer's size cap");
  if (r.sse_unterminated > 0) {
    out.errors.push_back("the stream ended inside an SSE event (no blank line after it)");
  }
  for (std::string& e : event_errors_) out.errors.push_back(std::move(e));
  if (r.http_status == 200 && is_sse) {
    if (!out.saw_done) {
      out.errors.push_back(std::string("the stream ended without data: [DONE]") +
                           (CloseDelimited(r)
                                ? " (a body with neither length nor chunked framing, ended by the "
                                  "server's close: a cut reads the same)"
                                : ""));
    }
    if (!usage_seen_) {
      out.errors.push_back("no usage object in the stream (server token counts unknown)");
    } else if (!out.completion_tokens) {
      out.errors.push_back("usage without completion_tokens");
    }
  }
  out.output_utf8_bytes = digest_.bytes();
  out.output_valid_utf8 = digest_.valid_utf8();
  if (!out.output_valid_utf8) out.errors.push_back("the streamed text is not valid UTF-8");
  out.output_sha256 = digest_.FinishSha256Hex();
  out.content_sha256 = content_digest_.FinishSha256Hex();
  out.output_text = std::move(text_);
  out.content_text = std::move(content_);
  return out;
}

RequestResult DecodeRecord(const RawRecord& r) {
  StreamDecoder d(r.actual_send_ns);
  if (r.actual_send_ns != 0) {
    for (const SseEvent& ev : r.events) d.Feed(ev);
  }
  return d.Finish(r);
}

nlohmann::json RequestResultToJson(const RequestResult& r) {
  auto opt = [](const std::optional<int64_t>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json j;
  j["id"] = r.id;
  j["phase"] = PhaseName(r.phase);
  j["index"] = r.index;
  j["http_status"] = r.http_status;
  j["cancelled"] = r.cancelled;
  j["timed_out"] = r.timed_out;
  j["stalled"] = r.stalled;
  j["cancelled_by_harness"] = r.cancelled_by_harness;
  j["transport_error"] = Excerpt(r.transport_error, 1000);
  j["start_ns"] = r.start_ns;
  j["end_ns"] = r.end_ns;
  j["scheduling_lag_ns"] = r.scheduling_lag_ns;
  j["ttft_ns"] = opt(r.ttft_ns);
  j["ttfb_ns"] = opt(r.ttfb_ns);
  j["first_event_ns"] = opt(r.first_event_ns);
  j["e2e_ns"] = opt(r.e2e_ns);
  j["prompt_tokens"] = opt(r.prompt_tokens);
  j["completion_tokens"] = opt(r.completion_tokens);
  j["cached_tokens"] = opt(r.cached_tokens);
  j["finish_reason"] = Excerpt(r.finish_reason);
  j["saw_done"] = r.saw_done;
  j["chunks"] = r.chunks;
  j["nonempty_chunks"] = r.nonempty_chunks;
  j["output_utf8_bytes"] = r.output_utf8_bytes;
  j["content_bytes"] = r.content_bytes;
  j["reasoning_bytes"] = r.reasoning_bytes;
  j["output_valid_utf8"] = r.output_valid_utf8;
  j["output_sha256"] = r.output_sha256;
  j["models"] = r.models;
  j["errors"] = r.errors;
  return j;
}

void CountFromIntendedSend(RequestResult* r) {
  const MonoNs lag = r->scheduling_lag_ns;
  if (r->start_ns == 0 || lag == 0) return;
  r->start_ns -= lag;
  for (std::optional<int64_t>* d : {&r->ttft_ns, &r->ttfb_ns, &r->first_event_ns, &r->e2e_ns}) {
    if (*d) **d += lag;
  }
}

}  // namespace capq
