// Effective collections and the save schedule (specs/smdebug.md §1.5, §1.8, §8.11).
//
// A Collection is a config::CollectionConfig with everything resolved: a built-in's default
// regex filled in, reductions parsed, and the smdebug special cases flagged. The schedule
// decisions are pure functions; CollectionMatcher caches regex results per tensor name and
// is NOT thread-safe (one owner thread: the training thread).
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "debugger/reductions.h"
#include "debugger/types.h"

namespace strata::debugger {

struct Collection {
  std::string name;
  std::vector<std::string> includeRegex;  // effective; searched unanchored (Python re.search)
  config::ModeSaveConfigs save;           // the schedule of each mode, on that mode's steps
  std::vector<Reduction> reductions;
  bool saveRawTensor = true;
  bool saveShape = false;       // the index lists the tensor's shape (shape_payload)
  bool saveHistogram = false;   // a TensorBoard histogram per saved tensor (never for scalars)
  bool scalarValued = false;    // losses, metrics, sm_metrics: raw only, TensorBoard scalars
  bool trainModeOnly = false;   // gradients, optimizer_variables: skipped in EVAL and PREDICT

  const config::SaveConfig& saveFor(Mode mode) const { return save[static_cast<size_t>(mode) - 1]; }
};

// Our defaults for the built-in collections. smdebug's PyTorch defaults (weights, biases,
// gradients, losses) are kept verbatim; inputs/outputs/layers select the names our module
// wrapper forms; metrics selects save_scalar values; all selects everything. default,
// sm_metrics and optimizer_variables select nothing unless configured with include_regex.
const std::vector<std::string>& builtinIncludeRegex(const std::string& collectionName);

// Resolves a config into effective collections, in config order. Throws strata::Error if
// more than kMaxCollections are configured.
inline constexpr size_t kMaxCollections = 64;  // CollectionMask is one 64-bit word
std::vector<Collection> effectiveCollections(const config::DebuggerConfig& config);

// Bit i set: collection i.
using CollectionMask = uint64_t;

// smdebug's rule: a collection is due at (mode, modeStep) when its SaveConfig says so for
// that MODE step, except that gradients/optimizer_variables are never due in EVAL/PREDICT.
bool isCollectionDue(const Collection& c, Mode mode, int64_t modeStep);
CollectionMask dueCollections(const std::vector<Collection>& cs, Mode mode, int64_t modeStep);

// What to write for one tensor, given the due collections that contain it.
struct TensorPlan {
  bool raw = false;                   // some collection saves the raw tensor
  std::vector<Reduction> reductions;  // union over non-scalar collections, first-seen order
  bool tensorboardScalar = false;     // some scalar-valued collection contains it
  // smdebug's save_shape: the shape goes to the index's shape_payload. Only when the raw
  // tensor is not written: a name in both payloads of one index makes smdebug's reader lose
  // the value (specs/smdebug.md §1.4), and a raw tensor carries its shape anyway.
  bool shapeOnly = false;
  // The TensorBoard histogram tag "<collection>/<tensor>" of the first due collection with
  // save_histogram (smdebug writes one histogram per tensor); empty: none.
  std::string histogramTag;
  bool any() const { return raw || !reductions.empty() || shapeOnly || !histogramTag.empty(); }
};
TensorPlan planTensor(const std::vector<Collection>& cs, CollectionMask dueAndContaining,
                      const std::string& tensorName);

// Regex membership of tensor names, cached per name (regex_search is slow; names repeat
// every saved step).
class CollectionMatcher {
 public:
  explicit CollectionMatcher(const std::vector<Collection>& collections);
  // Collections whose include_regex matches `tensorName`.
  CollectionMask collectionsOf(const std::string& tensorName);
  size_t cachedNames() const { return cache_.size(); }

 private:
  std::vector<std::vector<std::regex>> regexes_;  // per collection
  std::unordered_map<std::string, CollectionMask> cache_;
};

}  // namespace strata::debugger
