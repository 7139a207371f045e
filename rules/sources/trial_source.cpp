// TensorSource over the debugger's trial reader (src/debugger/trial.h).
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "debugger/trial.h"
#include "rules/sources/file_sources.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;

Mode toMode(debugger::Mode m) {
  switch (m) {
    case debugger::Mode::kTrain: return Mode::kTrain;
    case debugger::Mode::kEval: return Mode::kEval;
    case debugger::Mode::kPredict: return Mode::kPredict;
    case debugger::Mode::kGlobal: return Mode::kGlobal;
  }
  return Mode::kGlobal;
}

class DebuggerTrialSource final : public TensorSource, public Trial {
 public:
  explicit DebuggerTrialSource(const std::string& path) : trial_(path), path_(path) { refresh(); }

  void refresh() override {
    trial_.refresh();
    std::map<int64_t, StepInfo> info;
    for (debugger::Mode m : {debugger::Mode::kTrain, debugger::Mode::kEval, debugger::Mode::kPredict}) {
      for (int64_t ms : trial_.steps(m)) {
        const int64_t g = trial_.globalStep(m, ms);
        if (g < 0) continue;
        StepInfo s;
        s.step = g;
        s.mode = toMode(m);
        s.modeStep = ms;
        info[g] = s;
      }
    }
    steps_.clear();
    for (int64_t g : trial_.steps(debugger::Mode::kGlobal)) {
      auto it = info.find(g);
      StepInfo s = it != info.end() ? it->second : StepInfo{g, Mode::kGlobal, g};
      s.wallTimeSec = wallTime(g);
      steps_.push_back(s);
    }
  }
  const Trial& trial() const override { return *this; }

  std::vector<std::string> collections() const override { return trial_.collectionNames(); }
  std::vector<std::string> tensorNames(const std::string& collection) const override {
    return trial_.tensorNames(collection);
  }
  std::vector<StepInfo> steps() const override { return steps_; }
  bool hasTensor(const std::string& name, int64_t step) const override {
    if (!trial_.hasTensor(name)) return false;
    try {
      const auto& t = trial_.tensor(name);
      return t.hasValue(step) || !t.storedReductions(step).empty();
    } catch (const std::exception&) {
      return false;
    }
  }
  std::optional<TensorValue> value(const std::string& name, int64_t step) const override {
    if (!trial_.hasTensor(name)) return std::nullopt;
    try {
      const auto& t = trial_.tensor(name);
      if (!t.hasValue(step)) return std::nullopt;
      const debugger::TensorData d = t.value(step);
      if (d.dtype == debugger::DType::kString) return std::nullopt;
      return TensorValue{d.shape, d.toDoubles()};
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::optional<double> reduction(const std::string& name, int64_t step, const std::string& op,
                                   bool abs) const override {
    if (!trial_.hasTensor(name)) return std::nullopt;
    const auto parsed = debugger::parseReductionOp(op);
    if (!parsed) return std::nullopt;
    try {
      const auto& t = trial_.tensor(name);
      for (const debugger::Reduction& r : t.storedReductions(step))
        if (r.op == *parsed && r.abs == abs) return t.reductionValue(step, *parsed, abs);
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  std::optional<double> lastUpdateSec() const override {
    std::optional<double> best;
    for (const StepInfo& s : steps_)
      if (!std::isnan(s.wallTimeSec) && (!best || s.wallTimeSec > *best)) best = s.wallTimeSec;
    return best;
  }
  bool finished() const override { return trial_.hasTrainingEnded(); }

 private:
  // The modification time of the step's first index file: when the step was written.
  double wallTime(int64_t step) {
    auto it = wallTimes_.find(step);
    if (it != wallTimes_.end()) return it->second;
    char dir[32], prefix[32];
    std::snprintf(dir, sizeof dir, "%09lld", static_cast<long long>(step / 1000));
    std::snprintf(prefix, sizeof prefix, "%012lld_", static_cast<long long>(step));
    double t = std::nan("");
    std::error_code ec;
    for (auto e = fs::directory_iterator(fs::path(path_) / "index" / dir, ec); !ec && e != fs::end(e); e.increment(ec)) {
      if (e->path().filename().string().rfind(prefix, 0) != 0) continue;
      struct stat st {};
      if (stat(e->path().c_str(), &st) == 0) t = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
      break;
    }
    wallTimes_[step] = t;
    return t;
  }

  debugger::Trial trial_;
  std::string path_;
  std::vector<StepInfo> steps_;
  std::map<int64_t, double> wallTimes_;
};

}  // namespace

std::unique_ptr<TensorSource> makeTrialSource(const std::string& runDir) {
  std::error_code ec;
  if (!fs::is_directory(fs::path(runDir) / "index", ec) && !fs::is_directory(fs::path(runDir) / "collections", ec))
    return nullptr;
  return std::make_unique<DebuggerTrialSource>(runDir);
}

}  // namespace strata::rules
