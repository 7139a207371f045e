// The data-parallel gradient reducer: gradients live in flat buckets, and each bucket's
// AllReduce (average) starts as soon as backward has produced all of its gradients, while
// backward goes on (PyTorch DDP's Reducer design).
//
//   * Buckets: a small first bucket, then `bucketCapMb` (collectives/bucket_assignment.h,
//     pure). From its parameter's first gradient after zeroGrad() until the next zeroGrad(),
//     every parameter's .grad() is a tensor over its slice of a bucket's storage (not an
//     autograd view), so optimizers may detach_() and zero_() it and later backwards
//     accumulate into it in place. zeroGrad() clears the gradients (PyTorch's set_to_none)
//     instead of zeroing the buckets: autograd then hands over its own gradient tensor, which
//     the hook copies into the bucket (reads and writes the gradient once, where zeroing and
//     accumulating into zeros wrote it twice and read it twice).
//   * Own shard in place: with more than one rank, each rank's shard of a bucket is read
//     only by that rank (Group::sharedShard), so a gradient's elements there stay in
//     autograd's tensor and the reduction reads them from it (Group::InputPiece); only the
//     elements the peers read are copied into the bucket. Once a bucket's reduction has
//     completed (checked at each hook, and in finish()) .grad() is the bucket view (or the
//     host-shared average) as always, and autograd's tensor is released.
//   * Zero-copy: all buckets (and their 16-bit wire copies) live in one buffer from
//     Group::allocateShared, so on a host with peers each bucket's in-place AllReduce reads
//     the peers' buckets directly (shm_direct / hierarchical_direct, docs/collectives.md)
//     instead of staging copies; without local peers it is ordinary memory.
//   * Hooks: a post-hook on every parameter's gradient accumulator counts the bucket down;
//     buckets are launched in bucket order on every rank, whatever order they became ready
//     in, so all ranks issue the same collectives.
//   * Rebuild: after the first synchronised backward, the group's rank 0's observed ready
//     order decides the buckets for everyone (broadcast), once.
//   * Unused parameters never fire: finish() launches the buckets still pending, so their
//     (zero or accumulated) gradients are reduced with the rest.
//   * 16-bit wire: with a bfloat16/float16 wire type, float32 buckets are converted for the
//     AllReduce and back.
//   * Host-shared averages (host_shared_state.h): once reduceIntoShared() is called, each
//     bucket is reduce-scattered (averaged) into one host-wide copy instead of AllReduced, and
//     after finish() every .grad() is a view of that copy until zeroGrad() clears it.
//
// Events (bucket launched, reduction waited for) go to the step observers (observer.h).
//
// Threading: one training thread; the hooks run on the autograd engine's thread for that
// training thread's backward.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/group.h"

namespace strata::adapter {

struct GradientReducerOptions {
  double firstBucketMb = 1;
  double bucketCapMb = 25;
  c10::ScalarType wire = c10::ScalarType::Undefined;  // Undefined: the gradients' own type
};

// The wire type of a "gradient_dtype" setting ("bfloat16", "float16"; anything else:
// Undefined, the gradients' own type).
c10::ScalarType wireType(const std::string& gradientDtype);

struct GradientReducerStats {
  int64_t steps = 0;
  double allreduceSeconds = 0;  // time the bucket AllReduces ran on the comm thread
  double allreduceCpuSeconds = 0;  // CPU time the comm thread spent on them
  double exposedSeconds = 0;    // time the training thread waited for them
  int64_t bytesReduced = 0;
  int64_t bytesReadInPlace = 0;  // gradients the reductions read from autograd's tensors
};

class GradientReducer {
 public:
  // `named`: the parameters to synchronise (frozen ones are skipped here), in registration
  // order. Builds the buckets and arms the hooks; no collective. Throws strata::Error for a
  // non-contiguous or non-CPU parameter.
  GradientReducer(Group& group, const std::vector<std::pair<std::string, torch::Tensor>>& named,
                  GradientReducerOptions options);
  // Removes the hooks and waits for AllReduces in flight (logging, never throwing).
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // While disabled, hooks only accumulate (no_sync, and pipeline chunks before the rank's
  // last backward).
  void setEnabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  // Launches every bucket not launched yet and waits for all (gradients averaged). Does
  // nothing when no hook fired since the last finish.
  void finish();
  // finish() even if no hook fired (a pipeline rank whose last backward had no parameters).
  void reduceNow();
  // Clears every parameter's .grad() (undefined until its next gradient, which is placed in
  // its bucket slice; after the first synchronised step: rebuilds the buckets in the observed
  // order first).
  void zeroGrad();

  // Host-shared averages: from the next backward on, each bucket is averaged with
  // Group::reduceScatterShared into the host-wide copy at `base` + the bucket's own byte
  // offset (every rank writes its shard there; `keep` keeps that memory alive), and after
  // finish() every .grad() is a view of that copy. Requires rebuilt buckets (their layout is
  // final) and no 16-bit wire.
  void reduceIntoShared(std::shared_ptr<SharedBuffer> keep, char* base);
  bool reducesIntoShared() const { return averaged_ != nullptr; }
  // Back to the in-place AllReduce (gradients first copied back to this rank's buckets).
  void stopReducingIntoShared();
  // .grad() back on this rank's buckets, keeping the values (a backward without zeroGrad()
  // after a step accumulates onto the averaged gradients, as without host sharing).
  void detachSharedGrads();

