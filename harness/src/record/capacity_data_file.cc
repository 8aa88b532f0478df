#include "capq/file_io.h"
#include "capq/record/artifacts.h"
#include "capq/record/capacity_data.h"

namespace capq {

using nlohmann::json;

Result<CapacityData> ReadCapacityData(const std::string& path) {
  auto text = ReadWholeFile(path);
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
