// The trial directory: every file written atomically (temp + fsync + rename), staged in a sibling
// folder and renamed into place at the end, with SHA256SUMS (sha256sum's format) written last.
//
// Layout (all JSON is schema-versioned):
//   row.yaml             the resolved row            plan.json        seed, prompts (+sha256),
//   bodies raw.jsonl            one raw record per request  results.jsonl    decoded per-request
//   results metrics.json         capq/metrics/v1             verdict.json     capq/verdict/v1
//   server_info.json     what the server said        server_metrics.jsonl  before, samples, after
//   identity.json        pinned vs running, probe, flush, cold prefix
//   command.txt          the exact command           SHA256SUMS       checksums of all of the above
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/file_io.h"
#include "capq/status.h"

namespace capq {

inline constexpr const char* kVerdictSchema = "capq/verdict/v1";
inline constexpr const char* kMetricsSchema = "capq/metrics/v1";
inline constexpr const char* kIdentitySchema = "capq/identity/v1";
inline constexpr const char* kServerInfoSchema = "capq/server_info/v1";

Result<std::string> FileSha256Hex(const std::string& path);

// Stages a trial directory next to its final place and renames it there on Commit().
class TrialDirWriter {
 public:
  // An existing `final_dir` that holds a previous trial (verdict.json or SHA256SUMS) is replaced
  // at Commit(); any other non-empty folder is refused.
  static Result<TrialDirWriter> Create(const std::string& final_dir);
  Status Write(const std::string& name, const std::string& bytes);
  // A file someone else wrote (and synced) in the staging folder, listed in SHA256SUMS like the
  // rest; NotFound when it is not there.
  Status Adopt(const std::string& name);
  // Writes SHA256SUMS over every file written, then moves the staging folder into place.
  Status Commit();
  const std::string& final_dir() const { return final_dir_; }
  const std::string& staging_dir() const { return staging_dir_; }

 private:
  std::string final_dir_, staging_dir_;
  std::vector<std::string> files_;
};

struct ChecksumReport {
  bool ok = false;
  std::vector<std::string> problems;  // "metrics.json: checksum mismatch (file changed)", ...
  std::vector<std::string> files;     // names listed in SHA256SUMS
};
// Checks every line of DIR/SHA256SUMS and that no file of the directory is left unlisted.
ChecksumReport VerifyChecksums(const std::string& dir);

}  // namespace capq
