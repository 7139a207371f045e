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

#include "strata/errors.h"


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
