// Runtime state for the library's own adapters (not part of the public API).
#pragma once

#include "config/config.h"

namespace strata::runtime {

// The validated job config in force. Throws strata::Error before init().
const config::JobConfig& jobConfig();

}  // namespace strata::runtime
