#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "capq/record/artifacts.h"
#include "capq/record/capacity_data.h"

namespace capq {

using nlohmann::json;

namespace capdata {

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read failed");
  return ss.str();
}

}  // namespace capdata

Result<CapacityData> ReadCapacityData(const std::string& path) {
  auto text = capdata::ReadFileToString(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not valid JSON");
  auto d = CapacityDataFromJson(j);
  if (!d.ok()) return d.status().WithContext(path);
  return d;
}

Status WriteCapacityData(const std::string& path, const CapacityData& d) {
  return WriteFileAtomic(path, CapacityDataToJson(d).dump(2) + "\n", ParentDirs::kCreate);
}

}  // namespace capq
