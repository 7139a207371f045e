#include "pipeline/adapter/tied_gradients.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <map>

#include "core/errors.h"
#include "core/logging.h"
#include "pipeline/adapter/model_builder.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"

namespace strata::pipeline {

using torch::autograd::variable_list;

namespace {

constexpr uint64_t kTieTag = uint64_t{0x54} << 56;  // 'T': contributions on a tie's group

uint64_t contributionTag(const TieContribution& c) {
  return kTieTag | (static_cast<uint64_t>(c.microbatch) << 24) | static_cast<uint64_t>(c.stage);
}

struct TieRuntime {
  TiePlacement place;
  torch::Tensor tensor;  // this rank's copy
  std::shared_ptr<torch::autograd::Node> accumulator;
  std::shared_ptr<Group> group;         // holder ranks; null when they are all this rank
  std::map<int, int> groupIndexOfRank;  // pipeline rank -> index in group
  std::vector<int> localStages;         // stages of this rank holding a use
  // Owner side: contributions of this rank's other stages, and the ones for the running backward.
  std::map<std::pair<int, int>, torch::Tensor> received;  // (stage, microbatch)
  std::vector<torch::Tensor> pending;
  // Contributing side.
  torch::Tensor captured;
  std::map<TieContribution, torch::Tensor> outbox;
  std::vector<TieContribution> sendOrder;
  size_t nextSend = 0;
  std::vector<std::pair<std::shared_ptr<Work>, torch::Tensor>> sends;

  bool owns(int stage) const { return stage == place.ownerStage; }
  bool contributes(int stage) const {
    return stage != place.ownerStage && std::find(place.stages.begin(), place.stages.end(), stage) != place.stages.end();
  }
};

}  // namespace

struct TiedGradients::State {
  std::vector<TieRuntime> ties;
  std::vector<int> chunkStage;
  int ppRank = 0;
  int partitions = 1;
  int currentStage = -1;  // the stage whose backward runs, -1 outside
  bool active = true;

  variable_list onGradient(size_t t, const variable_list& grads) {
    TieRuntime& r = ties[t];
    if (currentStage < 0 || grads.size() != 1) return grads;
    if (r.owns(currentStage)) {
      if (r.pending.empty()) return grads;
      // Contributions of later stages first, then this stage's: one process's order.
      torch::Tensor sum = r.pending[0];
      for (size_t i = 1; i < r.pending.size(); ++i) sum.add_(r.pending[i]);
      if (grads[0].defined()) sum.add_(grads[0]);
      r.pending.clear();
      return {sum};
    }
    if (r.contributes(currentStage)) {
      r.captured = grads[0];
      return {torch::Tensor()};  // nothing accumulates here; the owner adds it
    }
    return grads;
  }
};

namespace {

class TiePreHook : public torch::autograd::FunctionPreHook {
 public:
  TiePreHook(std::weak_ptr<TiedGradients::State> state, size_t tie) : state_(std::move(state)), tie_(tie) {}
  variable_list operator()(const variable_list& grads) override {
    auto state = state_.lock();
    if (!state || !state->active) return grads;
    return state->onGradient(tie_, grads);
  }

 private:
  std::weak_ptr<TiedGradients::State> state_;
  size_t tie_;
};

}  // namespace

TiedGradients::TiedGradients(TiedGradientsSetup setup) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.chunkStage = setup.chunkStage;
  s.ppRank = setup.ppRank;
  s.partitions = setup.partitions;
  for (const TiedTensor& tie : setup.ties) {
    TieRuntime r;
    r.place = placeTie(tie.layers(), setup.stageOfLayer, setup.partitions);
    if (!r.place.acrossStages() ||
        std::find(r.place.ranks.begin(), r.place.ranks.end(), setup.ppRank) == r.place.ranks.end())
      continue;  // one stage (autograd sums it), or not held here
    for (int stage : r.place.stages)
      if (stage % setup.partitions == setup.ppRank) r.localStages.push_back(stage);
    for (const auto& use : tie.uses)
      if (setup.stageOfLayer.at(static_cast<size_t>(use.first)) % setup.partitions == setup.ppRank) {
        r.tensor = tiedParameter(*setup.layers, use);  // the first held use: the rank's copy
        break;
      }
    if (r.place.acrossRanks()) {
      std::vector<int> worldRanks;
      for (int rank : r.place.ranks) worldRanks.push_back(setup.worldRankOfPpRank.at(static_cast<size_t>(rank)));
      std::vector<int> sorted = worldRanks;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < r.place.ranks.size(); ++i)
        r.groupIndexOfRank[r.place.ranks[i]] =
            static_cast<int>(std::find(sorted.begin(), sorted.end(), worldRanks[i]) - sorted.begin());
      r.group = newGroup(sorted);
      if (setup.broadcastInitialValues) {  // every copy starts from the value source's value
        const int sourceRank = setup.stageOfLayer.at(static_cast<size_t>(tie.uses[0].first)) % setup.partitions;
        torch::NoGradGuard noGrad;
        torch::Tensor value = r.tensor.detach();
        broadcast(value, r.groupIndexOfRank.at(sourceRank), r.group.get());
      }
    }
    if (!r.tensor.requires_grad()) continue;  // frozen: no gradient to sum
    r.accumulator = torch::autograd::impl::grad_accumulator(r.tensor);
    r.accumulator->add_pre_hook(std::make_unique<TiePreHook>(state_, s.ties.size()));
    ties_.push_back(static_cast<int>(s.ties.size()));
    s.ties.push_back(std::move(r));
  }
}

