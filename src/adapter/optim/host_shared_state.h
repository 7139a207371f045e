// Host-shared parameters (dataparallel.host_shared_parameters with shard_optimizer_state;
// docs/collectives.md "Host-shared parameters"). Internal to the adapter.
//
// When every data-parallel rank is on one host, the parameters, their averaged gradients and
// the optimizer state are kept once for the whole host, in shared memory, instead of once
// per rank:
//   * each bucket is reduce-scattered (averaged) into the host's one copy of the averaged
//     gradients: rank r reduces shard r and nobody pushes it anywhere (the AllReduce's push,
//     half its writes, is gone);
//   * rank r steps exactly the parameter elements of its shards (collectives/param_slices.h),
//     in place in the host's one copy of the parameters, with the wrapped optimizer's own
//     (element-wise) arithmetic, so the result is bitwise that of unsharded training;
//   * nothing is broadcast: a host barrier after the step, and every rank's next forward
//     reads the updated parameters.
// The optimizer's param groups are rebuilt to hold this rank's pieces (1-D tensors over the
// shared parameters). Checkpoints see an optimizer over whole parameters (wholeView), in the
// layout of whole-tensor sharding (OptimizerSharding's owners), so they load on any
// data-parallel size and with any sharding mode.
//
// Threading: the training thread; every public call is collective over the group, except
// beforeStep() and firstChange().
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter/dp/gradient_reducer.h"
#include "adapter/optim/optimizer_sharding.h"
#include "strata/group.h"

namespace strata::adapter {

class HostSharedState {
 public:
  // Why host sharing cannot be used ("" when it can): a group of one rank, ranks on several
  // hosts or no shared memory, an optimizer that is not element-wise, a 16-bit gradient
  // wire, buckets not final yet, an optimizer parameter the reducer does not synchronise, or
  // a parameter over part of another's storage (`allParameters`: the module's, repeats
  // included; a tie made of two tensors over the same elements is fine). Not collective; the
  // inputs are equal on every rank except the host layout, which the caller agrees on.
  static std::string whyNot(const torch::optim::Optimizer& optimizer, const GradientReducer& reducer,
                            const OptimizerSharding& sharding, const Group& group,
                            const std::vector<torch::Tensor>& allParameters);

  // Collective. Moves the parameters into the host's copy, the state of whole-tensor owners
  // into the host's state, rebuilds the optimizer's groups as this rank's pieces (their
  // gradients: this step's averages), and makes the reducer reduce-scatter from the next
  // backward on. `sharding` must outlive this object. `allParameters` as for whyNot: the
  // other tensors of a tie move with the one the reducer holds.
  HostSharedState(torch::optim::Optimizer& optimizer, GradientReducer& reducer, const OptimizerSharding& sharding,
                  Group& group, const std::vector<torch::Tensor>& allParameters);
  // Not collective, never throws: the parameters get private copies of their current values
  // and the reducer AllReduces again, so the model trains on correctly with any other
  // optimizer (which would otherwise step the host's one copy once per rank). The reducer
  // must still exist (the model outlives its optimizer).
  ~HostSharedState();
  HostSharedState(const HostSharedState&) = delete;
  HostSharedState& operator=(const HostSharedState&) = delete;

  // Points the pieces' gradients back at the averages (an optimizer's zero_grad may have
  // replaced them). Not collective.
  void beforeStep();
  // Moves any state the optimizer created during the step into the host's copy, then waits
  // for every rank's step (host barrier): the next forward reads the updated parameters.
  void afterStep();
  // "" or what changed in the optimizer's groups or the model's parameters since sharing.
  std::string firstChange(const torch::optim::Optimizer& optimizer,
                          const std::vector<torch::Tensor>& modelParameters) const;

  // An optimizer of the same type over this rank's whole-tensor share (OptimizerSharding's
  // owners), with a copy of the state of those parameters, for a checkpoint to write or
  // load into. Collective (a copy taken while no rank steps).
  std::unique_ptr<torch::optim::Optimizer> wholeView();
  // After a checkpoint was loaded into `view` (from wholeView()): its state becomes the host's.
  void commitLoaded(const torch::optim::Optimizer& view);

  // Scales the averaged gradients so that their global norm is at most maxNorm (each rank
  // scales its pieces). Returns the norm before scaling.
  double clipGradNorm(double maxNorm);

  size_t numPieces() const { return pieces_.size(); }

 private:
  struct Piece {
    torch::Tensor tensor;  // 1-D over the host's parameters (what the optimizer steps)
    torch::Tensor grad;    // 1-D over the host's averaged gradients
    size_t param = 0;      // index into sharding_.parameters()
    size_t byteOffset = 0;  // of its first element, in the bucket layout
    bool stateShared = false;  // its optimizer state lives in the host's state copy
  };
  struct Meta {  // of one whole parameter's state, agreed over the group
    bool hasState = false;
    int64_t step = 0;
    std::vector<bool> defined;  // per state tensor
  };

  char* hostBytes(size_t region, size_t byteOffset) const;
  torch::Tensor hostTensor(size_t region, size_t byteOffset, at::IntArrayRef sizes, const torch::TensorOptions& options) const;
  // The host's copy of state tensor `field` over `count` elements at `byteOffset`.
  torch::Tensor stateView(int field, size_t byteOffset, at::IntArrayRef sizes, const torch::TensorOptions& options) const;
  // Collective: every whole parameter's Meta from the ranks that know it (max over the group).
  std::vector<Meta> agreeMeta(const std::vector<Meta>& mine) const;
  // Copies the state `source` holds for the whole parameters this rank owns (OptimizerSharding's
  // owners) into the host's copy; returns what this rank knows of every parameter's state.
  std::vector<Meta> copyOwnedStateIn(const torch::optim::Optimizer& source);
  void installPieceState(Piece& piece, const Meta& meta);
  void shareNewState(Piece& piece);

  torch::optim::Optimizer& optimizer_;
  GradientReducer& reducer_;
  const OptimizerSharding& sharding_;
  Group& group_;
  int numFields_ = 0;
  std::vector<int> fieldRegion_;  // region of each state tensor; -1: the options never create it
  size_t regionBytes_ = 0;  // each of: parameters, averages, then the state tensors that can exist
  std::shared_ptr<SharedBuffer> host_;
  char* hostBase_ = nullptr;             // host_'s parts, back to back: one host-wide space
  std::vector<size_t> paramByteOffset_;  // of sharding_.parameters()[i] in the bucket layout
  std::vector<Piece> pieces_;
  std::vector<std::vector<const void*>> piecesByGroup_;  // TensorImpl* of the groups' pieces
  std::vector<const void*> modelData_;   // data pointers of the synchronised parameters
  std::vector<std::pair<torch::Tensor, size_t>> moved_;  // every tensor moved, and its byte offset
};

}  // namespace strata::adapter
