#include "collectives/shared_buffers.h"

#include <algorithm>

#include "collectives/shm_domain.h"

namespace strata::collectives {

// Here, not in the header: a ShmDomain is a LocalPeers (shm_domain.h), which the header
// does not include.
std::shared_ptr<SharedRegion> SharedRegion::createShared(ShmDomain& domain, uint64_t id, size_t numBytes) {
  return make<SharedRegion>(&domain, id, numBytes);
}

void SharedRegistry::add(const std::shared_ptr<SharedRegion>& region) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.erase(std::remove_if(regions_.begin(), regions_.end(), [](const auto& w) { return w.expired(); }),
                 regions_.end());
  regions_.push_back(region);
}

SharedPlace SharedRegistry::find(const void* data, size_t numBytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& weak : regions_) {
    std::shared_ptr<SharedRegion> region = weak.lock();
    if (region && region->contains(data, numBytes))
      return {region, static_cast<size_t>(static_cast<const uint8_t*>(data) - region->mine())};
  }
  return {};
}

}  // namespace strata::collectives
