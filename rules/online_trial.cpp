#include "rules/online_trial.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace strata::rules {

void OnlineTrial::setCollections(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& collections) {
  collections_.clear();
  for (const auto& [name, regexes] : collections) {
    Collection c;
    c.name = name;
    c.patterns = regexes;
    collections_.push_back(std::move(c));
  }
}

void OnlineTrial::addStep(const StepInfo& info) {
  steps_[info.step] = info;
  modes_ |= 1u << static_cast<int>(info.mode);
  if (!std::isnan(info.wallTimeSec) && (!lastUpdate_ || info.wallTimeSec > *lastUpdate_)) lastUpdate_ = info.wallTimeSec;
}

void OnlineTrial::touch(const std::string& name, int64_t step) {
  if (names_.insert(name).second) ++namesVersion_;
  std::deque<int64_t>& steps = stepsOf_[name];
  if (steps.empty() || steps.back() != step) {
    if (!steps.empty() && steps.back() > step) {
      // Out of order (not expected from the feed): keep the deque sorted.
      auto it = std::lower_bound(steps.begin(), steps.end(), step);
      if (it != steps.end() && *it == step) return;
      steps.insert(it, step);
    } else {
      steps.push_back(step);
    }
    ++dataPerStep_[step];
  }
  touched_.insert(name);
}

void OnlineTrial::addValue(int64_t step, const std::string& name, TensorValue value) {
  data_.putValue(name, step, std::move(value));
  touch(name, step);
}

void OnlineTrial::addReduction(int64_t step, const std::string& name, const std::string& op, bool abs,
                               double value) {
  data_.putReduction(name, step, op, abs, value);
  touch(name, step);
}

void OnlineTrial::dropData(const std::string& name, int64_t step) {
  data_.erase(name, step);
  auto d = dataPerStep_.find(step);
  if (d != dataPerStep_.end() && --d->second <= 0) {
    dataPerStep_.erase(d);
    steps_.erase(step);  // no retained data left at it: nothing a rule can read there
  }
}

void OnlineTrial::evict() {
  for (const std::string& name : touched_) {
    std::deque<int64_t>& steps = stepsOf_[name];
    while (steps.size() > retain_) {
      dropData(name, steps.front());
      steps.pop_front();
    }
  }
  touched_.clear();
}

std::vector<std::string> OnlineTrial::collections() const {
  std::vector<std::string> out;
  for (const auto& c : collections_) out.push_back(c.name);
  return out;
}

std::vector<std::string> OnlineTrial::tensorNames(const std::string& collection) const {
  if (collection.empty()) return {names_.begin(), names_.end()};
  auto c = std::find_if(collections_.begin(), collections_.end(),
                        [&](const Collection& e) { return e.name == collection; });
  // As the trial reader: asking for a collection the run does not have is an error.
  if (c == collections_.end()) throw std::out_of_range("trial has no collection \"" + collection + "\"");
  if (!c->compiled) {
    for (const std::string& r : c->patterns) {
      try {
        c->regexes.emplace_back(r, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        // The trial reader skips what C++ cannot compile too (with a warning there).
      }
    }
    c->compiled = true;
  }
  if (c->version != namesVersion_) {
    c->members.clear();
    for (const std::string& name : names_) {
      auto it = c->matched.find(name);
      if (it == c->matched.end()) {
        bool member = false;
        for (const std::regex& r : c->regexes) member = member || std::regex_search(name, r);
        it = c->matched.emplace(name, member).first;
      }
      if (it->second) c->members.push_back(name);
    }
    c->version = namesVersion_;
  }
  return c->members;
}

bool OnlineTrial::collectionHasTensors(const std::string& collection) const {
  if (std::find(filledElsewhere_.begin(), filledElsewhere_.end(), collection) != filledElsewhere_.end()) return true;
  return !tensorNames(collection).empty();
}

std::vector<StepInfo> OnlineTrial::steps() const {
  std::vector<StepInfo> out;
  out.reserve(steps_.size());
  for (const auto& kv : steps_) out.push_back(kv.second);
  return out;
}

std::vector<StepInfo> OnlineTrial::stepsAfter(int64_t step) const {
  std::vector<StepInfo> out;
  for (auto it = steps_.upper_bound(step); it != steps_.end(); ++it) out.push_back(it->second);
  return out;
}

}  // namespace strata::rules
