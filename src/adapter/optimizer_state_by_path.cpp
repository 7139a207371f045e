#include "adapter/optimizer_state_by_path.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cstring>
#include <memory>
#include <set>

#include "core/errors.h"

namespace strata::detail {
namespace {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

std::string stateKey(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

torch::Tensor textTensor(const std::string& text) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

std::string readText(InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  t = t.contiguous();
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    out.push_back(text.substr(begin, end - begin));
    begin = end == std::string::npos ? text.size() : end + 1;
  }
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

std::string optimizerKind(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return "AdamW";
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return "Adam";
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return "SGD";
  if (dynamic_cast<const torch::optim::Adagrad*>(&optimizer)) return "Adagrad";
  if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer)) return "RMSprop";
  STRATA_THROW(Error, "checkpoint: this optimizer (", typeid(optimizer).name(),
               ") keeps no per-parameter state Strata can key by parameter path; supported: SGD, Adam, AdamW, "
               "Adagrad, RMSprop");
}

bool writeParamState(OutputArchive& entry, const torch::optim::Optimizer& optimizer, const torch::Tensor& param) {
  auto& opt = const_cast<torch::optim::Optimizer&>(optimizer);  // param_groups() has no const form
  const std::string key = stateKey(param);
  for (auto& group : opt.param_groups()) {
    for (const auto& p : group.params()) {
      if (stateKey(p) != key) continue;
      OutputArchive options;
      group.options().serialize(options);
      entry.write("options", options);
      const auto s = optimizer.state().find(key);
      if (s != optimizer.state().end()) {
        OutputArchive values;
        s->second->serialize(values);
        entry.write("state", values);
      }
      return true;
    }
  }
  return false;
}

bool readParamState(InputArchive& entry, torch::optim::Optimizer& optimizer, const torch::Tensor& param,
                    const std::string& kind, const std::string& source) {
  const std::string mine = optimizerKind(optimizer);
  STRATA_CHECK(kind == mine, "checkpoint ", source, " holds ", kind, " optimizer state; this optimizer is ", mine);
  const std::string key = stateKey(param);
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      if (stateKey(p) != key) continue;
      InputArchive options;
      entry.read("options", options);
      group.options().serialize(options);
      InputArchive values;
      if (entry.try_read("state", values)) {
        std::unique_ptr<torch::optim::OptimizerParamState> s = newState(kind);
        s->serialize(values);
        optimizer.state()[key] = std::move(s);
      }
      return true;
    }
  }
  return false;
}

void writeStateByPath(OutputArchive& archive, const torch::optim::Optimizer& optimizer,
                      const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::string names;
  std::set<const void*> written;  // a tied tensor listed under two paths: its state once
  int64_t i = 0;
  for (const auto& [path, tensor] : params) {
    if (!written.insert(tensor.unsafeGetTensorImpl()).second) continue;
    OutputArchive entry;
    if (!writeParamState(entry, optimizer, tensor)) continue;
    archive.write("p" + std::to_string(i++), entry);
    names += path + "\n";
  }
  archive.write("kind", textTensor(optimizerKind(optimizer)), /*is_buffer=*/true);
  archive.write("names", textTensor(names), /*is_buffer=*/true);
}

StateByPathResult readStateByPath(InputArchive& archive, torch::optim::Optimizer& optimizer,
                                  const std::map<std::string, torch::Tensor>& params, const std::string& source) {
  const std::string kind = readText(archive, "kind");
  StateByPathResult result;
  result.paths = splitLines(readText(archive, "names"));
  for (size_t i = 0; i < result.paths.size(); ++i) {
    const auto target = params.find(result.paths[i]);
    if (target == params.end()) continue;
    InputArchive entry;
    archive.read("p" + std::to_string(i), entry);
    if (readParamState(entry, optimizer, target->second, kind, source)) ++result.restored;
  }
  return result;
}

}  // namespace strata::detail
