// Small collectives that keep ranks in agreement when something fails on some of them, so
// every rank throws the same clear error instead of some waiting forever. Every function is
// collective over its group (the world where none is given).
#pragma once

#include <string>

#include "strata/group.h"

namespace strata::adapter {

// `text` of rank `root` on every rank.
void broadcastString(Group& group, std::string& text, int root);

// The error of the lowest rank whose `error` is non-empty, as that rank wrote it, or "".
std::string firstError(Group& group, const std::string& error);

// When any rank's `error` is non-empty, every rank throws strata::Error
// "<what> failed on rank <r>: <error>" with the lowest failing rank's error (the failing
// rank too, so its log names the rank).
void agreeOnError(Group& group, const std::string& error, const std::string& what);

// The same over the world, from an outcome and its error text.
void agreeOrThrow(bool ok, const std::string& error, const std::string& what);
std::string agreeOnError(bool ok, const std::string& error);

// An exception's text without trailing newlines and spaces.
std::string trimmed(std::string text);

}  // namespace strata::adapter
