// The endpoints only llama.cpp's server has, in the shapes recorded from llama-server b9749
// (conformance/llamacpp/INDEX.md; tools/server/ is ts/ below, commit d32676d77): /props, /slots,
// /slots/{id}?action=..., /apply-template, /tokenize, the Ollama-plus-OpenAI /v1/models and the
// llamacpp:* metrics. Values are the sim's; keys, nesting and types are llama.cpp's.
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include "server_impl.h"

namespace capq::sim {
namespace {

// The sampling defaults /props reports (recording 04); /slots shows them with a slot's last
// task's values in place (recording 22).
json SamplingParams() {
  static const json* params = new json(json::parse(R"({
    "seed":4294967295,"temperature":0.800000011920929,"dynatemp_range":0.0,
    "dynatemp_exponent":1.0,"top_k":40,"top_p":0.949999988079071,"min_p":0.05000000074505806,
    "top_n_sigma":-1.0,"xtc_probability":0.0,"xtc_threshold":0.10000000149011612,"typical_p":1.0,
    "repeat_last_n":64,"repeat_penalty":1.0,"presence_penalty":0.0,"frequency_penalty":0.0,
    "dry_multiplier":0.0,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":64,
    "mirostat":0,"mirostat_tau":5.0,"mirostat_eta":0.10000000149011612,"adaptive_target":-1.0,
    "adaptive_decay":0.8999999761581421,"max_tokens":-1,"n_predict":-1,"n_keep":0,"n_discard":0,
    "ignore_eos":false,"stream":false,"n_probs":0,"min_keep":0,"chat_format":"Content-only",
    "reasoning_format":"none","reasoning_in_content":false,"generation_prompt":"",
    "samplers":["penalties","dry","top_n_sigma","top_k","typ_p","top_p","min_p","xtc",
                "temperature"],
    "speculative.types":"none","timings_per_token":false,"post_sampling_probs":false,
    "backend_sampling":false,"lora":[]})"));
  return *params;
}

// A Jinja-like rendering of the sim template, for /props "chat_template" (a string there).
std::string TemplateSource(const ChatTemplate& t) {
  std::string out = t.bos ? "{{ bos_token }}" : "";
  for (int i = t.bos ? 1 : 0; i < t.prefix_tokens; ++i) {
    out += "<|capq_template_" + std::to_string(i) + "|> ";
  }
  out += "{% for message in messages %}{{ message['content'] + '\\n' }}{% endfor %}";
  for (int i = t.prefix_tokens; i < t.tokens; ++i) {
    out += " <|capq_template_" + std::to_string(i) + "|>";
  }
  return out;
}

// b10587 added supports_reasoning_effort (common/jinja/caps.cpp; recorded, conformance/
// llamacpp_b10587/03-props.resp); b9749 had the other eight (conformance/llamacpp/04).
json TemplateCaps(int build) {
  json caps = {{"supports_object_arguments", false},
               {"supports_parallel_tool_calls", false},
               {"supports_preserve_reasoning", false},
               {"supports_string_content", true},
               {"supports_system_role", false},
               {"supports_tool_calls", false},
               {"supports_tools", false},
               {"supports_typed_content", false}};
  if (build >= 10587) caps["supports_reasoning_effort"] = false;
  return caps;
}

}  // namespace

void SimServer::Impl::HandleProps(evhttp_request* req) {
  // ts/server-context.cpp:4611-4660; nothing in it reveals the host prompt cache (recording 85).
  const json props = {
      {"default_generation_settings",
       {{"params", SamplingParams()}, {"n_ctx", profile.context_length}}},
      {"total_slots", profile.max_running_requests},
      {"model_alias", profile.served_model_name},
      {"model_ftype", "capq-sim"},
      {"model_path", profile.model_path},
      {"modalities", {{"vision", false}, {"video", false}, {"audio", false}}},
      {"media_marker", "<__media_capqsim__>"},
      {"endpoint_slots", true},
      {"endpoint_props", false},
      {"endpoint_metrics", true},
      {"ui", false},
      {"ui_settings", json::object()},
      {"chat_template", TemplateSource(tmpl)},
      {"chat_template_caps", TemplateCaps(opts.engine_build)},
      {"bos_token", tmpl.bos ? std::string(kBosText) : std::string()},
      {"eos_token", "<|endoftext|>"},
      {"build_info", kSimFingerprint},
      {"is_sleeping", false},
      {"cors_proxy_enabled", false},
  };
  Reply(req, 200, props.dump(), "application/json");
}

void SimServer::Impl::OnSlotAdmitted(Stream* s) {
  if (s->slot < 0 || static_cast<size_t>(s->slot) >= slot_tasks.size()) return;
  SlotTask& t = slot_tasks[static_cast<size_t>(s->slot)];
  t.id_task = s->index;
  t.n_predict = s->max_tokens;
  t.ignore_eos = s->ignore_eos;
  t.stream = s->streaming;
  t.temperature = s->temperature;
}

void SimServer::Impl::OnLlamacppFinished(Stream* s, VirtNs t) {
  const VirtNs start = s->admitted_v >= 0 ? s->admitted_v : s->arrival_v;
  if (s->first_token_v >= 0) {
    lc_prompt_s_total += static_cast<double>(s->first_token_v - start) / 1e9;
    lc_predicted_s_total += static_cast<double>(t - s->first_token_v) / 1e9;
  }
  const int64_t prompt_n = s->prompt_tokens - s->cached_tokens;
  lc_prompt_n_total += prompt_n;
  lc_n_tokens_max = std::max(lc_n_tokens_max, prompt_n);
  if (s->slot < 0 || static_cast<size_t>(s->slot) >= slot_tasks.size()) return;
  SlotTask& task = slot_tasks[static_cast<size_t>(s->slot)];
  task.n_prompt_tokens_processed = prompt_n;
  task.n_decoded = s->emitted;
}

// ts/server-context.cpp:679-711. A slot that never ran a task shows four keys; once used it also
// shows its last task, and n_prompt_tokens is what its KV holds (prompt + generated - 1).
void SimServer::Impl::HandleSlots(evhttp_request* req) {
  const std::vector<SlotState> states = engine->Slots();
  const EngineStats st = engine->stats();
  json slots = json::array();
  for (int i = 0; i < profile.max_running_requests; ++i) {
    const SlotState* state = static_cast<size_t>(i) < states.size() ? &states[i] : nullptr;
    const bool processing = state ? state->processing : i < st.running;
    json j = {{"id", i},
              {"n_ctx", profile.context_length},
              {"speculative", false},
              {"is_processing", processing}};
    if (state && state->used && static_cast<size_t>(i) < slot_tasks.size()) {
      const SlotTask& t = slot_tasks[static_cast<size_t>(i)];
      json params = SamplingParams();
      params["temperature"] = t.temperature;
      params["max_tokens"] = t.n_predict;
      params["n_predict"] = t.n_predict;
      params["ignore_eos"] = t.ignore_eos;
      params["stream"] = t.stream;
      params["chat_format"] = "peg-native";
      params["reasoning_format"] = "deepseek";
      j["id_task"] = t.id_task;
      j["n_prompt_tokens"] = state->n_kv_tokens;
      j["n_prompt_tokens_processed"] =
          processing ? state->n_prompt_tokens_processed : t.n_prompt_tokens_processed;
      // Reset when the slot is released (ts/server-context.cpp:333-338).
      j["n_prompt_tokens_cache"] = processing ? state->n_prompt_tokens_cache : 0;
      j["params"] = std::move(params);
      j["next_token"] = json::array({{{"has_next_token", processing},
                                      {"has_new_line", false},
                                      {"n_remain", processing ? state->n_remain : 0},
                                      {"n_decoded", processing ? state->n_decoded : t.n_decoded}}});
    }
    slots.push_back(std::move(j));
  }
  Reply(req, 200, slots.dump(), "application/json");
}

void SimServer::Impl::ErasePendingSlots() {
  std::vector<int> left;
  for (int id : slots_to_erase) {
    if (!engine->EraseSlot(id).has_value()) left.push_back(id);
  }
  slots_to_erase = std::move(left);
}

void SimServer::Impl::HandleSlotAction(evhttp_request* req, const std::string& path) {
  if (!profile.slot_actions) {
    // Without --slot-save-path every slot action is refused (ts/server-context.cpp:4578-4583).
    ReplyJsonError(
        req, 501,
        {{"code", 501},
         {"message", "This server does not support slots action. Start it with `--slot-save-path`"},
         {"type", "not_supported_error"}});
    return;
  }
  const std::string id_s = path.substr(std::strlen("/slots/"));
  char* end = nullptr;
  const long raw_id = std::strtol(id_s.c_str(), &end, 10);
  if (id_s.empty() || *end != '\0' || raw_id < 0) {
    ReplyError(req, 400, "Invalid slot ID");
    return;
  }
  // Slot ids wrap modulo the slot count (get_slot_by_id, ts/server-context.cpp:1563-1566).
  const int id = static_cast<int>(raw_id % profile.max_running_requests);
  const char* uri_s = evhttp_request_get_uri(req);
  evkeyvalq q{};
  q.tqh_first = nullptr;
  q.tqh_last = &q.tqh_first;
  const char* query = std::strchr(uri_s, '?');
  std::string action;
  if (query && evhttp_parse_query_str(query + 1, &q) == 0) {
    const char* a = evhttp_find_header(&q, "action");
    if (a) action = a;
  }
  evhttp_clear_headers(&q);
  if (action != "erase") {
    ReplyError(req, 400, "Invalid action");
    return;
  }
  int64_t n_erased = 0;
  if (profile.cache_model == CacheModel::kSlots) {
    // llama.cpp defers the erase of a busy slot until it is free (:2680-2684); the sim answers at
    // once with what the slot holds and erases it when the task ends.
    std::optional<int64_t> n = engine->EraseSlot(id);
    if (!n) {
      const std::vector<SlotState> states = engine->Slots();
      n = states[static_cast<size_t>(id)].n_kv_tokens;
      slots_to_erase.push_back(id);
    }
    n_erased = *n;
  } else {
    // One shared prefix cache models every slot's KV: erasing any slot clears it.
    n_erased = engine->stats().cache_tokens;
    if (!DoFlush()) erase_pending = true;
  }
  Reply(req, 200, json{{"id_slot", id}, {"n_erased", n_erased}}.dump(), "application/json");
}

// POST /apply-template {"messages"} -> {"prompt"}: the template text without the BOS, which the
// tokenizer adds (recordings 10 and 11).
void SimServer::Impl::HandleApplyTemplate(evhttp_request* req) {
  json body;
  if (!ParseBody(req, &body)) return;
  std::string text, error;
  std::vector<ChatMessage> messages;
  if (!MessagesText(body.value("messages", json()), &text, &error, &messages)) {
    ReplyError(req, 400, error);
    return;
  }
  Reply(req, 200, json{{"prompt", RenderChatTemplate(messages, tmpl)}}.dump(), "application/json");
}

// POST /tokenize {"content","add_special","with_pieces"} -> {"tokens":[ids]} or
// {"tokens":[{"id","piece"}]}; add_special puts the BOS in front (recordings 07, 08, 09, 12).
void SimServer::Impl::HandleLlamacppTokenize(evhttp_request* req, const json& body) {
  if (!body.contains("content") || !body["content"].is_string()) {
    ReplyError(req, 400, "missing string field 'content'");
    return;
  }
  const std::string content = body["content"].get<std::string>();
  const json add = body.value("add_special", json(false));
  const json pieces = body.value("with_pieces", json(false));
  const bool bos = tmpl.bos && add.is_boolean() && add.get<bool>();
  std::vector<uint32_t> ids;
  if (bos) ids.push_back(BosTokenId());
  TokenizeWords(content, &ids);
  if (!(pieces.is_boolean() && pieces.get<bool>())) {
    Reply(req, 200, json{{"tokens", ids}}.dump(), "application/json");
    return;
  }
  std::vector<std::string> words;
  if (bos) words.emplace_back(kBosText);
  size_t i = 0;
  while (i < content.size()) {
    while (i < content.size() && std::isspace(static_cast<unsigned char>(content[i]))) ++i;
    const size_t start = i;
    while (i < content.size() && !std::isspace(static_cast<unsigned char>(content[i]))) ++i;
    if (i > start) words.push_back(content.substr(start, i - start));
  }
  json out = json::array();
  for (size_t k = 0; k < ids.size() && k < words.size(); ++k) {
    out.push_back({{"id", ids[k]}, {"piece", words[k]}});
  }
  Reply(req, 200, json{{"tokens", out}}.dump(), "application/json");
}

// Ollama-style "models" plus OpenAI "data" with llama.cpp's "meta" (recording 03).
void SimServer::Impl::HandleLlamacppModels(evhttp_request* req) {
  const std::string& name = profile.served_model_name;
  const json ollama = {{"name", name},
                       {"model", name},
                       {"modified_at", ""},
                       {"size", ""},
                       {"digest", ""},
                       {"type", "model"},
                       {"description", ""},
                       {"tags", json::array({""})},
                       {"capabilities", json::array({"completion"})},
                       {"parameters", ""},
                       {"details",
                        {{"parent_model", ""},
                         {"format", "gguf"},
                         {"family", ""},
                         {"families", json::array({""})},
                         {"parameter_size", ""},
                         {"quantization_level", ""}}}};
  // vocab_type is the vocabulary's enum (ts/server-context.cpp meta.model_vocab_type): b9749
  // wrote it as 1 (conformance/llamacpp/03), b10587 as true (conformance/llamacpp_b10587/02).
  const json vocab_type = opts.engine_build >= 10587 ? json(true) : json(1);
  const json meta = {{"vocab_type", vocab_type},
                     {"n_vocab", 32064},
                     {"n_ctx", profile.context_length},
                     {"n_ctx_train", profile.context_length},
                     {"n_embd", 256},
                     {"n_params", 0},
                     {"size", 0},
                     {"ftype", "capq-sim"}};
  const json data = {
      {"id", name},        {"aliases", json::array({name})},        {"tags", json::array()},
      {"object", "model"}, {"created", start_unix_ns / 1000000000}, {"owned_by", spec->owned_by},
      {"meta", meta}};
  const json body = {
      {"models", json::array({ollama})}, {"object", "list"}, {"data", json::array({data})}};
  Reply(req, 200, body.dump(), "application/json");
}

// The names, help texts and order of recording 06 (ts/server-context.cpp:4528 and on).
void SimServer::Impl::HandleLlamacppMetrics(evhttp_request* req) {
  const EngineStats st = engine->stats();
  const double prompt_tps = lc_prompt_s_total > 0 ? lc_prompt_n_total / lc_prompt_s_total : 0;
  const double gen_tps =
      lc_predicted_s_total > 0 ? st.generated_tokens_total / lc_predicted_s_total : 0;
  const struct {
    const char* name;
    const char* help;
    const char* type;
    double value;
  } rows[] = {
      {"prompt_tokens_total", "Number of prompt tokens processed.", "counter",
       static_cast<double>(st.prompt_tokens_total - st.cached_tokens_total)},
      {"prompt_seconds_total", "Prompt process time", "counter", lc_prompt_s_total},
      {"tokens_predicted_total", "Number of generation tokens processed.", "counter",
       static_cast<double>(st.generated_tokens_total)},
      {"tokens_predicted_seconds_total", "Predict process time", "counter", lc_predicted_s_total},
      {"n_decode_total", "Total number of llama_decode() calls", "counter",
       static_cast<double>(st.steps)},
      {"n_tokens_max", "Largest observed n_tokens.", "counter",
       static_cast<double>(lc_n_tokens_max)},
      {"spec_decode_num_draft_tokens_total", "Total draft tokens generated", "counter", 0},
      {"spec_decode_num_accepted_tokens_total", "Total draft tokens accepted by the target model",
       "counter", 0},
      {"spec_decode_num_drafts_total", "Total speculative decoding verification steps", "counter",
       0},
      {"prompt_tokens_seconds", "Average prompt throughput in tokens/s.", "gauge", prompt_tps},
      {"predicted_tokens_seconds", "Average generation throughput in tokens/s.", "gauge", gen_tps},
      {"requests_processing", "Number of requests processing.", "gauge",
       static_cast<double>(st.running)},
      {"requests_deferred", "Number of requests deferred.", "gauge",
       static_cast<double>(st.waiting + delayed)},
      {"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "gauge",
       0},
  };
  std::string out;
  char value[64];
  for (const auto& r : rows) {
    std::snprintf(value, sizeof(value), "%.17g", r.value);
    out += std::string("# HELP llamacpp:") + r.name + " " + r.help + "\n# TYPE llamacpp:" + r.name +
           " " + r.type + "\nllamacpp:" + r.name + " " + value + "\n";
  }
  // llama.cpp fills this header from CLOCK_MONOTONIC in microseconds, not Unix time
  // (ts/server-context.cpp:853-855): the sim sends its virtual uptime the same way.
  evkeyvalq* h = evhttp_request_get_output_headers(req);
  evhttp_add_header(h, "Process-Start-Time-Unix", std::to_string(VirtNow() / 1000).c_str());
  Reply(req, 200, out, spec->metrics_content_type);
}

}  // namespace capq::sim
