#include "capq/model/session_import.h"

#include <algorithm>
#include <limits>
#include <set>

namespace capq {
namespace {

// The smallest and largest block id of the sessions; nullopt when they have none.
std::optional<std::pair<int64_t, int64_t>> IdRange(const std::vector<TrajectorySession>& sessions) {
  std::optional<std::pair<int64_t, int64_t>> r;
  for (const TrajectorySession& s : sessions) {
    for (const TrajectoryTurn& t : s.turns) {
      for (int64_t id : t.block_ids) {
        r = r ? std::pair{std::min(r->first, id), std::max(r->second, id)} : std::pair{id, id};
      }
    }
  }
  return r;
}

// Shifts a local-id file's ids to start at `next_free` (never down), and moves `next_free`
// past them.
Status ShiftLocalIds(ImportedSessions* f, int64_t* next_free) {
  const auto range = IdRange(f->sessions);
  if (!range) return Status::Ok();
  int64_t shift = 0, top = 0;
  if ((*next_free > range->first && __builtin_sub_overflow(*next_free, range->first, &shift)) ||
      __builtin_add_overflow(range->second, shift, &top) ||
      top == std::numeric_limits<int64_t>::max()) {
    return Status::InvalidArgument(f->file +
                                   ": its block ids cannot be shifted past the ids of "
                                   "the files before it without overflowing");
  }
  for (TrajectorySession& s : f->sessions) {
    for (TrajectoryTurn& t : s.turns) {
      for (int64_t& id : t.block_ids) id += shift;
    }
  }
  *next_free = std::max(*next_free, top + 1);
  return Status::Ok();
}

}  // namespace

Result<ImportedSessions> ImportSessionTrace(TraceFormat format, const std::string& text,
                                            const std::string& file) {
  if (format == TraceFormat::kWeka) return ImportWeka(text, file);
  if (format == TraceFormat::kTraceLab) return ImportTraceLab(text, file);
  return Status::InvalidArgument(file + ": not a session format");
}

Result<std::vector<TrajectorySession>> JoinSessionFiles(std::vector<ImportedSessions> files) {
  int64_t next_free = std::numeric_limits<int64_t>::min();
  for (const ImportedSessions& f : files) {
    const auto range = f.local_block_ids ? std::nullopt : IdRange(f.sessions);
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    if (range) next_free = std::max(next_free, range->second == kMax ? kMax : range->second + 1);
  }
  std::vector<TrajectorySession> out;
  std::set<std::string> names;
  for (ImportedSessions& f : files) {
    if (f.local_block_ids) CAPQ_RETURN_IF_ERROR(ShiftLocalIds(&f, &next_free));
    for (TrajectorySession& s : f.sessions) {
      if (!names.insert(s.name).second) {
        return Status::InvalidArgument(f.file + ": session " + s.name +
                                       " was already read from an earlier file");
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace capq
