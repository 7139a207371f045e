#include "adapter/dp/gradient_reducer.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>

#include "adapter/observe/observers.h"
#include "collectives/bucket_assignment.h"
#include "core/errors.h"
#include "core/logging.h"
#include "strata/tensor_ops.h"

namespace strata::adapter {
namespace {
constexpr double kBytesPerMb = 1024.0 * 1024.0;
constexpr size_t kAlignBytes = 64;  // buckets start on cache lines
size_t alignUp(size_t v) { return (v + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
}  // namespace

c10::ScalarType wireType(const std::string& gradientDtype) {
  if (gradientDtype == "bfloat16") return c10::ScalarType::BFloat16;
  if (gradientDtype == "float16") return c10::ScalarType::Half;
  return c10::ScalarType::Undefined;
}

GradientReducer::GradientReducer(Group& group, const std::vector<std::pair<std::string, torch::Tensor>>& named,
                                 GradientReducerOptions options)
    : group_(group), options_(options) {
  for (const auto& [name, param] : named) {
    if (!param.requires_grad()) continue;  // frozen: nothing to synchronise
    STRATA_CHECK(param.is_contiguous(), "DistributedModel: parameter ", name, " is not contiguous");
    STRATA_CHECK(param.device().is_cpu(), "DistributedModel: parameter ", name, " is on ", param.device().str(),
                 "; this build supports CPU tensors");
    Slot slot;
    slot.name = name;
    slot.param = param;
    slots_.push_back(std::move(slot));
  }
  buildBuckets({});
  registerHooks();
}

GradientReducer::~GradientReducer() {
  for (auto& slot : slots_)
    if (slot.accumulator) slot.accumulator->del_post_hook(slot.hookKey);
  try {
    for (auto& b : buckets_)
      if (b.work) b.work->wait();
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kColl, "DistributedModel: gradient AllReduce failed during destruction: ", e.what());
  }
}

torch::Tensor GradientReducer::gradView(const Bucket& bucket, const Slot& slot) const {
  torch::Tensor flat = bucket.flat;
  return torch::from_blob(static_cast<char*>(flat.data_ptr()) + slot.offset * flat.element_size(), slot.param.sizes(),
                          [keep = flat](void*) {}, flat.options());
}

size_t GradientReducer::byteOffsetOf(const Bucket& bucket) const {
  return static_cast<size_t>(static_cast<const char*>(bucket.flat.data_ptr()) -
                             static_cast<const char*>(storage_->data()));
}

torch::Tensor GradientReducer::averagedView(const Bucket& bucket, const Slot& slot) const {
  char* base = averagedBase_ + byteOffsetOf(bucket);
  return torch::from_blob(base + slot.offset * bucket.flat.element_size(), slot.param.sizes(),
                          [keep = averaged_](void*) {}, bucket.flat.options());
}

std::vector<GradientReducer::BucketInfo> GradientReducer::bucketInfos() const {
  std::vector<BucketInfo> out;
  for (const auto& b : buckets_) out.push_back({byteOffsetOf(b), b.flat.numel(), b.flat.scalar_type()});
  return out;
}

std::vector<GradientReducer::ParamInfo> GradientReducer::paramInfos() const {
  std::vector<ParamInfo> out;
  for (const auto& s : slots_) out.push_back({s.param, s.bucket, s.offset});
  return out;
}

void GradientReducer::reduceIntoShared(std::shared_ptr<SharedBuffer> keep, char* base) {
  STRATA_CHECK(rebuilt_ && !rebuildDue_, "GradientReducer: host-shared averages need the final bucket layout");
  STRATA_CHECK(!usesWireType(), "GradientReducer: host-shared averages do not support a 16-bit gradient wire type");
  STRATA_CHECK(keep != nullptr && base != nullptr, "GradientReducer: no memory for the host-shared averages");
  averaged_ = std::move(keep);
  averagedBase_ = base;
  for (auto& slot : slots_) slot.averaged = averagedView(buckets_[slot.bucket], slot);  // once, not per step
}

void GradientReducer::stopReducingIntoShared() {
  detachSharedGrads();
  for (auto& slot : slots_) slot.averaged = torch::Tensor();
  averaged_.reset();
  averagedBase_ = nullptr;
}

void GradientReducer::detachSharedGrads() {
  if (!gradsOnAveraged_) return;
  gradsOnAveraged_ = false;
  torch::NoGradGuard noGrad;
  for (auto& slot : slots_) {
    const Bucket& b = buckets_[slot.bucket];
    torch::Tensor own = gradView(b, slot);
    if (slot.param.grad().defined()) own.copy_(slot.param.grad());
    slot.param.mutable_grad() = own;
  }
}

torch::Tensor GradientReducer::sharedTensor(size_t byteOffset, int64_t numel, const torch::TensorOptions& options) const {
  return torch::from_blob(static_cast<char*>(storage_->data()) + byteOffset, {numel}, [keep = storage_](void*) {},
                          options);
}

void GradientReducer::buildBuckets(const std::vector<int>& order) {
  std::vector<collectives::ParamInfo> infos;
  for (const auto& s : slots_)
    infos.push_back({static_cast<size_t>(s.param.numel()) * s.param.element_size(), toDType(s.param.scalar_type())});
  const auto plan = collectives::assignBuckets(infos, order, static_cast<size_t>(options_.firstBucketMb * kBytesPerMb),
                                               static_cast<size_t>(options_.bucketCapMb * kBytesPerMb));
  // Where each bucket (and its 16-bit wire copy) lives in the shared buffer: cache-line
  // aligned, back to back. Every rank computes the same layout from the same plan.
  std::vector<BucketPlace> places(plan.size());
  size_t bytes = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    const torch::Tensor& first = slots_[plan[b].params.at(0)].param;
    for (int s : plan[b].params) places[b].numel += slots_[s].param.numel();
    places[b].flatOffset = bytes;
    bytes = alignUp(bytes + static_cast<size_t>(places[b].numel) * first.element_size());
    if (usesWire(first.scalar_type())) {
      places[b].wireOffset = bytes;
      bytes = alignUp(bytes + static_cast<size_t>(places[b].numel) * c10::elementSize(options_.wire));
    }
  }
  // Collective (every rank of the group builds its buckets at the same point). Zeroed. The
  // old buffer stays alive while the old buckets' gradients are copied over.
  std::shared_ptr<SharedBuffer> previous = std::move(storage_);
  storage_ = group_.allocateShared(bytes);
  std::vector<Bucket> fresh(plan.size());
  for (size_t b = 0; b < plan.size(); ++b) {
    const torch::TensorOptions options = slots_[plan[b].params.at(0)].param.options().requires_grad(false);
    fresh[b].flat = sharedTensor(places[b].flatOffset, places[b].numel, options);
    if (places[b].wireOffset != kNoWire)
      fresh[b].wireBuffer = sharedTensor(places[b].wireOffset, places[b].numel, options.dtype(options_.wire));
    int64_t offset = 0;
    for (int s : plan[b].params) {
      Slot& slot = slots_[s];
      slot.bucket = static_cast<int>(b);
      slot.offset = offset;
      // A fresh tensor over the bucket's storage (not an autograd view), so optimizers
      // may detach_() and zero_() it, and autograd accumulates into it in place.
      torch::Tensor grad = gradView(fresh[b], slot);
      torch::NoGradGuard noGrad;
      if (slot.param.grad().defined()) grad.copy_(slot.param.grad());
      slot.param.mutable_grad() = grad;
      fresh[b].slots.push_back(s);
      offset += slot.param.numel();
    }
    fresh[b].pending = static_cast<int>(fresh[b].slots.size());
    if (group_.size() > 1 && places[b].wireOffset == kNoWire) {
      const Group::ShardRange own =
          group_.sharedShard(static_cast<size_t>(places[b].numel), toDType(fresh[b].flat.scalar_type()));
      fresh[b].ownBegin = static_cast<int64_t>(own.offset);
      fresh[b].ownEnd = static_cast<int64_t>(own.offset + own.count);
    }
  }
  buckets_ = std::move(fresh);
  nextToLaunch_ = 0;
}

bool GradientReducer::usesWire(c10::ScalarType gradType) const {
  return options_.wire != c10::ScalarType::Undefined && gradType == torch::kFloat32;
}

void GradientReducer::registerHooks() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    slot.accumulator = torch::autograd::impl::grad_accumulator(slot.param);
    STRATA_CHECK(slot.accumulator != nullptr, "DistributedModel: no gradient accumulator for ", slot.name);
    const int index = static_cast<int>(i);
    slot.hookKey = slot.accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          onGradReady(index);
          return outputs;
        }));
  }
}

