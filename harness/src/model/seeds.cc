// The seed of a trial whose row names none: a pure function of the row id and the trial index.
#include <string>

#include "capq/hash.h"
#include "capq/model/row_loader.h"

namespace capq {

uint64_t DeriveTrialSeed(const std::string& row_id, int trial_index) {
  std::string key = row_id + "#" + std::to_string(trial_index);
  uint64_t h = Fnv1a64(key);
  return (h ^ (h >> 31)) % 2147483647ull + 1;
}

}  // namespace capq
