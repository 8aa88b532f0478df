#include "capq/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace capq {
namespace fs = std::filesystem;

namespace {

Status SyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IoError("fsync " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Status SyncParentFolder(const std::string& path) {
  fs::path p(path);
  return SyncPath(p.has_parent_path() ? p.parent_path().string() : ".", O_RDONLY | O_DIRECTORY);
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes, ParentDirs parents) {
  if (parents == ParentDirs::kCreate && fs::path(path).has_parent_path()) {
    // A folder that cannot be made shows as the temporary file's open error below.
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IoError("write " + tmp + ": " + std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IoError("fsync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Status::IoError("rename " + tmp + " -> " + path + ": " + std::strerror(e));
  }
  return SyncParentFolder(path);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read failed");
  return ss.str();
}

}  // namespace capq
