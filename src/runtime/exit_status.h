// Exit statuses a scheduler can act on (docs/exit_status.md): a ConfigError that nobody
// catches ends the process with strata::kExitConfigError (78) instead of std::terminate's
// abort (SIGABRT, 134), which `strata run` and schedulers would take for a crash and retry.
//
// Threading: install from one thread (strata::init); the handler runs on the terminating one.
#pragma once

namespace strata::runtime {

// Idempotent. Other uncaught exceptions keep the previous terminate handler's behaviour.
void installConfigErrorExit();

}  // namespace strata::runtime
