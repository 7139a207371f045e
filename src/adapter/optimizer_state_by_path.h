// Optimizer state keyed by parameter path (internal to the torch adapter).
//
// libtorch's Optimizer::save() numbers parameters by their position in the param groups, so
// it only loads back into an optimizer over the same parameters in the same order. A
// checkpoint meant to resume on another layout (4 pipeline stages -> 2, a pipeline -> one
// process) stores each parameter's state under the parameter's path in the model instead
// ("blocks.3.attn.qkv.weight": AdamW's step, exp_avg, exp_avg_sq), together with the
// options of the group that held it (lr, betas, weight decay...), so any rank can pick the
// entries of the parameters it holds.
//
// Supported: SGD, Adam, AdamW, Adagrad, RMSprop (per-parameter state). LBFGS keeps one
// state for all parameters together and is refused by name.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata::detail {

// "AdamW", "SGD", ...; throws strata::Error naming the type for an unsupported optimizer.
std::string optimizerKind(const torch::optim::Optimizer& optimizer);

// One parameter's entry: its group's options and (after its first step) its state. Returns
// false, writing nothing, when the optimizer does not hold `param`.
bool writeParamState(torch::serialize::OutputArchive& entry, const torch::optim::Optimizer& optimizer,
                     const torch::Tensor& param);
// Restores one entry of optimizer kind `kind` for `param`: the group's options, and the state
// when the entry has one. Returns false when the optimizer does not hold `param`. Throws
// strata::Error when `kind` is not this optimizer's.
bool readParamState(torch::serialize::InputArchive& entry, torch::optim::Optimizer& optimizer,
                    const torch::Tensor& param, const std::string& kind, const std::string& source);

// Writes the state (and group options) of every parameter in `params` (path, tensor) that the
// optimizer holds. A parameter without state yet (no step taken) is listed with options only.
void writeStateByPath(torch::serialize::OutputArchive& archive, const torch::optim::Optimizer& optimizer,
                      const std::vector<std::pair<std::string, torch::Tensor>>& params);

struct StateByPathResult {
  int restored = 0;          // parameters whose state was restored
  std::vector<std::string> paths;  // every path the archive holds
};

// Restores the entries whose path is in `params` (path -> this rank's tensor) into the
// optimizer's state; entries of other parameters are skipped. Throws strata::Error when
// the archive holds another optimizer kind's state.
StateByPathResult readStateByPath(torch::serialize::InputArchive& archive, torch::optim::Optimizer& optimizer,
                                  const std::map<std::string, torch::Tensor>& params, const std::string& source);

}  // namespace strata::detail
