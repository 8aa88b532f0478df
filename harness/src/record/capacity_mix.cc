#include "capq/record/capacity_data.h"

namespace capq {

nlohmann::json MixInfoToJson(const std::vector<MixClass>& mix) {
  nlohmann::json out = nlohmann::json::array();
  for (const MixClass& c : mix) out.push_back({{"class", c.name}, {"share", c.share}});
  return out;
}

std::vector<MixClass> MixInfoFromJson(const nlohmann::json& j) {
  std::vector<MixClass> out;
  if (!j.is_array()) return out;
  for (const nlohmann::json& e : j) {
    MixClass c;
    c.name = e.value("class", "");
    c.share = e.value("share", 1);
    out.push_back(c);
  }
  return out;
}

}  // namespace capq
