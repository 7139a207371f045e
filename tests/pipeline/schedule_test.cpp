// Schedules with no processes: every program set runs to the end in the all-rank simulator,
// stashes what the schedule promises, and has the textbook bubble under uniform costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "pipeline/schedule.h"
#include "pipeline/simulator.h"

namespace strata::pipeline {
namespace {

// The programs, for failure messages (small shapes only: big ones would flood the log).
std::string dump(const std::vector<Program>& programs, int p) {
  std::string out;
  if (p > 4 || programs.front().instructions.size() > 120) return "(programs too long to print)";
  for (const Program& prog : programs) out += formatProgram(prog, p) + "\n";
  return out;
}

ScheduleSpec spec(ScheduleKind kind, int p, int m, int v = 1, int cap = 0) {
  ScheduleSpec s;
  s.kind = kind;
  s.partitions = p;
  s.microbatches = m;
  s.virtualStages = v;
  s.activeMicrobatches = cap;
  return s;
}

struct Shape {
  ScheduleKind kind;
  int p, m, v, cap;
};

std::vector<Shape> grid() {
  std::vector<Shape> shapes;
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, p, 3 * p + 1})
      for (ScheduleKind kind : {ScheduleKind::kSimple, ScheduleKind::kInterleaved})
        for (int v : {1, 2, 3})
          for (int cap : {0, p, 1}) {
            if ((v > 1 || kind == ScheduleKind::kSimple) && cap != 0) continue;  // cap only matters for 1F1B
            shapes.push_back({kind, p, m, v, cap});
          }
  return shapes;
}

std::string name(const Shape& s) {
  return c10::str(scheduleKindName(s.kind), " p=", s.p, " m=", s.m, " v=", s.v, " cap=", s.cap);
}

TEST(Schedules, EveryShapeRunsToTheEndWithoutDeadlock) {
  for (const Shape& s : grid()) {
    const std::vector<Program> programs = buildPrograms(spec(s.kind, s.p, s.m, s.v, s.cap));
    const SimulationResult r = simulate(programs, uniformCostModel(s.p, s.v, 1.0, 2.0, 100));
    ASSERT_TRUE(r.ok) << name(s) << ": " << r.errors.front() << "\n" << dump(programs, s.p);
  }
}

TEST(Schedules, EveryMicrobatchForwardAndBackwardOnceOnEveryStage) {
  for (const Shape& s : grid()) {
    const std::vector<Program> programs = buildPrograms(spec(s.kind, s.p, s.m, s.v, s.cap));
    ASSERT_EQ(programs.size(), static_cast<size_t>(s.p));
    for (const Program& prog : programs) {
      std::vector<int> forwards(static_cast<size_t>(s.v * s.m), 0), backwards = forwards;
      int steps = 0, reduces = 0;
      for (const Instruction& in : prog.instructions) {
        if (in.op == Op::kForward) ++forwards[static_cast<size_t>(in.chunk * s.m + in.microbatch)];
        if (in.op == Op::kBackward) ++backwards[static_cast<size_t>(in.chunk * s.m + in.microbatch)];
        steps += in.op == Op::kOptimizerStep;
        reduces += in.op == Op::kReduceGradients;
      }
      EXPECT_TRUE(std::all_of(forwards.begin(), forwards.end(), [](int n) { return n == 1; })) << name(s);
      EXPECT_TRUE(std::all_of(backwards.begin(), backwards.end(), [](int n) { return n == 1; })) << name(s);
      EXPECT_EQ(steps, 1) << name(s);
      EXPECT_EQ(reduces, 0) << name(s) << ": no data parallelism requested";
      EXPECT_EQ(prog.instructions.back().op, Op::kOptimizerStep);
    }
  }
}

