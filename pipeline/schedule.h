// Pipeline schedules as data: one Program per pipeline rank (see program.h).
//
//   simple       GPipe: every forward, then every backward (ascending microbatch order, so
//                gradients accumulate in the same order as one process running microbatches
//                0..m-1). Stage s stashes all m microbatches. With v virtual stages: chunk by
//                chunk (looped breadth-first), m*v chunk-microbatches stashed per rank.
//   interleaved  SageMaker's meaning (not Megatron's): backward as early as possible, at most
//                `activeMicrobatches` (c) microbatches in flight. The order is the one a
//                backward-first list scheduler produces under nominal costs (forward 1,
//                backward 2, no latency) with stage s allowed max(1, c - s) stashed
//                microbatches: stage 0 holds at most c, which is smp's global cap since every
//                active microbatch is stashed on stage 0. c = p gives classic 1F1B (stage s
//                holds at most p - s); smp's default is p + 2.
//   virtual stages (v > 1, interleaved): Megatron's interleaved 1F1B. Microbatches go in
//                groups through chunk 0, then chunk 1, ...; rank r warms up with Megatron's
//                2(p-r-1) + (v-1)g chunk-forwards (g = the first group's size), then
//                alternates. Megatron needs m % p == 0 (groups of p); we accept any m by
//                sharing the m microbatches evenly among max(1, m / p) groups (each >= p
//                when m >= p), and the bubble is (p-1)/(v*m) over ideal for every m >= p.
//   zero_bubble  ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): the
//                backward is split into B (gradient w.r.t. the stage input, kBackward, sent
//                upstream at once) and W (gradients w.r.t. the parameters, kBackwardWeight).
//                Rank r runs 1F1B's p-r-1 warmup forwards, then F B pairs in which W is held
//                back by r microbatches, so the W's that would run in 1F1B's bubble fill it
//                instead; the held-back W's drain at the end. A stage keeps a microbatch from
//                F to W: at most min(p, m) on every rank, 1F1B's peak (stage 0). With
//                t_F = t_B = t_W the bubble over ideal is (p-1)/(3m), a third of 1F1B's.
//                W's run in ascending microbatch order, so parameter gradients accumulate
//                in the same order as the other schedules and one process. v = 1 only.
//
// Every order is proven by construction: it is extracted from a feasible execution, and
// receives are placed in the order the peer sends on that channel (FIFO). The simulator
// re-checks it independently.
#pragma once

#include <string>
#include <vector>

#include "pipeline/program.h"

namespace strata::pipeline {

// A stage, rank or microbatch number as a vector index (they are ints in the programs).
inline size_t toIndex(int i) { return static_cast<size_t>(i); }

enum class ScheduleKind { kSimple, kInterleaved, kZeroBubble };

// "simple" | "interleaved" | "zero_bubble"; anything else throws strata::ConfigError naming
// `pipeline` and listing the valid names.
ScheduleKind parseScheduleKind(const std::string& name);
const char* scheduleKindName(ScheduleKind kind);

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::kInterleaved;
  int partitions = 1;          // p: pipeline ranks
  int microbatches = 1;        // m
  int virtualStages = 1;       // v: chunks per rank; p*v global stages
  int activeMicrobatches = 0;  // interleaved, v == 1: cap c; 0 = p + 2 (smp's default)
  int dataParallelSize = 1;    // > 1 appends kReduceGradients before kOptimizerStep
  bool optimizerStep = true;   // append kOptimizerStep

  int numStages() const { return partitions * virtualStages; }
};

// Throws strata::ConfigError naming the field and value: partitions, microbatches,
// virtual_stages, data-parallel size below 1, active_microbatches below 0, or zero_bubble
// with virtual_stages above 1.
void validateSpec(const ScheduleSpec& spec);

// The cap actually used: activeMicrobatches, or p + 2 when 0.
int resolvedActiveMicrobatches(const ScheduleSpec& spec);

// One program per pipeline rank, index = rank. Validates the spec first.
std::vector<Program> buildPrograms(const ScheduleSpec& spec);

// Peak number of microbatches stashed (forward done, backward not yet; with a split
// backward: W not yet) per global stage, read off the programs (independent of timing).
// Index = global stage.
std::vector<int> peakInFlightPerStage(const std::vector<Program>& programs, int partitions,
                                      int virtualStages);

// The global stage an instruction's chunk is on: chunk * p + rank.
inline int globalStage(int rank, int chunk, int partitions) { return chunk * partitions + rank; }

// The tag of a send or receive instruction of `rank` (messageTag of the boundary it crosses;
// the boundary between stages s and s+1 is identified by s+1 for both directions).
// Throws strata::Error for an instruction that is not a send or receive.
uint64_t instructionTag(const Instruction& instruction, int rank, int partitions);

// Compact forms for logs and test failures, torch-style: "1F0" = global stage 1 forward
// microbatch 0; "1B0" its backward (zero_bubble: the input-gradient part), "1W0" its weight
// gradients; "1SEND_A0>2", "2RECV_A0<1", "1SEND_G0>0", "0RECV_G0<1", "0LOAD0", "REDUCE",
// "STEP". A program prints as its rank then the instructions separated by spaces.
std::string formatInstruction(const Instruction& instruction, int rank, int partitions);
std::string formatProgram(const Program& program, int partitions);

}  // namespace strata::pipeline
