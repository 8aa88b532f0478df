// Replays response bytes as framed on the wire into the RawRecord the load generator would build.
//
// The load generator (loadgen_transfer.cc) stamps the first response byte in libcurl's header
// callback and, in the write callback, feeds each read's de-chunked body bytes to the SSE framer
// with that read's arrival time; the transfer's end closes the framer. ReplayWire() does the same
// from a recorded .resp and the list of reads it arrived in, so a test decodes exactly what capq
// would have.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "capq/measurement/loadgen.h"
#include "capq/measurement/sse.h"

namespace capq::wire {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool StartsWithNoCase(std::string_view s, std::string_view lower_prefix) {
  if (s.size() < lower_prefix.size()) return false;
  for (size_t i = 0; i < lower_prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != lower_prefix[i]) return false;
  }
  return true;
}

// Incremental HTTP/1.1 chunked-body decoder: accepts the wire bytes in any split, as a client
// receives them, and appends the payload to *out.
class Dechunker {
 public:
  void Feed(std::string_view in, std::string* out) {
    for (size_t i = 0; i < in.size();) {
      const char c = in[i];
      switch (state_) {
        case kSize:
          ++i;
          if (c == '\n') {
            size_ = std::stoul(line_, nullptr, 16);  // no chunk extensions in these corpora
            line_.clear();
            state_ = size_ == 0 ? kTrailer : kData;
          } else if (c != '\r') {
            line_.push_back(c);
          }
          break;
        case kData: {
          const size_t take = std::min(size_, in.size() - i);
          out->append(in.data() + i, take);
          i += take;
          size_ -= take;
          if (size_ == 0) state_ = kDataEnd;
          break;
        }
        case kDataEnd:  // the CRLF after a chunk's data
          ++i;
          if (c == '\n') state_ = kSize;
          break;
        case kTrailer:
          ++i;
          if (c == '\n') {
            if (line_.empty()) state_ = kDone;
            line_.clear();
          } else if (c != '\r') {
            line_.push_back(c);
          }
          break;
        case kDone:
          ++i;  // nothing may follow; counted as trailing garbage
          ++trailing_;
          break;
      }
    }
  }
  bool complete() const { return state_ == kDone; }
  size_t trailing() const { return trailing_; }

 private:
  enum { kSize, kData, kDataEnd, kTrailer, kDone } state_ = kSize;
  std::string line_;
  size_t size_ = 0;
  size_t trailing_ = 0;
};

// One recv(): `len` bytes at offset `off` of the .resp, arrived at `t`.
struct Read {
  MonoNs t = 0;
  size_t off = 0, len = 0;
};

struct Replayed {
  RawRecord raw;
  bool framing_complete = false;  // Content-Length met, or the terminating 0-chunk arrived
};

// Splits `reads` further into pieces of `split` bytes, each at the time of the read it came from.
inline std::vector<Read> Resplit(const std::vector<Read>& reads, size_t split) {
  std::vector<Read> fine;
  for (const Read& r : reads) {
    for (size_t o = 0; o < r.len; o += split) {
      fine.push_back({r.t, r.off + o, std::min(split, r.len - o)});
    }
  }
  return fine;
}

// One read for the headers and one per HTTP chunk (the servers write one chunk per SSE frame),
// `step` apart from `first`; a body that is not chunked comes with the headers.
inline std::vector<Read> ReadPerChunk(const std::string& resp, MonoNs first, MonoNs step) {
  std::vector<Read> reads;
  const size_t body = resp.find("\r\n\r\n") + 4;
  std::string head = resp.substr(0, body);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (head.find("transfer-encoding: chunked") == std::string::npos) {
    return {{first, 0, resp.size()}};
  }
  reads.push_back({first, 0, body});
  size_t off = body;
  MonoNs t = first;
  while (off < resp.size()) {
    const size_t eol = resp.find("\r\n", off);
    const size_t n = std::stoul(resp.substr(off, eol - off), nullptr, 16);
    const size_t end = n == 0 ? resp.size() : eol + 2 + n + 2;
    t += step;
    reads.push_back({t, off, std::min(end, resp.size()) - off});
    off = end;
  }
  return reads;
}

inline Replayed ReplayWire(const std::string& id, const std::string& resp,
                           const std::vector<Read>& reads, MonoNs send_ns, MonoNs end_ns) {
  Replayed out;
  RawRecord& raw = out.raw;
  raw.id = id;
  raw.intended_send_ns = send_ns;
  raw.actual_send_ns = send_ns;
  const size_t head_end = resp.find("\r\n\r\n");
  EXPECT_NE(head_end, std::string::npos) << id;
  const size_t body_start = head_end + 4;
  bool chunked = false;
  {
    std::istringstream hs(resp.substr(0, head_end));
    std::string line;
    bool first = true;
    while (std::getline(hs, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (first) {
        raw.http_status = std::stol(line.substr(line.find(' ') + 1));
        first = false;
      } else if (StartsWithNoCase(line, "content-type:")) {
        raw.content_type = line.substr(line.find_first_not_of(' ', 13));
      } else if (StartsWithNoCase(line, "transfer-encoding:") &&
                 line.find("chunked") != std::string::npos) {
        chunked = true;
      }
      raw.response_headers.push_back(line);
    }
  }
  const bool sse = StartsWithNoCase(raw.content_type, "text/event-stream");
  SseFramer framer;
  Dechunker dechunk;
  size_t covered = 0;
  for (const Read& r : reads) {
    EXPECT_EQ(r.off, covered) << id << ": the reads must tile the response";
    covered = r.off + r.len;
    if (raw.first_byte_ns == 0 && r.len > 0) raw.first_byte_ns = r.t;
    if (r.off + r.len <= body_start) continue;
    const size_t from = std::max(r.off, body_start);
    const std::string_view bytes(resp.data() + from, r.off + r.len - from);
    std::string payload;
    if (chunked) {
      dechunk.Feed(bytes, &payload);
    } else {
      payload.assign(bytes);
    }
    if (payload.empty()) continue;  // libcurl makes no write call for framing bytes alone
    if (raw.first_body_ns == 0) raw.first_body_ns = r.t;
    raw.body_bytes += static_cast<int64_t>(payload.size());
    if (sse) {
      framer.Feed(payload, r.t, &raw.events);
    } else {
      raw.body += payload;
    }
  }
  EXPECT_EQ(covered, resp.size()) << id << ": the reads cover every byte";
  raw.end_ns = end_ns;
  framer.Finish(raw.end_ns, &raw.events);
  raw.sse_comments = framer.comments();
  raw.sse_overflow = framer.overflowed();
  raw.sse_unterminated = framer.unterminated_events();
  out.framing_complete = chunked ? dechunk.complete() : true;
  if (chunked) {
    EXPECT_EQ(dechunk.trailing(), 0u) << id;
  }
  if (!out.framing_complete) {
    // libcurl ends a chunked body cut by EOF with CURLE_PARTIAL_FILE and this error text; the load
    // generator stores it and marks the request cancelled (loadgen_end.cc, Complete()).
    raw.transport_error = "transfer closed with outstanding read data remaining";
    raw.cancelled = true;
  }
  return out;
}

}  // namespace capq::wire
