// A copy of a libtorch optimizer's state taken at a step boundary, in buffers reused from one
// snapshot to the next, and written later (on the checkpoint thread) in exactly the layout of
// the optimizer's own save(), so Optimizer::load reads it back.
//
// Supported: SGD, Adam, AdamW, Adagrad, RMSprop (their state is a few tensors per parameter
// plus scalars; each type's tensor fields are listed in the .cpp). Other optimizers (LBFGS, a
// user's own, a subclass that may override save()) are not: their checkpoints are written
// synchronously (supports() says which).
//
// Threading: take() on the training thread while nothing else touches the optimizer; write()
// afterwards on any one thread; the next take() only after write() returned.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "adapter/checkpoint/optimizer_state_by_path.h"

namespace strata::detail {

class OptimizerSnapshot {
 public:
  static bool supports(const torch::optim::Optimizer& optimizer);

  // Copies the optimizer's state and parameter groups (options included: a learning-rate
  // schedule may change them while the copy waits to be written). Throws strata::Error when
  // !supports(optimizer).
  void take(const torch::optim::Optimizer& optimizer);
  // Writes what take() copied, as optimizer.save(archive) would have then.
  void write(torch::serialize::OutputArchive& archive) const;
  // The by-path entries of `slots` (taken from the live optimizer at take()) from the copies.
  void forEachEntry(const std::vector<std::pair<std::string, ParamSlot>>& slots, const EmitEntry& emit) const;
  // Bytes held in the reused buffers.
  uint64_t bytes() const;

  // Copies `src` into the reused buffer of (key, slot); undefined stays undefined.
  torch::Tensor copyToBuffer(const std::string& key, size_t slot, const torch::Tensor& src);

  struct Kind;  // one per supported optimizer type (in the .cpp)

 private:
  const Kind* kind_ = nullptr;
  ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>> state_;
  std::vector<torch::optim::OptimizerParamGroup> groups_;
  std::map<std::string, std::vector<torch::Tensor>> buffers_;  // per state key, per tensor field
};

// Copies `src` into `buffer`, (re)allocating it on the CPU when its shape or dtype differ;
// undefined stays undefined. Returns the buffer. Not differentiable (no autograd history).
torch::Tensor copyIntoReused(torch::Tensor& buffer, const torch::Tensor& src);

}  // namespace strata::detail
