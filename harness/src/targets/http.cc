#include "capq/targets/http.h"

#include <curl/curl.h>

#include <mutex>

namespace capq {
namespace {

size_t Collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

struct HttpClient::Impl {
  HttpOptions options;
  CURL* easy = nullptr;
  ~Impl() {
    if (easy) curl_easy_cleanup(easy);
  }
};

HttpClient::HttpClient(HttpOptions options) : impl_(std::make_unique<Impl>()) {
  GlobalInitOnce();
  impl_->options = std::move(options);
  impl_->easy = curl_easy_init();
}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<HttpResponse> HttpClient::Get(const std::string& url) {
  return Perform("GET", url, nullptr, "");
}

Result<HttpResponse> HttpClient::Post(const std::string& url, const std::string& body,
                                      const std::string& content_type) {
  return Perform("POST", url, &body, content_type);
}

Result<HttpResponse> HttpClient::Perform(const std::string& method, const std::string& url,
                                         const std::string* body, const std::string& content_type) {
  if (!impl_ || !impl_->easy) return Status::Internal("curl_easy_init failed");
  CURL* c = impl_->easy;
  curl_easy_reset(c);  // keeps the connection cache, drops the previous request's options
  HttpResponse resp;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(impl_->options.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(impl_->options.connect_timeout_s * 1000));
  if (impl_->options.insecure_tls) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  struct curl_slist* headers = nullptr;
  std::string auth;
  if (!impl_->options.api_key.empty()) {
    auth = "Authorization: Bearer " + impl_->options.api_key;
    headers = curl_slist_append(headers, auth.c_str());
  }
  if (body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  } else if (method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  // The key must not survive in the handle's memory longer than needed.
  std::fill(auth.begin(), auth.end(), '\0');
  if (rc != CURLE_OK) {
    std::string why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    return Status::Unavailable(method + " " + url + ": " + why);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  char* ct = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct) resp.content_type = ct;
  return resp;
}

}  // namespace capq
