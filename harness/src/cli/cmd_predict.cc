// capq predict: a row's boundary and its identity's capacity surface through the engine model,
// before any trial is paid for. Navigation, never evidence: qualified points are overlaid.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/model/row_loader.h"
#include "capq/qualify/predict.h"
#include "capq/record/capacity_data.h"
#include "capq/targets/row_limits.h"

namespace capq::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: capq predict ROW [--baseline SRC[,SRC]] [--isl N,N,...] [--osl N,N,...]\n"
    "                        [--qualified SRC,...] [--max-concurrency N]\n"
    "\n"
    "  Predicts ROW's Cmax through the engine model, then the capacity surface of its identity\n"
    "  over a grid of input x output tokens (default: input /4, x1, x2 by output /2, x1, x2).\n"
    "  --baseline SRC     the C=1 baseline to calibrate on: a baseline trial directory, or a row\n"
    "                     file whose expect.baseline is published; two at different prompt\n"
    "                     lengths separate fixed from per-token costs. Default: a sim row's own\n"
    "                     engine profile, else ROW's expect.baseline\n"
    "  --qualified SRC    overlay proven boundaries: capacity-data.json files, or row files with\n"
    "                     expect.cmax, of the same engine, image, model and hardware\n";

using Predictor = RowPredictor;

Result<MeasuredBaseline> LoadBaseline(const std::string& src) {
  if (fs::is_directory(src)) {
    Result<TrialSummary> t = ReadTrialDir(src);
    if (!t.ok()) return t.status();
    Result<Row> row = LoadRow((fs::path(src) / "row.yaml").string(), CheckServerExpect);
    if (!row.ok()) return row.status();
    return BaselineFromTrial(*t, *row);
  }
  Result<Row> row = LoadRow(src, CheckServerExpect);
  if (!row.ok()) return row.status();
  return BaselineFromRow(*row);
}

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

Result<std::vector<int64_t>> Tokens(const ArgParser& p, const char* flag,
                                    std::vector<int64_t> dflt) {
  if (!p.Has(flag)) return dflt;
  std::vector<int64_t> out;
  for (const std::string& s : Split(*p.Get(flag))) {
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || v < 1) {
      return Status::InvalidArgument(std::string("--") + flag + ": '" + s +
                                     "' is not a token count >= 1");
    }
    out.push_back(v);
  }
  return out;
}

// How ROW and its other shapes are predicted, and in words where from.
Result<Predictor> MakePredictor(const Row& row, const ArgParser& p, int max_level) {
  if (!p.Has("baseline") && row.identity.engine == Engine::kSim) {
    return Predictor([max_level](const Row& r) { return PredictFromProfile(r, max_level); });
  }
  std::vector<MeasuredBaseline> baselines;
  for (const std::string& src :
       p.Has("baseline") ? Split(*p.Get("baseline")) : std::vector<std::string>{row.source_path}) {
    Result<MeasuredBaseline> b = LoadBaseline(src);
    if (!b.ok()) return b.status();
    baselines.push_back(std::move(*b));
  }
  return Predictor([baselines, max_level](const Row& r) {
    return PredictFromBaselines(r, baselines, max_level);
  });
}

// Proven boundaries of `row`'s identity, by (input, output) tokens, with where each came from.
using Overlay = std::map<std::pair<int64_t, int64_t>, std::pair<int, std::string>>;

bool SameIdentity(const Row& row, const RowInfo& other) {
  const RowInfo mine = RowInfoFromRow(row);
  return mine.engine == other.engine && mine.image == other.image && mine.model == other.model &&
         mine.hardware == other.hardware;
}

Status AddQualified(const Row& row, const std::string& src, Overlay* out) {
  if (src.size() > 5 && src.substr(src.size() - 5) == ".yaml") {
    Result<Row> r = LoadRow(src, CheckServerExpect);
    if (!r.ok()) return r.status();
    if (r->expect.cmax && SameIdentity(row, RowInfoFromRow(*r))) {
      (*out)[{r->workload.input_tokens, r->workload.output_tokens}] = {*r->expect.cmax, r->id};
    }
    return Status::Ok();
  }
  Result<CapacityData> d = ReadCapacityData(src);
  if (!d.ok()) return d.status();
  for (const RowQualification& q : d->rows) {
    if (q.cmax && !q.row.open_loop() && SameIdentity(row, q.row)) {
      (*out)[{q.row.input_tokens, q.row.output_tokens}] = {*q.cmax, q.row.id};
    }
  }
  return Status::Ok();
}

std::string CmaxText(const Result<BoundaryPrediction>& p, int max_level) {
  if (!p.ok()) return "error";
  if (p->cmax) return std::to_string(*p->cmax);
  return p->curve.size() == 1 && !p->curve[0].passes ? "0" : ">" + std::to_string(max_level);
}

