// The simulated server's HTTP plumbing: the answers every endpoint shares, in the dialect's shape
// (its headers, content types and error bodies), and a request's JSON body.
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <cstring>
#include <string>

#include "server_impl.h"

namespace capq::sim {
namespace {

const char* ErrorType(int status, ErrorStyle style) {
  const bool lc = style == ErrorStyle::kLlamacpp;
  switch (status) {
    case 400:
      return lc ? "invalid_request_error" : "BadRequestError";
    case 404:
      return lc ? "not_found_error" : "NotFoundError";
    case 429:
      return lc ? "rate_limit_error" : "RateLimitError";
    case 501:
      return lc ? "not_supported_error" : "NotImplementedError";
    case 503:
      return lc ? "unavailable_error" : "ServiceUnavailableError";
    default:
      return lc ? "server_error" : "InternalServerError";
  }
}

}  // namespace

// The error object itself (what a stream's error frame wraps in {"error": ...}).
json ErrorInner(ErrorStyle style, int status, const std::string& message) {
  json e;
  switch (style) {
    case ErrorStyle::kSglang:
      e = {{"object", "error"},
           {"message", message},
           {"type", ErrorType(status, style)},
           {"param", nullptr},
           {"code", status}};
      break;
    case ErrorStyle::kVllm:
      e = {{"message", message},
           {"type", ErrorType(status, style)},
           {"param", nullptr},
           {"code", status}};
      break;
    case ErrorStyle::kLlamacpp:
      e = {{"code", status}, {"message", message}, {"type", ErrorType(status, style)}};
      break;
  }
  return e;
}

// The body of an HTTP error answer: SGLang's is the bare object, the others wrap it.
std::string ErrorBody(ErrorStyle style, int status, const std::string& message) {
  json inner = ErrorInner(style, status, message);
  if (style == ErrorStyle::kSglang) return inner.dump();
  return json{{"error", inner}}.dump();
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string BodyOf(evhttp_request* req) {
  evbuffer* in = evhttp_request_get_input_buffer(req);
  size_t n = evbuffer_get_length(in);
  std::string body(n, '\0');
  if (n) evbuffer_copyout(in, body.data(), n);
  return body;
}

void SimServer::Impl::AddDialectHeaders(evkeyvalq* h, int status) const {
  for (int i = 0; i < spec->header_count; ++i) {
    evhttp_add_header(h, spec->headers[i].name, spec->headers[i].value);
  }
  if (!spec->close_on_error) return;
  // cpp-httplib closes the connection after every error status (httplib.cpp:7823-7825) and
  // announces its keep-alive limits on every other answer.
  if (status >= 400) {
    evhttp_add_header(h, "Connection", "close");
  } else {
    evhttp_add_header(h, "Keep-Alive", "timeout=5, max=100");
  }
}

void SimServer::Impl::Reply(evhttp_request* req, int status, const std::string& body,
                            const char* content_type) {
  evkeyvalq* h = evhttp_request_get_output_headers(req);
  AddDialectHeaders(h, status);
  if (content_type && std::strcmp(content_type, "application/json") == 0) {
    content_type = spec->json_content_type;
  }
  if (content_type) evhttp_add_header(h, "Content-Type", content_type);
  evbuffer* b = evbuffer_new();
  evbuffer_add(b, body.data(), body.size());
  IdleOnceWritten(req);  // a chat's connection streamed with no timeout (WatchConnection)
  evhttp_send_reply(req, status, ReasonPhrase(status), b);
  evbuffer_free(b);
}

void SimServer::Impl::ReplyError(evhttp_request* req, int status, const std::string& message) {
  Reply(req, status, ErrorBody(spec->errors, status, message), "application/json");
}

void SimServer::Impl::ReplyJsonError(evhttp_request* req, int status, json error) {
  Reply(req, status, json{{"error", std::move(error)}}.dump(), "application/json");
}

std::string SimServer::Impl::InvalidJsonMessage(const json::exception& e) const {
  // llama.cpp answers with the parser's own text (recording 50).
  if (spec->dialect == Dialect::kLlamacpp) return e.what();
  return std::string("invalid JSON body: ") + e.what();
}

bool SimServer::Impl::ParseBody(evhttp_request* req, json* body) {
  try {
    *body = json::parse(BodyOf(req));
  } catch (const json::exception& e) {
    ReplyError(req, spec->invalid_json_status, InvalidJsonMessage(e));
    return false;
  }
  if (!body->is_object()) {
    ReplyError(req, 400, "the body must be a JSON object");
    return false;
  }
  return true;
}

}  // namespace capq::sim
