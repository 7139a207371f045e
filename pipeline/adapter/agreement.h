// Small collectives that keep ranks in agreement when something fails on some of them, so
// every rank throws the same clear error instead of some waiting forever.
#pragma once

#include <string>

#include "strata/group.h"

namespace strata::pipeline {

// Collective over `group`: `text` of rank `root` on every rank.
void broadcastString(Group& group, std::string& text, int root);

// Collective over `group`: when any rank's `error` is non-empty, every rank throws
// strata::Error "<what> failed on rank <r>: <error>" with the lowest failing rank's error.
void agreeOnError(Group& group, const std::string& error, const std::string& what);

}  // namespace strata::pipeline
