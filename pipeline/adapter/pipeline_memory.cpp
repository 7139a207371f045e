#include "pipeline/adapter/pipeline_memory.h"

#include <sstream>

#include "adapter/ops/unique_tensors.h"
#include "adapter/optim/optimizer_state.h"
#include "core/logging.h"
#include "pipeline/plan.h"

namespace strata::adapter {

HeldBytes heldBytes(const std::vector<std::pair<std::string, torch::Tensor>>& parameters,
                    const std::vector<std::pair<std::string, torch::Tensor>>& buffers,
                    const torch::optim::Optimizer* optimizer) {
  HeldBytes held;
  for (const auto& [name, p] : uniqueTensors(parameters)) {
    held.parameters += static_cast<int64_t>(p.nbytes());
    if (p.grad().defined()) held.gradients += static_cast<int64_t>(p.grad().nbytes());
  }
  for (const auto& [name, b] : uniqueTensors(buffers)) held.parameters += static_cast<int64_t>(b.nbytes());
  if (optimizer != nullptr) held.optimizerState = static_cast<int64_t>(optimizerStateBytes(*optimizer));
  return held;
}

void logHeldBytes(Group& world, int64_t predicted, const HeldBytes& held, double optimizerStateFactor) {
  const int64_t mine[5] = {predicted, held.total(), held.parameters, held.gradients, held.optimizerState};
  std::vector<int64_t> all(static_cast<size_t>(5 * world.size()));
  world.allgather(mine, all.data(), 5, DType::kInt64);
  if (world.rank() != 0) return;
  auto bytes = [](int64_t n) { return pipeline::formatBytes(static_cast<size_t>(n)); };
  std::ostringstream table;
  table << "pipeline memory after step 1 (parameters + gradients + optimizer state at "
        << optimizerStateFactor << " x gradients):\nrank  predicted   holds       parameters  gradients   optimizer\n";
  std::vector<int> over;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* v = &all[static_cast<size_t>(5 * r)];
    char line[160];
    std::snprintf(line, sizeof(line), "%-5d %-11s %-11s %-11s %-11s %s\n", r, bytes(v[0]).c_str(), bytes(v[1]).c_str(),
                  bytes(v[2]).c_str(), bytes(v[3]).c_str(), bytes(v[4]).c_str());
    table << line;
    if (v[1] > v[0]) over.push_back(r);
  }
  STRATA_LOG(kInfo, kPipe, table.str());
  if (!over.empty())
    STRATA_LOG(kWarn, kPipe, "pipeline memory: rank(s) ", c10::Join(", ", over),
               " hold more than the plan predicted (", table.str(),
               "); an optimizer with more state than modelparallel.optimizer_state_factor assumes?");
}

}  // namespace strata::adapter