void PrintPrediction(const Row& row, const BoundaryPrediction& p, int max_level) {
  std::printf("%s: %s\n", row.id.c_str(), p.source.c_str());
  std::printf("  %-26s %12s  %-8s %s\n", "parameter", "value", "basis", "how");
  for (const engine::Parameter& x : p.parameters) {
    std::printf("  %-26s %12.6g  %-8s %s\n", x.name.c_str(), x.value, engine::BasisName(x.basis),
                x.how.c_str());
  }
  const SloGate& g = row.slo.front();
  std::printf("  predicted p%g %s, %lld server prompt tokens (limit %.0f ms):\n", g.percentile,
              SloMetricName(g.metric), static_cast<long long>(p.prompt_tokens), g.below_ms);
  for (const PredictedPoint& c : p.curve) {
    std::printf("    C=%-4d %10.0f ms  %s\n", c.level, c.gating_ms, c.passes ? "pass" : "fail");
  }
  std::string expected =
      row.expect.cmax ? " (expect.cmax " + std::to_string(*row.expect.cmax) + ")" : "";
  std::printf("  predicted Cmax = %s%s — %s\n", CmaxText(p, max_level).c_str(), expected.c_str(),
              p.note.c_str());
}

void PrintSurface(const std::vector<SurfacePoint>& pts, const std::vector<int64_t>& osl,
                  const Overlay& qualified, int max_level) {
  std::printf("\ncapacity surface, predicted Cmax [qualified Cmax]:\n  %-10s", "ISL \\ OSL");
  for (int64_t o : osl) std::printf(" %10lld", static_cast<long long>(o));
  for (size_t i = 0; i < pts.size(); ++i) {
    if (i % osl.size() == 0)
      std::printf("\n  %-10lld", static_cast<long long>(pts[i].input_tokens));
    std::string cell = CmaxText(pts[i].prediction, max_level);
    auto q = qualified.find({pts[i].input_tokens, pts[i].output_tokens});
    if (q != qualified.end()) cell += " [" + std::to_string(q->second.first) + "]";
    std::printf(" %10s", cell.c_str());
  }
  std::printf("\n");
  for (const auto& [shape, q] : qualified) {
    std::printf("  [%d] %lld/%lld: %s\n", q.first, static_cast<long long>(shape.first),
                static_cast<long long>(shape.second), q.second.c_str());
  }
  for (const SurfacePoint& pt : pts) {
    if (!pt.prediction.ok()) {
      std::printf("  error at %lld/%lld: %s\n", static_cast<long long>(pt.input_tokens),
                  static_cast<long long>(pt.output_tokens),
                  pt.prediction.status().message().c_str());
    }
  }
}

}  // namespace

int RunPredict(const Args& args) {
  ArgParser p({"baseline", "isl", "osl", "qualified", "max-concurrency"}, {"help"});
  if (std::optional<int> rc = ParseCommand(p, args, "predict", kUsage, 2)) return *rc;
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "capq predict: %s\n", st.ToString().c_str());
    return 2;
  };
  if (p.positionals().size() != 1) return fail(Status::InvalidArgument("give exactly one ROW"));
  Result<Row> row = LoadRow(p.positionals()[0], CheckServerExpect);
  if (!row.ok()) return fail(row.status());
  Result<long long> max_c = p.GetInt("max-concurrency", 256);
  if (!max_c.ok()) return fail(max_c.status());
  const int max_level = static_cast<int>(*max_c);
  Result<Predictor> predict = MakePredictor(*row, p, max_level);
  if (!predict.ok()) return fail(predict.status());
  Result<BoundaryPrediction> mine = (*predict)(*row);
  if (!mine.ok()) return fail(mine.status());
  Result<std::vector<int64_t>> isl =
      Tokens(p, "isl", GridAround(row->workload.input_tokens, {0.25, 1, 2}));
  Result<std::vector<int64_t>> osl =
      Tokens(p, "osl", GridAround(row->workload.output_tokens, {0.5, 1, 2}));
  if (!isl.ok()) return fail(isl.status());
  if (!osl.ok()) return fail(osl.status());
  Overlay qualified;
  for (const std::string& src :
       p.Has("qualified") ? Split(*p.Get("qualified")) : std::vector<std::string>{}) {
    if (Status st = AddQualified(*row, src, &qualified); !st.ok()) return fail(st);
  }
  PrintPrediction(*row, *mine, max_level);
  PrintSurface(PredictSurface(*row, *predict, *isl, *osl), *osl, qualified, max_level);
  return 0;
}

}  // namespace capq::cli
