#include "debugger/collections.h"

#include <algorithm>
#include <map>

#include "core/errors.h"

namespace strata::debugger {

const std::vector<std::string>& builtinIncludeRegex(const std::string& collectionName) {
  static const std::map<std::string, std::vector<std::string>> kRegex = {
      // smdebug/pytorch/collection.py, verbatim.
      {"weights", {"^(?!gradient).*weight"}},
      {"biases", {"^(?!gradient).*bias"}},
      {"gradients", {"^gradient"}},
      {"losses", {"[Ll]oss_(?!input).*output"}},
      // Ours: the names formed by naming.h.
      {"inputs", {"_input_\\d+$"}},
      {"outputs", {"_output_\\d+$"}},
      {"layers", {"_input_\\d+$", "_output_\\d+$"}},
      {"metrics", {"^scalar/"}},
      {"all", {".*"}},
  };
  static const std::vector<std::string> kNone;
  const auto it = kRegex.find(collectionName);
  return it == kRegex.end() ? kNone : it->second;
}

std::vector<Collection> effectiveCollections(const config::DebuggerConfig& config) {
  STRATA_CHECK(config.collections.size() <= kMaxCollections, "the debugger supports at most ",
               kMaxCollections, " collections, the config has ", config.collections.size());
  std::vector<Collection> out;
  for (const config::CollectionConfig& cc : config.collections) {
    Collection c;
    c.name = cc.name;
    c.includeRegex = cc.includeRegex.empty() ? builtinIncludeRegex(cc.name) : cc.includeRegex;
    c.save = cc.modeSave;
    c.saveShape = cc.saveShape;
    for (const std::string& name : cc.reductions) {
      const auto r = parseReduction(name);
      STRATA_CHECK(r.has_value(), "collection \"", cc.name, "\": unknown reduction \"", name, "\"");
      c.reductions.push_back(*r);
    }
    c.scalarValued = cc.name == "losses" || cc.name == "metrics" || cc.name == "sm_metrics";
    c.trainModeOnly = cc.name == "gradients" || cc.name == "optimizer_variables";
    // smdebug forces scalar collections to raw tensors without reductions.
    c.saveRawTensor = c.scalarValued ? true : cc.saveRawTensor;
    if (c.scalarValued) c.reductions.clear();
    // smdebug writes no histograms of scalar collections (NON_HISTOGRAM_COLLECTIONS).
    c.saveHistogram = cc.saveHistogram && !c.scalarValued;
    out.push_back(std::move(c));
  }
  return out;
}

bool isCollectionDue(const Collection& c, Mode mode, int64_t modeStep) {
  if (c.trainModeOnly && (mode == Mode::kEval || mode == Mode::kPredict)) return false;
  return c.saveFor(mode).shouldSave(modeStep);
}

CollectionMask dueCollections(const std::vector<Collection>& cs, Mode mode, int64_t modeStep) {
  CollectionMask mask = 0;
  for (size_t i = 0; i < cs.size(); ++i)
    if (isCollectionDue(cs[i], mode, modeStep)) mask |= CollectionMask{1} << i;
  return mask;
}

TensorPlan planTensor(const std::vector<Collection>& cs, CollectionMask dueAndContaining,
                      const std::string& tensorName) {
  TensorPlan plan;
  bool shape = false;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!(dueAndContaining & (CollectionMask{1} << i))) continue;
    const Collection& c = cs[i];
    plan.raw = plan.raw || c.saveRawTensor;
    shape = shape || c.saveShape;
    plan.tensorboardScalar = plan.tensorboardScalar || c.scalarValued;
    if (plan.histogramTag.empty() && c.saveHistogram) plan.histogramTag = c.name + "/" + tensorName;
    for (const Reduction& r : c.reductions)
      if (std::find(plan.reductions.begin(), plan.reductions.end(), r) == plan.reductions.end())
        plan.reductions.push_back(r);
  }
  plan.shapeOnly = shape && !plan.raw;
  return plan;
}

CollectionMatcher::CollectionMatcher(const std::vector<Collection>& collections) {
  for (const Collection& c : collections) {
    std::vector<std::regex> compiled;
    for (const std::string& pattern : c.includeRegex) {
      try {
        compiled.emplace_back(pattern, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        STRATA_THROW(Error, "collection \"", c.name, "\": invalid include_regex \"", pattern,
                     "\": ", e.what());
      }
    }
    regexes_.push_back(std::move(compiled));
  }
}

CollectionMask CollectionMatcher::collectionsOf(const std::string& tensorName) {
  const auto it = cache_.find(tensorName);
  if (it != cache_.end()) return it->second;
  CollectionMask mask = 0;
  for (size_t i = 0; i < regexes_.size(); ++i) {
    for (const std::regex& re : regexes_[i]) {
      if (std::regex_search(tensorName, re)) {
        mask |= CollectionMask{1} << i;
        break;
      }
    }
  }
  cache_.emplace(tensorName, mask);
  return mask;
}

}  // namespace strata::debugger
