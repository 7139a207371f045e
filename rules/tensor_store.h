// Tensor data by (name, step): raw values and stored reductions, and the lookups a Trial
// answers hasTensor(), value() and reduction() from; InMemoryTrial, the base of MemoryTrial
// and OnlineTrial, answers them from one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "strata/rules.h"

namespace strata::rules {

class TensorStore {
 public:
  // Adds or replaces a value; a shapeless value of other than one element gets the 1-d shape
  // of its data.
  void putValue(const std::string& name, int64_t step, TensorValue value) {
    if (value.shape.empty() && value.data.size() != 1) value.shape = {static_cast<int64_t>(value.data.size())};
    values_[{name, step}] = std::move(value);
  }
  void putReduction(const std::string& name, int64_t step, const std::string& op, bool abs, double v) {
    reductions_[{name, step, op, abs}] = v;
  }
  // Drops the value and every reduction of (name, step).
  void erase(const std::string& name, int64_t step) {
    values_.erase({name, step});
    auto it = firstReduction(name, step);
    while (it != reductions_.end() && std::get<0>(it->first) == name && std::get<1>(it->first) == step)
      it = reductions_.erase(it);
  }
  size_t size() const { return values_.size() + reductions_.size(); }

  // A value or any reduction of (name, step).
  bool has(const std::string& name, int64_t step) const {
    if (values_.count({name, step})) return true;
    auto it = firstReduction(name, step);
    return it != reductions_.end() && std::get<0>(it->first) == name && std::get<1>(it->first) == step;
  }
  std::optional<TensorValue> value(const std::string& name, int64_t step) const {
    auto it = values_.find({name, step});
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<double> reduction(const std::string& name, int64_t step, const std::string& op, bool abs) const {
    auto it = reductions_.find({name, step, op, abs});
    if (it == reductions_.end()) return std::nullopt;
    return it->second;
  }

 private:
  using ReductionKey = std::tuple<std::string, int64_t, std::string, bool>;
  std::map<ReductionKey, double>::const_iterator firstReduction(const std::string& name, int64_t step) const {
    return reductions_.lower_bound({name, step, std::string(), false});
  }
  std::map<ReductionKey, double>::iterator firstReduction(const std::string& name, int64_t step) {
    return reductions_.lower_bound({name, step, std::string(), false});
  }

  std::map<std::pair<std::string, int64_t>, TensorValue> values_;
  std::map<ReductionKey, double> reductions_;
};

// A Trial whose tensor data is a TensorStore it owns (the derived class fills it).
class InMemoryTrial : public Trial {
 public:
  bool hasTensor(const std::string& name, int64_t step) const override { return data_.has(name, step); }
  std::optional<TensorValue> value(const std::string& name, int64_t step) const override {
    return data_.value(name, step);
  }
  std::optional<double> reduction(const std::string& name, int64_t step, const std::string& op,
                                  bool abs) const override {
    return data_.reduction(name, step, op, abs);
  }

 protected:
  TensorStore data_;
};

}  // namespace strata::rules
