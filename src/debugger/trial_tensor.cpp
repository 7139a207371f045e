// TrialTensor: one tensor's saved values across steps and workers (see trial.h).
#include <algorithm>

#include "debugger/trial.h"

namespace strata::debugger {

const TrialTensor::Saved* TrialTensor::savedAt(int64_t step, Mode mode, int64_t* globalStep) const {
  const int64_t g = trial_->globalStep(mode, step);
  if (g < 0) return nullptr;
  const auto it = byGlobalStep_.find(g);
  if (it == byGlobalStep_.end()) return nullptr;
  *globalStep = g;
  return &it->second;
}

std::vector<int64_t> TrialTensor::steps(Mode mode, bool showIncomplete) const {
  std::vector<int64_t> out;
  for (const auto& [global, saved] : byGlobalStep_) {
    if (!showIncomplete && !trial_->isComplete(global)) continue;
    const auto& info = trial_->steps_.at(global);
    if (mode == Mode::kGlobal) {
      out.push_back(global);
    } else if (info.mode == mode) {
      out.push_back(info.modeStep);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> TrialTensor::workers(int64_t step, Mode mode) const {
  int64_t g = 0;
  const Saved* saved = savedAt(step, mode, &g);
  std::vector<std::string> out;
  if (!saved) return out;
  for (const auto& [worker, where] : saved->raw) out.push_back(worker);
  for (const auto& [worker, list] : saved->reductions)
    if (!saved->raw.count(worker)) out.push_back(worker);
  std::sort(out.begin(), out.end());
  return out;
}

bool TrialTensor::hasValue(int64_t step, Mode mode) const {
  int64_t g = 0;
  const Saved* saved = savedAt(step, mode, &g);
  return saved != nullptr && !saved->raw.empty();
}

std::string TrialTensor::pickWorker(const std::map<std::string, TensorLocation>& byWorker,
                                    const std::string& worker, int64_t globalStep) const {
  if (worker.empty()) return byWorker.begin()->first;  // smdebug: sorted(workers)[0]
  STRATA_CHECK_WITH(debugger::TensorUnavailable, byWorker.count(worker), "tensor \"", name_,
                    "\" has no value from worker \"", worker, "\" at global step ", globalStep);
  return worker;
}

TensorData TrialTensor::value(int64_t step, const std::string& worker, Mode mode) const {
  int64_t g = 0;
  const Saved* saved = savedAt(step, mode, &g);
  STRATA_CHECK_WITH(debugger::TensorUnavailable, saved != nullptr && !saved->raw.empty(), "tensor \"",
                    name_, "\" has no value at ", modeName(mode), " step ", step);
  return trial_->readTensor(saved->raw.at(pickWorker(saved->raw, worker, g)), name_);
}

std::map<int64_t, TensorData> TrialTensor::values(Mode mode, const std::string& worker) const {
  std::map<int64_t, TensorData> out;
  for (int64_t step : steps(mode)) {
    if (!hasValue(step, mode)) continue;
    int64_t g = 0;
    const Saved* saved = savedAt(step, mode, &g);
    if (!worker.empty() && !saved->raw.count(worker)) continue;
    out.emplace(step, value(step, worker, mode));
  }
  return out;
}

std::vector<Reduction> TrialTensor::storedReductions(int64_t step, Mode mode) const {
  int64_t g = 0;
  const Saved* saved = savedAt(step, mode, &g);
  std::vector<Reduction> out;
  if (!saved) return out;
  for (const auto& [worker, list] : saved->reductions)
    for (const auto& [r, where] : list)
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  return out;
}

double TrialTensor::reductionValue(int64_t step, ReductionOp op, bool abs, Mode mode,
                                   const std::string& worker) const {
  int64_t g = 0;
  const Saved* saved = savedAt(step, mode, &g);
  STRATA_CHECK_WITH(debugger::TensorUnavailable, saved != nullptr, "tensor \"", name_, "\" has no data at ",
                    modeName(mode), " step ", step);
  const Reduction wanted{op, abs};
  if (!saved->reductions.empty()) {
    const auto it = worker.empty() ? saved->reductions.begin() : saved->reductions.find(worker);
    if (it != saved->reductions.end()) {
      for (const auto& [r, where] : it->second)
        if (r == wanted) return trial_->readTensor(where, name_).scalar();
    }
  }
  STRATA_CHECK_WITH(debugger::TensorUnavailable, !saved->raw.empty(), "tensor \"", name_,
                    "\" has neither a stored ", reductionConfigName(wanted),
                    " nor a raw value at ", modeName(mode), " step ", step);
  const TensorData t = trial_->readTensor(saved->raw.at(pickWorker(saved->raw, worker, g)), name_);
  const auto result = reduceAll(t, {wanted});
  STRATA_CHECK_WITH(debugger::TensorUnavailable, !result.empty(), "tensor \"", name_,
                    "\" is empty at step ", step, ": no ", reductionConfigName(wanted));
  return result[0];
}

}  // namespace strata::debugger
