// The runtime's side of the in-process rule engine (rules/online_engine.h): which rank
// evaluates its own debugger data, and starting/stopping the engine with the debugger tap.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "rules/online_engine.h"

namespace strata::runtime {

// Pure: whether `rank` evaluates its own tensors in process. It must write them (a debugger
// config, and include_workers "all" or rank 0), and be the worker the offline reader takes
// them from: the first by worker name among the ranks that save the same names (every rank
// in data parallelism; the replicas of one pipeline stage with model parallelism).
bool evaluatesOwnTensors(int rank, int worldSize, const config::JobConfig& config);

// Pure: the collections that other ranks fill for `rank`'s in-process trial: "losses" on a
// pipeline stage other than the last (the loss lives on the last stage), none otherwise. The
// offline reader sees every rank's tensors, so a loss rule there never falls back to this
// rank's names containing "loss" (a scalar such as train_loss_avg200) while the last stage
// saves the loss; the in-process engine must not either.
std::vector<std::string> collectionsFilledElsewhere(int rank, int worldSize, const config::JobConfig& config);

// Starts this rank's engine when the job has tensor rules and the rank evaluates its tensors,
// and makes its feed the debugger's tap (hooks created later hand their data to it). Returns
// nullptr otherwise. Logs and returns nullptr when a rule cannot be built (training goes on;
// rank 0's engine over the files reports the error).
std::unique_ptr<rules::OnlineEngine> startInProcessRules(const config::JobConfig& config, int rank, int worldSize);

// Clears the tap, evaluates what is left, writes rule-output/online/<worker>.json. Never throws.
void stopInProcessRules(std::unique_ptr<rules::OnlineEngine>& engine);

}  // namespace strata::runtime
