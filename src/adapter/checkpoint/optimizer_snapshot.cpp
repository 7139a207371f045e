#include "adapter/checkpoint/optimizer_snapshot.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/serialize.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <typeinfo>

#include "core/errors.h"

namespace strata::detail {
namespace {

namespace optim = torch::optim;
using torch::serialize::OutputArchive;
using StateMap = ska::flat_hash_map<std::string, std::unique_ptr<optim::OptimizerParamState>>;

// What libtorch's optimizers write as "pytorch_version" (torch/optim/serialize.h); their
// load() reads it back, so the snapshot writes the same.
constexpr const char* kOptimizerArchiveVersion = "1.5.0";

template <typename Opt>
bool isExactly(const optim::Optimizer& optimizer) {
  // Exact type: a subclass may override save() with a layout of its own.
  return typeid(optimizer) == typeid(Opt);
}

template <typename State>
std::unique_ptr<State> shallowCopy(const optim::OptimizerParamState& live) {
  return std::make_unique<State>(static_cast<const State&>(live));
}

// Per type: a copy of one parameter's state whose tensor fields are the snapshot's buffers
// (scalars such as Adam's step are copied with the state itself).
std::unique_ptr<optim::OptimizerParamState> copySgd(OptimizerSnapshot& snap, const std::string& key,
                                                    const optim::OptimizerParamState& live) {
  auto s = shallowCopy<optim::SGDParamState>(live);
  s->momentum_buffer(snap.copyToBuffer(key, 0, s->momentum_buffer()));
  return s;
}

template <typename State>
std::unique_ptr<optim::OptimizerParamState> copyAdamLike(OptimizerSnapshot& snap, const std::string& key,
                                                         const optim::OptimizerParamState& live) {
  auto s = shallowCopy<State>(live);
  s->exp_avg(snap.copyToBuffer(key, 0, s->exp_avg()));
  s->exp_avg_sq(snap.copyToBuffer(key, 1, s->exp_avg_sq()));
  s->max_exp_avg_sq(snap.copyToBuffer(key, 2, s->max_exp_avg_sq()));
  return s;
}

std::unique_ptr<optim::OptimizerParamState> copyAdagrad(OptimizerSnapshot& snap, const std::string& key,
                                                        const optim::OptimizerParamState& live) {
  auto s = shallowCopy<optim::AdagradParamState>(live);
  s->sum(snap.copyToBuffer(key, 0, s->sum()));
  return s;
}

std::unique_ptr<optim::OptimizerParamState> copyRmsprop(OptimizerSnapshot& snap, const std::string& key,
                                                        const optim::OptimizerParamState& live) {
  auto s = shallowCopy<optim::RMSpropParamState>(live);
  s->square_avg(snap.copyToBuffer(key, 0, s->square_avg()));
  s->momentum_buffer(snap.copyToBuffer(key, 1, s->momentum_buffer()));
  s->grad_avg(snap.copyToBuffer(key, 2, s->grad_avg()));
  return s;
}

// torch::optim::serialize<State, Options>(archive, optimizer), over the snapshot's copies.
template <typename State, typename Options>
void writeAs(OutputArchive& archive, const StateMap& state, const std::vector<optim::OptimizerParamGroup>& groups) {
  archive.write("pytorch_version", c10::IValue(kOptimizerArchiveVersion));
  OutputArchive stateArchive(archive.compilation_unit());
  optim::detail::serialize<State>(stateArchive, state);
  archive.write("state", stateArchive);
  OutputArchive groupsArchive(archive.compilation_unit());
  optim::detail::serialize<Options>(groupsArchive, groups);
  archive.write("param_groups", groupsArchive);
}

}  // namespace

struct OptimizerSnapshot::Kind {
  const char* name;
  bool (*matches)(const optim::Optimizer&);
  std::unique_ptr<optim::OptimizerParamState> (*copyState)(OptimizerSnapshot&, const std::string&,
                                                           const optim::OptimizerParamState&);
  void (*write)(OutputArchive&, const StateMap&, const std::vector<optim::OptimizerParamGroup>&);
};

namespace {

const OptimizerSnapshot::Kind kKinds[] = {
    {"SGD", &isExactly<optim::SGD>, &copySgd, &writeAs<optim::SGDParamState, optim::SGDOptions>},
    {"Adam", &isExactly<optim::Adam>, &copyAdamLike<optim::AdamParamState>,
     &writeAs<optim::AdamParamState, optim::AdamOptions>},
    {"AdamW", &isExactly<optim::AdamW>, &copyAdamLike<optim::AdamWParamState>,
     &writeAs<optim::AdamWParamState, optim::AdamWOptions>},
    {"Adagrad", &isExactly<optim::Adagrad>, &copyAdagrad, &writeAs<optim::AdagradParamState, optim::AdagradOptions>},
    {"RMSprop", &isExactly<optim::RMSprop>, &copyRmsprop, &writeAs<optim::RMSpropParamState, optim::RMSpropOptions>},
};

const OptimizerSnapshot::Kind* findKind(const optim::Optimizer& optimizer) {
  for (const auto& kind : kKinds)
    if (kind.matches(optimizer)) return &kind;
  return nullptr;
}

}  // namespace

torch::Tensor copyIntoReused(torch::Tensor& buffer, const torch::Tensor& src) {
  if (!src.defined()) {
    buffer = torch::Tensor();
    return buffer;
  }
  if (!buffer.defined() || buffer.sizes() != src.sizes() || buffer.scalar_type() != src.scalar_type())
    buffer = torch::empty(src.sizes(), torch::TensorOptions().dtype(src.scalar_type()).device(torch::kCPU));
  torch::NoGradGuard noGrad;
  buffer.copy_(src.detach());
  return buffer;
}

bool OptimizerSnapshot::supports(const optim::Optimizer& optimizer) { return findKind(optimizer) != nullptr; }

torch::Tensor OptimizerSnapshot::copyToBuffer(const std::string& key, size_t slot, const torch::Tensor& src) {
  std::vector<torch::Tensor>& slots = buffers_[key];
  if (slots.size() <= slot) slots.resize(slot + 1);
  return copyIntoReused(slots[slot], src);
}

void OptimizerSnapshot::take(const optim::Optimizer& optimizer) {
  kind_ = findKind(optimizer);
  STRATA_CHECK(kind_ != nullptr, "checkpoint: no snapshot for this optimizer type (", typeid(optimizer).name(),
               "); its checkpoints are written synchronously");
  const StateMap& live = optimizer.state();
  state_.clear();
  for (const auto& item : live) state_[item.first] = kind_->copyState(*this, item.first, *item.second);
  for (auto it = buffers_.begin(); it != buffers_.end();) it = live.count(it->first) ? std::next(it) : buffers_.erase(it);
  groups_.clear();
  for (const auto& group : optimizer.param_groups()) groups_.push_back(group);  // clones the options
}

void OptimizerSnapshot::write(OutputArchive& archive) const {
  STRATA_CHECK(kind_ != nullptr, "checkpoint: OptimizerSnapshot::write before take");
  kind_->write(archive, state_, groups_);
}

void OptimizerSnapshot::forEachEntry(const std::vector<std::pair<std::string, ParamSlot>>& slots,
                                     const EmitEntry& emit) const {
  STRATA_CHECK(kind_ != nullptr, "checkpoint: OptimizerSnapshot::forEachEntry before take");
  for (const auto& [path, slot] : slots) {
    const auto s = state_.find(slot.stateKey);
    emit(path, entryBytes(groups_.at(slot.group).options(), s == state_.end() ? nullptr : s->second.get()));
  }
}

uint64_t OptimizerSnapshot::bytes() const {
  uint64_t total = 0;
  for (const auto& item : buffers_)
    for (const auto& t : item.second)
      if (t.defined()) total += static_cast<uint64_t>(t.nbytes());
  return total;
}

}  // namespace strata::detail