TEST(Schedules, SimpleStashesEveryMicrobatch) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, p, 3 * p + 1})
      for (int v : {1, 2, 3}) {
        const auto programs = buildPrograms(spec(ScheduleKind::kSimple, p, m, v));
        const SimulationResult r = simulate(programs, uniformCostModel(p, v, 1, 1));
        ASSERT_TRUE(r.ok);
        for (int s = 0; s < p * v; ++s)
          EXPECT_EQ(r.peakInFlightPerStage[static_cast<size_t>(s)], m) << "p=" << p << " m=" << m << " v=" << v;
        for (const RankStats& rank : r.ranks) EXPECT_EQ(rank.peakInFlight, m * v);
        EXPECT_EQ(peakInFlightPerStage(programs, p, v), r.peakInFlightPerStage);
      }
}

TEST(Schedules, OneFOneBStashesAtMostPMinusStage) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, p, 3 * p + 1}) {
      const auto programs = buildPrograms(spec(ScheduleKind::kInterleaved, p, m, 1, /*cap=*/p));
      const auto peak = peakInFlightPerStage(programs, p, 1);
      for (int s = 0; s < p; ++s) {
        EXPECT_LE(peak[static_cast<size_t>(s)], std::min(m, p - s)) << "p=" << p << " m=" << m << " stage " << s;
        EXPECT_GE(peak[static_cast<size_t>(s)], 1);
      }
      // Stage 0 reaches the full p - 0 when there are enough microbatches: the schedule
      // uses the memory it is allowed to keep the pipeline full.
      if (m >= p) {
        EXPECT_EQ(peak[0], p) << "p=" << p << " m=" << m;
      }
    }
}

TEST(Schedules, InterleavedRespectsTheActiveMicrobatchCap) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, p, 3 * p + 1})
      for (int cap : {0, 1, 2, p, p + 2, 2 * p}) {
        ScheduleSpec s = spec(ScheduleKind::kInterleaved, p, m, 1, cap);
        const int c = resolvedActiveMicrobatches(s);
        const auto peak = peakInFlightPerStage(buildPrograms(s), p, 1);
        for (int stage = 0; stage < p; ++stage)
          EXPECT_LE(peak[static_cast<size_t>(stage)], std::min(m, std::max(1, c - stage)))
              << "p=" << p << " m=" << m << " cap=" << cap << " stage " << stage;
      }
}

TEST(Schedules, DefaultCapIsPartitionsPlusTwo) {
  EXPECT_EQ(resolvedActiveMicrobatches(spec(ScheduleKind::kInterleaved, 4, 8)), 6);
  EXPECT_EQ(resolvedActiveMicrobatches(spec(ScheduleKind::kInterleaved, 4, 8, 1, 3)), 3);
}

// Uniform costs: idle / (p * step) == (p-1)/(m+p-1) exactly, for GPipe and 1F1B.
TEST(Schedules, UniformCostsGiveTheTextbookBubble) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, p, 3 * p + 1})
      for (double bwd : {1.0, 2.0})
        for (ScheduleKind kind : {ScheduleKind::kSimple, ScheduleKind::kInterleaved}) {
          const auto programs = buildPrograms(spec(kind, p, m, 1, p));
          const SimulationResult r = simulate(programs, uniformCostModel(p, 1, 1.0, bwd));
          ASSERT_TRUE(r.ok);
          const double expected = double(p - 1) / double(m + p - 1);
          EXPECT_NEAR(r.bubbleFraction, expected, 1e-12)
              << scheduleKindName(kind) << " p=" << p << " m=" << m << " bwd=" << bwd << "\n" << dump(programs, p);
          EXPECT_NEAR(r.stepSeconds, (m + p - 1) * (1.0 + bwd), 1e-9);
          EXPECT_NEAR(r.bubbleOverIdeal, double(p - 1) / m, 1e-12);
        }
}

