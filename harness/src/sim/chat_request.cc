// A chat completion request read and checked: its messages, its sampling and streaming options,
// and whether its prompt and output fit the context. Each check answers its own error.
#include <event2/http.h>

#include <string>
#include <vector>

#include "capq/sim/tokenizer.h"
#include "server_impl.h"

namespace capq::sim {
namespace {

// Without max_tokens a request gets SGLang's default max_new_tokens; capq always sends it.
constexpr int64_t kDefaultMaxTokens = 128;

}  // namespace

bool MessagesText(const json& messages, std::string* text, std::string* error,
                  std::vector<ChatMessage>* parsed) {
  if (!messages.is_array() || messages.empty()) {
    *error = "'messages' must be a non-empty array";
    return false;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      *error = at + ": each message needs a string 'role'";
      return false;
    }
    if (!m.contains("content")) {
      *error = at + ": missing 'content'";
      return false;
    }
    const json& c = m["content"];
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {
      for (const auto& part : c) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) {
          *error = at + ": content parts must be {\"type\":\"text\",\"text\":...}";
          return false;
        }
        msg.content += part["text"].get<std::string>();
      }
    } else if (!c.is_null()) {
      *error = at + ": 'content' must be a string or a list of text parts";
      return false;
    }
    *text += msg.content;
    *text += '\n';
    if (parsed) parsed->push_back(std::move(msg));
  }
  return true;
}

