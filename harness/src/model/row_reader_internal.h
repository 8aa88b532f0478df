// What the pieces of the row parser share (row_loader.h states the rules they enforce): the bounds
// a row is checked against, the text of values in messages, a YAML mapping walked in file order,
// and RowParser, whose sections live in files of their own:
//   row_reader.cc           the document, its top-level keys and the rules across sections, and
//                           ParseRow and LoadRowFromString
//   row_reader_values.cc    mappings, keys and typed scalars, each refused with its position
//   row_reader_identity.cc  identity and identity.server_expect
//   row_reader_workload.cc  workload, its arrival, cache, warmup, measured and stability
//   row_reader_slo.cc       slo, slo_tiers and correctness
//   row_reader_expect.cc    trials, expect and provenance
//   row_reader_mix.cc       mix
//   row_reader_reuse.cc     prefix and sessions
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "capq/model/row.h"
#include "capq/model/row_loader.h"

namespace capq::row_reader {

inline constexpr const char* kSchema = "capq/row/v1";
// Upper bounds keep every count inside `int` arithmetic downstream (per_concurrency * C, seeds per
// trial) and keep a malformed row from asking for absurd allocations.
inline constexpr int64_t kMaxTokens = 100'000'000;
inline constexpr int64_t kMaxRequests = 1'000'000;
inline constexpr int64_t kMaxConcurrency = 100'000;
inline constexpr int64_t kMaxTrials = 1000;
// An open-loop row's bounds: a rate step of 100,000 requests/s is far beyond any server; a gamma cv
// of 10 (shape 0.01) is already a train of near-simultaneous bursts.
inline constexpr double kMaxRateStepRps = 100'000;
inline constexpr double kMaxCv = 10;
inline constexpr double kMaxDurationS = 7 * 86400.0;

// A scalar as it may appear in a message: bounded and printable.
std::string Shown(const std::string& s);
// A node as a message names it: null, an empty list, a sequence, a mapping or its shown scalar.
std::string Describe(const YAML::Node& n);
bool IsQuoted(const YAML::Node& n);
bool IsHex(const std::string& s, size_t len);
bool IsValidId(const std::string& s);
// The gates as a set: two tiers with the same gates in another order are the same contract.
std::set<std::tuple<int, double, double>> GateSet(const std::vector<SloGate>& slo);
bool IsDate(const std::string& s);
std::string JoinKeys(const std::vector<std::string>& keys);
// The shortest text that reads back as `v`.
std::string Num(double v);

// The tests of GetNumber.
bool Positive(double v);
bool NonNegative(double v);
bool OpenPercent(double v);
bool UnitInterval(double v);
bool OpenUnitInterval(double v);

struct Entry {
  std::string key;
  YAML::Mark key_mark;
  YAML::Node value;
};

// A YAML mapping with its entries in file order, so that duplicate keys (which yaml-cpp keeps
// silently) and unknown keys can be refused with their own positions.
struct MapView {
  std::string path;       // key path of the mapping itself ("" for the document)
  YAML::Mark mark;        // where the mapping's content starts
  YAML::Mark missing_at;  // where a missing key is reported: the mapping's own key, if it has one
  std::vector<Entry> entries;

  const Entry* Find(const std::string& key) const {
    for (const auto& e : entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }
};

class RowParser {
 public:
  RowParser(std::string file, RowError* error) : file_(std::move(file)), error_(error) {}

  bool Parse(const std::string& text, Row* row);
  const YAML::Mark& id_mark() const { return id_mark_; }

 private:
  bool Fail(const YAML::Mark& mark, const std::string& key_path, const std::string& message) {
    if (error_) {
      error_->file = file_;
      error_->line = mark.is_null() ? 1 : mark.line + 1;
      error_->column = mark.is_null() ? 1 : mark.column + 1;
      error_->key_path = key_path;
      error_->message = message;
    }
    return false;
  }
  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static YAML::Mark ValueMark(const Entry& e) {
    // yaml-cpp places an empty value ("key:") on the following line; its key is where the reader
    // looks.
    return e.value.IsNull() ? e.key_mark : e.value.Mark();
  }

  bool OpenMap(const YAML::Node& node, const YAML::Mark& at, const std::string& path,
               const std::string& what, MapView* out);
  bool OpenMap(const Entry& e, const std::string& path, const std::string& what, MapView* out) {
    if (!OpenMap(e.value, ValueMark(e), path, what, out)) return false;
    out->missing_at = e.key_mark;
    return true;
  }
  bool CheckKeys(const MapView& m, const std::vector<std::string>& allowed);
  bool Required(const MapView& m, const std::string& key, const std::string& what,
                const Entry** out);

  bool GetString(const Entry& e, const std::string& path, std::string* out);
  bool GetInt(const Entry& e, const std::string& path, int64_t min, int64_t max, int64_t* out);
  bool GetUint(const Entry& e, const std::string& path, uint64_t* out);
  bool GetNumber(const Entry& e, const std::string& path, const std::string& expected,
                 bool (*ok)(double), double* out);
  bool GetBool(const Entry& e, const std::string& path, bool* out);
  bool GetEnum(const Entry& e, const std::string& path, const std::vector<std::string>& options,
               std::string* out);

