// Strata's exception types and the macros that throw them.
//
// Every error derives from c10::Error, the type libtorch users already catch. The
// distributed error classes of later PyTorch releases (DistNetworkError...) do not
// exist in libtorch 1.13, so we define our own with the same roles. Only
// c10/util (header-only parts plus libc10) is used, never ATen: the core stays
// torch-free.
#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>

#include "core/rank_tag.h"

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

}  // namespace strata

// Throws `type` with the rank tag and the concatenated message when cond is false.
#define STRATA_CHECK_WITH(type, cond, ...)                                 \
  do {                                                                     \
    if (C10_UNLIKELY(!(cond))) {                                           \
      throw ::strata::type(::c10::str(::strata::rankTag(), " ", __VA_ARGS__)); \
    }                                                                      \
  } while (0)

// Misuse by the caller.
#define STRATA_CHECK(cond, ...) STRATA_CHECK_WITH(Error, cond, __VA_ARGS__)
// Peer, socket or shared-memory failure.
#define STRATA_CHECK_NET(cond, ...) STRATA_CHECK_WITH(NetworkError, cond, __VA_ARGS__)

#define STRATA_THROW(type, ...) \
  throw ::strata::type(::c10::str(::strata::rankTag(), " ", __VA_ARGS__))
