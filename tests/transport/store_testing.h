// Shared by the store tests (HashStore, TcpStore and its authentication) and the transport
// tests that time their waits: the loopback address, the default wait, elapsed time, and the
// contract every Store keeps for a key nobody sets.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bootstrap/store.h"
#include "core/errors.h"

namespace strata::bootstrap::testing {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kTimeout{5000};
inline const char* const kHost = "127.0.0.1";

inline std::chrono::milliseconds elapsedSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// A get of `key` (never set) throws TimeoutError naming the key once `wait` has passed, and
// not much later.
inline void expectGetTimesOutNamingTheKey(Store& store, const std::string& key, std::chrono::milliseconds wait) {
  const auto start = Clock::now();
  try {
    store.get(key, wait);
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
  EXPECT_GE(elapsedSince(start).count(), (wait - std::chrono::milliseconds(10)).count());
  EXPECT_LT(elapsedSince(start).count(), 2000);
}

}  // namespace strata::bootstrap::testing
