// The Azure trace row sends the trace: each class's share of a trial's measured requests and its
// paired input and output lengths against the trace's own, within the tolerances
// rows/traffic/README.md states ("Trace rows").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "capq/model/mix.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/model/traffic.h"

namespace capq {
namespace {

const std::string kAzureRow = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_azure.yaml";

// The README's tolerances.
constexpr double kSharePoints = 3.0;   // a class's share, in percentage points
constexpr double kMedianRatio = 0.15;  // a class's p50 input and output, relative
constexpr double kTailRatio = 0.25;    // a class's p95 input and output, relative

struct Lengths {
  std::vector<int64_t> in, out;
};

int64_t Rank(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<size_t>(k, 1) - 1];
}

// What the trace file holds per class, read here on its own: each line in the first class whose
// bin holds its own lengths, both lengths times the row's declared scale.
std::map<std::string, Lengths> TraceClasses(const Mix& mix) {
  Result<std::vector<TrafficSample>> samples = LoadTraffic(mix.traffic);
  EXPECT_TRUE(samples.ok()) << samples.status().ToString();
  std::map<std::string, Lengths> out;
  if (!samples.ok()) return out;
  const auto fit = [&](int64_t v) {
    return std::max<int64_t>(1, std::llround(static_cast<double>(v) * mix.lengths.scale));
  };
  for (const TrafficSample& s : *samples) {
    for (const MixClass& c : mix.classes) {
      if (s.input_tokens > c.max_input_tokens.value_or(INT64_MAX)) continue;
      out[c.name].in.push_back(fit(s.input_tokens));
      out[c.name].out.push_back(fit(s.output_tokens));
      break;
    }
  }
  return out;
}

// What three confirmation trials at C plan to send, per class.
std::map<std::string, Lengths> SentClasses(const Row& row, int c) {
  std::map<std::string, Lengths> out;
  for (int t = 1; t <= 3; ++t) {
    PlanInputs in;
    in.level = c;
    in.trial_index = t;
    Result<TrialPlan> plan = MakeTrialPlan(row, in);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (!plan.ok()) continue;
    for (const PlanRequest& r : plan->measured) {
      out[r.traffic_class].in.push_back(r.prompt.target_tokens);
      out[r.traffic_class].out.push_back(r.max_tokens);
    }
  }
  return out;
}

double Count(const std::map<std::string, Lengths>& m) {
  double n = 0;
  for (const auto& [name, l] : m) n += static_cast<double>(l.in.size());
  return n;
}

// Every way the sent mix strays from the trace beyond the tolerances; empty when it matches.
std::vector<std::string> Deviations(const std::map<std::string, Lengths>& trace,
                                    const std::map<std::string, Lengths>& sent) {
  std::vector<std::string> out;
  const double tn = Count(trace), sn = Count(sent);
  for (const auto& [name, t] : trace) {
    const auto it = sent.find(name);
    if (it == sent.end()) {
      out.push_back(name + ": never sent");
      continue;
    }
    const Lengths& s = it->second;
    const double share_t = 100.0 * static_cast<double>(t.in.size()) / tn;
    const double share_s = 100.0 * static_cast<double>(s.in.size()) / sn;
    if (std::abs(share_t - share_s) > kSharePoints) {
      out.push_back(name + ": share " + std::to_string(share_s) + " % against the trace's " +
                    std::to_string(share_t) + " %");
    }
    for (auto [p, tol] : {std::pair<double, double>{50, kMedianRatio}, {95, kTailRatio}}) {
      for (auto [what, tv, sv] :
           {std::tuple<const char*, const std::vector<int64_t>*, const std::vector<int64_t>*>{
                "input", &t.in, &s.in},
            {"output", &t.out, &s.out}}) {
        const double want = static_cast<double>(Rank(*tv, p));
        const double got = static_cast<double>(Rank(*sv, p));
        if (std::abs(got - want) > tol * want) {
          out.push_back(name + ": p" + std::to_string(static_cast<int>(p)) + " " + what + " " +
                        std::to_string(got) + " against the trace's " + std::to_string(want));
        }
      }
    }
  }
  return out;
}

TEST(TraceMix, TheAzureRowSendsTheTracesSharesAndPairedLengths) {
  Result<Row> row = LoadRow(kAzureRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->mix);
  const auto trace = TraceClasses(*row->mix);
  ASSERT_EQ(Count(trace), 2000);  // every request of the slice has a class
  for (int c : {1, 8, 9}) {
    const std::vector<std::string> dev = Deviations(trace, SentClasses(*row, c));
    EXPECT_TRUE(dev.empty()) << "C=" << c << ": " << dev.front();
  }
}

TEST(TraceMix, SharesOtherThanTheTracesAreCaught) {
  Result<Row> row = LoadRow(kAzureRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  const auto trace = TraceClasses(*row->mix);
  Row skewed = *row;
  skewed.mix->classes.front().share = 3;  // short sent three times as often as long
  const std::vector<std::string> dev = Deviations(trace, SentClasses(skewed, 8));
  ASSERT_FALSE(dev.empty());
  EXPECT_NE(dev.front().find("share"), std::string::npos) << dev.front();
}

TEST(TraceMix, LengthsNotTheTracesAreCaught) {
  Result<Row> row = LoadRow(kAzureRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  const auto trace = TraceClasses(*row->mix);
  Row unscaled = *row;
  for (MixClass& c : unscaled.mix->classes) {
    for (TrafficSample& s : c.samples) s.output_tokens *= 2;  // the fit forgotten on outputs
  }
  const std::vector<std::string> dev = Deviations(trace, SentClasses(unscaled, 8));
  ASSERT_FALSE(dev.empty());
  EXPECT_NE(dev.front().find("output"), std::string::npos) << dev.front();
}

}  // namespace
}  // namespace capq
