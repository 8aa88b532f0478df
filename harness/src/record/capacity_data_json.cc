// Capacity data as JSON (schema capq/capacity/v1): the rows, each with its result, its locate
// and baseline, its prediction beside the outcome and its trials.
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "capacity_data_internal.h"
#include "capq/record/capacity_data.h"

namespace capq {

using namespace capjson;

namespace capjson {

Result<SloMetric> ParseSloMetric(const std::string& s) {
  if (s == "ttft") return SloMetric::kTtft;
  if (s == "itl") return SloMetric::kItl;
  if (s == "e2e") return SloMetric::kE2e;
  return Status::InvalidArgument("unknown SLO metric '" + s + "'");
}

json GatesToJson(const std::vector<SloGate>& gates) {
  json a = json::array();
  for (const auto& g : gates) {
    a.push_back({{"metric", SloMetricName(g.metric)},
                 {"percentile", g.percentile},
                 {"below_ms", g.below_ms}});
  }
  return a;
}

}  // namespace capjson

namespace {

json RowInfoToJson(const RowInfo& r) {
  json slo = json::array();
  for (const auto& g : r.slo) {
    slo.push_back({{"metric", SloMetricName(g.metric)},
                   {"percentile", g.percentile},
                   {"below_ms", g.below_ms}});
  }
  json out{{"id", r.id},
           {"title", r.title},
           {"family", r.family},
           {"source_path", r.source_path},
           {"identity",
            {{"engine", r.engine},
             {"image", r.image},
             {"model", r.model},
             {"model_revision", r.model_revision},
             {"served_model_name", r.served_model_name},
             {"hardware", r.hardware},
             {"driver", r.driver},
             {"sim_profile", r.sim_profile},
             {"time_scale", r.time_scale}}},
           {"workload", {{"input_tokens", r.input_tokens}, {"output_tokens", r.output_tokens}}},
           {"slo", slo},
           {"percentile_method", r.percentile_method},
           {"warmup", {{"requests", r.warmup_requests}, {"concurrency", r.warmup_concurrency}}},
           {"measured", {{"min_requests", r.min_requests}, {"per_concurrency", r.per_concurrency}}},
           {"trials", {{"count", r.trials_count}, {"quiet_period_s", r.quiet_period_s}}},
           {"expected_cmax", r.expected_cmax ? json(*r.expected_cmax) : json(nullptr)}};
  json arrival{{"kind", ArrivalKindName(r.arrival)}};
  if (r.open_loop()) {
    arrival["rate_step_rps"] = r.rate_step_rps;
    arrival["ramp_s"] = r.ramp_s;
    if (r.measured_duration_s) arrival["duration_s"] = *r.measured_duration_s;
    if (r.measured_requests) arrival["requests"] = *r.measured_requests;
    out["expected_rmax_rps"] = r.expected_rmax_rps ? json(*r.expected_rmax_rps) : json(nullptr);
  }
  out["arrival"] = arrival;
  if (!r.mix.empty()) out["mix"] = MixInfoToJson(r.mix);
  if (!r.reuse.empty()) out["reuse"] = r.reuse;
  if (!r.trace.empty()) {
    json samples = json::array();
    for (const TracePoint& p : r.trace) {
      samples.push_back({p.input_tokens, p.output_tokens, Num(p.offset_s)});
    }
    out["trace"] = {{"file", r.trace_file}, {"samples", std::move(samples)}};
  }
  if (r.confidence) out["confidence"] = *r.confidence;
  return out;
}

Result<RowInfo> RowInfoFromJson(const json& j) {
  RowInfo r;
  r.id = j.at("id").get<std::string>();
  r.title = Get<std::string>(j, "title", "");
  r.family = Get<std::string>(j, "family", "");
  r.source_path = Get<std::string>(j, "source_path", "");
  const json& id = j.at("identity");
  r.engine = Get<std::string>(id, "engine", "");
  r.image = Get<std::string>(id, "image", "");
  r.model = Get<std::string>(id, "model", "");
  r.model_revision = Get<std::string>(id, "model_revision", "");
  r.served_model_name = Get<std::string>(id, "served_model_name", "");
  r.hardware = Get<std::string>(id, "hardware", "");
  r.driver = Get<std::string>(id, "driver", "");
  r.sim_profile = Get<std::string>(id, "sim_profile", "");
  r.time_scale = Get<double>(id, "time_scale", 1.0);
  const json& w = j.at("workload");
  r.input_tokens = w.at("input_tokens").get<int64_t>();
  r.output_tokens = w.at("output_tokens").get<int64_t>();
  for (const auto& g : j.at("slo")) {
    auto m = ParseSloMetric(g.at("metric").get<std::string>());
    if (!m.ok()) return m.status().WithContext("slo");
    r.slo.push_back(SloGate{*m, g.at("percentile").get<double>(), g.at("below_ms").get<double>()});
  }
  r.percentile_method = Get<std::string>(j, "percentile_method", "linear");
  if (j.contains("warmup")) {
    r.warmup_requests = Get<int>(j["warmup"], "requests", 0);
    r.warmup_concurrency = Get<int>(j["warmup"], "concurrency", 1);
  }
  if (j.contains("measured")) {
    r.min_requests = Get<int>(j["measured"], "min_requests", 0);
    r.per_concurrency = Get<int>(j["measured"], "per_concurrency", 0);
  }
  if (j.contains("trials")) {
    r.trials_count = Get<int>(j["trials"], "count", 0);
    r.quiet_period_s = Get<double>(j["trials"], "quiet_period_s", 0);
  }
  if (j.contains("expected_cmax") && !j["expected_cmax"].is_null()) {
    r.expected_cmax = j["expected_cmax"].get<int>();
  }
  // Data written before rate rows has no "arrival": its rows are closed loop.
  if (j.contains("arrival") && j["arrival"].is_object()) {
    const json& a = j["arrival"];
    const std::string kind = a.at("kind").get<std::string>();
    std::optional<ArrivalKind> k = ParseArrivalKind(kind);
    if (!k) return Status::InvalidArgument("arrival.kind: '" + kind + "' is not an arrival kind");
    r.arrival = *k;
    if (r.open_loop()) {
      r.rate_step_rps = a.at("rate_step_rps").get<double>();
      if (!(r.rate_step_rps > 0)) {
        return Status::InvalidArgument("arrival.rate_step_rps: a rate row needs a step > 0");
      }
      r.ramp_s = Get<double>(a, "ramp_s", 0);
      if (a.contains("duration_s")) r.measured_duration_s = a["duration_s"].get<double>();
      if (a.contains("requests")) r.measured_requests = a["requests"].get<int>();
    }
  }
  if (j.contains("expected_rmax_rps") && !j["expected_rmax_rps"].is_null()) {
    r.expected_rmax_rps = j["expected_rmax_rps"].get<double>();
  }
  r.mix = MixInfoFromJson(j.value("mix", json::array()));
  r.reuse = Get<std::string>(j, "reuse", "");
  if (j.contains("trace") && j["trace"].is_object()) {
    r.trace_file = Get<std::string>(j["trace"], "file", "");
    for (const json& p : j["trace"].value("samples", json::array())) {
      if (!p.is_array() || p.size() != 3) continue;
      r.trace.push_back(
          {p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].is_number() ? p[2].get<double>() : NAN});
    }
  }
  if (j.contains("confidence") && j["confidence"].is_number()) {
    r.confidence = j["confidence"].get<double>();
  }
  return r;
}

// Where the locator's hint came from, the curve it predicted and how each engine-model parameter
// was obtained: the prediction beside the outcome.
json PredictionToJson(const RowQualification& q) {
  json curve = json::array(), params = json::array();
  for (const PredictedPoint& p : q.predicted_curve) {
    curve.push_back({{"level", p.level}, {"gating_ms", Num(p.gating_ms)}, {"passes", p.passes}});
  }
  for (const engine::Parameter& p : q.prediction_parameters) {
    params.push_back({{"name", p.name},
                      {"value", Num(p.value)},
                      {"basis", engine::BasisName(p.basis)},
                      {"how", p.how}});
  }
  json checks = json::array();
  for (const PredictionCheck& c : q.prediction_checks) {
    checks.push_back({{"level", c.level},
                      {"predicted_ms", Num(c.predicted_ms)},
                      {"measured_ms", Num(c.measured_ms)},
                      {"trials", c.trials},
                      {"error_pct", Num(c.error_pct)}});
  }
  const std::optional<int> proven = q.proven_level();
  return json{{"source", q.prediction_source},
              {"refined_cmax", q.refined_cmax ? json(*q.refined_cmax) : json(nullptr)},
              {"curve", curve},
              {"checks", checks},
              {"parameters", params},
              {"error_levels",
               proven && q.predicted_cmax ? json(*proven - *q.predicted_cmax) : json(nullptr)},
              {"refined_error_levels",
               proven && q.refined_cmax ? json(*proven - *q.refined_cmax) : json(nullptr)}};
}

engine::Basis BasisFromName(const std::string& name) {
  if (name == "reported") return engine::Basis::kReported;
  if (name == "measured") return engine::Basis::kMeasured;
  return engine::Basis::kAssumed;
}

void PredictionFromJson(const json& d, RowQualification* q) {
  q->prediction_source = Get<std::string>(d, "source", "");
  if (d.contains("refined_cmax") && d["refined_cmax"].is_number_integer()) {
    q->refined_cmax = d["refined_cmax"].get<int>();
  }
  for (const auto& p : d.value("curve", json::array())) {
    q->predicted_curve.push_back(PredictedPoint{p.at("level").get<int>(), GetNum(p, "gating_ms"),
                                                Get<bool>(p, "passes", false)});
  }
  for (const auto& c : d.value("checks", json::array())) {
    q->prediction_checks.push_back(PredictionCheck{
        c.at("level").get<int>(), GetNum(c, "predicted_ms"), GetNum(c, "measured_ms"),
        Get<int>(c, "trials", 0), GetNum(c, "error_pct")});
  }
  for (const auto& p : d.value("parameters", json::array())) {
    q->prediction_parameters.push_back(engine::Parameter{
        Get<std::string>(p, "name", ""), GetNum(p, "value"),
        BasisFromName(Get<std::string>(p, "basis", "")), Get<std::string>(p, "how", "")});
  }
}

json RowQualificationCoreToJson(const RowQualification& q) {
  json phases = json::array();
  for (const auto& p : q.phases) {
    phases.push_back({{"name", p.name},
                      {"trials", p.trials},
                      {"wall_s", p.wall_s},
                      {"start_offset_s", p.start_offset_s}});
  }
  json trials = json::array();
  for (const auto& t : q.trials) trials.push_back(TrialSummaryToJson(t));
  auto opt = [](const std::optional<double>& v) { return v ? Num(*v) : json(nullptr); };
  const BaselineCheck& b = q.baseline;
  auto level = [](const std::optional<int>& v) { return v ? json(*v) : json(nullptr); };
  json result{{"status", QualifyStatusName(q.status)},
              {"cmax", level(q.cmax)},
              {"operating_point", level(q.operating_point)},
              {"message", q.message},
              {"failed_gate", q.failed_gate},
              {"summary_line", q.summary_line}};
  json sides = json::array();
  for (const BoundarySide& s : q.boundary_confidence) {
    json gates = json::array();
    for (const GateConfidence& g : s.gates) gates.push_back(ConfidenceToJson(g));
    sides.push_back(
        {{"level", s.level}, {"side", s.pass_side ? "pass" : "fail"}, {"gates", gates}});
  }
  result["boundary_confidence"] = sides;
  if (const auto& c = q.confidence_claim) {
    result["confidence_claim"] = {
        {"asked", c->asked},
        {"reached", std::isfinite(c->reached) ? json(c->reached) : json()},
        {"met", c->met},
        {"added_trials", c->added_trials},
        {"note", c->note}};
  }
  json locate{
      {"probes", q.probes}, {"probe_budget", q.probe_budget}, {"prediction", q.prediction_note}};
  if (!q.prediction_source.empty()) locate["prediction_detail"] = PredictionToJson(q);
  if (q.row.open_loop()) {
    // A rate row's result is a rate; its levels are written beside the rates they stand for.
    const LoadScale scale = q.row.scale();
    auto rate = [&](const std::optional<int>& v) {
      return v ? json(scale.Rate(*v)) : json(nullptr);
    };
    result["rmax_rps"] = q.rmax_rps ? json(*q.rmax_rps) : json(nullptr);
    result["operating_point_rps"] = rate(q.operating_point);
    locate["max_level"] = q.max_level;
    locate["max_rps"] = scale.Rate(q.max_level);
    locate["predicted_level"] = level(q.predicted_cmax);
    locate["predicted_rps"] = rate(q.predicted_cmax);
  } else {
    locate["max_concurrency"] = q.max_level;
    locate["predicted_cmax"] = level(q.predicted_cmax);
  }
  return json{{"row", RowInfoToJson(q.row)},
              {"result", result},
              {"recommendation", RecommendationToJson(q.recommendation, q.row.scale())},
              {"locate", locate},
              {"baseline",
               {{"checked", b.checked},
                {"within", b.within},
                {"ttft_p50_ms", opt(b.ttft_p50_ms)},
                {"expected_ttft_p50_ms", opt(b.expected_ttft_p50_ms)},
                {"itl_p50_ms", opt(b.itl_p50_ms)},
                {"expected_itl_p50_ms", opt(b.expected_itl_p50_ms)},
                {"tolerance_pct", b.tolerance_pct},
                {"message", b.message}}},
              {"phases", phases},
              {"trials", trials},
              {"started_utc", q.started_utc},
              {"finished_utc", q.finished_utc},
              {"wall_s", q.wall_s},
              {"complete", q.complete},
              {"url", q.url}};
}

}  // namespace