TiedGradients::~TiedGradients() {
  state_->active = false;
  for (TieRuntime& r : state_->ties) {
    try {
      for (auto& send : r.sends) send.first->wait();
    } catch (const std::exception& e) {
      STRATA_LOG(kWarn, kPipe, "tied gradients: a send failed during destruction: ", e.what());
    }
  }
}

void TiedGradients::beginStep(int microbatches) {
  for (TieRuntime& r : state_->ties) {
    r.received.clear();
    r.pending.clear();
    r.captured = torch::Tensor();
    r.outbox.clear();
    r.sendOrder.clear();
    r.nextSend = 0;
    if (r.place.ownerRank == state_->ppRank) continue;
    for (int mb = 0; mb < microbatches; ++mb)
      for (int stage : r.localStages) r.sendOrder.push_back({mb, stage});
    std::sort(r.sendOrder.begin(), r.sendOrder.end());
  }
}

void TiedGradients::beforeBackward(int chunk, int microbatch) {
  State& s = *state_;
  s.currentStage = s.chunkStage.at(static_cast<size_t>(chunk));
  for (TieRuntime& r : s.ties) {
    if (!r.owns(s.currentStage)) continue;
    r.pending.clear();
    for (int stage : contributionOrder(r.place)) {
      const int rank = stage % s.partitions;
      if (rank == s.ppRank) {
        auto it = r.received.find({stage, microbatch});
        STRATA_CHECK(it != r.received.end(), "tied gradients: stage ", stage, " has no contribution for microbatch ",
                     microbatch, " before the owner stage ", s.currentStage, "'s backward (an invalid program)");
        r.pending.push_back(it->second);
        r.received.erase(it);
      } else {
        torch::Tensor t = torch::empty_like(r.tensor, torch::MemoryFormat::Contiguous);
        r.group->recv(t.data_ptr(), t.nbytes(), r.groupIndexOfRank.at(rank), contributionTag({microbatch, stage}));
        r.pending.push_back(std::move(t));
      }
    }
  }
}

void TiedGradients::afterBackward(int, int microbatch) {
  State& s = *state_;
  const int stage = s.currentStage;
  s.currentStage = -1;
  for (TieRuntime& r : s.ties) {
    if (r.owns(stage) && !r.pending.empty()) {  // no gradient reached the tensor: add them anyway
      torch::NoGradGuard noGrad;
      torch::Tensor sum = r.pending[0];
      for (size_t i = 1; i < r.pending.size(); ++i) sum.add_(r.pending[i]);
      if (r.tensor.grad().defined()) r.tensor.mutable_grad().add_(sum);
      else r.tensor.mutable_grad() = sum;
      r.pending.clear();
    }
    if (!r.contributes(stage)) continue;
    torch::Tensor c = r.captured.defined() ? r.captured.contiguous() : torch::zeros_like(r.tensor);
    r.captured = torch::Tensor();
    if (r.place.ownerRank == s.ppRank) {
      r.received[{stage, microbatch}] = c;
      continue;
    }
    r.outbox[{microbatch, stage}] = c;
    while (r.nextSend < r.sendOrder.size()) {  // in the owner's order
      auto it = r.outbox.find(r.sendOrder[r.nextSend]);
      if (it == r.outbox.end()) break;
      auto work = r.group->isend(it->second.data_ptr(), it->second.nbytes(), r.groupIndexOfRank.at(r.place.ownerRank),
                                 contributionTag(it->first));
      r.sends.emplace_back(std::move(work), it->second);
      r.outbox.erase(it);
      ++r.nextSend;
    }
  }
}

void TiedGradients::finishStep() {
  State& s = *state_;
  for (TieRuntime& r : s.ties) {
    for (auto& send : r.sends) send.first->wait();
    r.sends.clear();
    STRATA_CHECK(r.outbox.empty() && r.nextSend == r.sendOrder.size(), "tied gradients: ",
                 r.sendOrder.size() - r.nextSend, " contribution(s) were never computed (an invalid program)");
    if (!r.group) continue;
    torch::NoGradGuard noGrad;
    if (!r.tensor.grad().defined()) r.tensor.mutable_grad() = torch::zeros_like(r.tensor);
    torch::Tensor grad = r.tensor.grad();
    STRATA_CHECK(grad.is_contiguous(), "tied gradients: the gradient of a tied tensor is not contiguous");
    broadcast(grad, r.groupIndexOfRank.at(r.place.ownerRank), r.group.get());
  }
}

}  // namespace strata::pipeline