// smp's default cap (p + 2) may not beat 1F1B with uniform costs but must not be worse.
TEST(Schedules, DefaultCapIsNoSlowerThanOneFOneBWithUniformCosts) {
  for (int p : {2, 3, 4, 8})
    for (int m : {p, 3 * p + 1}) {
      const auto r = simulate(buildPrograms(spec(ScheduleKind::kInterleaved, p, m)), uniformCostModel(p, 1, 1, 2));
      ASSERT_TRUE(r.ok);
      EXPECT_NEAR(r.stepSeconds, (m + p - 1) * 3.0, 1e-9) << "p=" << p << " m=" << m;
    }
}

// Why smp's cap exceeds p: 1F1B pays the link latency on every forward/backward alternation;
// extra microbatches in flight fill those waits. Deterministic simulation, no timing.
TEST(Schedules, ExtraActiveMicrobatchesHideLinkLatency) {
  LinkModel link;
  link.latencySeconds = 0.2;  // a fifth of a forward
  auto step = [&](int cap) {
    const auto r = simulate(buildPrograms(spec(ScheduleKind::kInterleaved, 4, 16, 1, cap)),
                            uniformCostModel(4, 1, 1.0, 2.0, 0, link));
    EXPECT_TRUE(r.ok);
    return r.stepSeconds;
  };
  const double ideal = (16 + 4 - 1) * 3.0;
  EXPECT_GT(step(4), ideal);      // pure 1F1B: latency on the critical path
  EXPECT_LT(step(6), step(4));    // smp's default p + 2 hides part of it
  EXPECT_LE(step(8), step(6));
}

// Megatron's virtual stages: bubble / ideal == (p-1)/(v m) with chunks costing 1/v; with
// the microbatches shared evenly among max(1, m / p) groups this holds for any m >= p.
TEST(Schedules, VirtualStagesShrinkTheBubbleByV) {
  for (int p : {2, 3, 4, 8})
    for (int v : {2, 3, 4})
      for (int m : {p, p + 1, 2 * p, 2 * p + 1, 3 * p + 1, 4 * p}) {
        const auto programs = buildPrograms(spec(ScheduleKind::kInterleaved, p, m, v));
        const SimulationResult r = simulate(programs, uniformCostModel(p, v, 1.0 / v, 2.0 / v));
        ASSERT_TRUE(r.ok);
        EXPECT_NEAR(r.bubbleOverIdeal, double(p - 1) / (v * m), 1e-9)
            << "p=" << p << " v=" << v << " m=" << m << "\n" << dump(programs, p);
      }
}

TEST(Schedules, VirtualStagesStashLessThanSimple) {
  for (int p : {2, 4})
    for (int v : {2, 4}) {
      const int m = 4 * p;
      const SimulationResult r =
          simulate(buildPrograms(spec(ScheduleKind::kInterleaved, p, m, v)), uniformCostModel(p, v, 1, 2));
      ASSERT_TRUE(r.ok);
      const int rank0 = r.ranks[0].peakInFlight;  // all chunks at the same moment
      // Megatron: rank 0 holds (v+1)p - 1 chunk-microbatches at most; simple holds m*v.
      EXPECT_EQ(rank0, (v + 1) * p - 1) << "p=" << p << " v=" << v;
      EXPECT_LT(rank0, m * v);
    }
}

TEST(Schedules, DataParallelAddsOneReduceBeforeTheStep) {
  ScheduleSpec s = spec(ScheduleKind::kInterleaved, 2, 4);
  s.dataParallelSize = 2;
  for (const Program& prog : buildPrograms(s)) {
    const auto& ins = prog.instructions;
    ASSERT_GE(ins.size(), 2u);
    EXPECT_EQ(ins[ins.size() - 2].op, Op::kReduceGradients);
    EXPECT_EQ(ins.back().op, Op::kOptimizerStep);
  }
  s.optimizerStep = false;
  for (const Program& prog : buildPrograms(s)) EXPECT_EQ(prog.instructions.back().op, Op::kReduceGradients);
}

