#include "runtime/exit_status.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/errors.h"

namespace strata::runtime {
namespace {

std::atomic<bool> installed{false};
std::terminate_handler previousHandler = nullptr;

[[noreturn]] void onTerminate() {
  if (const std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const ConfigError& e) {
      std::fprintf(stderr, "strata: configuration error (exit %d, not worth a restart): %s\n", kExitConfigError,
                   e.what());
      std::fflush(stderr);
      std::_Exit(kExitConfigError);
    } catch (...) {
    }
  }
  if (previousHandler != nullptr) previousHandler();
  std::abort();
}

}  // namespace

void installConfigErrorExit() {
  if (installed.exchange(true)) return;
  previousHandler = std::set_terminate(onTerminate);
}

}  // namespace strata::runtime
