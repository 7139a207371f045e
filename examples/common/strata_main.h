// The start and end of every example's main(): parse the command line, start Strata, train,
// shut Strata down (torch-free: the collectives tour uses it too). An error anywhere (a bad flag, a bad job config, a wrong job secret, a
// failed peer) is printed once per rank and ends the process with the code a scheduler and
// `strata run` read (docs/exit_status.md): strata::exit_code_for(e), 78 (kExitConfigError)
// for what a retry cannot fix, 1 (kExitFailed) for the rest.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <optional>

#include "strata/errors.h"
#include "strata/runtime.h"

namespace examples {

// CLI11's parse: std::nullopt when the flags are good, else the exit code (0 after --help;
// kExitConfigError for a bad flag, which a restart would repeat).
inline std::optional<int> parseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : strata::kExitConfigError;
  }
}

// `train()` returns the process's exit code (a stopped run's kExitStopped included). A flag
// whose value is wrong for the job (a batch that does not split over the ranks) is a
// strata::ConfigError thrown from train().
template <typename Train>
int runWithStrata(int argc, char** argv, Train&& train) {
  try {
    strata::init(argc, argv);
    const int code = train();
    strata::finalize();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return strata::exit_code_for(e);
  }
}

}  // namespace examples
