// Debugger calls for training code (SageMaker Debugger's hook.save_scalar / save_tensor).
// What is saved, when, and where is set by the job config's "debugger" section
// (docs/debugger.md); with no collections configured these calls do nothing.
// Thread-safe; meant for the training thread.
#pragma once

#include <torch/types.h>

#include <string>

namespace torch::nn {
class Module;
}  // namespace torch::nn

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

// For the modules inside a custom module's forward (libtorch has no forward hooks, so the
// runtime captures a model's Sequential children, nested Sequentials included, but cannot
// see inside a module with a forward of its own): offers `output` as the output of `module`,
// saved as "<module path>_output_0" ("layer1.0.relu_output_0", smdebug's name) when a
// collection selects it at this step. `module` must belong to the model being run by
// DistributedModel; otherwise, and on steps where nothing is captured, this does nothing
// (one thread-local check). Returns `output`, so it wraps the call:
//   torch::Tensor forward(torch::Tensor x) {
//     x = strata::debugger::module_output(*relu, relu->forward(conv->forward(x)));
//     ...
//   }
torch::Tensor module_output(const torch::nn::Module& module, const torch::Tensor& output);

}  // namespace strata::debugger
