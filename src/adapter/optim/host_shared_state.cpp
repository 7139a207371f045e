#include "adapter/optim/host_shared_state.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "adapter/optim/optimizer_kinds.h"
#include "collectives/param_slices.h"
#include "core/errors.h"
#include "core/logging.h"
#include "strata/tensor_ops.h"

namespace strata::adapter {
namespace {

constexpr size_t kPageBytes = 4096;
size_t pageAlign(size_t v) { return (v + kPageBytes - 1) / kPageBytes * kPageBytes; }

// libtorch's key of a tensor's entry in Optimizer::state().
std::string pieceStateKey(const torch::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

// Regions of the host-wide space, each regionBytes_ long.
constexpr size_t kParamsRegion = 0;
constexpr size_t kAveragesRegion = 1;
constexpr size_t kFirstStateRegion = 2;

std::map<const void*, size_t> indexByTensorImpl(const std::vector<torch::Tensor>& tensors) {
  std::map<const void*, size_t> out;
  for (size_t i = 0; i < tensors.size(); ++i) out.emplace(tensors[i].unsafeGetTensorImpl(), i);
  return out;
}

std::vector<torch::Tensor> synchronisedParams(const GradientReducer& reducer) {
  std::vector<torch::Tensor> out;
  for (const auto& info : reducer.paramInfos()) out.push_back(info.param);
  return out;
}

}  // namespace

std::string HostSharedState::whyNot(const torch::optim::Optimizer& optimizer, const GradientReducer& reducer,
                                    const OptimizerSharding& sharding, const Group& group,
                                    const std::vector<torch::Tensor>& allParameters) {
  if (group.size() < 2) return "the data-parallel group has one rank";
  if (!isElementwiseOptimizer(optimizer))
    return "the optimizer is not exactly SGD, Adam, AdamW, Adagrad or RMSprop (whose updates are element-wise)";
  if (reducer.usesWireType()) return "dataparallel.gradient_dtype is a 16-bit type";
  if (!reducer.rebuilt()) return "the gradient buckets are not final yet";
  const auto& storage = reducer.storage();
  if (!storage || !storage->peerMapped() || storage->localSize() != group.size())
    return "the data-parallel ranks are not all on one host with shared memory";
  const auto synchronised = indexByTensorImpl(synchronisedParams(reducer));
  for (const auto& p : sharding.parameters())
    if (synchronised.count(p.unsafeGetTensorImpl()) == 0)
      return c10::str("the optimizer holds a parameter of shape ", p.sizes(),
                      " whose gradient is not synchronised (frozen when the model was wrapped)");
  // A tie made of two tensors over the same elements moves as one (both are pointed at the
  // host's copy); a tensor over part of a synchronised parameter's storage cannot follow.
  std::map<const void*, int64_t> numelOfStorage, numelOfData;
  for (const auto& p : synchronisedParams(reducer)) {
    numelOfStorage[p.storage().data()] = p.numel();
    numelOfData[p.data_ptr()] = p.numel();
  }
  for (const auto& p : allParameters) {
    if (numelOfStorage.count(p.storage().data()) == 0) continue;
    auto same = numelOfData.find(p.data_ptr());
    if (same == numelOfData.end() || same->second != p.numel())
      return c10::str("a parameter of shape ", p.sizes(), " covers part of another parameter's storage");
  }
  return "";
}

char* HostSharedState::hostBytes(size_t region, size_t byteOffset) const {
  return hostBase_ + region * regionBytes_ + byteOffset;
}

torch::Tensor HostSharedState::hostTensor(size_t region, size_t byteOffset, at::IntArrayRef sizes,
                                          const torch::TensorOptions& options) const {
  return torch::from_blob(hostBytes(region, byteOffset), sizes, [keep = host_](void*) {},
                          options.requires_grad(false));
}

torch::Tensor HostSharedState::stateView(int field, size_t byteOffset, at::IntArrayRef sizes,
                                         const torch::TensorOptions& options) const {
  const int region = fieldRegion_.at(static_cast<size_t>(field));
  STRATA_CHECK(region >= 0, "dataparallel.host_shared_parameters: the optimizer now keeps state tensor ", field,
               " of its type, which its options did not allow when the parameters became host-shared (e.g. "
               "momentum or amsgrad turned on later); set those options before the second step");
  return hostTensor(static_cast<size_t>(region), byteOffset, sizes, options);
}

HostSharedState::HostSharedState(torch::optim::Optimizer& optimizer, GradientReducer& reducer,
                                 const OptimizerSharding& sharding, Group& group,
                                 const std::vector<torch::Tensor>& allParameters)
    : optimizer_(optimizer), reducer_(reducer), sharding_(sharding), group_(group) {
  torch::NoGradGuard noGrad;
  numFields_ = numStateTensors(optimizer_);
  // Only the state tensors the options can create get memory (Adam without amsgrad keeps two).
  size_t regions = kFirstStateRegion;
  for (bool possible : possibleStateTensors(optimizer_))
    fieldRegion_.push_back(possible ? static_cast<int>(regions++) : -1);
  const auto infos = reducer_.paramInfos();
  const auto buckets = reducer_.bucketInfos();
  const auto& params = sharding_.parameters();
  const auto slotOf = indexByTensorImpl(synchronisedParams(reducer_));
  auto slotByteOffset = [&](size_t j) {
    const auto& b = buckets[static_cast<size_t>(infos[j].bucket)];
    return b.byteOffset + static_cast<size_t>(infos[j].offset) * c10::elementSize(b.dtype);
  };
  for (const auto& p : params) paramByteOffset_.push_back(slotByteOffset(slotOf.at(p.unsafeGetTensorImpl())));

  // One allocation: its parts, back to back in every rank's mapping, form one host-wide space
  // (each rank first-touches only its part, so the host holds every byte once).
  const int n = group_.size();
  regionBytes_ = pageAlign(reducer_.storageBytes());
  const size_t total = regions * regionBytes_;
  host_ = group_.allocateShared(pageAlign((total + static_cast<size_t>(n) - 1) / static_cast<size_t>(n)));
  hostBase_ = static_cast<char*>(host_->part(0));
  const size_t stride = n > 1 ? static_cast<size_t>(static_cast<char*>(host_->part(1)) - hostBase_) : host_->size();
  for (int k = 0; k < host_->localSize(); ++k)
    STRATA_CHECK(static_cast<char*>(host_->part(k)) == hostBase_ + static_cast<size_t>(k) * stride,
                 "host-shared parameters: the shared parts are not contiguous");
  STRATA_CHECK(stride * static_cast<size_t>(n) >= total, "host-shared parameters: ", stride * n, " bytes for ", total);

  // The parameters (equal on every rank) once; this step's averages (each rank its shards, as
  // the reduce-scatter will write them); the whole-tensor owners' optimizer state.
  if (host_->localRank() == 0)
    for (size_t j = 0; j < infos.size(); ++j)
      hostTensor(kParamsRegion, slotByteOffset(j), infos[j].param.sizes(), infos[j].param.options())
          .copy_(infos[j].param);
  const char* ownBuckets = static_cast<const char*>(reducer_.storage()->data());
  for (const auto& b : buckets) {
    const Group::ShardRange shard = group_.sharedShard(static_cast<size_t>(b.numel), toDType(b.dtype));
    const size_t elem = c10::elementSize(b.dtype);
    std::copy_n(ownBuckets + b.byteOffset + shard.offset * elem, shard.count * elem,
                hostBytes(kAveragesRegion, b.byteOffset + shard.offset * elem));
  }
  const std::vector<Meta> meta = agreeMeta(copyOwnedStateIn(optimizer_));
  group_.barrier();  // every copy above is in place

  // Every synchronised parameter, and any other tensor of a tie, is now a view of the host's copy.
  std::map<const void*, size_t> slotOfData;
  for (size_t j = 0; j < infos.size(); ++j) slotOfData.emplace(infos[j].param.data_ptr(), j);
  std::vector<std::pair<torch::Tensor, size_t>> moves;
  for (const auto& p : allParameters) {
    auto at = slotOfData.find(p.data_ptr());
    if (at != slotOfData.end()) moves.emplace_back(p, at->second);
  }
  for (size_t j = 0; j < infos.size(); ++j) moves.emplace_back(infos[j].param, j);
  for (auto& [p, j] : moves)
    if (p.data_ptr() != hostBytes(kParamsRegion, slotByteOffset(j))) {
      p.set_data(hostTensor(kParamsRegion, slotByteOffset(j), p.sizes(), p.options()));
      moved_.emplace_back(p, slotByteOffset(j));
    }
  std::vector<collectives::ParamPlace> places;
  for (const auto& info : infos)
    places.push_back({info.bucket, static_cast<size_t>(info.offset), static_cast<size_t>(info.param.numel())});
  std::vector<collectives::Range> shards;
  for (const auto& b : buckets) {
    const Group::ShardRange s = group_.sharedShard(static_cast<size_t>(b.numel), toDType(b.dtype));
    shards.push_back({s.offset, s.count});
  }
  const auto optimizerIndex = indexByTensorImpl(params);
  optimizer_.state().clear();
  for (const collectives::ParamSlice& s : collectives::sliceParameters(places, shards)) {
    const torch::Tensor& p = infos[static_cast<size_t>(s.param)].param;
    auto at = optimizerIndex.find(p.unsafeGetTensorImpl());
    if (at == optimizerIndex.end()) continue;  // the optimizer does not step it
    const auto& b = buckets[static_cast<size_t>(infos[static_cast<size_t>(s.param)].bucket)];
    Piece piece;
    piece.param = at->second;
    piece.byteOffset = b.byteOffset + s.bucketOffset * c10::elementSize(b.dtype);
    const int64_t count = static_cast<int64_t>(s.count);
    piece.tensor = hostTensor(kParamsRegion, piece.byteOffset, {count}, p.options());
    piece.grad = hostTensor(kAveragesRegion, piece.byteOffset, {count}, p.options());
    piece.tensor.mutable_grad() = piece.grad;
    installPieceState(piece, meta[piece.param]);
    pieces_.push_back(std::move(piece));
  }
  piecesByGroup_.assign(optimizer_.param_groups().size(), {});
  std::vector<std::vector<torch::Tensor>> groups(optimizer_.param_groups().size());
  for (const Piece& piece : pieces_) {
    groups[sharding_.groupOf(piece.param)].push_back(piece.tensor);
    piecesByGroup_[sharding_.groupOf(piece.param)].push_back(piece.tensor.unsafeGetTensorImpl());
  }
  for (size_t g = 0; g < groups.size(); ++g) optimizer_.param_groups()[g].params() = std::move(groups[g]);
  for (const auto& info : infos) modelData_.push_back(info.param.data_ptr());
  reducer_.reduceIntoShared(host_, hostBytes(kAveragesRegion, 0));
  STRATA_LOG(kInfo, kInit, "host-shared parameters: ", infos.size(), " parameter(s), ", reducer_.storageBytes(),
             " bytes, one copy for the host's ", n, " rank(s); this rank steps ", pieces_.size(),
             " piece(s) of them");
}

HostSharedState::~HostSharedState() {
  try {
    torch::NoGradGuard noGrad;
    reducer_.stopReducingIntoShared();
    // One private copy per place, so the tensors of a tie still share their storage.
    std::map<size_t, torch::Tensor> copies;
    for (auto& [p, byteOffset] : moved_) {
      auto at = copies.find(byteOffset);
      if (at == copies.end()) at = copies.emplace(byteOffset, p.detach().clone()).first;
      p.set_data(at->second);
    }
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kInit, "host-shared parameters: could not give the parameters private copies: ", e.what());
  }
}

std::vector<HostSharedState::Meta> HostSharedState::agreeMeta(const std::vector<Meta>& mine) const {
  // Per parameter: has state, step, and a bit per defined state tensor; ranks that do not
  // know a parameter send zeros, so the maximum is what the knowing ranks say.
  const size_t width = 3;
  std::vector<int64_t> flat(mine.size() * width, 0);
  for (size_t i = 0; i < mine.size(); ++i) {
    flat[i * width] = mine[i].hasState ? 1 : 0;
    flat[i * width + 1] = mine[i].step;
    int64_t bits = 0;
    for (size_t f = 0; f < mine[i].defined.size(); ++f)
      if (mine[i].defined[f]) bits |= int64_t{1} << f;
    flat[i * width + 2] = bits;
  }
  group_.allreduce(flat.data(), flat.data(), flat.size(), DType::kInt64, ReduceOp::kMax);
  std::vector<Meta> out(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    out[i].hasState = flat[i * width] != 0;
    out[i].step = flat[i * width + 1];
    for (int f = 0; f < numFields_; ++f) out[i].defined.push_back(((flat[i * width + 2] >> f) & 1) != 0);
  }
  return out;
}

std::vector<HostSharedState::Meta> HostSharedState::copyOwnedStateIn(const torch::optim::Optimizer& source) {
  torch::NoGradGuard noGrad;
  const auto& params = sharding_.parameters();
  std::vector<Meta> mine(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    mine[i].defined.assign(static_cast<size_t>(numFields_), false);
    if (sharding_.ownerOf(i) != group_.rank()) continue;
    auto it = source.state().find(pieceStateKey(params[i]));
    if (it == source.state().end()) continue;
    const std::vector<torch::Tensor> fields = stateTensors(source, *it->second);
    for (int f = 0; f < numFields_; ++f) {
      if (!fields[static_cast<size_t>(f)].defined()) continue;
      stateView(f, paramByteOffset_[i], params[i].sizes(), params[i].options()).copy_(fields[static_cast<size_t>(f)]);
      mine[i].defined[static_cast<size_t>(f)] = true;
    }
    mine[i].hasState = true;
    mine[i].step = stateStep(source, *it->second);
  }
  return mine;
}

void HostSharedState::installPieceState(Piece& piece, const Meta& meta) {
  optimizer_.state().erase(pieceStateKey(piece.tensor));
  piece.stateShared = false;
  if (!meta.hasState) return;  // none yet: the optimizer creates it (shareNewState moves it)
  const int64_t count = piece.tensor.numel();
  std::vector<torch::Tensor> fields(static_cast<size_t>(numFields_));
  for (int f = 0; f < numFields_; ++f)
    if (meta.defined[static_cast<size_t>(f)])
      fields[static_cast<size_t>(f)] = stateView(f, piece.byteOffset, {count}, piece.tensor.options());
  optimizer_.state()[pieceStateKey(piece.tensor)] = makeState(optimizer_, fields, meta.step);
  piece.stateShared = true;
}

void HostSharedState::shareNewState(Piece& piece) {
  if (piece.stateShared) return;
  auto it = optimizer_.state().find(pieceStateKey(piece.tensor));
  if (it == optimizer_.state().end()) return;
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> fields = stateTensors(optimizer_, *it->second);
  for (int f = 0; f < numFields_; ++f) {
    torch::Tensor& t = fields[static_cast<size_t>(f)];
    if (!t.defined()) continue;
    torch::Tensor shared = stateView(f, piece.byteOffset, {piece.tensor.numel()}, piece.tensor.options());
    shared.copy_(t);
    t = shared;
  }
  it->second = makeState(optimizer_, fields, stateStep(optimizer_, *it->second));
  piece.stateShared = true;
}

void HostSharedState::beforeStep() {
  for (Piece& piece : pieces_)
    if (!piece.tensor.grad().defined() || piece.tensor.grad().data_ptr() != piece.grad.data_ptr())
      piece.tensor.mutable_grad() = piece.grad;
}

void HostSharedState::afterStep() {
  for (Piece& piece : pieces_) shareNewState(piece);
  group_.barrier();
}

std::string HostSharedState::firstChange(const torch::optim::Optimizer& optimizer,
                                         const std::vector<torch::Tensor>& modelParameters) const {
  if (std::string change = groupsChange(optimizer, piecesByGroup_, "pieces of host-shared parameters");
      !change.empty())
    return change;
  std::vector<const void*> data;
  for (const auto& info : reducer_.paramInfos()) data.push_back(info.param.data_ptr());
  if (data != modelData_)
    return "a model parameter no longer lives in the host's shared copy (its data was replaced)";
  size_t requiringGrad = 0;
  for (const auto& p : modelParameters) requiringGrad += p.requires_grad() ? 1 : 0;
  if (requiringGrad != modelData_.size())
    return c10::str("the model has ", requiringGrad, " trainable parameter(s), ", modelData_.size(),
                    " when the optimizer state was sharded");
  return "";
}

std::unique_ptr<torch::optim::Optimizer> HostSharedState::wholeView() {
  torch::NoGradGuard noGrad;
  const auto& params = sharding_.parameters();
  std::vector<Meta> mine(params.size());
  for (auto& m : mine) m.defined.assign(static_cast<size_t>(numFields_), false);
  for (Piece& piece : pieces_) {
    shareNewState(piece);
    auto it = optimizer_.state().find(pieceStateKey(piece.tensor));
    if (it == optimizer_.state().end()) continue;
    Meta& m = mine[piece.param];
    m.hasState = true;
    m.step = stateStep(optimizer_, *it->second);
    const auto fields = stateTensors(optimizer_, *it->second);
    for (int f = 0; f < numFields_; ++f) m.defined[static_cast<size_t>(f)] = fields[static_cast<size_t>(f)].defined();
  }
  const std::vector<Meta> meta = agreeMeta(mine);  // also: every rank's step has ended
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < optimizer_.param_groups().size(); ++g) {
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < params.size(); ++i)
      if (sharding_.groupOf(i) == g && sharding_.ownerOf(i) == group_.rank()) owned.push_back(params[i]);
    groups.emplace_back(owned, optimizer_.param_groups()[g].options().clone());
  }
  std::unique_ptr<torch::optim::Optimizer> view = makeOptimizerLike(optimizer_, std::move(groups));
  for (size_t i = 0; i < params.size(); ++i) {
    if (sharding_.ownerOf(i) != group_.rank() || !meta[i].hasState) continue;
    std::vector<torch::Tensor> fields(static_cast<size_t>(numFields_));
    for (int f = 0; f < numFields_; ++f)
      if (meta[i].defined[static_cast<size_t>(f)])
        fields[static_cast<size_t>(f)] = stateView(f, paramByteOffset_[i], params[i].sizes(), params[i].options()).clone();
    view->state()[pieceStateKey(params[i])] = makeState(optimizer_, fields, meta[i].step);
  }
  group_.barrier();  // the copies are taken before any rank steps again
  return view;
}

