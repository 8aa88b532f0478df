// The triggers of the faults that change a stream's shape (faults.h): the streaming code
// (server_stream.cc, server_write.cc) asks each one how the frame in hand must look.
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/http_struct.h>

#include <cstring>
#include <utility>

#include "server_impl.h"

namespace capq::sim {
namespace {

constexpr const char* kOtherModelJson = "\"capq-sim-other-model\"";
constexpr const char* kSplitChar = "\xc3\xa9";  // "é"

// Whether the content chunk of tokens [first, first + words) holds token `at`.
bool Holds(const std::optional<int64_t>& at, int64_t first, int64_t words) {
  return at && *at >= first && *at < first + words;
}

// Even numbers in [0, n).
int64_t EvensBelow(int64_t n) { return (n + 1) / 2; }

}  // namespace

void TruncatePrompt(const RequestFaults& f, std::vector<uint32_t>* ids) {
  if (!f.truncate_prompt) return;
  const size_t drop = ids->size() - ids->size() / 4;
  ids->erase(ids->begin(), ids->begin() + static_cast<std::ptrdiff_t>(drop));
}

int64_t HollowWords(const RequestFaults& f, int64_t first, int64_t words) {
  if (!f.hollow_usage) return words;
  return EvensBelow(first + words) - EvensBelow(first);
}

std::string_view SimServer::Impl::ChunkModelJson(const Stream* s) const {
  return s->faults.wrong_model ? std::string_view(kOtherModelJson) : std::string_view(model_json);
}

std::string_view SimServer::Impl::ContentOpen(const Stream* s, int64_t first, int64_t words,
                                              FinishKind finish) const {
  if (finish == FinishKind::kNone && Holds(s->faults.wrong_index_at, first, words)) {
    return s->parts->content_open_index1;
  }
  return s->parts->content_open[static_cast<int>(finish)];
}

void SimServer::Impl::AppendFaultChoices(const Stream* s, int64_t first, int64_t words,
                                         std::string* f) const {
  if (Holds(s->faults.several_choices_at, first, words)) f->append(",{\"index\":1,\"delta\":{}}");
}

void SimServer::Impl::AppendChunkClose(const Stream* s, std::string* f) const {
  if (!s->faults.usage_every_chunk) {
    f->append(s->parts->chunk_close[s->frame_index & 1]);
    return;
  }
  f->append(",\"usage\":").append(UsageJson(s)).append("}");
}

void AppendPromptDetails(const Stream* s, std::string* u) {
  if (s->faults.no_prompt_details) return;
  CachedZero form = CachedZero::kObject;
  if (s->faults.null_prompt_details) {
    form = CachedZero::kNull;
  } else if (!s->impl->counts_reported) {
    form = s->impl->unreported_form;
  } else if (s->cached_tokens == 0) {
    form = s->var.cached_zero;
  }
  switch (form) {
    case CachedZero::kAbsent:
      return;
    case CachedZero::kNull:
      u->append(",\"prompt_tokens_details\":null");
      return;
    case CachedZero::kObject:
      u->append(",\"prompt_tokens_details\":{\"cached_tokens\":");
      AppendInt(u, s->cached_tokens);
      u->push_back('}');
  }
}

void SimServer::Impl::DecorateEvent(const Stream* s) {
  const RequestFaults& f = s->faults;
  if (f.sse_fields) {
    std::string fields = "id: ";
    AppendInt(&fields, s->frame_index);
    fields += "\nevent: message\n";
    frame.insert(kFrameRoom, fields);
    frame += "\nretry: 3000";
  }
  if (f.keepalive_comments) frame.insert(kFrameRoom, ": ping\n\n");
}

void SimServer::Impl::SendAfterDone(Stream* s, VirtNs v) {
  if (s->faults.second_done) WriteFrame(s, "[DONE]", v);
  if (s->faults.data_after_done) WriteFrame(s, s->head + s->tail + s->parts->chunk_close[0], v);
}

bool SimServer::Impl::AppendSplitUtf8(const Stream* s, int64_t first, int64_t words,
                                      std::string* f) const {
  if (!Holds(s->faults.split_utf8_at, first, words)) return false;
  f->append(kSplitChar);
  return true;
}

// Two HTTP chunks through evhttp, each framed on its own, so that the client's reads see the
// first byte of the character without the second.
void SimServer::Impl::SendSplitFrame(Stream* s, VirtNs v) {
  if (!s->req) return;
  FlushStaged();
  frame += "\n\n";
  const size_t cut = frame.find(kSplitChar, kFrameRoom) + 1;
  for (int i = 0; i < frame_count; ++i) {
    if (truth.is_open()) truth.Append(s->id, s->frame_index, v, NowNs(), DueMono(v));
    ++s->frame_index;
  }
  for (const auto& [from, to] : {std::pair{kFrameRoom, cut}, std::pair{cut, frame.size()}}) {
    std::string piece = frame.substr(from, to - from);
    if (s->gzip) EncodeBody(s, &piece, 0);
    evbuffer_add(scratch, piece.data(), piece.size());
    evhttp_send_reply_chunk(s->req, scratch);
    evbuffer_drain(scratch, evbuffer_get_length(scratch));
  }
}

void SimServer::Impl::PrepareFaultReply(Stream* s) {
  evkeyvalq* out = evhttp_request_get_output_headers(s->req);
  if (s->faults.gzip) {
    s->gzip = std::make_unique<internal::GzipStream>();
    if (s->gzip->ok()) {
      evhttp_add_header(out, "Content-Encoding", "gzip");
    } else {
      s->gzip.reset();
    }
  }
  if (s->faults.close_delimited) {
    // evhttp chunks a streamed reply to HTTP/1.1 and ends one to HTTP/1.0 by closing the
    // connection (http.c: evhttp_send_reply_start, and evhttp_send_done, which closes a 1.0
    // connection that did not ask for keep-alive): the reply is made 1.0, as Python's
    // http.server writes every reply by default. Without a keep-alive request header evhttp adds
    // no Content-Length either.
    s->req->minor = 0;
    evhttp_remove_header(evhttp_request_get_input_headers(s->req), "Connection");
    evhttp_remove_header(out, "Keep-Alive");  // the llamacpp dialect announces one otherwise
    evhttp_add_header(out, "Connection", "close");
  }
}

void SimServer::Impl::EncodeBody(Stream* s, std::string* bytes, size_t from) {
  std::string coded;
  s->gzip->Flush(std::string_view(*bytes).substr(from), &coded);
  bytes->replace(from, std::string::npos, coded);
}

std::string SimServer::Impl::BodyCoda(Stream* s) {
  std::string coda;
  s->gzip->Finish(&coda);
  return coda;
}

}  // namespace capq::sim
