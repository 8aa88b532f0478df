#include "capq/measurement/validator.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "validator_internal.h"

namespace capq {
namespace {

using namespace validator_internal;

GateResult RecordCount(const ValidationInput& in) {
  GateResult g = NewGate("expected_record_count");
  // A prefix row primes each of its prefixes after the warm-ups, in the warm-up phase.
  const size_t primes = in.row->prefix ? static_cast<size_t>(in.row->prefix->Prefixes()) : 0;
  const size_t want_warmup = static_cast<size_t>(std::max(in.row->warmup.requests, 0)) + primes;
  std::set<int> seen;
  std::vector<std::string> dup;
  for (const RequestResult& r : in.measured) {
    if (!seen.insert(r.index).second) {
      dup.push_back(r.id);
      g.offending_ids.push_back(r.id);
    }
  }
  std::vector<std::string> missing;
  for (int i = 0; i < in.expected_measured; ++i) {
    if (!seen.count(i)) missing.push_back("#" + std::to_string(i));
  }
  g.passed = in.measured.size() == static_cast<size_t>(std::max(in.expected_measured, 0)) &&
             in.warmup.size() == want_warmup && dup.empty() && missing.empty();
  g.evidence = std::to_string(in.measured.size()) + " measured records (want " +
               std::to_string(in.expected_measured) + "), " + std::to_string(in.warmup.size()) +
               " warm-up records (want " + std::to_string(want_warmup) +
               (primes ? ", " + std::to_string(primes) + " of them priming" : "") + ")";
  if (!missing.empty()) g.evidence += "; missing measured indices: " + Join(missing);
  if (!dup.empty()) g.evidence += "; repeated measured indices: " + Join(dup);
  return g;
}

GateResult Status200(const ValidationInput& in) {
  GateResult g = NewGate("status_200");
  std::vector<std::string> words;
  for (const RequestResult& r : in.measured) {
    if (r.http_status == 200) continue;
    g.offending_ids.push_back(r.id);
    words.push_back(r.id + (r.http_status == 0 ? " (no response)"
                                               : " (" + std::to_string(r.http_status) + ")"));
  }
  g.passed = g.offending_ids.empty();
  g.evidence =
      g.passed
          ? Of(in.measured.size(), in.measured.size(), "measured requests returned HTTP 200")
          : Of(words.size(), in.measured.size(), "measured requests did not return HTTP 200: ") +
                Join(words);
  return g;
}

GateResult NoCancellations(const ValidationInput& in) {
  GateResult g = NewGate("no_cancellations");
  std::vector<std::string> words;
  for (const RequestResult& r : in.measured) {
    if (!r.cancelled && !r.timed_out) continue;
    g.offending_ids.push_back(r.id);
    std::string why = r.timed_out       ? "timed out"
                      : r.stalled       ? "stalled"
                      : r.start_ns == 0 ? "never sent"
                                        : "cut";
    words.push_back(r.id + " (" + why + ")");
  }
  g.passed = g.offending_ids.empty();
  g.evidence = g.passed ? Of(0, in.measured.size(), "measured requests were cancelled or timed out")
                        : Of(words.size(), in.measured.size(),
                             "measured requests did not complete normally: ") +
                              Join(words);
  return g;
}

GateResult ZeroErrors(const ValidationInput& in) {
  GateResult g = NewGate("zero_errors");
  std::vector<std::string> words;
  int64_t total_errors = 0;
  const size_t total = in.warmup.size() + in.measured.size();
  for (const auto* list : {&in.warmup, &in.measured}) {
    for (const RequestResult& r : *list) {
      if (r.errors.empty()) continue;
      total_errors += static_cast<int64_t>(r.errors.size());
      g.offending_ids.push_back(r.id);
      std::string w = r.id + " (" + r.errors.front();
      if (r.errors.size() > 1) w += "; +" + std::to_string(r.errors.size() - 1) + " more";
      words.push_back(w + ")");
    }
  }
  g.passed = g.offending_ids.empty();
  g.evidence = g.passed
                   ? "0 errors in " + std::to_string(total) + " requests (warm-up and measured)"
                   : std::to_string(total_errors) + " errors in " +
                         Of(words.size(), total, "requests: ") + Join(words, 5) +
                         (words.size() > 5 ? "; all: " + Join(g.offending_ids) : "");
  return g;
}

GateResult ExactTokens(const ValidationInput& in) {
  GateResult g = NewGate("exact_completion_tokens");
  std::vector<std::string> words;
  std::set<int64_t> wants;
  for (const RequestResult& r : in.measured) {
    auto it = in.expected_completion_tokens.find(r.id);
    const int64_t want =
        it != in.expected_completion_tokens.end() ? it->second : in.row->workload.output_tokens;
    wants.insert(want);
    if (r.completion_tokens && *r.completion_tokens == want) continue;
    g.offending_ids.push_back(r.id);
    words.push_back(
        r.id + " (" +
        (r.completion_tokens ? std::to_string(*r.completion_tokens) : std::string("none")) +
        ", want " + std::to_string(want) + ")");
  }
  const std::string want_words =
      wants.size() == 1 ? std::to_string(*wants.begin()) : std::string("the requested count");
  g.passed = g.offending_ids.empty();
  g.evidence = g.passed ? Of(in.measured.size(), in.measured.size(),
                             "streams reported server completion_tokens = ") +
                              want_words
                        : Of(words.size(), in.measured.size(),
                             "streams reported server completion_tokens other than ") +
                              want_words + ": " + Join(words);
  return g;
}

GateResult FinishReason(const ValidationInput& in) {
  GateResult g = NewGate("finish_reason");
  const std::string& want = in.row->correctness.finish_reason_value;
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const RequestResult& r : in.measured) {
    if (r.finish_reason == want) continue;
    g.offending_ids.push_back(r.id);
    by_reason[r.finish_reason].push_back(r.id);
  }
  g.passed = g.offending_ids.empty();
  const size_t n = in.measured.size();
  if (g.passed) {
    g.evidence = Of(n, n, "streams ended with finish_reason ") + Quote(want);
  } else if (by_reason.size() == 1) {
    const std::string& got = by_reason.begin()->first;
    g.evidence = Of(g.offending_ids.size(), n, "streams ended with ") +
                 (got.empty() ? std::string("no finish_reason") : "finish_reason " + Quote(got)) +
                 " (want " + Quote(want) + "): " + Join(g.offending_ids);
  } else {
    std::vector<std::string> groups;
    for (const auto& [got, ids] : by_reason) {
      groups.push_back((got.empty() ? std::string("none") : Quote(got)) + ": " + Join(ids));
    }
    g.evidence = Of(g.offending_ids.size(), n, "streams ended with a finish_reason other than ") +
                 Quote(want) + " (";
    for (size_t i = 0; i < groups.size(); ++i) g.evidence += (i ? "; " : "") + groups[i];
    g.evidence += ")";
  }
  return g;
}

GateResult NonemptyDeltas(const ValidationInput& in) {
  GateResult g = NewGate("nonempty_deltas");
  int64_t chunks = 0;
  for (const RequestResult& r : in.measured) {
    chunks += r.nonempty_chunks;
    if (r.nonempty_chunks == 0) g.offending_ids.push_back(r.id);
  }
  g.passed = g.offending_ids.empty();
  const size_t n = in.measured.size();
  g.evidence = g.passed ? Of(n, n, "streams carried non-empty content or reasoning deltas (") +
                              Count(chunks) + " non-empty chunks)"
                        : Of(g.offending_ids.size(), n,
                             "streams carried no non-empty content or reasoning delta: ") +
                              Join(g.offending_ids);
  return g;
}

// Groups of indices whose hashes are equal, each group of size >= 2.
std::vector<std::vector<size_t>> Duplicates(const std::vector<std::string>& hashes) {
  std::map<std::string, std::vector<size_t>> by_hash;
  for (size_t i = 0; i < hashes.size(); ++i) by_hash[hashes[i]].push_back(i);
  std::vector<std::vector<size_t>> out;
  for (auto& [h, idx] : by_hash) {
    if (idx.size() > 1) out.push_back(idx);
  }
  std::sort(out.begin(), out.end());
  return out;
}

GateResult UniquePrompts(const ValidationInput& in) {
  GateResult g = NewGate("unique_prompts");
  std::vector<std::string> words;
  size_t repeats = 0;
  auto check = [&](const std::vector<std::string>& hashes,
                   const std::vector<RequestResult>& results, const char* phase) {
    for (const auto& group : Duplicates(hashes)) {
      std::vector<std::string> names;
      for (size_t i : group) {
        names.push_back(PromptName(results, i, phase));
        g.offending_ids.push_back(names.back());
      }
      repeats += group.size() - 1;
      std::string w;
      for (size_t i = 0; i < names.size(); ++i) w += (i ? " = " : "") + names[i];
      words.push_back(w);
    }
  };
  check(in.warmup_prompt_hashes, in.warmup, "warm-up");
  check(in.measured_prompt_hashes, in.measured, "measured");
  const bool missing = in.measured_prompt_hashes.size() != in.measured.size() ||
                       in.warmup_prompt_hashes.size() != in.warmup.size();
  g.passed = words.empty() && !missing;
  const std::string counts = std::to_string(in.measured_prompt_hashes.size()) + " measured and " +
                             std::to_string(in.warmup_prompt_hashes.size()) +
                             " warm-up prompt hashes";
  if (missing) {
    g.evidence = "cannot check: " + counts + " for " + std::to_string(in.measured.size()) +
                 " measured and " + std::to_string(in.warmup.size()) + " warm-up requests";
  } else if (words.empty()) {
    g.evidence = "all prompts unique: " + counts;
  } else {
    g.evidence = std::to_string(repeats) + " prompts repeat another among " + counts + ": " +
                 Join(words, 10);
  }
  if (missing && !words.empty()) g.evidence += "; repeats: " + Join(words, 10);
  return g;
}

GateResult UniqueOutputs(const ValidationInput& in) {
  GateResult g = NewGate("unique_outputs");
  std::vector<std::string> hashes;
  for (const RequestResult& r : in.measured) hashes.push_back(r.output_sha256);
  std::vector<std::string> words;
  size_t repeats = 0;
  for (const auto& group : Duplicates(hashes)) {
    std::string w;
    for (size_t k = 0; k < group.size(); ++k) {
      const std::string& id = in.measured[group[k]].id;
      g.offending_ids.push_back(id);
      w += (k ? " = " : "") + id;
    }
    repeats += group.size() - 1;
    words.push_back(w);
  }
  const size_t unique = hashes.size() - repeats;
  g.passed = words.empty();
  g.evidence = g.passed ? std::to_string(unique) + " unique output hashes over " +
                              std::to_string(hashes.size()) + " streams"
                        : std::to_string(unique) + " unique output hashes over " +
                              std::to_string(hashes.size()) +
                              " streams; identical outputs: " + Join(words, 10);
  return g;
}

GateResult WarmupDisjoint(const ValidationInput& in) {
  GateResult g = NewGate("warmup_disjoint");
  std::unordered_map<std::string, size_t> warm;
  for (size_t i = 0; i < in.warmup_prompt_hashes.size(); ++i)
    warm.emplace(in.warmup_prompt_hashes[i], i);
  std::vector<std::string> words;
  for (size_t i = 0; i < in.measured_prompt_hashes.size(); ++i) {
    auto it = warm.find(in.measured_prompt_hashes[i]);
    if (it == warm.end()) continue;
    const std::string m = PromptName(in.measured, i, "measured");
    g.offending_ids.push_back(m);
    words.push_back(m + " = " + PromptName(in.warmup, it->second, "warm-up"));
  }
  const bool missing = in.warmup_prompt_hashes.size() != in.warmup.size() ||
                       in.measured_prompt_hashes.size() != in.measured.size();
  g.passed = words.empty() && !missing;
  if (missing) {
    g.evidence = "cannot check: " + std::to_string(in.warmup_prompt_hashes.size()) +
                 " warm-up prompt hashes for " + std::to_string(in.warmup.size()) +
                 " warm-up requests, " + std::to_string(in.measured_prompt_hashes.size()) +
                 " measured prompt hashes for " + std::to_string(in.measured.size()) + " requests";
  } else if (words.empty()) {
    g.evidence = "none of " + std::to_string(in.warmup_prompt_hashes.size()) +
                 " warm-up prompts is among the " +
                 std::to_string(in.measured_prompt_hashes.size()) + " measured prompts";
  } else {
    g.evidence = Of(words.size(), in.measured_prompt_hashes.size(),
                    "measured prompts were also used in warm-up: ") +
                 Join(words);
  }
  return g;
}

// The requests whose prompts share nothing but the template: every measured one, or on a reuse
// row the warm-ups, the primes and the measured prompts it declares unique.
std::vector<RequestResult> ColdChecked(const ValidationInput& in) {
  if (!in.reuse_row) return in.measured;
  std::vector<RequestResult> out = in.warmup;
  for (const RequestResult& r : in.measured) {
    auto it = in.declared_cached_tokens.find(r.id);
    if (it != in.declared_cached_tokens.end() && it->second == 0) out.push_back(r);
  }
  return out;
}

GateResult VerifyCold(const ValidationInput& in) {
  GateResult g = NewGate("verify_cold");
  const int64_t allowed = in.cold_prefix_tokens_allowed;
  std::vector<std::string> words, no_counter;
  int64_t max_cached = 0;
  const std::vector<RequestResult> checked = ColdChecked(in);
  const char* noun = in.reuse_row ? "unique prompts (warm-ups, primes, unshared measured prompts)"
                                  : "measured requests";
  for (const RequestResult& r : checked) {
    if (!r.cached_tokens) {
      no_counter.push_back(r.id);
      continue;
    }
    max_cached = std::max(max_cached, *r.cached_tokens);
    if (*r.cached_tokens > allowed) {
      g.offending_ids.push_back(r.id);
      words.push_back(r.id + " (" + std::to_string(*r.cached_tokens) + ")");
    }
  }
  const size_t n = checked.size();
  const size_t with_counter = n - no_counter.size();
  if (!words.empty()) {
    g.passed = false;
    g.evidence = Of(words.size(), n, noun) + " showed more cached prompt tokens than the " +
                 std::to_string(allowed) + " shared template tokens allowed: " + Join(words);
    if (!in.cold_hint.empty()) g.evidence += ". " + in.cold_hint;
    return g;
  }
  if (no_counter.empty() && n > 0) {
    g.passed = true;
    g.evidence = Of(n, n, noun) + " reported cached prompt tokens <= " + std::to_string(allowed) +
                 " (max " + std::to_string(max_cached) + ")";
    if (!in.counter_note.empty()) g.evidence += "; " + in.counter_note;
    return g;
  }
  // Some or all requests carry no per-request counter: fall back to the server's own counters.
  if (in.cold_counter_available && in.server_cached_tokens_total) {
    const int64_t window = std::max(static_cast<int64_t>(n), in.server_cached_window_requests);
    const int64_t budget = allowed * window;
    g.passed = *in.server_cached_tokens_total <= budget;
    g.evidence = "server cache-hit counter over the " +
                 std::string(window > static_cast<int64_t>(n) ? "warm-up and measured phases: "
                                                              : "measured phase: ") +
                 std::to_string(*in.server_cached_tokens_total) +
                 " cached prompt tokens (allowed " + std::to_string(allowed) + " x " +
                 std::to_string(window) + " requests = " + std::to_string(budget) + "); " +
                 std::to_string(with_counter) + " of " + std::to_string(n) +
                 " requests reported a per-request counter";
    return g;
  }
  if (in.cold_by_unique_prompts && no_counter.size() == n) {
    g.passed = n > 0;
    g.evidence = "not measured: " + in.counter_note + "; " + Of(n, n, noun) +
                 " reported no cached-token counter";
    return g;
  }
  g.passed = false;
  g.evidence = "no counter: the server reported no cached-token counter for " +
               Of(no_counter.size(), n, noun) +
               (no_counter.empty() ? std::string() : " (" + Join(no_counter) + ")") +
               " and no /metrics cache counter was given; cold cache unproven (fail closed)";
  if (!in.counter_hint.empty()) g.evidence += ": " + in.counter_hint;
  g.offending_ids = no_counter;
  return g;
}

// Fail fast leaves requests the harness cut or never sent (RequestResult::cancelled_by_harness).
// They are not the server's failures: the gates judge the streams that ran, and each says how
// many were left out and why.
size_t DropHarnessCut(std::vector<RequestResult>* list, std::string* why) {
  const auto cut = [](const RequestResult& r) { return !r.cancelled_by_harness.empty(); };
  for (const RequestResult& r : *list) {
    if (cut(r) && why->empty()) *why = r.cancelled_by_harness;
  }
  return static_cast<size_t>(std::erase_if(*list, cut));
}

void NoteHarnessCut(CorrectnessReport* rep, size_t cut, const std::string& why) {
  if (cut == 0) return;
  const bool one = cut == 1;
  const std::string note =
      "; " + std::to_string(cut) + (one ? " request" : " requests") +
      " cut or never sent by the harness (" + why + ")" +
      (one ? " is not the server's failure" : " are not the server's failures");
  for (GateResult& g : rep->gates) g.evidence += note;
}

}  // namespace