void HostSharedState::commitLoaded(const torch::optim::Optimizer& view) {
  torch::NoGradGuard noGrad;
  const std::vector<Meta> mine = copyOwnedStateIn(view);
  // The loaded group options (learning rates...) of the groups this rank restored.
  for (size_t g = 0; g < view.param_groups().size() && g < optimizer_.param_groups().size(); ++g)
    if (!view.param_groups()[g].params().empty())
      optimizer_.param_groups()[g].set_options(view.param_groups()[g].options().clone());
  const std::vector<Meta> meta = agreeMeta(mine);
  group_.barrier();  // every owner's state is in place
  for (Piece& piece : pieces_) installPieceState(piece, meta[piece.param]);
}

double HostSharedState::clipGradNorm(double maxNorm) {
  torch::NoGradGuard noGrad;
  double sumSq = 0;
  for (const Piece& piece : pieces_) sumSq += piece.grad.to(torch::kFloat64).pow(2).sum().item<double>();
  group_.allreduce(&sumSq, &sumSq, 1, DType::kFloat64, ReduceOp::kSum);
  const double norm = std::sqrt(sumSq);
  const double coef = maxNorm / (norm + 1e-6);
  if (coef < 1)
    for (const Piece& piece : pieces_) piece.grad.mul_(coef);
  group_.barrier();  // every .grad() view shows the scaled values
  return norm;
}

}  // namespace strata::adapter