// The sampling and streaming fields of a chat request, validated; answers the error and returns
// false when one is wrong. max_tokens < 0 means "until the context is full" (llama.cpp's -1).
bool SimServer::Impl::ParseChatOptions(evhttp_request* req, const json& body, ChatOptions* o) {
  auto bad_type = [&](const char* key, bool ok) {
    if (body.contains(key) && !body[key].is_null() && !ok) {
      ReplyError(req, 400, std::string("'") + key + "' has the wrong type");
      return true;
    }
    return false;
  };
  if (bad_type("stream", body.value("stream", json()).is_boolean()) ||
      bad_type("ignore_eos", body.value("ignore_eos", json()).is_boolean()) ||
      bad_type("temperature", body.value("temperature", json()).is_number()) ||
      bad_type("seed", body.value("seed", json()).is_number_integer()) ||
      bad_type("max_tokens", body.value("max_tokens", json()).is_number_integer()) ||
      bad_type("max_completion_tokens",
               body.value("max_completion_tokens", json()).is_number_integer()) ||
      bad_type("stream_options", body.value("stream_options", json()).is_object()) ||
      bad_type("n", body.value("n", json()).is_number_integer())) {
    return false;
  }
  auto opt = [&](const char* key) -> const json* {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  const bool streaming = opt("stream") && opt("stream")->get<bool>();
  o->streaming = streaming;
  o->ignore_eos = opt("ignore_eos") && opt("ignore_eos")->get<bool>();
  o->temperature = opt("temperature") ? opt("temperature")->get<double>() : 1.0;
  o->seed = opt("seed") ? opt("seed")->get<int64_t>() : 0;
  if (o->temperature < 0 || o->temperature > 2) {
    ReplyError(req, 400, "'temperature' must be in [0, 2]");
    return false;
  }
  if (opt("n") && opt("n")->get<int64_t>() != 1) {
    ReplyError(req, 400, "only n = 1 is supported");
    return false;
  }
  const char* max_key = opt("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!ParseMaxTokens(req, opt(max_key), max_key, &o->max_tokens)) return false;
  if (const json* so = opt("stream_options")) {
    if (!ParseStreamOptions(req, *so, streaming, &o->include_usage)) return false;
  }
  return true;
}

// max_tokens (or max_completion_tokens, named `key`), `given` or the dialect's default.
bool SimServer::Impl::ParseMaxTokens(evhttp_request* req, const json* given, const char* key,
                                     int64_t* out) {
  const bool llamacpp = spec->dialect == Dialect::kLlamacpp;
  // llama.cpp's n_predict defaults to -1, unlimited until the slot's context is full.
  int64_t max_tokens = llamacpp ? -1 : kDefaultMaxTokens;
  if (given) max_tokens = given->get<int64_t>();
  if (llamacpp && max_tokens < -1) {
    // ts/server-schema.cpp's range check (recording 55).
    ReplyError(req, 400,
               std::string("Field '") + key +
                   "': Value must be between -1 <= value <= 2147483647, but got " +
                   std::to_string(max_tokens));
    return false;
  }
  if (!llamacpp && max_tokens < 1) {
    ReplyError(req, 400, "'max_tokens' must be at least 1");
    return false;
  }
  // llama.cpp still samples one token for n_predict 0 (recordings 54 and 56).
  if (llamacpp && max_tokens == 0) max_tokens = 1;
  *out = max_tokens;
  return true;
}

// stream_options, allowed only on a stream: whether it asks for the usage chunk.
bool SimServer::Impl::ParseStreamOptions(evhttp_request* req, const json& so, bool streaming,
                                         bool* include_usage) {
  if (!streaming) {
    ReplyError(req, 400, "'stream_options' is only allowed with 'stream': true");
    return false;
  }
  *include_usage = spec->usage_default_with_stream_options;
  if (so.contains("include_usage")) {
    if (!so["include_usage"].is_boolean()) {
      ReplyError(req, 400, "'stream_options.include_usage' must be a boolean");
      return false;
    }
    *include_usage = so["include_usage"].get<bool>();
  }
  return true;
}

// Whether a prompt of `prompt_tokens` with `*max_tokens` of output fits the context (and, with a
// shared pool, the pool); llama.cpp caps *max_tokens to what is left instead of refusing.
// Answers the error and returns false when it does not fit.
bool SimServer::Impl::FitContext(evhttp_request* req, int64_t prompt_tokens, int64_t* max_tokens) {
  if (spec->dialect == Dialect::kLlamacpp && prompt_tokens >= profile.context_length) {
    // A plain 400 even for a stream (ts/server-context.cpp:3208-3216, :4243-4246; recording 51).
    ReplyJsonError(
        req, 400,
        {{"code", 400},
         {"message", "request (" + std::to_string(prompt_tokens) +
                         " tokens) exceeds the available context size (" +
                         std::to_string(profile.context_length) + " tokens), try increasing it"},
         {"type", "exceed_context_size_error"},
         {"n_prompt_tokens", prompt_tokens},
         {"n_ctx", profile.context_length}});
    return false;
  }
  if (*max_tokens < 0) *max_tokens = profile.context_length - prompt_tokens;
  if (prompt_tokens >= profile.context_length) {
    ReplyError(req, 400,
               "The input (" + std::to_string(prompt_tokens) +
                   " tokens) is longer than the model's context length (" +
                   std::to_string(profile.context_length) + " tokens).");
    return false;
  }
  if (prompt_tokens + *max_tokens > profile.context_length) {
    if (spec->cap_max_tokens_to_context) {
      *max_tokens = profile.context_length - prompt_tokens;
    } else {
      ReplyError(req, 400,
                 "Requested token count exceeds the model's maximum context length of " +
                     std::to_string(profile.context_length) + " tokens. You requested a total of " +
                     std::to_string(prompt_tokens + *max_tokens) +
                     " tokens: " + std::to_string(prompt_tokens) +
                     " tokens from the input messages and " + std::to_string(*max_tokens) +
                     " tokens for the completion. Please reduce the number of tokens in the input "
                     "messages or the completion to fit within the limit.");
      return false;
    }
  }
  const int64_t page = std::max(1, profile.page_size);
  const int64_t need_tokens = (prompt_tokens + *max_tokens + page - 1) / page * page;
  if (profile.cache_model == CacheModel::kRadix && need_tokens > profile.max_total_tokens) {
    ReplyError(req, 400,
               "The request needs " + std::to_string(need_tokens) +
                   " tokens (prompt + max_tokens, in whole pages) but the token pool holds " +
                   std::to_string(profile.max_total_tokens) + ".");
    return false;
  }
  return true;
}

}  // namespace capq::sim
