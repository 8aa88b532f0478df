// One stream of the load generator (loadgen_internal.h): its easy handle's options, and the
// callbacks libcurl calls on the loop's thread as its bytes arrive. They stamp first, frame SSE
// (sse.h) and hand the events over to the recorder; nothing here decodes.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "loadgen_internal.h"

namespace capq::internal::loadgen {

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char a = s[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != prefix[i]) return false;
  }
  return true;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// Every connection asks the kernel for receive stamps (receive_stamp.h); one that refuses still
// connects, its events carry the read's own stamp only.
int SockoptCb(void*, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) (void)EnableReceiveStamps(static_cast<int>(fd));
  return CURL_SOCKOPT_OK;
}

size_t HeaderCb(char* data, size_t size, size_t nitems, void* userp) {
  const MonoNs t = NowNs();
  auto* tr = static_cast<Transfer*>(userp);
  RawRecord* rec = tr->rec;
  const size_t n = size * nitems;
  if (rec->first_byte_ns == 0) rec->first_byte_ns = t;
  rec->last_byte_ns = t;
  std::string_view line = Trim(std::string_view(data, n));
  if (StartsWithNoCase(line, "http/")) {
    // A new response (e.g. after "100 Continue"): only the final one's headers are kept.
    rec->response_headers.clear();
    rec->content_type.clear();
  }
  if (line.empty()) return n;
  if (StartsWithNoCase(line, "content-type:")) {
    rec->content_type = std::string(Trim(line.substr(13)));
  }
  rec->response_headers.emplace_back(line);
  return n;
}

// The kernel's stamp for what this transfer's socket has read, where the loop's probe proves it.
MonoNs KernelStamp(Transfer* tr, MonoNs t) { return tr->probe->Confirm(tr->fd, t); }

size_t WriteCb(char* data, size_t size, size_t nmemb, void* userp) {
  // Timestamp first: everything after this line is bookkeeping, not latency.
  const MonoNs t = NowNs();
  auto* tr = static_cast<Transfer*>(userp);
  RawRecord* rec = tr->rec;
  const size_t n = size * nmemb;
  if (rec->first_body_ns == 0) {
    rec->first_body_ns = t;
    if (rec->first_byte_ns == 0) rec->first_byte_ns = t;
  }
  rec->last_byte_ns = t;
  rec->body_bytes += static_cast<int64_t>(n);
  if (tr->sse < 0) tr->sse = StartsWithNoCase(rec->content_type, "text/event-stream") ? 1 : 0;
  if (tr->sse == 1) {
    tr->framer.Feed(std::string_view(data, n), t, &tr->framed);
    if (!tr->framed.empty()) HandOver(tr, KernelStamp(tr, t));
  } else {
    const size_t room =
        tr->max_body_bytes > rec->body.size() ? tr->max_body_bytes - rec->body.size() : 0;
    const size_t take = std::min(room, n);
    rec->body.append(data, take);
    if (take < n) rec->body_truncated = true;
  }
  return n;
}

}  // namespace

void HandOver(Transfer* tr, MonoNs kernel_ns) {
  for (SseEvent& ev : tr->framed) {
    ev.wake_ns = std::min(*tr->wake_ns, ev.arrival_ns);
    ev.kernel_ns = kernel_ns;
    tr->out->Event(tr->record_index, ev);
    if (tr->keep_events) tr->rec->events.push_back(std::move(ev));
  }
  tr->framed.clear();
}

void SetTransferOptions(const LoadSpec& spec, curl_slist* headers, const std::string& body,
                        Transfer* tr) {
  CURL* e = tr->easy.get();
  curl_easy_setopt(e, CURLOPT_URL, spec.url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  // One stream per connection, as every OpenAI-compatible client does; HTTP/2 multiplexing would
  // change what the server sees as concurrency.
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  // Asks for no content coding: a compressor that fills its block before it writes holds events
  // back, and chunk arrival times would measure it. Setting the option also makes libcurl
  // decode a gzip or deflate body that a server sends anyway (RFC 9110 lets one that was sent
  // no Accept-Encoding choose any coding): the events stay readable, and the server's
  // Content-Encoding stays in the record's response headers.
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "identity");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // the API key goes to `url` and nowhere else
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(spec.request_timeout_s * 1000.0));
  curl_easy_setopt(
      e, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(std::min(spec.connect_timeout_s, spec.request_timeout_s) * 1000.0));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, spec.insecure_tls ? 0L : 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, spec.insecure_tls ? 0L : 2L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  // 4 KiB reads, not curl's 16 KiB: one chunk is a few hundred bytes, and at 4,096 streams the
  // difference is 48 MB of buffers. A larger burst is read in more calls, each stamped.
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 4096L);
  curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &SockoptCb);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &WriteCb);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, tr);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &HeaderCb);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, tr);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, tr->errbuf);
  curl_easy_setopt(e, CURLOPT_PRIVATE, tr);
}

}  // namespace capq::internal::loadgen
