// The "[r3/8]" tag that prefixes every log line and exception message.
#pragma once

#include <string>

namespace strata {

// Thread-safe to read; set once by the runtime when the world group is formed.
// Before that it is "[r?]".
const std::string& rankTag();
void setRankTag(int rank, int worldSize);

// Threads that act as ranks inside one process (tests) override the tag per thread.
void setThreadRankTag(int rank, int worldSize);

}  // namespace strata
