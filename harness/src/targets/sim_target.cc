// The simulator's adapter (target.h), around the adapter of the engine its dialect stands in for.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter_common.h"
#include "capq/engine/profile.h"

namespace capq::internal {
namespace {

using adapter::Metric;
using adapter::ScalarText;

// The simulator speaks one real engine's dialect, so everything goes to that engine's adapter;
// only its identity (the profile digest and time scale, GET /capq/sim) is the simulator's own.
// The digest the server must report is the row's own profile file's, hashed here.
class SimTarget : public Target {
 public:
  SimTarget(TargetOptions o, std::string profile_path, std::unique_ptr<Target> dialect)
      : Target(std::move(o)),
        profile_path_(std::move(profile_path)),
        dialect_(std::move(dialect)) {}
  Engine engine() const override { return Engine::kSim; }

  Result<IdentityInputs> LocalIdentity() const override {
    Result<engine::EngineProfile> profile = engine::LoadProfile(profile_path_);
    if (!profile.ok()) return profile.status().WithContext("the row's simulator profile");
    IdentityInputs in;
    in.sim_profile_digest = engine::ProfileDigest(*profile);
    in.sim_served_model_name = profile->served_model_name;
    return in;
  }

  Result<ServerFacts> Facts() override {
    Result<ServerFacts> f = dialect_->Facts();
    if (!f.ok()) return f;
    Result<nlohmann::json> sim = GetJson("/capq/sim");
    if (!sim.ok()) return f;  // CheckIdentity says the digest was not reported
    f->documents["/capq/sim"] = *sim;
    const auto& s = *sim;
    if (s.contains("identity_digest") && s["identity_digest"].is_string()) {
      f->sim_identity_digest = s["identity_digest"].get<std::string>();
    }
    if (s.contains("time_scale") && s["time_scale"].is_number()) {
      f->sim_time_scale = s["time_scale"].get<double>();
    }
    if (s.contains("profile")) f->sim_profile = ScalarText(s["profile"]);
    return f;
  }
  Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) override {
    return dialect_->Flush(deadline_ns, cancel);
  }
  Result<int64_t> CountTokens(const std::string& text) override {
    return dialect_->CountTokens(text);
  }
  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    return dialect_->TokenIds(text);
  }
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return dialect_->RenderedTokenIds(message);
  }
  std::string RenderMethod() const override { return dialect_->RenderMethod(); }
  std::string ColdHint() const override { return dialect_->ColdHint(); }
  std::string MetricsHint() const override { return dialect_->MetricsHint(); }
  std::string MissHint() const override { return dialect_->MissHint(); }
  CacheCounterRule CacheCounter(const ServerFacts& facts) const override {
    return dialect_->CacheCounter(facts);
  }
  std::vector<std::string> CacheSettings(const ServerFacts& facts) const override {
    return dialect_->CacheSettings(facts);
  }
  std::string PrefixCacheOff(const ServerFacts& facts) const override {
    return dialect_->PrefixCacheOff(facts);
  }
  ServerLoad ParseLoad(const std::string& text) const override {
    ServerLoad l = dialect_->ParseLoad(text);
    auto m = ParsePrometheus(text);
    if (!l.running) l.running = Metric(m, "capq_sim:running");
    if (!l.waiting) l.waiting = Metric(m, "capq_sim:waiting");
    return l;
  }
  std::optional<double> ParseCachedTokens(const std::string& text) const override {
    if (auto v = Metric(ParsePrometheus(text), "capq_sim:cached_tokens_total")) return v;
    return dialect_->ParseCachedTokens(text);
  }

 protected:
  // The simulator's /health never generates in any dialect (tested in tests/sim).
  std::string ProbePath() const override { return "/health"; }

 private:
  std::string profile_path_;  // the row's identity.sim_profile
  std::unique_ptr<Target> dialect_;
};

}  // namespace

std::unique_ptr<Target> MakeSimTarget(TargetOptions options, std::string profile_path,
                                      std::unique_ptr<Target> dialect) {
  return std::make_unique<SimTarget>(std::move(options), std::move(profile_path),
                                     std::move(dialect));
}

}  // namespace capq::internal
