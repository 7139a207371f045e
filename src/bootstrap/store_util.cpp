// Helpers over any Store: string values and a reusable barrier.
//
// Thread-safety: stateless; safe to call concurrently (every Store is thread-safe).
#include <string>

#include "bootstrap/store.h"
#include "core/errors.h"

namespace strata::bootstrap {

void setString(Store& store, const std::string& key, const std::string& value) {
  store.set(key, Bytes(value.begin(), value.end()));
}

std::string getString(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  const Bytes value = store.get(key, timeout);
  return std::string(value.begin(), value.end());
}

// Reusable: the n-th arrival on `key` belongs to generation (n-1)/worldSize. A rank cannot
// leave generation g before all worldSize ranks have added for g, so the arrivals of
// consecutive generations never interleave. The last arrival of a generation releases it
// by setting "<key>/done/<g>".
void storeBarrier(Store& store, const std::string& key, int worldSize,
                  std::chrono::milliseconds timeout) {
  STRATA_CHECK(worldSize > 0, "storeBarrier(\"", key, "\"): worldSize must be positive, got ",
               worldSize);
  const std::string counterKey = key + "/arrived";
  const int64_t arrival = store.add(counterKey, 1);
  const int64_t generation = (arrival - 1) / worldSize;
  const std::string doneKey = key + "/done/" + std::to_string(generation);
  if (arrival == (generation + 1) * worldSize) {
    setString(store, doneKey, "1");
    return;
  }
  try {
    store.get(doneKey, timeout);
  } catch (const TimeoutError&) {
    const int64_t arrived = store.add(counterKey, 0) - generation * worldSize;
    STRATA_THROW(TimeoutError, "storeBarrier(\"", key, "\") timed out after ", timeout.count(),
                 " ms: ", arrived, " of ", worldSize, " ranks arrived");
  }
}

}  // namespace strata::bootstrap