void GradientReducer::beginBackward() {
  backwardActive_ = true;
  for (auto& b : buckets_) b.pending = static_cast<int>(b.slots.size());
  nextToLaunch_ = 0;
  nextToRetire_ = 0;
}

void GradientReducer::placeInBucket(Slot& slot) {
  const Bucket& b = buckets_[slot.bucket];
  const char* where = static_cast<const char*>(b.flat.data_ptr()) + slot.offset * b.flat.element_size();
  const torch::Tensor& grad = slot.param.grad();
  if (grad.defined() && (grad.data_ptr() == where || grad.is_same(slot.ownSource))) return;
  torch::NoGradGuard noGrad;
  torch::Tensor view = gradView(b, slot);
  const int64_t begin = slot.offset, end = slot.offset + slot.param.numel();
  const int64_t ownBegin = std::max(begin, b.ownBegin), ownEnd = std::min(end, b.ownEnd);
  if (ownBegin < ownEnd && grad.defined() && grad.scalar_type() == b.flat.scalar_type() && grad.is_contiguous() &&
      grad.sizes() == slot.param.sizes() && grad.layout() == torch::kStrided && grad.device().is_cpu()) {
    // Only the elements the peers read go into the bucket; the reduction reads the rest here.
    torch::Tensor flatView = view.view({-1}), flatGrad = grad.view({-1});
    if (ownBegin > begin) flatView.narrow(0, 0, ownBegin - begin).copy_(flatGrad.narrow(0, 0, ownBegin - begin));
    if (end > ownEnd)
      flatView.narrow(0, ownEnd - begin, end - ownEnd).copy_(flatGrad.narrow(0, ownEnd - begin, end - ownEnd));
    slot.ownSource = grad;
    return;
  }
  if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  slot.ownSource = torch::Tensor();
  slot.param.mutable_grad() = view;
}

