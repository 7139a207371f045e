// One SHA-256 over the whole model's parameters, the same for every layout (one process,
// data parallel, any pipeline partition), computed without any rank holding or receiving
// the whole model.
//
// Every parameter and buffer is digested where it lives: on data-parallel replica 0, each
// rank hashes its own (its pipeline stage's) tensors, one SHA-256 per tensor over its dtype,
// shape and bytes. Only the lines "<path> <hex digest>" travel, to rank 0, which sorts them
// by path and hashes the lines: the canonical order is the sorted parameter paths. A tied
// weight is listed once, under its canonical path: `aliases` maps every other path of a tied
// tensor ("head.weight") to it ("embed.token.weight"), and the copies (one per stage that
// holds it) must have equal digests, or the call throws naming the path.
//
// Collective over the world; every rank returns the hex digest.
#pragma once

#include <map>
#include <string>

#include "strata/distributed_model.h"

namespace lm {

std::string paramsSha256(strata::DistributedModel& model, const std::map<std::string, std::string>& aliases);

}  // namespace lm
