// Whole files: the one reader and the one atomic writer every layer uses for a file read or
// replaced at once (rows, profiles, capacity data, a trial's JSON files).
#pragma once

#include <string>

#include "capq/status.h"

namespace capq {

// Whether WriteFileAtomic first creates the folders above `path` that are missing.
enum class ParentDirs { kMustExist, kCreate };

// Writes `bytes` to `path` through a temporary file in the same folder: write, fsync, rename,
// fsync the folder. A reader sees the old file or the new one, never a part.
Status WriteFileAtomic(const std::string& path, const std::string& bytes,
                       ParentDirs parents = ParentDirs::kMustExist);

// The bytes of `path`; NotFound when it cannot be opened, IoError when the read fails. The
// message names the path.
Result<std::string> ReadWholeFile(const std::string& path);

// fsyncs the folder that holds `path`, so that a rename into it outlives a crash.
Status SyncParentFolder(const std::string& path);

}  // namespace capq