std::vector<Group::InputPiece> GradientReducer::ownPieces(const Bucket& bucket) const {
  std::vector<Group::InputPiece> pieces;
  for (int s : bucket.slots) {
    const Slot& slot = slots_[s];
    if (!slot.ownSource.defined()) continue;
    const int64_t begin = std::max(slot.offset, bucket.ownBegin);
    const int64_t end = std::min(slot.offset + slot.param.numel(), bucket.ownEnd);
    const char* data =
        static_cast<const char*>(slot.ownSource.data_ptr()) + (begin - slot.offset) * slot.ownSource.element_size();
    pieces.push_back(Group::InputPiece{static_cast<size_t>(begin), static_cast<size_t>(end - begin), data});
  }
  return pieces;
}

void GradientReducer::releaseOwnSource(Slot& slot, const Bucket& bucket) {
  if (!slot.ownSource.defined()) return;
  slot.param.mutable_grad() = averaged_ ? slot.averaged : gradView(bucket, slot);
  slot.ownSource = torch::Tensor();
}

void GradientReducer::retireCompleted() {
  for (; nextToRetire_ < nextToLaunch_; ++nextToRetire_) {
    const Bucket& b = buckets_[nextToRetire_];
    // A failed reduction is left to finish(), which rethrows its error.
    if (b.work && (!b.work->isCompleted() || b.work->exception())) return;
    for (int s : b.slots) releaseOwnSource(slots_[s], b);
  }
}

void GradientReducer::onGradReady(int index) {
  if (!enabled_) return;
  if (!backwardActive_) beginBackward();
  placeInBucket(slots_[index]);
  if (!rebuilt_ && !rebuildDue_) readyOrder_.push_back(index);
  Bucket& bucket = buckets_[slots_[index].bucket];
  if (--bucket.pending <= 0) {
    // Launch in bucket order on every rank, whatever order the buckets became ready in. The
    // last bucket is left to finish(), whose caller waits for it at once (see launch()).
    while (nextToLaunch_ + 1 < buckets_.size() && buckets_[nextToLaunch_].pending <= 0) launch(nextToLaunch_++);
  }
  retireCompleted();
}

void GradientReducer::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  for (int s : bucket.slots) placeInBucket(slots_[s]);  // unused parameters: zeros or what they accumulated
  bucket.launchUs = observe::observers().nowUs();
  std::vector<Group::InputPiece> pieces = ownPieces(bucket);
  for (const auto& p : pieces) stats_.bytesReadInPlace += static_cast<int64_t>(p.count * bucket.flat.element_size());
  // The last bucket is launched by finish(), which waits for it next: it runs on the caller's
  // thread when nothing is in flight. That saves the hand-off to the communication thread and
  // back (two wakeups, and two context switches where the threads share a core): the 2-rank
  // CNN of bench/scaling_bench (3 ms steps, one bucket) ran 5-7 % faster on the default path
  // (bench/RESULTS.md, session 14). Code between backward and finish() no longer overlaps
  // with the last bucket, which on one core per rank it could not anyway.
  const Group::Launch where = b + 1 == buckets_.size() ? Group::Launch::kHereIfIdle : Group::Launch::kQueue;
  if (averaged_) {
    bucket.work = group_.reduceScatterSharedAsync(bucket.flat.data_ptr(), averagedBase_ + byteOffsetOf(bucket),
                                                  static_cast<size_t>(bucket.flat.numel()),
                                                  toDType(bucket.flat.scalar_type()), ReduceOp::kAvg, std::move(pieces),
                                                  where);
  } else if (bucket.wireBuffer.defined()) {
    torch::NoGradGuard noGrad;
    bucket.wireBuffer.copy_(bucket.flat);
    bucket.wire = bucket.wireBuffer;  // converted back in finish()
    bucket.work = allreduceAsync(bucket.wire, ReduceOp::kAvg, &group_);
  } else {
    bucket.work = group_.allreduceAsync(bucket.flat.data_ptr(), static_cast<size_t>(bucket.flat.numel()),
                                        toDType(bucket.flat.scalar_type()), ReduceOp::kAvg, std::move(pieces), where);
  }
}

