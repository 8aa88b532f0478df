#include "capq/measurement/gate_miss.h"

#include "capq/measurement/json_figure.h"

namespace capq {

GateMiss CapacityMiss(const GateResult& g, int judged) {
  GateMiss m;
  m.gate = g.name;
  m.off = static_cast<int>(g.offending_ids.size());
  m.judged = judged;
  m.text = g.name + ": " + g.evidence;
  return m;
}

nlohmann::json GateMissesToJson(const std::vector<GateMiss>& misses) {
  nlohmann::json a = nlohmann::json::array();
  for (const GateMiss& m : misses) {
    nlohmann::json j = {{"gate", m.gate},
                        {"subject", m.subject},
                        {"value", FigureToJson(m.value)},
                        {"bound", FigureToJson(m.bound)},
                        {"in_ms", m.in_ms},
                        {"text", m.text}};
    if (m.capacity()) {
      j["off"] = m.off;
      j["judged"] = m.judged;
    }
    a.push_back(std::move(j));
  }
  return a;
}

std::vector<GateMiss> GateMissesFromJson(const nlohmann::json& a) {
  std::vector<GateMiss> out;
  for (const nlohmann::json& j : a) {
    GateMiss m;
    m.gate = j.at("gate").get<std::string>();
    m.subject = j.value("subject", "");
    m.value = FigureAt(j, "value");
    m.bound = FigureAt(j, "bound");
    m.in_ms = j.value("in_ms", false);
    m.off = j.value("off", 0);
    m.judged = j.value("judged", 0);
    m.text = j.value("text", "");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace capq
