// How a stream's frames reach its socket: the reply's headers, each frame framed as an HTTP chunk
// and staged so that all of one stream's frames from one engine event leave in one write, the
// truth log of when each was written, and the reply's end.
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>

#include <string>
#include <string_view>

#include "capq/clock.h"
#include "server_impl.h"

namespace capq::sim {

void SimServer::Impl::StartReply(Stream* s) {
  if (s->headers_sent || !s->req) return;
  evkeyvalq* h = evhttp_request_get_output_headers(s->req);
  AddDialectHeaders(h, 200);
  for (int i = 0; i < spec->sse_header_count; ++i) {
    evhttp_add_header(h, spec->sse_headers[i].name, spec->sse_headers[i].value);
  }
  evhttp_add_header(h, "Content-Type", spec->sse_content_type);
  if (s->faults.gzip || s->faults.close_delimited) PrepareFaultReply(s);
  evhttp_send_reply_start(s->req, 200, "OK");
  s->headers_sent = true;
  // Chunked unless the reply is HTTP/1.0 (the client's version, or the close_delimited fault):
  // then the body ends when the connection closes.
  s->chunked = s->req->chunked;
  if (s->conn) s->bev = evhttp_connection_get_bufferevent(s->conn);
  WatchWrites(s);
}

void SimServer::Impl::WatchWrites(Stream* s) {
  if (!truth.is_open() || !s->bev || s->drain_watch) return;
  s->drain_watch = evbuffer_add_cb(bufferevent_get_output(s->bev), &Impl::OnDrained, s);
}

// libevent calls this right after each write(2) from the connection's output (not deferred:
// evhttp's bufferevents defer no callbacks), with the bytes it took out.
void SimServer::Impl::OnDrained(evbuffer*, const evbuffer_cb_info* info, void* arg) {
  auto* s = static_cast<Stream*>(arg);
  if (info->n_deleted == 0) return;
  s->drained += info->n_deleted;
  const MonoNs now = NowNs();
  Impl* impl = s->impl;
  while (!s->unwritten.empty() && s->unwritten.front().written_at <= s->drained) {
    const Stream::Unwritten& u = s->unwritten.front();
    impl->truth.Append(s->id, u.index, u.virtual_ns, u.handover_ns, impl->DueMono(u.virtual_ns),
                       now);
    s->unwritten.pop_front();
  }
}

void SimServer::Impl::LogUnwritten(Stream* s, MonoNs written_ns) {
  for (const Stream::Unwritten& u : s->unwritten) {
    truth.Append(s->id, u.index, u.virtual_ns, u.handover_ns, DueMono(u.virtual_ns), written_ns);
  }
  s->unwritten.clear();
  if (s->drain_watch && s->bev)
    evbuffer_remove_cb_entry(bufferevent_get_output(s->bev), s->drain_watch);
  s->drain_watch = nullptr;
}

void SimServer::Impl::WriteFrame(Stream* s, std::string_view payload, VirtNs v,
                                 void (*done_cb)(evhttp_connection*, void*)) {
  BeginFrame().append(payload);
  SendFrame(s, v, done_cb);
}

void SimServer::Impl::SendFrame(Stream* s, VirtNs v, void (*done_cb)(evhttp_connection*, void*)) {
  if (!s->req) return;
  if (s->faults.sse_fields || s->faults.keepalive_comments) DecorateEvent(s);
  frame += "\n\n";
  if (s->gzip) EncodeBody(s, &frame, kFrameRoom);
  const size_t payload_len = frame.size() - kFrameRoom;
  if (done_cb || !s->bev) {
    FlushStaged();
    for (int i = 0; i < frame_count; ++i) {
      if (truth.is_open()) truth.Append(s->id, s->frame_index, v, NowNs(), DueMono(v));
      ++s->frame_index;
    }
    evbuffer_add(scratch, frame.data() + kFrameRoom, payload_len);
    evhttp_send_reply_chunk_with_cb(s->req, scratch, done_cb, nullptr);
    evbuffer_drain(scratch, evbuffer_get_length(scratch));
    return;
  }
  // The hot path frames the chunk itself and stages it; all frames of one stream from one engine
  // event (a step's tokens, or content + finish + usage + [DONE]) leave in one write. evhttp's own
  // chunk call would format the size with printf and re-register callbacks for every frame; evhttp
  // enabled writing when it sent the headers, so bytes appended to the output go out the same way.
  size_t start = kFrameRoom;
  if (s->chunked) {
    frame += "\r\n";
    char hex[16];
    size_t n = 0;
    for (size_t len = payload_len; len > 0 || n == 0; len >>= 4) {
      hex[n++] = "0123456789abcdef"[len & 15];
    }
    frame[--start] = '\n';
    frame[--start] = '\r';
    for (size_t i = 0; i < n; ++i) frame[--start] = hex[i];  // least significant digit last
  }
  if (staged_stream && staged_stream != s) FlushStaged();
  staged_stream = s;
  staged.append(frame, start, std::string::npos);
  for (int i = 0; i < frame_count; ++i) {
    staged_truth.push_back({s->frame_index, v});
    ++s->frame_index;
  }
}

void SimServer::Impl::FlushStaged() {
  Stream* s = staged_stream;
  if (!s) return;
  staged_stream = nullptr;
  if (s->req && s->bev) {
    const MonoNs now = NowNs();  // right before the hand-over
    bufferevent_write(s->bev, staged.data(), staged.size());
    if (truth.is_open()) {
      // Its last byte is out once everything now queued before it is drained too.
      const uint64_t at = s->drained + evbuffer_get_length(bufferevent_get_output(s->bev));
      for (const StagedTruth& t : staged_truth) {
        if (s->drain_watch) {
          s->unwritten.push_back({at, t.index, t.v, now});
        } else {
          truth.Append(s->id, t.index, t.v, now, DueMono(t.v));
        }
      }
    }
    WriteNow(s->bev);
  }
  staged.clear();
  staged_truth.clear();
}

// A server writes a frame when it hands it over, as llama.cpp's and vLLM's do, not on its loop's
// next turn: left to libevent, a step's frames for 256 streams would wait until all 256 were staged
// and then each for its socket's writable event. What evhttp queued ahead of the frame (a reply's
// headers) goes with it: evhttp waits on no write of a reply until its end, and the staged path is
// never used after that (EndReply writes what is staged first). A socket that takes only part
// leaves the rest to libevent. The bufferevent keeps its output's front frozen between its own
// writes, so it is thawed for this one.
void SimServer::Impl::WriteNow(bufferevent* bev) {
  evbuffer* out = bufferevent_get_output(bev);
  evbuffer_unfreeze(out, 1);
  (void)evbuffer_write(out, bufferevent_getfd(bev));
  evbuffer_freeze(out, 1);
}

// An SSE comment is no event: it goes to the socket as its own HTTP chunk, outside the truth log.
void SimServer::Impl::SendComment(Stream* s) {
  if (!s->req || !s->bev || s->gzip) return;
  FlushStaged();
  static constexpr char kPing[] = ": ping\n\n";
  const std::string body = s->chunked ? "8\r\n" + std::string(kPing) + "\r\n" : kPing;
  bufferevent_write(s->bev, body.data(), body.size());
  WriteNow(s->bev);
}

void SimServer::Impl::EndReply(Stream* s) {
  evhttp_request* req = s->req;
  const std::string coda = s->gzip ? BodyCoda(s) : std::string();
  Forget(s);  // writes what is staged for this stream: the coda goes after it
  if (!req) return;
  if (!coda.empty()) {
    evbuffer_add(scratch, coda.data(), coda.size());
    evhttp_send_reply_chunk(req, scratch);
    evbuffer_drain(scratch, evbuffer_get_length(scratch));
  }
  IdleOnceWritten(req);
  evhttp_send_reply_end(req);
}

// The keep-alive timeout is for a connection that waits for its next request. evhttp times a
// connection's reads and writes with one value, so armed while any byte of the reply is still
// queued (the terminating chunk alone, behind a socket a lagging reader keeps full) it would time
// that write out and cut the stream with all its tokens generated; a real server writes on for as
// long as the client reads. evhttp calls a request's completion callback once the whole reply has
// left the connection's output, just before it waits for the next request: the timeout is armed
// there.
void SimServer::Impl::IdleOnceWritten(evhttp_request* req) {
  evhttp_request_set_on_complete_cb(req, &Impl::OnReplyWritten, this);
}

void SimServer::Impl::OnReplyWritten(evhttp_request* req, void* arg) {
  evhttp_connection* conn = evhttp_request_get_connection(req);
  if (conn) evhttp_connection_set_timeout_tv(conn, &static_cast<Impl*>(arg)->idle_timeout);
}

}  // namespace capq::sim