void GradientReducer::reduceNow() {
  if (buckets_.empty()) return;
  if (!backwardActive_) beginBackward();  // no hook fired (the last backward's chunk has no parameters)
  finish();
}

void GradientReducer::finish() {
  if (!backwardActive_) return;
  // The wait starts before the rest is launched: the last bucket may run right here.
  const auto waitStart = std::chrono::steady_clock::now();
  const int64_t waitStartUs = observe::observers().nowUs();
  // Parameters unused in this step never fired: their (zero or accumulated) gradients
  // are reduced with the rest.
  while (nextToLaunch_ < buckets_.size()) launch(nextToLaunch_++);
  std::vector<observe::BucketRun> runs;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (b.work) {
      b.work->wait();
      const size_t bytes = b.wire.defined() ? b.wire.nbytes() : b.flat.nbytes();
      stats_.allreduceSeconds += std::chrono::duration<double>(b.work->runTime()).count();
      stats_.allreduceCpuSeconds += std::chrono::duration<double>(b.work->cpuTime()).count();
      stats_.bytesReduced += static_cast<int64_t>(bytes);
      runs.push_back({i, bytes, b.launchUs,
                      std::chrono::duration_cast<std::chrono::microseconds>(b.work->runTime()).count()});
    }
    b.work.reset();
    if (b.wire.defined()) {
      torch::NoGradGuard noGrad;
      b.flat.copy_(b.wire);
      b.wire = torch::Tensor();
    }
  }
  // Every reduction is done: autograd's tensors read in place are no longer needed.
  for (auto& slot : slots_) releaseOwnSource(slot, buckets_[slot.bucket]);
  if (averaged_) {
    // Every rank's shard has been written (reduceScatterShared returns after all): the whole
    // averaged gradient is readable in the host's one copy.
    for (const auto& slot : slots_) slot.param.mutable_grad() = slot.averaged;
    gradsOnAveraged_ = true;
  }
  stats_.exposedSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - waitStart).count();
  ++stats_.steps;
  backwardActive_ = false;
  if (waitStartUs >= 0) observe::observers().gradientSync(observe::spanSince(waitStartUs), runs);
  // The first synchronised backward observed the order; the buckets are rebuilt at the next
  // zeroGrad(), where the gradients are discarded anyway, so the old buffer is released
  // before the new one is allocated (no second copy of every gradient at the peak). Without
  // a zeroGrad() in between (accumulation), they are rebuilt here one backward later, copying.
  if (rebuildDue_) {
    maybeRebuild();
  } else if (!rebuilt_) {
    rebuildDue_ = true;
  }
}

void GradientReducer::maybeRebuild() {
  if (rebuilt_) return;
  rebuilt_ = true;
  rebuildDue_ = false;
  // Rank 0's observed order decides for everyone, so buckets stay identical across ranks.
  std::vector<int64_t> order(slots_.size(), -1);
  for (size_t i = 0; i < readyOrder_.size() && i < order.size(); ++i) order[i] = readyOrder_[i];
  group_.broadcast(order.data(), order.size(), DType::kInt64, 0);
  std::vector<int> sequence;
  std::vector<bool> seen(slots_.size(), false);
  for (int64_t v : order)
    if (v >= 0 && !seen[v]) {
      sequence.push_back(static_cast<int>(v));
      seen[v] = true;
    }
  for (size_t i = slots_.size(); i-- > 0;)  // unused parameters: reverse registration order
    if (!seen[i]) sequence.push_back(static_cast<int>(i));
  readyOrder_.clear();
  buildBuckets(sequence);
  STRATA_LOG(kInfo, kColl, "DistributedModel: rebuilt ", buckets_.size(), " gradient buckets from the observed order");
}

void GradientReducer::zeroGrad() {
  finish();
  torch::NoGradGuard noGrad;
  if (rebuildDue_) {
    // Nothing to carry over: drop every reference to the old buffer first (a gradient the
    // user still holds keeps it alive, which costs memory, not correctness).
    for (auto& slot : slots_) slot.param.mutable_grad() = torch::Tensor();
    buckets_.clear();
    storage_.reset();
    maybeRebuild();
  }
  // No bucket is zeroed: the next backward's first gradient of each parameter is autograd's
  // own tensor (taken over, not added to zeros) and placeInBucket() copies it in, which
  // moves half the bytes that zeroing and accumulating in place did.
  gradsOnAveraged_ = false;
  for (auto& slot : slots_) {
    slot.param.mutable_grad() = torch::Tensor();
    slot.ownSource = torch::Tensor();
  }
}

}  // namespace strata::adapter
