#include "adapter/checkpoint/optimizer_state_by_path.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <memory>
#include <set>
#include <typeinfo>

#include "adapter/ops/unique_tensors.h"
#include "adapter/checkpoint/tensor_shard.h"
#include "core/errors.h"

namespace strata::detail {
namespace {

using adapter::TensorKey;
using adapter::tensorKey;

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

std::string stateKey(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

std::map<TensorKey, ParamSlot> slotsOf(const torch::optim::Optimizer& optimizer) {
  std::map<TensorKey, ParamSlot> out;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto& p : groups[g].params()) out.emplace(tensorKey(p), ParamSlot{g, stateKey(p)});
  return out;
}

// An empty per-parameter state of the optimizer's kind (filled by serialize(InputArchive)).
std::unique_ptr<torch::optim::OptimizerParamState> newState(const std::string& kind) {
  if (kind == "AdamW") return std::make_unique<torch::optim::AdamWParamState>();
  if (kind == "Adam") return std::make_unique<torch::optim::AdamParamState>();
  if (kind == "SGD") return std::make_unique<torch::optim::SGDParamState>();
  if (kind == "Adagrad") return std::make_unique<torch::optim::AdagradParamState>();
  if (kind == "RMSprop") return std::make_unique<torch::optim::RMSpropParamState>();
  STRATA_THROW(Error, "optimizer state by path: unsupported optimizer kind \"", kind, "\"");
}

}  // namespace

std::string stateByPathKind(const torch::optim::Optimizer& optimizer) {
  // Exact types: a subclass may keep state of its own.
  const std::type_info& t = typeid(optimizer);
  if (t == typeid(torch::optim::AdamW)) return "AdamW";
  if (t == typeid(torch::optim::Adam)) return "Adam";
  if (t == typeid(torch::optim::SGD)) return "SGD";
  if (t == typeid(torch::optim::Adagrad)) return "Adagrad";
  if (t == typeid(torch::optim::RMSprop)) return "RMSprop";
  return "";
}

std::vector<std::pair<std::string, ParamSlot>> slotsByPath(
    const torch::optim::Optimizer& optimizer, const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  const std::map<TensorKey, ParamSlot> slots = slotsOf(optimizer);
  std::vector<std::pair<std::string, ParamSlot>> out;
  std::set<std::string> seen;  // state keys
  for (const auto& [path, tensor] : named) {
    auto it = slots.find(tensorKey(tensor));
    if (it == slots.end() || !seen.insert(it->second.stateKey).second) continue;
    out.emplace_back(path, it->second);
  }
  return out;
}

std::string entryBytes(const torch::optim::OptimizerOptions& options, const torch::optim::OptimizerParamState* state) {
  OutputArchive entry;
  OutputArchive optionsArchive;
  options.serialize(optionsArchive);
  entry.write("options", optionsArchive);
  if (state) {
    OutputArchive values;
    state->serialize(values);
    entry.write("state", values);
  }
  return archiveBytes(entry);
}

void forEachEntry(const torch::optim::Optimizer& optimizer, const std::vector<std::pair<std::string, ParamSlot>>& slots,
                  const EmitEntry& emit) {
  const auto& groups = optimizer.param_groups();
  for (const auto& [path, slot] : slots) {
    const auto s = optimizer.state().find(slot.stateKey);
    emit(path, entryBytes(groups.at(slot.group).options(), s == optimizer.state().end() ? nullptr : s->second.get()));
  }
}

void readEntry(InputArchive& entry, torch::optim::Optimizer& optimizer, const ParamSlot& slot, const std::string& kind,
               const std::string& source) {
  const std::string mine = stateByPathKind(optimizer);
  STRATA_CHECK(kind == mine, "checkpoint ", source, " holds ", kind, " optimizer state; this optimizer is ",
               mine.empty() ? std::string(typeid(optimizer).name()) : mine);
  InputArchive options;
  entry.read("options", options);
  optimizer.param_groups().at(slot.group).options().serialize(options);
  InputArchive values;
  if (entry.try_read("state", values)) {
    std::unique_ptr<torch::optim::OptimizerParamState> s = newState(kind);
    s->serialize(values);
    optimizer.state()[slot.stateKey] = std::move(s);
  } else {
    optimizer.state().erase(slot.stateKey);  // the checkpoint was taken before this parameter's first step
  }
}

}  // namespace strata::detail
