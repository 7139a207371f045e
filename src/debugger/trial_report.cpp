#include "debugger/trial_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace strata::debugger {
namespace {

std::string formatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string stepRange(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "none";
  std::string out = std::to_string(steps.size()) + " (" + std::to_string(steps.front());
  if (steps.size() > 1) out += ".." + std::to_string(steps.back());
  return out + ")";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string formatValues(const TensorData& tensor, size_t maxValues) {
  std::string out = "[";
  if (tensor.dtype == DType::kString) {
    for (size_t i = 0; i < tensor.strings.size() && i < maxValues; ++i)
      out += (i ? ", \"" : "\"") + tensor.strings[i] + "\"";
  } else {
    const std::vector<double> values = tensor.toDoubles();
    for (size_t i = 0; i < values.size() && i < maxValues; ++i)
      out += (i ? ", " : "") + formatNumber(values[i]);
    if (values.size() > maxValues) out += ", ... (" + std::to_string(values.size()) + " values)";
  }
  return out + "]";
}

std::string trialSummary(const Trial& trial, const TrialReportOptions& options) {
  std::ostringstream out;
  out << "trial " << trial.path() << "\n";
  out << "workers: " << joined(trial.workers()) << " (num_workers " << trial.numWorkers() << ")\n";
  out << "training ended: " << (trial.hasTrainingEnded() ? "yes" : "no") << "\n";
  out << "steps: " << stepRange(trial.steps()) << " complete, "
      << trial.steps(Mode::kGlobal, true).size() << " seen\n";
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict}) {
    const auto steps = trial.steps(m);
    if (!steps.empty()) out << "  " << modeName(m) << ": " << stepRange(steps) << "\n";
  }
  const auto collections = trial.collectionNames();
  if (!collections.empty()) out << "collections: " << joined(collections) << "\n";
  const auto names = trial.tensorNames(options.collection);
  out << "tensors" << (options.collection.empty() ? "" : " in " + options.collection) << ": "
      << names.size() << "\n";
  for (const std::string& name : names) {
    const TrialTensor& t = trial.tensor(name);
    const auto steps = t.steps();
    std::string kind;
    if (!steps.empty()) {
      kind = t.hasValue(steps.back()) ? "" : " (reductions only)";
    }
    out << "  " << name << "  steps " << stepRange(steps) << kind << "\n";
  }
  for (const std::string& p : trial.problems()) out << "skipped: " << p << "\n";
  return out.str();
}

std::string trialSteps(const Trial& trial) {
  std::ostringstream out;
  out << "global  mode     mode_step  workers  complete\n";
  for (int64_t step : trial.steps(Mode::kGlobal, true)) {
    const auto info = trial.stepSummary(step);
    char line[128];
    std::snprintf(line, sizeof(line), "%-7lld %-8s %-10lld %-8zu %s\n", static_cast<long long>(step),
                  modeName(info->mode), static_cast<long long>(info->modeStep),
                  info->workers.size(), info->complete ? "yes" : "no");
    out << line;
  }
  return out.str();
}

std::string tensorReport(const Trial& trial, const std::string& name, const TrialReportOptions& options) {
  const TrialTensor& t = trial.tensor(name);
  std::ostringstream out;
  out << name << "\n";
  for (Mode mode : kAllModes) {
    if (mode == Mode::kGlobal) continue;
    if (!options.allModes && mode != options.mode) continue;
    for (int64_t step : t.steps(mode)) {
      const int64_t global = trial.globalStep(mode, step);
      for (const std::string& worker : t.workers(step, mode)) {
        if (!options.worker.empty() && worker != options.worker) continue;
        out << "  step " << global << " (" << modeName(mode) << " " << step << ") " << worker << ": ";
        try {
          if (t.hasValue(step, mode)) {
            const TensorData v = t.value(step, worker, mode);
            out << dtypeName(v.dtype) << " " << shapeText(v.shape) << " "
                << formatValues(v, options.maxValues);
            if (v.dtype != DType::kString && v.numel() > 1) {
              const auto stats = reduceAll(v, {{ReductionOp::kMin, false}, {ReductionOp::kMax, false},
                                               {ReductionOp::kMean, false}});
              if (!stats.empty())
                out << " min " << formatNumber(stats[0]) << " max " << formatNumber(stats[1])
                    << " mean " << formatNumber(stats[2]);
            }
          }
          for (const Reduction& r : t.storedReductions(step, mode))
            out << " " << reductionConfigName(r) << "="
                << formatNumber(t.reductionValue(step, r.op, r.abs, mode, worker));
        } catch (const std::exception& e) {
          out << "unreadable: " << e.what();
        }
        out << "\n";
      }
    }
  }
  return out.str();
}

}  // namespace strata::debugger
