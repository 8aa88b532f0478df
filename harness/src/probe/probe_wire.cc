// One HTTP exchange kept as wire bytes, and the parsing of recorded bytes (probe_internal.h).
#include <curl/curl.h>
#include <strings.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <mutex>
#include <sstream>
#include <thread>

#include "capq/clock.h"
#include "probe_internal.h"

namespace capq::probe {
namespace {

struct Capture {
  MonoNs t0_ns = 0;
  WireExchange* ex = nullptr;
  bool header_open = false;  // the last piece was a header line: the next one extends its read
  double Ms() const { return NsToMs(NowNs() - t0_ns); }
};

// Header lines of one read come back to back, so a header block counts as one read.
size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Capture*>(user);
  const size_t len = size * n;
  WireExchange& ex = *c->ex;
  const double now = c->Ms();
  if (ex.t_first_byte_ms < 0) ex.t_first_byte_ms = now;
  if (c->header_open && !ex.reads.empty()) {
    ex.reads.back().len += len;
  } else {
    ex.reads.push_back({now, ex.response_bytes.size(), len});
  }
  c->header_open = true;
  ex.response_bytes.append(data, len);
  return len;
}

// With transfer decoding off, libcurl hands over each read's body bytes as they came, chunk-size
// lines included.
size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Capture*>(user);
  const size_t len = size * n;
  WireExchange& ex = *c->ex;
  const double now = c->Ms();
  if (ex.t_first_byte_ms < 0) ex.t_first_byte_ms = now;
  ex.reads.push_back({now, ex.response_bytes.size(), len});
  c->header_open = false;
  ex.response_bytes.append(data, len);
  return len;
}

// libcurl reports the request it wrote; HEADER_OUT and DATA_OUT are the plain bytes (TLS or not).
int OnDebug(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) {
    static_cast<Capture*>(user)->ex->request_bytes.append(data, size);
  }
  return 0;
}

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct EasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

curl_slist* RequestHeaders(const WireRequest& req, const std::string& auth) {
  curl_slist* h = curl_slist_append(nullptr, "User-Agent: capq-probe/1");
  if (!auth.empty()) h = curl_slist_append(h, auth.c_str());
  if (req.method != "GET") {
    h = curl_slist_append(h, ("Content-Type: " + req.content_type).c_str());
  }
  return curl_slist_append(h, "Expect:");  // no 100-continue round trip
}

void SetMethod(CURL* e, const WireRequest& req) {
  if (req.method == "GET") {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    return;
  }
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  if (req.method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
}

void Redact(const std::string& secret, std::string* text) {
  if (secret.empty()) return;
  for (size_t at = text->find(secret); at != std::string::npos; at = text->find(secret, at)) {
    text->replace(at, secret.size(), "<redacted>");
  }
}

}  // namespace

WireRequest Get(const std::string& target) {
  WireRequest r;
  r.target = target;
  return r;
}

WireRequest Post(const std::string& target, const std::string& body,
                 const std::string& content_type) {
  WireRequest r;
  r.method = "POST";
  r.target = target;
  r.body = body;
  r.content_type = content_type;
  return r;
}

WireExchange Exchange(const std::string& base_url, const WireRequest& req, const WireOptions& o) {
  GlobalInitOnce();
  WireExchange ex;
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  if (!easy) {
    ex.transport_error = "curl_easy_init failed";
    return ex;
  }
  CURL* e = easy.get();
  const std::string url = base_url + req.target;
  const std::string auth = o.api_key.empty() ? "" : "Authorization: Bearer " + o.api_key;
  std::unique_ptr<curl_slist, SlistDeleter> headers(RequestHeaders(req, auth));
  Capture cap;
  cap.ex = &ex;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(e, CURLOPT_HTTP_TRANSFER_DECODING, 0L);  // keep the chunk framing
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // the URL given and nothing else
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, o.insecure_tls ? 0L : 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, o.insecure_tls ? 0L : 2L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &cap);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &cap);
  curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);  // the debug callback sees the request as written
  curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, &OnDebug);
  curl_easy_setopt(e, CURLOPT_DEBUGDATA, &cap);
  SetMethod(e, req);
  ex.wall_start_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  cap.t0_ns = NowNs();
  const CURLcode rc = curl_easy_perform(e);
  ex.t_end_ms = cap.Ms();
  if (rc != CURLE_OK) ex.transport_error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &ex.status);
  Redact(o.api_key, &ex.request_bytes);
  Redact(o.api_key, &ex.response_bytes);  // a server that echoes it must not leak it either
  return ex;
}

