// The end of every example's main(): start Strata, train, shut Strata down. An error anywhere
// (a bad job config, a failed peer) is printed once and ends the process with exit code 2.
#pragma once

#include <cstdio>
#include <exception>

#include "strata/strata.h"

namespace examples {

// `train()` returns the process's exit code (a stopped run's kExitStopped included).
template <typename Train>
int runWithStrata(int argc, char** argv, Train&& train) {
  try {
    strata::init(argc, argv);
    const int code = train();
    strata::finalize();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

}  // namespace examples
