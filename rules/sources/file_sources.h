// The engine's sources over a run directory's files: the tensor trial (the debugger's trial
// reader) and the profiler output (the profiler's file parsers). Both read incrementally, so an
// engine can follow a run while it is written (`strata rules --watch`, the online thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rules/sources.h"

namespace strata::rules {

struct FileSourceOptions {
  // Files keep coming until the training_job_end.ts marker appears (online / --watch).
  // false: the run is finished; whatever is on disk is all there is.
  bool follow = false;
  // Compat: framework files only (the reference does not know Strata's always-on step timer).
  bool compat = false;
  // Online, windows are closed this long after the newest file stamps (late files of other
  // ranks and hosts).
  int64_t lagUs = 120 * 1000000LL;
};

// nullptr when RUN_DIR has no profiler output (profiler-output/system or /framework).
std::unique_ptr<MetricSource> makeProfilerSource(const std::string& runDir, const FileSourceOptions& options);
// nullptr when RUN_DIR holds no tensor trial (index/ or collections/).
std::unique_ptr<TensorSource> makeTrialSource(const std::string& runDir);

}  // namespace strata::rules
