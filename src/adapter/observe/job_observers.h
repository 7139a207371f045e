// The two observers a job registers (observers.h): the profiler's and the debugger's.
#pragma once

#include <memory>
#include <string>

#include "adapter/observe/step_observer.h"
#include "config/config.h"
#include "debugger/hook.h"

namespace strata::observe {

// Records timeline slices and step times into profiler::current() (the runtime's session);
// times only while that session's framework timeline is on.
std::shared_ptr<StepObserver> makeProfilerObserver();

// Creates the rank's debugger hook (and makes it debugger::activeHook(), which
// strata::debugger::save_scalar() reaches) and an observer saving tensors through it.
std::shared_ptr<StepObserver> makeDebuggerObserver(const config::DebuggerConfig& config, const std::string& outputDir,
                                                   int rank, int worldSize);
std::shared_ptr<StepObserver> makeDebuggerObserver(const config::DebuggerConfig& config,
                                                   debugger::HookOptions options);
// At finalize: stops being the active hook, closes its files, and (rank 0, once every rank
// arrived) writes the end marker. Never throws.
void closeDebuggerObserver(StepObserver& debuggerObserver, const std::string& outputDir);

}  // namespace strata::observe
