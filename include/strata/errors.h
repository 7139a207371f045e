// The exception types Strata throws. All derive from c10::Error, the type libtorch users
// already catch; the distributed error classes of later PyTorch releases do not exist in
// libtorch 1.13, so these play their roles.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "strata/exit_codes.h"

namespace strata {

// Base class: misuse by the caller (bad argument, wrong state).
class Error : public c10::Error {
 public:
  explicit Error(std::string msg) : c10::Error(std::move(msg), /*backtrace=*/"") {}
};

// The job config (file, environment) is invalid. Fix the configuration; do not retry.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A peer, socket or shared-memory failure. The group is unusable afterwards.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// A wait ran past its timeout. A kind of NetworkError: the group is unusable.
class TimeoutError : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

// Ranks called different collectives (op, dtype, count or root differ).
class MismatchError : public Error {
 public:
  using Error::Error;
};

// Rendezvous / key-value store failure (transient: connecting may be retried).
class StoreError : public Error {
 public:
  using Error::Error;
};

// NCCL or CUDA failure, converted at the call site.
class BackendError : public Error {
 public:
  using Error::Error;
};

// The exit status a main() should return for the exception that ended it: kExitConfigError
// for a ConfigError (a restart cannot help), else kExitFailed (docs/exit_status.md). A
// ConfigError nobody catches after strata::init() began exits with kExitConfigError too.
inline int exit_code_for(const std::exception& e) {
  return dynamic_cast<const ConfigError*>(&e) != nullptr ? kExitConfigError : kExitFailed;
}

}  // namespace strata
