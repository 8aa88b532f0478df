// Reading a raw evidence file back in one pass (raw_evidence.h).
#include "capq/measurement/raw_evidence.h"

#include <unordered_map>

#include "capq/measurement/evidence_log.h"

namespace capq {
namespace {

// What one pass over the lines keeps: the decoders of the requests still open at this point.
class EvidencePass {
 public:
  EvidencePass(std::string name, const RawRecordFn& on_record, bool keep_events)
      : name_(std::move(name)), on_record_(on_record), keep_events_(keep_events) {}

  Status Line(const std::string& line, int64_t lineno) {
    if (line.empty()) return Status::Ok();
    // Nearly every line is an event, read in place when it is laid out as capq writes it.
    if (lineno > 1 && !v1_ && ParseRawEventLine(line, &event_id_, &event_)) {
      return Event(event_id_, event_, lineno);
    }
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Bad(lineno, "not a JSON object");
    if (lineno == 1) {
      if (!j.contains("schema")) return Bad(lineno, "the first line names no schema");
      sum_.header = j;
      v1_ = j["schema"] == "capq/raw/v1";
      if (v1_) sum_.end = j;  // v1 wrote its load times in the header, at the end of the trial
      return Status::Ok();
    }
    if (v1_) return RecordV1(j, lineno);
    if (auto it = j.find("ev"); it != j.end()) return Event(j, *it, lineno);
    if (auto it = j.find("sent"); it != j.end()) return Sent(j, *it, lineno);
    if (auto it = j.find("record"); it != j.end()) return Record(*it, lineno);
    if (auto it = j.find("end"); it != j.end()) {
      sum_.end = *it;
      return Status::Ok();
    }
    return Bad(lineno, "neither sent, ev, record nor end");
  }

  RawEvidenceSummary Finish(std::string cut) {
    sum_.cut = std::move(cut);
    sum_.unfinished = static_cast<int64_t>(open_.size());
    return std::move(sum_);
  }

 private:
  Status Bad(int64_t lineno, const std::string& why) const {
    return Status::InvalidArgument(name_ + ":" + std::to_string(lineno) + ": " + why);
  }

  static Result<std::string> Id(const nlohmann::json& v) {
    if (!v.is_string()) return Status::InvalidArgument("the request id is not a string");
    return v.get<std::string>();
  }

  Status Sent(const nlohmann::json& j, const nlohmann::json& idv, int64_t lineno) {
    Result<std::string> id = Id(idv);
    if (!id.ok() || !j.contains("t") || !j["t"].is_number_integer()) {
      return Bad(lineno, "a sent line needs a string id and an integer t");
    }
    if (!open_.emplace(*id, StreamDecoder(j["t"].get<MonoNs>())).second) {
      return Bad(lineno, "request " + *id + " sent twice");
    }
    return Status::Ok();
  }

  Status Event(const nlohmann::json& j, const nlohmann::json& idv, int64_t lineno) {
    Result<std::string> id = Id(idv);
    if (!id.ok()) return Bad(lineno, id.status().message());
    if (open_.find(*id) == open_.end()) return NotSent(*id, lineno);
    Result<SseEvent> ev = RawEventFromJson(j);
    if (!ev.ok()) return Bad(lineno, ev.status().message());
    return Event(*id, *ev, lineno);
  }

  Status Event(const std::string& id, SseEvent& ev, int64_t lineno) {
    auto it = open_.find(id);
    if (it == open_.end()) return NotSent(id, lineno);
    it->second.Feed(ev);
    if (keep_events_) events_[id].push_back(std::move(ev));
    return Status::Ok();
  }

  Status NotSent(const std::string& id, int64_t lineno) const {
    return Bad(lineno, "an event of " + id + ", which was not sent");
  }

  Status Record(const nlohmann::json& j, int64_t lineno) {
    Result<RawRecord> rec = RawRecordFromJson(j);
    if (!rec.ok()) return Bad(lineno, rec.status().message());
    if (auto ev = events_.find(rec->id); ev != events_.end()) {
      rec->events = std::move(ev->second);
      events_.erase(ev);
    }
    auto it = open_.find(rec->id);
    RequestResult decoded;
    if (it == open_.end()) {
      decoded = DecodeRecord(*rec);  // never sent: no events
    } else {
      decoded = it->second.Finish(*rec);
      open_.erase(it);
    }
    ++sum_.records;
    on_record_(std::move(*rec), std::move(decoded));
    return Status::Ok();
  }

  Status RecordV1(const nlohmann::json& j, int64_t lineno) {
    Result<RawRecord> rec = RawRecordFromJson(j);
    if (!rec.ok()) return Bad(lineno, rec.status().message());
    RequestResult decoded = DecodeRecord(*rec);
    ++sum_.records;
    on_record_(std::move(*rec), std::move(decoded));
    return Status::Ok();
  }

  std::string name_;
  const RawRecordFn& on_record_;
  bool keep_events_;
  std::unordered_map<std::string, std::vector<SseEvent>> events_;  // keep_events only
  bool v1_ = false;
  std::unordered_map<std::string, StreamDecoder> open_;
  std::string event_id_;  // the event line read in place, its buffers reused
  SseEvent event_;
  RawEvidenceSummary sum_;
};

}  // namespace

Result<RawEvidenceSummary> ReadRawEvidence(const std::string& path, const RawRecordFn& on_record,
                                           bool keep_events) {
  Result<std::unique_ptr<EvidenceReader>> reader = EvidenceReader::Open(path);
  if (!reader.ok()) return reader.status();
  const size_t slash = path.find_last_of('/');
  EvidencePass pass(slash == std::string::npos ? path : path.substr(slash + 1), on_record,
                    keep_events);
  std::string line;
  int64_t lineno = 0;
  while ((*reader)->Next(&line)) {
    CAPQ_RETURN_IF_ERROR(pass.Line(line, ++lineno));
  }
  if (lineno == 0) return Status::InvalidArgument(path + ": empty");
  return pass.Finish((*reader)->cut());
}

Result<RawEvidenceFile> ReadRawRecords(const std::string& path) {
  RawEvidenceFile f;
  Result<RawEvidenceSummary> sum = ReadRawEvidence(
      path, [&f](RawRecord&& r, RequestResult&&) { f.records.push_back(std::move(r)); }, true);
  if (!sum.ok()) return sum.status();
  f.summary = std::move(*sum);
  return f;
}

}  // namespace capq