json RowQualificationToJson(const RowQualification& q) {
  json j = RowQualificationCoreToJson(q);
  if (!q.tiers.empty()) AddTiersJson(q, &j);
  return j;
}

json CapacityDataToJson(const CapacityData& d) {
  json rows = json::array();
  for (const auto& r : d.rows) rows.push_back(RowQualificationToJson(r));
  return json{{"schema", d.schema},
              {"generated_utc", d.generated_utc},
              {"command", d.command},
              {"rows", rows}};
}

namespace {

// "result": the status, the boundary found and the words that explain it; a bad status name is
// a Status, a wrong type a json exception.
Status ResultFromJson(const json& res, RowQualification* q) {
  auto st = ParseQualifyStatus(res.at("status").get<std::string>());
  if (!st.ok()) return st.status();
  q->status = *st;
  if (!res.at("cmax").is_null()) q->cmax = res["cmax"].get<int>();
  if (res.contains("rmax_rps") && !res["rmax_rps"].is_null()) {
    q->rmax_rps = res["rmax_rps"].get<double>();
  }
  if (res.contains("operating_point") && !res["operating_point"].is_null()) {
    q->operating_point = res["operating_point"].get<int>();
  }
  q->message = Get<std::string>(res, "message", "");
  q->failed_gate = Get<std::string>(res, "failed_gate", "");
  q->summary_line = Get<std::string>(res, "summary_line", "");
  for (const auto& s : res.value("boundary_confidence", json::array())) {
    BoundarySide side{s.at("level").get<int>(), s.at("side").get<std::string>() == "pass", {}};
    for (const auto& g : s.at("gates")) side.gates.push_back(ConfidenceFromJson(g));
    q->boundary_confidence.push_back(std::move(side));
  }
  if (res.contains("confidence_claim") && res["confidence_claim"].is_object()) {
    const json& c = res["confidence_claim"];
    const json& reached = c.value("reached", json());
    q->confidence_claim = ConfidenceClaim{
        c.at("asked").get<double>(), reached.is_number() ? reached.get<double>() : NAN,
        c.at("met").get<bool>(), c.value("added_trials", 0), c.value("note", std::string())};
  }
  return Status::Ok();
}

// "locate": the probes and the prediction; a rate row names its levels, a closed-loop row its
// concurrencies.
void LocateFromJson(const json& loc, RowQualification* q) {
  q->max_level = loc.contains("max_level") ? Get<int>(loc, "max_level", 0)
                                           : Get<int>(loc, "max_concurrency", 0);
  q->probes = Get<int>(loc, "probes", 0);
  q->probe_budget = Get<int>(loc, "probe_budget", 0);
  for (const char* key : {"predicted_cmax", "predicted_level"}) {
    if (loc.contains(key) && !loc[key].is_null()) q->predicted_cmax = loc[key].get<int>();
  }
  q->prediction_note = Get<std::string>(loc, "prediction", "");
  if (const json d = loc.value("prediction_detail", json()); d.is_object()) {
    PredictionFromJson(d, q);
  }
}

void BaselineFromJson(const json& b, BaselineCheck* out) {
  auto opt = [&](const char* k) -> std::optional<double> {
    double v = GetNum(b, k);
    if (std::isnan(v)) return std::nullopt;
    return v;
  };
  out->checked = Get<bool>(b, "checked", false);
  out->within = Get<bool>(b, "within", true);
  out->ttft_p50_ms = opt("ttft_p50_ms");
  out->expected_ttft_p50_ms = opt("expected_ttft_p50_ms");
  out->itl_p50_ms = opt("itl_p50_ms");
  out->expected_itl_p50_ms = opt("expected_itl_p50_ms");
  out->tolerance_pct = Get<double>(b, "tolerance_pct", 0);
  out->message = Get<std::string>(b, "message", "");
}

// rows[index]. `where` follows the part being read, for the caller's message when a json exception
// escapes; a Status returned names it already.
Result<RowQualification> RowFromJson(const json& rj, size_t index, std::string* where) {
  const std::string row_at = "rows[" + std::to_string(index) + "]";
  *where = row_at;
  RowQualification q;
  auto info = RowInfoFromJson(rj.at("row"));
  if (!info.ok()) return info.status().WithContext("capacity data: " + *where + ".row");
  q.row = *info;
  if (Status st = ResultFromJson(rj.at("result"), &q); !st.ok()) {
    return st.WithContext("capacity data: " + *where + ".result.status");
  }
  if (rj.contains("locate")) LocateFromJson(rj["locate"], &q);
  if (rj.contains("baseline")) BaselineFromJson(rj["baseline"], &q.baseline);
  for (const auto& p : rj.value("phases", json::array())) {
    q.phases.push_back(PhaseCost{p.at("name").get<std::string>(), Get<int>(p, "trials", 0),
                                 Get<double>(p, "wall_s", 0), Get<double>(p, "start_offset_s", 0)});
  }
  size_t ti = 0;
  for (const auto& tj : rj.at("trials")) {
    *where = row_at + ".trials[" + std::to_string(ti++) + "]";
    q.trials.push_back(TrialFromJson(tj));
  }
  q.started_utc = Get<std::string>(rj, "started_utc", "");
  q.finished_utc = Get<std::string>(rj, "finished_utc", "");
  q.wall_s = Get<double>(rj, "wall_s", 0);
  q.complete = Get<bool>(rj, "complete", false);
  q.url = Get<std::string>(rj, "url", "");
  // Data written before recommendations reads without one (RecommendWhereNotRecorded).
  *where = row_at + ".recommendation";
  q.recommendation_recorded = rj.contains("recommendation");
  if (q.recommendation_recorded) q.recommendation = RecommendationFromJson(rj.at("recommendation"));
  if (rj.contains("tiers")) {
    *where = row_at + ".tiers";
    if (Status st = TiersFromJson(rj, &q); !st.ok()) {
      return st.WithContext("capacity data: " + *where);
    }
  }
  return q;
}

}  // namespace

Result<CapacityData> CapacityDataFromJson(const json& j) {
  CapacityData d;
  std::string where = "capacity data";
  try {
    if (!j.is_object()) return Status::InvalidArgument("capacity data: not a JSON object");
    d.schema = j.at("schema").get<std::string>();
    if (d.schema != kCapacitySchema) {
      return Status::InvalidArgument("capacity data: schema '" + d.schema + "', expected '" +
                                     kCapacitySchema + "'");
    }
    d.generated_utc = Get<std::string>(j, "generated_utc", "");
    d.command = Get<std::string>(j, "command", "");
    size_t ri = 0;
    for (const auto& rj : j.at("rows")) {
      Result<RowQualification> q = RowFromJson(rj, ri++, &where);
      if (!q.ok()) return q.status();
      d.rows.push_back(std::move(*q));
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument("capacity data: " + where + ": " + e.what());
  }
  return d;
}

}  // namespace capq
