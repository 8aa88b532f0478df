#include "capq/measurement/sse.h"

#include <algorithm>
#include <cstring>

namespace capq {

SseFramer::SseFramer(size_t max_event_bytes)
    : max_event_bytes_(max_event_bytes == 0 ? 1 : max_event_bytes) {}

namespace {

// Index of the first CR or LF in [from, end), or end.
inline size_t FindEol(const char* p, size_t from, size_t end) {
  for (size_t i = from; i < end; ++i) {
    const char c = p[i];
    if (c == '\n' || c == '\r') return i;
  }
  return end;
}

}  // namespace

// A line may hold a field name and separator beyond the data it carries ("data: ").
size_t SseFramer::LineRoom() const {
  const size_t cap = max_event_bytes_ + 16;  // keep in sync with Feed()
  return cap > line_.size() ? cap - line_.size() : 0;
}

void SseFramer::Feed(std::string_view bytes, MonoNs arrival_ns, std::vector<SseEvent>* out) {
  const char* p = bytes.data();
  const size_t n = bytes.size();
  bytes_ += static_cast<int64_t>(n);
  size_t i = 0;
  if (skip_lf_ && n > 0) {
    // The last read ended on CR; an LF here is the second half of that CRLF, not a blank line.
    if (p[0] == '\n') i = 1;
    skip_lf_ = false;
  }
  while (i < n) {
    const size_t eol = FindEol(p, i, n);
    if (eol == n) {
      // Partial line: keep it for the next read, within the cap.
      const size_t room = LineRoom();
      const size_t take = std::min(room, n - i);
      line_.append(p + i, take);
      if (take < n - i) {
        line_truncated_ = true;
        overflowed_ = true;
      }
      return;
    }
    if (line_.empty() && !line_truncated_) {
      // Same cap as a line assembled across reads, so framing never depends on read sizes.
      const size_t line_cap = max_event_bytes_ + 16;
      if (eol - i > line_cap) {
        overflowed_ = true;
        line_truncated_ = true;
        ProcessLine(std::string_view(p + i, line_cap), arrival_ns, out);
        line_truncated_ = false;
      } else {
        ProcessLine(std::string_view(p + i, eol - i), arrival_ns, out);
      }
    } else {
      const size_t room = LineRoom();
      const size_t take = std::min(room, eol - i);
      line_.append(p + i, take);
      if (take < eol - i) {
        line_truncated_ = true;
        overflowed_ = true;
      }
      ProcessLine(line_, arrival_ns, out);
      line_.clear();
      line_truncated_ = false;
    }
    size_t next = eol + 1;
    if (p[eol] == '\r') {
      if (next < n) {
        if (p[next] == '\n') ++next;
      } else {
        skip_lf_ = true;
      }
    }
    i = next;
  }
}

void SseFramer::ProcessLine(std::string_view line, MonoNs arrival_ns, std::vector<SseEvent>* out) {
  if (line.empty()) {
    Dispatch(arrival_ns, out);
    return;
  }
  if (line[0] == ':') {
    ++comments_;
    return;
  }
  std::string_view field = line;
  std::string_view value;
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field != "data") return;  // event, id, retry and unknown fields carry nothing we measure
  if (line_truncated_) data_truncated_ = true;
  const bool need_sep = has_data_;  // data lines of one event are joined by LF
  has_data_ = true;
  const size_t want = value.size() + (need_sep ? 1 : 0);
  const size_t room = max_event_bytes_ > data_.size() ? max_event_bytes_ - data_.size() : 0;
  if (want <= room) {
    if (need_sep) data_.push_back('\n');
    data_.append(value.data(), value.size());
  } else {
    data_truncated_ = true;
    overflowed_ = true;
    if (need_sep && room > 0) {
      data_.push_back('\n');
      data_.append(value.data(), std::min(value.size(), room - 1));
    } else if (!need_sep) {
      data_.append(value.data(), std::min(value.size(), room));
    }
  }
}

void SseFramer::Dispatch(MonoNs arrival_ns, std::vector<SseEvent>* out) {
  if (!has_data_) return;
  SseEvent ev;
  ev.arrival_ns = arrival_ns;
  ev.data = std::move(data_);
  ev.truncated = data_truncated_;
  out->push_back(std::move(ev));
  ++events_;
  data_.clear();
  has_data_ = false;
  data_truncated_ = false;
}

void SseFramer::Finish(MonoNs t, std::vector<SseEvent>* out) {
  if (!line_.empty() || line_truncated_) {
    std::string last = std::move(line_);
    ProcessLine(last, t, out);
    line_.clear();
    line_truncated_ = false;
  }
  skip_lf_ = false;
  if (has_data_) {
    ++unterminated_;
    Dispatch(t, out);
  }
}

}  // namespace capq
