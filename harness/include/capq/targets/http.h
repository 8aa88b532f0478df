// A small blocking HTTP client for control endpoints (info, flush, tokenize, metrics, probes).
// Measured traffic never goes through it: that is the load generator's job (loadgen.h).
//
// Thread safety: one HttpClient per thread. The API key is sent as "Authorization: Bearer" and is
// never included in any Status message or log line.
#pragma once

#include <memory>
#include <string>

#include "capq/status.h"

namespace capq {

struct HttpOptions {
  std::string api_key;        // "" = no Authorization header
  bool insecure_tls = false;  // certificate verification stays on unless set
  double timeout_s = 10;      // whole request, wall seconds
  double connect_timeout_s = 5;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A transport failure (refused, timeout, TLS) is Unavailable naming the method and URL; any HTTP
  // status is a successful Result the caller interprets.
  Result<HttpResponse> Get(const std::string& url);
  Result<HttpResponse> Post(const std::string& url, const std::string& body,
                            const std::string& content_type = "application/json");

 private:
  Result<HttpResponse> Perform(const std::string& method, const std::string& url,
                               const std::string* body, const std::string& content_type);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capq
