// The all-rank simulator: it must catch broken programs (deadlock, mismatched tags, lost
// messages, out-of-order compute) and price the link exactly as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "pipeline/schedule.h"
#include "pipeline/simulator.h"
#include "pipeline/schedule_spec_testing.h"

namespace strata::pipeline {
namespace {

size_t indexOf(const Program& prog, Op op, int microbatch) {
  for (size_t i = 0; i < prog.instructions.size(); ++i)
    if (prog.instructions[i].op == op && prog.instructions[i].microbatch == microbatch) return i;
  ADD_FAILURE() << "no " << opName(op) << " of microbatch " << microbatch;
  return 0;
}

bool anyContains(const std::vector<std::string>& errors, const std::string& needle) {
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) { return e.find(needle) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const std::string& e : errors) out += e + "\n";
  return out;
}

// The programs, simulated with unit costs on `partitions` stages, fail with an error containing
// each of `needles`.
void expectRejected(const std::vector<Program>& programs, int partitions, const std::vector<std::string>& needles) {
  const SimulationResult r = simulate(programs, uniformCostModel(partitions, 1, 1, 1));
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.errors.empty());
  for (const std::string& needle : needles) EXPECT_TRUE(anyContains(r.errors, needle)) << joined(r.errors);
}

TEST(Simulator, SwappedSendOrderIsAMismatch) {
  auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 4));
  auto& ins = programs[0].instructions;
  // Rank 0 sends microbatch 0's activation after microbatch 1's (both after their forwards).
  const size_t first = indexOf(programs[0], Op::kSendActivation, 0);
  const Instruction moved = ins[first];
  ins.erase(ins.begin() + static_cast<long>(first));
  ins.insert(ins.begin() + static_cast<long>(indexOf(programs[0], Op::kSendActivation, 1)) + 1, moved);
  expectRejected(programs, 2,
                 {"expects the activation of microbatch 0",
                  "the next message on that channel is the activation of microbatch 1"});
}

TEST(Simulator, ReceiveBeforeSendOnBothSidesIsADeadlock) {
  // Rank 0 waits for the gradient of microbatch 0 before sending its activation: rank 1
  // waits for that activation. Neither can move.
  auto programs = buildPrograms(spec(ScheduleKind::kInterleaved, 2, 2, 2));
  auto& ins = programs[0].instructions;
  const size_t send = indexOf(programs[0], Op::kSendActivation, 0);
  const size_t recv = indexOf(programs[0], Op::kRecvGradient, 0);
  const Instruction moved = ins[recv];
  ins.erase(ins.begin() + static_cast<long>(recv));
  ins.insert(ins.begin() + static_cast<long>(send), moved);
  expectRejected(programs, 2, {"deadlock: rank 0 waits", "deadlock: rank 1 waits", "gradient of microbatch 0"});
}

TEST(Simulator, AMessageNobodyReceivesIsReported) {
  auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 2));
  auto& ins = programs[0].instructions;
  // Rank 0 sends an extra copy of microbatch 1's activation at the end.
  ins.insert(ins.end() - 1, Instruction{Op::kSendActivation, 1, 0, 1});
  expectRejected(programs, 2, {"which never receives it"});
}

TEST(Simulator, BackwardBeforeForwardIsReported) {
  auto programs = buildPrograms(spec(ScheduleKind::kSimple, 1, 2));
  auto& ins = programs[0].instructions;
  std::swap(ins[indexOf(programs[0], Op::kForward, 1)], ins[indexOf(programs[0], Op::kBackward, 1)]);
  expectRejected(programs, 1, {"runs a backward before its forward"});
}

TEST(Simulator, ComputeBeforeItsInputArrivedIsReported) {
  auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 1));
  auto& ins = programs[1].instructions;
  // Move rank 1's forward in front of its receive.
  const size_t recv = indexOf(programs[1], Op::kRecvActivation, 0);
  const size_t fwd = indexOf(programs[1], Op::kForward, 0);
  std::swap(ins[recv], ins[fwd]);
  expectRejected(programs, 2, {"runs before its input activation arrived"});
}

TEST(Simulator, MisuseThrows) {
  auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 1));
  EXPECT_THROW(simulate(programs, uniformCostModel(3, 1, 1, 1)), strata::Error);
  CostModel wrongStages = uniformCostModel(2, 1, 1, 1);
  wrongStages.stages.pop_back();
  EXPECT_THROW(simulate(programs, wrongStages), strata::Error);
  programs[0].instructions[2].peer = 7;
  EXPECT_THROW(simulate(programs, uniformCostModel(2, 1, 1, 1)), strata::Error);
}