std::vector<WireExchange> ExchangeTogether(const std::string& base_url,
                                           const std::vector<WireRequest>& reqs,
                                           const WireOptions& o) {
  GlobalInitOnce();
  std::vector<WireExchange> got(reqs.size());
  std::latch start(static_cast<std::ptrdiff_t>(reqs.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[i] = Exchange(base_url, reqs[i], o);
    });
  }
  for (std::thread& t : threads) t.join();
  return got;
}

// ---- parsing -------------------------------------------------------------------------------

namespace {

std::string FindHeader(const std::vector<std::pair<std::string, std::string>>& headers,
                       const std::string& name) {
  for (const auto& [n, v] : headers) {
    if (strcasecmp(n.c_str(), name.c_str()) == 0) return v;
  }
  return "";
}

// Header lines after the first line of `head` (CRLF or LF ends).
std::vector<std::pair<std::string, std::string>> HeaderLines(const std::string& head,
                                                             std::string* first_line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(head);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  *first_line = line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t v = line.find_first_not_of(" \t", colon + 1);
    out.emplace_back(line.substr(0, colon), v == std::string::npos ? "" : line.substr(v));
  }
  return out;
}

// Parses chunk framing from `pos`; false when the bytes are not chunk framed.
bool ParseChunks(const std::string& bytes, size_t pos, ParsedResponse* r) {
  while (pos < bytes.size()) {
    const size_t eol = bytes.find("\r\n", pos);
    if (eol == std::string::npos) return !r->chunks.empty();
    const std::string size_line = bytes.substr(pos, eol - pos);
    char* end = nullptr;
    const unsigned long len = std::strtoul(size_line.c_str(), &end, 16);
    if (end == size_line.c_str() || (*end != '\0' && *end != ';' && *end != ' ')) return false;
    if (len == 0) {
      r->complete = true;
      return true;
    }
    if (bytes.size() < eol + 2 + len) return true;  // cut inside a chunk
    r->chunks.push_back(bytes.substr(eol + 2, len));
    r->body += r->chunks.back();
    pos = eol + 2 + len + 2;
  }
  return true;
}

}  // namespace

std::string ParsedResponse::Header(const std::string& name) const {
  return FindHeader(headers, name);
}
bool ParsedResponse::HasHeader(const std::string& name) const {
  for (const auto& [n, v] : headers) {
    if (strcasecmp(n.c_str(), name.c_str()) == 0) return true;
  }
  return false;
}
std::string ParsedRequest::Header(const std::string& name) const {
  return FindHeader(headers, name);
}

ParsedResponse ParseResponse(const std::string& bytes) {
  ParsedResponse r;
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  std::string status_line;
  r.headers = HeaderLines(bytes.substr(0, head_end), &status_line);
  r.has_headers = true;
  const size_t sp = status_line.find(' ');
  if (sp != std::string::npos) r.status = std::atoi(status_line.c_str() + sp + 1);
  const size_t body = head_end + 4;
  r.chunked = strcasecmp(r.Header("Transfer-Encoding").c_str(), "chunked") == 0;
  if (r.chunked) {
    r.chunk_framed = ParseChunks(bytes, body, &r);
    if (r.chunk_framed) return r;
    r.chunks.clear();  // written de-chunked: the body is the rest as it is
    r.body = bytes.substr(body);
    r.complete = true;
    return r;
  }
  const std::string cl = r.Header("Content-Length");
  r.body = bytes.substr(body);
  if (cl.empty()) {
    r.complete = true;  // ended by the close
  } else {
    const size_t want = std::strtoul(cl.c_str(), nullptr, 10);
    r.complete = r.body.size() >= want;
    if (r.body.size() > want) r.body.resize(want);
  }
  return r;
}

ParsedRequest ParseRequest(const std::string& bytes) {
  ParsedRequest r;
  const size_t head_end = bytes.find("\r\n\r\n");
  std::string line;
  r.headers = HeaderLines(bytes.substr(0, head_end), &line);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string::npos ? sp1 : sp1 + 1);
  r.method = line.substr(0, sp1);
  if (sp1 != std::string::npos) r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (head_end != std::string::npos) r.body = bytes.substr(head_end + 4);
  return r;
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status::IoError(path + ": cannot write");
  return Status::Ok();
}

}  // namespace capq::probe
