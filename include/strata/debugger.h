// Debugger calls for training code (SageMaker Debugger's hook.save_scalar / save_tensor).
// What is saved, when, and where is set by the job config's "debugger" section
// (docs/debugger.md); with no collections configured these calls do nothing.
// Thread-safe; meant for the training thread.
#pragma once

#include <torch/types.h>

#include <string>

namespace strata::debugger {

// Whether a debugger hook is active on this rank (it may still write nothing on this rank
// when include_workers is "one").
bool enabled();

// Records a user metric (validation loss, accuracy ...) at the current step: saved as the
// tensor "scalar/<name>" (read it with `strata trial` or smdebug's create_trial) and as a
// TensorBoard scalar "<name>" under <output_dir>/tensorboard/. Saved at every call,
// whatever the collections' schedule.
void save_scalar(const std::string& name, double value);

// Saves any tensor under `name` at the current step if a configured collection selects it
// (its include_regex matches `name`) and is due. Returns whether it was saved.
bool save_tensor(const std::string& name, const torch::Tensor& tensor);

}  // namespace strata::debugger
