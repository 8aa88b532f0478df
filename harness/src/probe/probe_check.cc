// capq probe --check DIR: a corpus against capq's dialect of its engine (capq/probe/probe.h).
// Every recorded request is replayed on the reference in the recorded order; streamed chats that
// share their number (NN-) were sent at once and are replayed at once. Then the engine's adapter
// runs on the recorded answers and on the reference (probe_adapter.cc).
#include "probe_internal.h"

namespace capq::probe {
namespace {

std::string Number(const std::string& name) { return name.substr(0, name.find('-')); }

bool IsStreamedChat(const CorpusExchange& e) {
  if (e.request.target.find("/chat/completions") == std::string::npos) return false;
  const ojson j = ojson::parse(e.request.body, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.value("stream", false) == true;
}

// Why a recorded exchange cannot be compared ("" when it can).
std::string NotComparable(const CorpusExchange& e) {
  if (e.response_bytes.empty()) return "nothing was received";
  if (!e.response.has_headers) return "the recording holds no complete status line and headers";
  if (!e.response.complete) return "the recorded answer did not complete (cut before its end)";
  return "";
}

// The request as capq's dialect is asked it: the reference's model, and an over-context prompt
// made longer than the reference's context, as the recorded one was than the server's.
WireRequest ReplayRequest(const CorpusExchange& e, const ServerView& ref) {
  WireRequest r;
  r.method = e.request.method;
  r.target = e.request.target;
  const std::string type = e.request.Header("Content-Type");
  if (!type.empty()) r.content_type = type;
  std::string longer;
  const bool over = e.kind == "over_context" && ref.context_tokens;
  if (over) longer = PseudoWords(*ref.context_tokens + 64);
  r.body = e.request.target.find("/chat/completions") != std::string::npos
               ? WithContent(e.request.body, over ? &longer : nullptr, ref.model)
               : e.request.body;
  return r;
}

// The end of the group starting at `i`: streamed chats sharing its number.
size_t GroupEnd(const std::vector<CorpusExchange>& c, size_t i) {
  size_t j = i + 1;
  if (!IsStreamedChat(c[i])) return j;
  while (j < c.size() && Number(c[j].name) == Number(c[i].name) && IsStreamedChat(c[j]) &&
         NotComparable(c[j]).empty()) {
    ++j;
  }
  return j;
}

void ReplayAll(const CheckOptions& o, const std::vector<CorpusExchange>& corpus,
               const ServerView& ref, CheckReport* report) {
  WireOptions wire;
  wire.timeout_s = o.timeout_s;
  for (size_t i = 0; i < corpus.size();) {
    if (std::string why = NotComparable(corpus[i]); !why.empty()) {
      report->notes.push_back(corpus[i].name + ": not compared: " + why);
      ++i;
      continue;
    }
    const size_t end = GroupEnd(corpus, i);
    std::vector<WireRequest> reqs;
    for (size_t k = i; k < end; ++k) reqs.push_back(ReplayRequest(corpus[k], ref));
    std::vector<WireExchange> got;
    if (reqs.size() == 1) {
      got.push_back(Exchange(o.reference_url, reqs[0], wire));
    } else {
      got = ExchangeTogether(o.reference_url, reqs, wire);
    }
    for (size_t k = i; k < end; ++k) {
      if (corpus[k].response.chunked && !corpus[k].response.chunk_framed) {
        report->notes.push_back(corpus[k].name +
                                ": recorded de-chunked, so its events per HTTP chunk are not "
                                "compared");
      }
      CompareAnswers(corpus[k].name + ".resp", corpus[k].response,
                     ParseResponse(got[k - i].response_bytes), o.chunk_key_order,
                     &report->differences);
      ++report->exchanges_compared;
    }
    i = end;
  }
}

}  // namespace

}  // namespace capq::probe

namespace capq {

Result<CheckReport> CheckCorpus(const CheckOptions& o) {
  using namespace probe;
  Result<std::vector<CorpusExchange>> corpus = LoadCorpus(o.dir);
  if (!corpus.ok()) return corpus.status();
  const ServerView ref = LearnServer(o.engine, o.reference_url, "", false);
  if (!ref.facts_error.empty()) {
    return Status::Unavailable("capq's " + ProbeEngineName(o.engine) +
                               " dialect did not answer its adapter: " + ref.facts_error);
  }
  CheckReport report;
  ReplayAll(o, *corpus, ref, &report);
  std::vector<RecordedAnswer> answers;
  for (const CorpusExchange& e : *corpus) {
    if (NotComparable(e).empty()) {
      answers.push_back({e.request.method, e.request.target, e.response_bytes});
    }
  }
  CompareAdapter(o.engine, answers, o.reference_url, &report.differences, &report.notes);
  return report;
}

}  // namespace capq