bool CorrectnessReport::passed() const {
  if (gates.empty()) return false;
  for (const GateResult& g : gates) {
    if (g.enabled && !g.passed && !g.capacity) return false;
  }
  return true;
}

const GateResult* CorrectnessReport::Find(const std::string& name) const {
  for (const GateResult& g : gates) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

CorrectnessReport Validate(const ValidationInput& all) {
  CorrectnessReport rep;
  ValidationInput in = all;
  std::string cut_why;
  const size_t cut = DropHarnessCut(&in.warmup, &cut_why) + DropHarnessCut(&in.measured, &cut_why);
  if (in.row == nullptr) {
    for (const char* name : kGateNames) {
      rep.gates.push_back(GateResult{name, true, false, "no row given to the validator", {}});
    }
    return rep;
  }
  const Correctness& c = in.row->correctness;
  // The gates on the plan (record count, prompts) see every planned request; the rest judge
  // the streams that ran.
  rep.gates.push_back(RecordCount(all));
  rep.gates.push_back(ApplyRow(Status200(in), c.status_200));
  rep.gates.push_back(ApplyRow(NoCancellations(in), c.no_cancellations));
  rep.gates.push_back(ZeroErrors(in));
  rep.gates.push_back(ApplyRow(ExactTokens(in), c.exact_completion_tokens));
  rep.gates.push_back(ApplyRow(FinishReason(in), c.finish_reason));
  rep.gates.push_back(ApplyRow(NonemptyDeltas(in), c.nonempty_deltas));
  rep.gates.push_back(ApplyRow(UniquePrompts(all), c.unique_prompts));
  rep.gates.push_back(ApplyRow(UniqueOutputs(in), c.unique_outputs));
  rep.gates.push_back(ApplyRow(WarmupDisjoint(all), c.warmup_disjoint));
  Gate cold;
  cold.enabled = in.row->cache.verify_cold;
  cold.reason_off = "the row sets cache.verify_cold: false";
  rep.gates.push_back(ApplyRow(VerifyCold(in), cold));
  rep.gates.push_back(CacheReuse(in));
  rep.gates.push_back(SessionHistory(in));
  rep.gates.push_back(ApplyRow(TextRecount(in), c.text_recount));
  rep.gates.push_back(ApplyRow(PromptTokens(in), c.prompt_tokens));
  rep.gates.push_back(ApplyRow(ModelName(in), c.model_name));

  CorrectnessTotals& t = rep.totals;
  t.streams = static_cast<int64_t>(in.measured.size());
  std::set<std::string> hashes;
  for (const RequestResult& r : in.measured) {
    if (r.completion_tokens) t.completion_tokens += *r.completion_tokens;
    t.nonempty_chunks += r.nonempty_chunks;
    t.utf8_bytes += r.output_utf8_bytes;
    hashes.insert(r.output_sha256);
  }
  t.unique_output_hashes = static_cast<int64_t>(hashes.size());
  t.warmup_prompts = static_cast<int64_t>(in.warmup_prompt_hashes.size());
  t.measured_prompts = static_cast<int64_t>(in.measured_prompt_hashes.size());
  NoteHarnessCut(&rep, cut, cut_why);
  return rep;
}

nlohmann::json CorrectnessToJson(const CorrectnessReport& r) {
  nlohmann::json gates = nlohmann::json::array();
  for (const GateResult& g : r.gates) {
    gates.push_back({{"name", g.name},
                     {"enabled", g.enabled},
                     {"passed", g.passed},
                     {"evidence", g.evidence},
                     {"offending_ids", g.offending_ids},
                     {"capacity", g.capacity}});
  }
  const CorrectnessTotals& t = r.totals;
  return nlohmann::json{{"passed", r.passed()},
                        {"gates", std::move(gates)},
                        {"totals",
                         {{"streams", t.streams},
                          {"completion_tokens", t.completion_tokens},
                          {"nonempty_chunks", t.nonempty_chunks},
                          {"utf8_bytes", t.utf8_bytes},
                          {"unique_output_hashes", t.unique_output_hashes},
                          {"warmup_prompts", t.warmup_prompts},
                          {"measured_prompts", t.measured_prompts}}}};
}

}  // namespace capq
