// capq probe URL: records a server's conformance corpus (capq/probe/probe.h). The order is a
// trial's: what the server says about itself, tokenize and template rendering, a flush while idle,
// streamed chats at C=1, a burst, and a request longer than the context.
#include "probe_internal.h"

namespace capq::probe {
namespace {

class Recorder {
 public:
  explicit Recorder(const ProbeOptions& o) : o_(o) {
    wire_.api_key = o.api_key;
    wire_.insecure_tls = o.insecure_tls;
    wire_.timeout_s = o.timeout_s;
  }
  const RecordedExchange& Run(PlannedExchange p) {
    WireExchange w = Exchange(o_.base_url, p.req, wire_);
    done_.push_back({std::move(p), std::move(w)});
    return done_.back();
  }
  void RunAll(std::vector<PlannedExchange> plans) {
    for (PlannedExchange& p : plans) Run(std::move(p));
  }
  // Sends every plan at once (ExchangeTogether).
  void RunTogether(std::vector<PlannedExchange> plans) {
    std::vector<WireRequest> reqs;
    for (const PlannedExchange& p : plans) reqs.push_back(p.req);
    std::vector<WireExchange> got = ExchangeTogether(o_.base_url, reqs, wire_);
    for (size_t i = 0; i < plans.size(); ++i) {
      done_.push_back({std::move(plans[i]), std::move(got[i])});
    }
  }
  std::vector<RecordedExchange>& done() { return done_; }

 private:
  const ProbeOptions& o_;
  WireOptions wire_;
  std::vector<RecordedExchange> done_;
};

// Unavailable when the server does not answer the first request.
Status RecordInfo(const ProbeOptions& o, Recorder& r, std::vector<std::string>* notes) {
  const ControlRequests controls = ProbeControls(o.engine, 1);
  if (!controls.readiness_note.empty() && !o.engine.sim) notes->push_back(controls.readiness_note);
  const std::string first_info = controls.info.empty() ? "" : controls.info.front().name;
  for (PlannedExchange& p : InfoExchanges(o.engine)) {
    const RecordedExchange& got = r.Run(std::move(p));
    if (r.done().size() == 1 && got.wire.status == 0) {
      return Status::Unavailable("no answer from " + o.base_url + ": " + got.wire.transport_error);
    }
    // An older build's name for the document (the adapter falls back to it).
    if (got.plan.name == first_info && got.wire.status == 404) {
      r.RunAll(FromControls(controls.info_fallback));
    }
  }
  return Status::Ok();
}

// The template request's answer is tokenized again where the adapter does so.
void RecordTokenize(const ProbeOptions& o, Recorder& r) {
  const ControlRequests controls = ProbeControls(o.engine, 1);
  for (PlannedExchange& p : FromControls(controls.tokenize)) {
    const RecordedExchange& got = r.Run(std::move(p));
    if (got.plan.kind != "template" || !controls.tokenize_rendered || got.wire.status != 200) {
      continue;
    }
    const ojson j = ojson::parse(ParseResponse(got.wire.response_bytes).body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
      r.Run(FromControl(controls.tokenize_rendered(j["prompt"].get<std::string>())));
    }
  }
}

void RecordChats(const ProbeOptions& o, const ServerView& v, Recorder& r) {
  for (int i = 0; i < o.c1_streams; ++i) {
    r.Run(ChatExchange(std::to_string(21 + i) + "-chat-c1", "chat_c1", v.model, i, o.max_tokens,
                       "streamed chat at C=1, include_usage, ignore_eos, max_tokens " +
                           std::to_string(o.max_tokens)));
  }
  std::vector<PlannedExchange> burst;
  const std::string tag = "30-burst" + std::to_string(o.burst) + "-stream";
  for (int i = 0; i < o.burst; ++i) {
    burst.push_back(
        ChatExchange(tag + TwoDigits(i + 1), "chat_burst", v.model, 100 + i, o.max_tokens,
                     "one of " + std::to_string(o.burst) + " streamed chats sent at once"));
  }
  r.RunTogether(std::move(burst));
}

// Past this many words the request body passes 20 MB; such a context is not probed.
constexpr int64_t kMaxOverContextWords = 2'500'000;

void RecordOverContext(const ProbeOptions& o, const ServerView& v, Recorder& r,
                       std::vector<std::string>* notes) {
  if (!v.context_tokens) {
    notes->push_back("no over-context request: the adapter found no context length");
    return;
  }
  const int64_t words = *v.context_tokens + 64;
  if (words > kMaxOverContextWords) {
    notes->push_back("no over-context request: the context (" + std::to_string(*v.context_tokens) +
                     " tokens) is too long to exceed here");
    return;
  }
  r.Run(OverContextExchange(v.model, words, o.max_tokens));
}

}  // namespace

}  // namespace capq::probe

namespace capq {

Result<ProbeSummary> RecordCorpus(const ProbeOptions& o) {
  using namespace probe;
  CAPQ_RETURN_IF_ERROR(PrepareCorpusDir(o.out_dir));
  ProbeSummary summary;
  const ServerView view = LearnServer(o.engine, o.base_url, o.api_key, o.insecure_tls);
  if (!view.facts_error.empty()) {
    summary.notes.push_back("the adapter's Facts() failed (" + view.facts_error + "): model '" +
                            view.model + "' and one slot assumed");
  }
  Recorder r(o);
  CAPQ_RETURN_IF_ERROR(RecordInfo(o, r, &summary.notes));
  RecordTokenize(o, r);
  r.RunAll(FromControls(ProbeControls(o.engine, view.slots).flush));
  RecordChats(o, view, r);
  RecordOverContext(o, view, r, &summary.notes);
  CorpusHeader header{ProbeEngineName(o.engine), o.base_url, view.model, view.context_tokens,
                      summary.notes};
  CAPQ_RETURN_IF_ERROR(WriteCorpus(o.out_dir, header, r.done()));
  summary.exchanges = static_cast<int>(r.done().size());
  return summary;
}

}  // namespace capq
