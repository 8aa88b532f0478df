// The row files on disk: finding them under folders (skipping simulator profiles), reading them,
// and loading them together with ids unique across every file.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "capq/file_io.h"
#include "capq/model/row_loader.h"
#include "row_reader_internal.h"

namespace capq {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxRowFileBytes = 1 << 20;

using row_reader::JoinKeys;
using row_reader::ParseRowImpl;
using row_reader::Shown;

bool ReadFile(const std::string& path, std::string* text, RowError* error) {
  error->file = path;
  error->line = 0;
  error->column = 0;
  error->key_path.clear();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    error->message = "not a readable file";
    return false;
  }
  auto size = fs::file_size(path, ec);
  if (ec || size > kMaxRowFileBytes) {
    error->message =
        ec ? "cannot read the file size: " + ec.message() : "file larger than 1 MiB: not a row";
    return false;
  }
  Result<std::string> read = ReadWholeFile(path);
  if (!read.ok()) {
    error->message = read.status().message();
    return false;
  }
  *text = std::move(*read);
  return true;
}

void CollectFiles(const std::string& root, std::vector<std::string>* files,
                  std::vector<RowError>* errors) {
  std::error_code ec;
  fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) {
    errors->push_back(RowError{root, 0, 0, "", "no such file or directory"});
    return;
  }
  if (!fs::is_directory(st)) {
    files->push_back(root);
    return;
  }
  std::vector<std::string> found;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    errors->push_back(RowError{root, 0, 0, "", "cannot list the directory: " + ec.message()});
    return;
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      errors->push_back(RowError{root, 0, 0, "", "cannot list the directory: " + ec.message()});
      return;
    }
    const fs::directory_entry& d = *it;
    std::error_code dec;
    if (d.is_directory(dec)) {
      if (d.path().filename() == "profiles") it.disable_recursion_pending();
      continue;
    }
    auto ext = d.path().extension().string();
    if (ext == ".yaml") {
      found.push_back(d.path().string());
    } else if (ext == ".yml") {
      errors->push_back(
          RowError{d.path().string(), 0, 0, "",
                   "row files end in .yaml; rename it so it is not silently skipped"});
    }
  }
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
}

}  // namespace

Result<Row> LoadRow(const std::string& path, const RowCheck& check) {
  std::string text;
  RowError error;
  if (!ReadFile(path, &text, &error)) return Status::IoError(error.ToString());
  return LoadRowFromString(text, path, check);
}

Result<std::vector<std::string>> FindRowFiles(const std::vector<std::string>& paths_or_dirs) {
  std::vector<std::string> files;
  std::vector<RowError> errors;
  for (const auto& p : paths_or_dirs) CollectFiles(p, &files, &errors);
  if (!errors.empty()) return Status::NotFound(errors.front().ToString());
  return files;
}

RowSet CheckRows(const std::vector<std::string>& paths_or_dirs, const RowCheck& check) {
  RowSet set;
  std::vector<std::string> files;
  for (const auto& p : paths_or_dirs) CollectFiles(p, &files, &set.errors);
  if (files.empty() && set.errors.empty()) {
    std::string where = JoinKeys(paths_or_dirs);
    set.errors.push_back(RowError{where, 0, 0, "", "no row files (*.yaml) found"});
  }
  struct Seen {
    std::string file;
    int line;
    int column;
  };
  std::map<std::string, Seen> ids;
  for (const auto& file : files) {
    std::string text;
    RowError error;
    if (!ReadFile(file, &text, &error)) {
      set.errors.push_back(error);
      continue;
    }
    Row row;
    int line = 0, column = 0;
    if (!ParseRowImpl(text, file, &row, &error, &line, &column)) {
      set.errors.push_back(error);
      continue;
    }
    if (std::optional<RowError> refused = check ? check(&row) : std::nullopt) {
      set.errors.push_back(*refused);
      continue;
    }
    auto [it, inserted] = ids.emplace(row.id, Seen{file, line, column});
    if (!inserted) {
      set.errors.push_back(RowError{file, line, column, "id",
                                    "duplicate id " + Shown(row.id) + ", already defined at " +
                                        it->second.file + ":" + std::to_string(it->second.line) +
                                        ":" + std::to_string(it->second.column) +
                                        "; expected ids unique across all rows"});
      continue;
    }
    set.rows.push_back(std::move(row));
  }
  return set;
}

Result<std::vector<Row>> LoadRows(const std::vector<std::string>& paths_or_dirs,
                                  const RowCheck& check) {
  RowSet set = CheckRows(paths_or_dirs, check);
  if (!set.errors.empty()) {
    std::string msg = set.errors.front().ToString();
    if (set.errors.size() > 1) {
      msg += " (and " + std::to_string(set.errors.size() - 1) + " more errors)";
    }
    return Status::InvalidArgument(msg);
  }
  return std::move(set.rows);
}

}  // namespace capq
