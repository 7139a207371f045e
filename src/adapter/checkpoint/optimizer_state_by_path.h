// Optimizer state keyed by parameter path (internal to the torch adapter).
//
// libtorch's Optimizer::save() numbers parameters by their position in the param groups, so
// it only loads back into an optimizer over the same parameters in the same order. A
// checkpoint meant to resume on another layout (4 pipeline stages -> 2, a pipeline -> one
// process) stores each parameter's state under the parameter's path in the model instead
// ("blocks.3.attn.qkv.weight": AdamW's step, exp_avg, exp_avg_sq), as one entry with the
// options of the group that held it (lr, betas, weight decay...), so any rank can pick the
// entries of the parameters it holds.
//
// Parameters are matched by storage (data pointer, shape, dtype), not by tensor object: the
// uses of a tied weight on one rank are distinct tensors sharing one storage, and an
// optimizer holds one of them.
//
// Supported: SGD, Adam, AdamW, Adagrad, RMSprop (per-parameter state). Others (LBFGS keeps
// one state for all parameters) are not: checkpoints keep their whole save() archive, which
// loads on the same layout only.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace strata::detail {

// "AdamW", "SGD", ... for a supported optimizer, "" for any other.
std::string stateByPathKind(const torch::optim::Optimizer& optimizer);

// Where a parameter's state lives in an optimizer: its group and its state key.
struct ParamSlot {
  size_t group = 0;
  std::string stateKey;
};

// The slot of every distinct parameter of `named` (path, tensor) that the optimizer holds,
// under the first path naming its storage. Tensors the optimizer does not hold (buffers,
// frozen parameters) are left out.
std::vector<std::pair<std::string, ParamSlot>> slotsByPath(
    const torch::optim::Optimizer& optimizer, const std::vector<std::pair<std::string, torch::Tensor>>& named);

// One entry as archive bytes: the group's options and the parameter's state (none before its
// first step).
std::string entryBytes(const torch::optim::OptimizerOptions& options, const torch::optim::OptimizerParamState* state);

// Calls `emit(path, entry bytes)` for every slot, with the options and state `optimizer` holds.
using EmitEntry = std::function<void(const std::string& path, const std::string& bytes)>;
void forEachEntry(const torch::optim::Optimizer& optimizer, const std::vector<std::pair<std::string, ParamSlot>>& slots,
                  const EmitEntry& emit);

// Restores one entry of optimizer kind `kind` into `slot`: the group's options, and the state
// when the entry has one. Throws strata::Error naming `source` when `kind` is not this
// optimizer's.
void readEntry(torch::serialize::InputArchive& entry, torch::optim::Optimizer& optimizer, const ParamSlot& slot,
               const std::string& kind, const std::string& source);

}  // namespace strata::detail