  // Where the gradients live: bytes of the bucket buffer, and each bucket's place in it.
  struct BucketInfo {
    size_t byteOffset = 0;
    int64_t numel = 0;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
  };
  struct ParamInfo {
    torch::Tensor param;
    int bucket = 0;
    int64_t offset = 0;  // elements into the bucket
  };
  size_t storageBytes() const { return storage_ ? storage_->size() : 0; }
  const std::shared_ptr<SharedBuffer>& storage() const { return storage_; }
  std::vector<BucketInfo> bucketInfos() const;
  std::vector<ParamInfo> paramInfos() const;
  bool usesWireType() const { return options_.wire != c10::ScalarType::Undefined; }

  size_t numBuckets() const { return buckets_.size(); }
  bool rebuilt() const { return rebuilt_; }
  size_t numParameters() const { return slots_.size(); }
  GradientReducerStats stats() const { return stats_; }
  void resetStats() { stats_ = GradientReducerStats{}; }

 private:
  // A parameter whose gradient is synchronised, and where its gradient lives.
  struct Slot {
    std::string name;
    torch::Tensor param;
    int bucket = -1;
    int64_t offset = 0;  // elements into the bucket
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t hookKey = 0;
    torch::Tensor averaged;  // its view of the host-shared averages (reduceIntoShared)
    // Autograd's gradient, whose elements inside the bucket's own shard the reduction reads
    // in place (not copied into the bucket); .grad() until finish().
    torch::Tensor ownSource;
  };
  struct Bucket {
    torch::Tensor flat;  // the gradients of its parameters, back to back
    std::vector<int> slots;
    int pending = 0;     // gradients not yet produced in this backward
    std::shared_ptr<Work> work;
    torch::Tensor wireBuffer;  // its 16-bit copy's place (wire type set, float32 bucket)
    torch::Tensor wire;        // wireBuffer while its AllReduce is in flight
    int64_t launchUs = -1;  // observer clock at launch (-1: nobody timing)
    // This rank's shard of the bucket (elements; Group::sharedShard), which only this rank
    // reads of its bucket: gradients there are read where autograd left them. Empty with
    // one rank or a 16-bit wire.
    int64_t ownBegin = 0, ownEnd = 0;
  };
  // Bytes into the shared buffer of a bucket and of its wire copy.
  static constexpr size_t kNoWire = static_cast<size_t>(-1);
  struct BucketPlace {
    int64_t numel = 0;
    size_t flatOffset = 0;
    size_t wireOffset = kNoWire;
  };
  void buildBuckets(const std::vector<int>& order);
  bool usesWire(c10::ScalarType gradType) const;
  // A 1-D tensor over the shared buffer at `byteOffset`, keeping the buffer alive.
  torch::Tensor sharedTensor(size_t byteOffset, int64_t numel, const torch::TensorOptions& options) const;
  void registerHooks();
  void onGradReady(int slot);
  // Makes the slot's bucket slice hold its gradient and .grad() a tensor over that slice:
  // copies a gradient that lives elsewhere (autograd's own tensor after zeroGrad(), or one
  // the user replaced), zeroes the slice when there is none.
  void placeInBucket(Slot& slot);
  // The gradients of `bucket` read in place for its own shard (their Slot::ownSource).
  std::vector<Group::InputPiece> ownPieces(const Bucket& bucket) const;
  // Buckets whose reduction completed while backward goes on (in launch order): .grad()
  // moves to the reduced values and autograd's tensors are released now, not at finish(),
  // so the gradients held for the own shards are those of the buckets still in flight.
  void retireCompleted();
  void releaseOwnSource(Slot& slot, const Bucket& bucket);
  void beginBackward();
  void launch(size_t bucket);
  void maybeRebuild();
  torch::Tensor gradView(const Bucket& bucket, const Slot& slot) const;
  torch::Tensor averagedView(const Bucket& bucket, const Slot& slot) const;
  size_t byteOffsetOf(const Bucket& bucket) const;

  Group& group_;
  GradientReducerOptions options_;
  std::vector<Slot> slots_;
  std::shared_ptr<SharedBuffer> storage_;  // every bucket's memory
  std::vector<Bucket> buckets_;
  size_t nextToLaunch_ = 0;
  size_t nextToRetire_ = 0;
  bool enabled_ = true;
  bool backwardActive_ = false;  // a hook fired since the last finish
  bool rebuilt_ = false;
  bool rebuildDue_ = false;      // the order is known; rebuild at the next zeroGrad()
  std::vector<int> readyOrder_;  // observed in the first synchronised backward
  std::shared_ptr<SharedBuffer> averaged_;  // host-shared averages (null: AllReduce in place)
  char* averagedBase_ = nullptr;
  bool gradsOnAveraged_ = false;            // .grad() are views of averaged_'s part(0)
  GradientReducerStats stats_;
};

}  // namespace strata::adapter