TEST(Schedules, LoadsOnTheFirstAndLastStageOnly) {
  for (int v : {1, 2}) {
    const int p = 3;
    for (const Program& prog : buildPrograms(spec(ScheduleKind::kInterleaved, p, 4, v))) {
      int loads = 0;
      for (const Instruction& in : prog.instructions)
        if (in.op == Op::kLoadMicrobatch) {
          const int g = globalStage(prog.rank, in.chunk, p);
          EXPECT_TRUE(g == 0 || g == p * v - 1) << "stage " << g;
          ++loads;
        }
      const bool hasFirstOrLast = prog.rank == 0 || prog.rank == p - 1;
      EXPECT_EQ(loads, hasFirstOrLast ? 4 : 0) << "rank " << prog.rank << " v=" << v;
    }
  }
}

TEST(Schedules, TwoStageOneFOneBIsTheTextbookOrder) {
  // p=2, m=4, pure 1F1B: rank 0 warms up with one forward, then alternates.
  const auto programs = buildPrograms(spec(ScheduleKind::kInterleaved, 2, 4, 1, 2));
  EXPECT_EQ(formatProgram(programs[0], 2),
            "rank 0: 0LOAD0 0F0 0SEND_A0>1 0LOAD1 0F1 0SEND_A1>1 0RECV_G0<1 0B0 0LOAD2 0F2 0SEND_A2>1 "
            "0RECV_G1<1 0B1 0LOAD3 0F3 0SEND_A3>1 0RECV_G2<1 0B2 0RECV_G3<1 0B3 STEP");
  EXPECT_EQ(formatProgram(programs[1], 2),
            "rank 1: 1LOAD0 1RECV_A0<0 1F0 1B0 1SEND_G0>0 1LOAD1 1RECV_A1<0 1F1 1B1 1SEND_G1>0 1LOAD2 1RECV_A2<0 "
            "1F2 1B2 1SEND_G2>0 1LOAD3 1RECV_A3<0 1F3 1B3 1SEND_G3>0 STEP");
}

TEST(Schedules, TagsPairSendsWithReceives) {
  const int p = 3;
  const Instruction send{Op::kSendActivation, 5, 1, 2};  // rank 1 chunk 1 = stage 4 -> stage 5
  const Instruction recv{Op::kRecvActivation, 5, 1, 1};  // rank 2 chunk 1 = stage 5
  EXPECT_EQ(instructionTag(send, 1, p), instructionTag(recv, 2, p));
  const Instruction sendGrad{Op::kSendGradient, 5, 1, 0};  // stage 4 -> stage 3
  const Instruction recvGrad{Op::kRecvGradient, 5, 1, 1};  // rank 0 chunk 1 = stage 3
  EXPECT_EQ(instructionTag(sendGrad, 1, p), instructionTag(recvGrad, 0, p));
  EXPECT_NE(instructionTag(send, 1, p), instructionTag(sendGrad, 1, p));
  EXPECT_THROW(instructionTag({Op::kForward, 0, 0, -1}, 0, p), strata::Error);
}

TEST(Schedules, BadSpecsNameTheField) {
  auto message = [](ScheduleSpec s) {
    try {
      buildPrograms(s);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(spec(ScheduleKind::kSimple, 0, 4)).find("partitions must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(message(spec(ScheduleKind::kSimple, 2, 0)).find("microbatches must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(message(spec(ScheduleKind::kSimple, 2, 2, 0)).find("virtual_stages must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(message(spec(ScheduleKind::kSimple, 2, 2, 1, -1)).find("active_microbatches"), std::string::npos);
  EXPECT_THROW(parseScheduleKind("gpipe"), ConfigError);
  EXPECT_EQ(parseScheduleKind("simple"), ScheduleKind::kSimple);
  EXPECT_EQ(parseScheduleKind("interleaved"), ScheduleKind::kInterleaved);
}

}  // namespace
}  // namespace strata::pipeline
