#include "collectives/optimizer_partition.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace strata::collectives {

std::vector<int> partitionParameters(const std::vector<size_t>& numBytes, int parts) {
  if (parts < 1) throw std::invalid_argument("partitionParameters: parts " + std::to_string(parts) + " < 1");
  std::vector<size_t> order(numBytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numBytes[a] > numBytes[b]; });
  std::vector<size_t> load(static_cast<size_t>(parts), 0);
  std::vector<int> owner(numBytes.size(), 0);
  for (size_t i : order) {
    // min_element returns the first minimum: ties go to the lower rank.
    const auto lightest = std::min_element(load.begin(), load.end());
    owner[i] = static_cast<int>(lightest - load.begin());
    *lightest += numBytes[i];
  }
  return owner;
}

std::vector<size_t> bytesPerPart(const std::vector<size_t>& numBytes, const std::vector<int>& owner, int parts) {
  std::vector<size_t> out(static_cast<size_t>(std::max(parts, 0)), 0);
  for (size_t i = 0; i < numBytes.size() && i < owner.size(); ++i) out.at(static_cast<size_t>(owner[i])) += numBytes[i];
  return out;
}

}  // namespace strata::collectives