// Two stages, one microbatch: F0 | link | F1 B1 | link | B0, all by hand.
TEST(Simulator, LinkLatencyAndBandwidthByHand) {
  const auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 1));
  LinkModel link;
  link.latencySeconds = 0.5;
  link.bytesPerSecond = 1e9;
  const CostModel costs = uniformCostModel(2, 1, 1.0, 2.0, /*activationBytes=*/1'000'000'000, link);
  const SimulationResult r = simulate(programs, costs);
  ASSERT_TRUE(r.ok) << joined(r.errors);
  // Rank 0: F 0-1; activation on the wire 1-2, arrives 2.5; rank 1: F 2.5-3.5, B 3.5-5.5;
  // gradient on the wire 5.5-6.5, arrives 7; rank 0: B 7-9.
  EXPECT_DOUBLE_EQ(r.stepSeconds, 9.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].busySeconds, 3.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].busySeconds, 3.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].finishSeconds, 5.5);
  EXPECT_DOUBLE_EQ(r.ranks[0].idleSeconds, 6.0);
  EXPECT_DOUBLE_EQ(r.bubbleFraction, 12.0 / 18.0);
}

// Back-to-back messages share the link: the second waits for the first to leave.
TEST(Simulator, MessagesQueueOnTheLink) {
  const auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 2));
  LinkModel link;
  link.bytesPerSecond = 1.0;  // 4 bytes take 4 s, longer than a 1 s forward
  const SimulationResult r = simulate(programs, uniformCostModel(2, 1, 1.0, 1.0, 4, link));
  ASSERT_TRUE(r.ok) << joined(r.errors);
  // Activations: mb0 on the wire 1-5, mb1 5-9 (not 2-6). Rank 1: F0 5-6, F1 9-10, B0 10-11,
  // B1 11-12; gradients: 11-15, 15-19; rank 0: B0 15-16, B1 19-20.
  EXPECT_DOUBLE_EQ(r.stepSeconds, 20.0);
}

TEST(Simulator, StashBytesAndMemoryPerRank) {
  const auto programs = buildPrograms(spec(ScheduleKind::kSimple, 2, 3));
  CostModel costs = uniformCostModel(2, 1, 1, 1);
  costs.stages[0].stashBytes = 100;
  costs.stages[0].staticBytes = 1000;
  costs.stages[1].stashBytes = 10;
  const SimulationResult r = simulate(programs, costs);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.ranks[0].peakInFlight, 3);
  EXPECT_EQ(r.ranks[0].peakStashBytes, 300u);
  EXPECT_EQ(r.ranks[0].peakMemoryBytes, 1300u);
  EXPECT_EQ(r.ranks[1].peakStashBytes, 30u);
  EXPECT_EQ(r.peakInFlightPerStage, (std::vector<int>{3, 3}));
  EXPECT_EQ(r.peakStashBytesPerStage, (std::vector<size_t>{300, 30}));
}

TEST(Simulator, ReduceAndOptimizerCostsAreBusyTime) {
  ScheduleSpec s = spec(ScheduleKind::kSimple, 1, 2);
  s.dataParallelSize = 2;
  CostModel costs = uniformCostModel(1, 1, 1, 1);
  costs.reduceSeconds = {0.5};
  costs.optimizerSeconds = 0.25;
  costs.loadSeconds = 0.125;
  const SimulationResult r = simulate(buildPrograms(s), costs);
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.stepSeconds, 4 + 0.5 + 0.25 + 2 * 0.125);
  EXPECT_DOUBLE_EQ(r.bubbleFraction, 0.0);
}

TEST(Simulator, TimelineCoversEveryInstruction) {
  const auto programs = buildPrograms(spec(ScheduleKind::kInterleaved, 3, 5));
  const SimulationResult r = simulate(programs, uniformCostModel(3, 1, 1, 2));
  ASSERT_TRUE(r.ok);
  size_t total = 0;
  for (const Program& prog : programs) total += prog.instructions.size();
  EXPECT_EQ(r.timeline.size(), total);
  for (const TimedInstruction& t : r.timeline) EXPECT_LE(t.startSeconds, t.endSeconds);
}

}  // namespace
}  // namespace strata::pipeline
