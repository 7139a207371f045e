// Runtime state for the library's own adapters (not part of the public API).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"

namespace strata::bootstrap {
class Store;
}

namespace strata::runtime {

// The validated job config in force. Throws strata::Error before init().
const config::JobConfig& jobConfig();

// Runs `fn` at the start of strata::finalize(), while the world group still works (the
// debugger hook flushes and writes its end marker there). Last added runs first.
void addFinalizer(std::function<void()> fn);

// Finalize-time rendezvous through the store, not the world group (a collective there
// would collide with a peer still inside one): every rank arrives at `key`; rank 0 then
// waits until all have, or until a bounded timeout. Returns whether all arrived (rank 0)
// or true (others). Never throws.
bool arriveAtFinalize(const std::string& key);

// The job's rendezvous store (thread-safe; usable until finalize() returns). The checkpoint
// thread exchanges its per-rank results through it, away from the world group's collectives.
std::shared_ptr<bootstrap::Store> rendezvousStore();
// The bound of every blocking wait: collectives.timeout_ms, or STRATA_TIMEOUT_MS.
std::chrono::milliseconds waitTimeout();

// The job secret in force on this rank, for one test only: the multi-host capture test
// (tests/multihost/secret_exchange.sh) searches every byte on the wire for it and the keys
// derived from it. Nothing else may read it; never log it.
std::string jobSecretForCaptureTest();

}  // namespace strata::runtime