  // Where the sample size of the measured interval is declared: the key a too-small sample is
  // reported at (min_requests, duration_s or requests).
  struct SampleAt {
    YAML::Mark mark;
    std::string path;
  };

  bool LoadDocument(const std::string& text, YAML::Node* doc);
  // Refuses a value `capq rows new` could not read from the server ("TODO: ..."), at its line.
  bool RefuseTodo(const YAML::Node& node, const std::string& path, int depth);
  bool ParseHeader(const MapView& top, Row* row);
  bool ParseServing(const MapView& top, Row* row, YAML::Mark* ignore_eos_at);
  bool ParseSampleAndSlo(const MapView& top, Row* row, SampleAt* sample_at);
  bool ParseGatesAndTrials(const MapView& top, Row* row);
  bool ParseReuse(const MapView& top, Row* row);
  bool CheckAcrossSections(const Row& row, const MapView& top, const SampleAt& sample_at,
                           const YAML::Mark& ignore_eos_at);
  bool CheckSloSamples(const Row& row, const SampleAt& sample_at);
  bool CheckThirdSamples(const Row& row, const SampleAt& sample_at);

  bool ParseIdentity(const Entry& e, Identity* id);
  bool ParseSimIdentity(const MapView& m, Identity* id);
  bool ParseSimProfile(const Entry& e, Identity* id);
  bool ParseServerIdentity(const MapView& m, Identity* id);
  bool ParseModelAndHardware(const MapView& m, Identity* id);
  bool ParseServerExpect(const Entry& e, Identity* id);
  bool ParseWorkload(const Entry& e, Workload* w, YAML::Mark* ignore_eos_at);
  bool ParseArrival(const Entry& e, Workload* w);
  bool ParseOpenLoopArrival(const MapView& a, const Entry* cv, Workload* w);
  bool ParseCache(const Entry& e, CachePolicy* c);
  bool ParseWarmup(const Entry& e, Warmup* w);
  bool ParseMeasured(const Entry& e, Workload* w, Measured* m, SampleAt* sample_at);
  bool ParseOpenLoopMeasured(const MapView& m, Workload* w, SampleAt* sample_at);
  bool ParseMeasuredInterval(const MapView& m, OpenLoop* o, SampleAt* sample_at);
  bool ParseClosedLoopMeasured(const MapView& m, Measured* out, SampleAt* sample_at);
  bool ParseStability(const Entry& e, Stability* s);
  bool ParseSlo(const Entry& e, const std::string& path, std::vector<SloGate>* slo);
  bool ParseSloTiers(const Entry& e, const std::vector<SloGate>& primary,
                     std::vector<SloTier>* tiers);
  bool ParseSloTier(const YAML::Node& item, const YAML::Mark& at, const std::string& path,
                    SloTier* tier);
  bool CheckTierNames(const std::vector<SloTier>& tiers, const std::vector<SloGate>& primary,
                      const std::vector<YAML::Mark>& marks);
  bool ParseCorrectness(const Entry& e, Correctness* c);
  bool CheckTierSamples(const Row& row, const SampleAt& at);
  bool ParseGate(const Entry& e, const std::string& path, Gate* gate, std::string* finish_value);
  bool ParseTrials(const Entry& e, const std::string& row_id, Trials* t);
  bool ParseExpect(const Entry& e, const Workload& w, Expect* x);
  bool ParseRateClaim(const Entry& e, const Workload& w, Expect* x);
  bool ParseBaseline(const Entry& e, Expect* x);
  bool ParseProvenance(const Entry& e, Provenance* p);
  bool ParseMix(const Entry& e, Row* row);
  bool ParseMixLengths(const Entry& e, LengthFit* fit);
  bool ParseMixClass(const Entry& e, const std::string& path, bool replay, MixClass* c);
  bool CheckReplaySample(const Row& row, const MapView& m);
  bool CheckMixSample(const Row& row, const MapView& m);
  bool CheckMixPeak(const Row& row, const Mix& mix, const Entry& traffic_at);
  bool ParseReuseTolerance(const MapView& m, const std::string& path, ReuseTolerance* t);
  bool ParsePrefix(const Entry& e, Row* row);
  bool ParsePrefixGroup(const Entry& e, const std::string& path, int64_t input_tokens,
                        PrefixGroup* g);
  bool ParseSessions(const Entry& e, Row* row);
  bool ParseThinkTime(const Entry& e, Sessions* s);
  bool ParseTrajectoryPath(const Entry& e, Sessions* s);
  bool ParseTrajectoryFit(const MapView& m, Sessions* s);
  bool ParseSessionScale(const Entry& e, Sessions* s);
  bool ParseSessionBlocks(const Entry& e, Sessions* s);
  bool CheckReuseRow(const Row& row, const MapView& top);
  bool CheckTurnSamples(const Row& row, const SampleAt& at);

  std::string file_;
  RowError* error_;
  YAML::Mark id_mark_;
};

// Parses `text` as the file `pseudo_path` (its family is the parent folder's name); on success
// also tells where the id's value lies (1-based), for duplicate-id errors of other files.
bool ParseRowImpl(const std::string& text, const std::string& pseudo_path, Row* row,
                  RowError* error, int* id_line, int* id_column);

}  // namespace capq::row_reader
