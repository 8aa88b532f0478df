#include "capq/record/artifacts.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "capq/measurement/decode.h"

namespace capq {
namespace fs = std::filesystem;

// In 1 MiB reads: a trial's raw evidence may be far larger than the memory a trial may use.
Result<std::string> FileSha256Hex(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::NotFound("cannot read " + path + ": " + std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  std::vector<char> buf(1u << 20);
  size_t n = 0;
  while (ok && (n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    ok = EVP_DigestUpdate(ctx.get(), buf.data(), n) == 1;
  }
  ok = ok && !std::ferror(f);
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ok || EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) {
    return Status::IoError("cannot hash " + path);
  }
  return LowerHex(std::string_view(reinterpret_cast<const char*>(md), len));
}

Result<TrialDirWriter> TrialDirWriter::Create(const std::string& final_dir) {
  if (final_dir.empty()) return Status::InvalidArgument("no trial directory given");
  std::error_code ec;
  fs::path final_path = fs::absolute(final_dir, ec);
  if (fs::exists(final_path, ec)) {
    if (!fs::is_directory(final_path, ec)) {
      return Status::InvalidArgument(final_dir + " exists and is not a directory");
    }
    bool empty = fs::is_empty(final_path, ec);
    bool previous_trial =
        fs::exists(final_path / "verdict.json") || fs::exists(final_path / "SHA256SUMS");
    if (!empty && !previous_trial) {
      return Status::InvalidArgument(final_dir +
                                     " exists and holds something other than a trial: refusing "
                                     "to replace it");
    }
  }
  TrialDirWriter w;
  w.final_dir_ = final_path.string();
  w.staging_dir_ = w.final_dir_ + ".partial-" + std::to_string(::getpid());
  fs::create_directories(final_path.parent_path(), ec);
  fs::remove_all(w.staging_dir_, ec);
  if (!fs::create_directories(w.staging_dir_, ec)) {
    return Status::IoError("cannot create " + w.staging_dir_ + ": " + ec.message());
  }
  return w;
}

Status TrialDirWriter::Write(const std::string& name, const std::string& bytes) {
  CAPQ_RETURN_IF_ERROR(WriteFileAtomic(staging_dir_ + "/" + name, bytes));
  if (std::find(files_.begin(), files_.end(), name) == files_.end()) files_.push_back(name);
  return Status::Ok();
}

Status TrialDirWriter::Adopt(const std::string& name) {
  std::error_code ec;
  if (!fs::is_regular_file(staging_dir_ + "/" + name, ec)) {
    return Status::NotFound(staging_dir_ + "/" + name + ": not written");
  }
  if (std::find(files_.begin(), files_.end(), name) == files_.end()) files_.push_back(name);
  return Status::Ok();
}

Status TrialDirWriter::Commit() {
  std::string sums;
  for (const auto& name : files_) {
    Result<std::string> h = FileSha256Hex(staging_dir_ + "/" + name);
    if (!h.ok()) return h.status();
    sums += *h + "  " + name + "\n";
  }
  CAPQ_RETURN_IF_ERROR(WriteFileAtomic(staging_dir_ + "/SHA256SUMS", sums));
  std::error_code ec;
  if (fs::exists(final_dir_, ec)) {
    // A previous trial in the same place: move it aside first so the rename stays atomic.
    const std::string old = final_dir_ + ".old-" + std::to_string(::getpid());
    fs::rename(final_dir_, old, ec);
    if (ec)
      return Status::IoError("cannot move the previous " + final_dir_ + " aside: " + ec.message());
    fs::remove_all(old, ec);
  }
  fs::rename(staging_dir_, final_dir_, ec);
  if (ec)
    return Status::IoError("rename " + staging_dir_ + " -> " + final_dir_ + ": " + ec.message());
  return SyncParentFolder(final_dir_);
}

ChecksumReport VerifyChecksums(const std::string& dir) {
  ChecksumReport rep;
  Result<std::string> sums = ReadWholeFile(dir + "/SHA256SUMS");
  if (!sums.ok()) {
    rep.problems.push_back("SHA256SUMS: missing (the directory was never completed)");
    return rep;
  }
  std::istringstream in(*sums);
  std::string line;
  std::set<std::string> listed;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.size() < 67 || line[64] != ' ') {
      rep.problems.push_back("SHA256SUMS: malformed line '" + line + "'");
      continue;
    }
    std::string want = line.substr(0, 64);
    std::string name = line.substr(66);
    listed.insert(name);
    rep.files.push_back(name);
    if (name.find('/') != std::string::npos || name == "..") {
      rep.problems.push_back("SHA256SUMS: refuses path '" + name + "'");
      continue;
    }
    Result<std::string> got = FileSha256Hex(dir + "/" + name);
    if (!got.ok()) {
      rep.problems.push_back(name + ": listed in SHA256SUMS but missing");
    } else if (*got != want) {
      rep.problems.push_back(name + ": checksum mismatch (the file changed after the trial)");
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name == "SHA256SUMS" || !e.is_regular_file()) continue;
    if (!listed.count(name)) rep.problems.push_back(name + ": not listed in SHA256SUMS");
  }
  rep.ok = rep.problems.empty();
  return rep;
}

}  // namespace capq
