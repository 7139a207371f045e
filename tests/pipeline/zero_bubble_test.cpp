// The zero_bubble schedule (ZB-H1) with no processes: over p in 1..8 and m in 1..16 (and a
// few larger shapes) its programs run to the end in the all-rank simulator, run every F, B
// and W exactly once per microbatch and stage with each W after its B and the W's in
// ascending microbatch order (the gradient accumulation order of the other schedules), stash
// no more than 1F1B does, and have the paper's bubble under uniform costs.
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

std::vector<Program> zeroBubble(int p, int m) { return buildPrograms(spec(ScheduleKind::kZeroBubble, p, m)); }
std::vector<Program> oneFOneB(int p, int m) { return buildPrograms(spec(ScheduleKind::kInterleaved, p, m, p)); }

struct Shape {
  int p, m;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) out.push_back({p, m});
  for (Shape s : {Shape{16, 16}, Shape{16, 64}, Shape{32, 40}, Shape{64, 64}, Shape{64, 256}}) out.push_back(s);
  return out;
}

std::string name(const Shape& s) { return c10::str("zero_bubble p=", s.p, " m=", s.m); }

std::string dump(const std::vector<Program>& programs, int p) {
  if (p > 4 || programs.front().instructions.size() > 120) return "(programs too long to print)";
  std::string out;
  for (const Program& prog : programs) out += formatProgram(prog, p) + "\n";
  return out;
}

// Costs t_F = 1, t_B = b, t_W = w (backward = b + w).
CostModel costs(int p, double b, double w, size_t activationBytes = 0) {
  CostModel c = uniformCostModel(p, 1, 1.0, b + w, activationBytes);
  for (StageCost& s : c.stages) s.weightGradientSeconds = w;
  return c;
}

TEST(ZeroBubble, EveryShapeRunsToTheEndWithoutDeadlock) {
  for (const Shape& s : shapes()) {
    const std::vector<Program> programs = zeroBubble(s.p, s.m);
    for (double latency : {0.0, 0.3}) {
      CostModel c = costs(s.p, 1.0, 1.0, 100);
      c.link.latencySeconds = latency;
      const SimulationResult r = simulate(programs, c);
      ASSERT_TRUE(r.ok) << name(s) << " latency " << latency << ": " << r.errors.front() << "\n" << dump(programs, s.p);
    }
  }
}

TEST(ZeroBubble, EveryMicrobatchFBWOnceWithWAfterBInAscendingOrder) {
  for (const Shape& s : shapes()) {
    for (const Program& prog : zeroBubble(s.p, s.m)) {
      std::vector<int> f(static_cast<size_t>(s.m), 0), b = f, w = f;
      std::vector<int> weightOrder;
      int steps = 0;
      for (const Instruction& in : prog.instructions) {
        ASSERT_EQ(in.chunk, 0) << name(s);
        const size_t mb = static_cast<size_t>(in.microbatch);
        if (in.op == Op::kForward) ++f[mb];
        if (in.op == Op::kBackward) {
          ASSERT_EQ(f[mb], 1) << name(s) << " rank " << prog.rank << ": B" << mb << " before its F";
          ++b[mb];
        }
        if (in.op == Op::kBackwardWeight) {
          ASSERT_EQ(b[mb], 1) << name(s) << " rank " << prog.rank << ": W" << mb << " before its B";
          ++w[mb];
          weightOrder.push_back(in.microbatch);
        }
        steps += in.op == Op::kOptimizerStep;
      }
      for (const std::vector<int>* counts : {&f, &b, &w})
        EXPECT_TRUE(std::all_of(counts->begin(), counts->end(), [](int n) { return n == 1; }))
            << name(s) << " rank " << prog.rank;
      EXPECT_TRUE(std::is_sorted(weightOrder.begin(), weightOrder.end())) << name(s) << " rank " << prog.rank;
      EXPECT_EQ(steps, 1);
      EXPECT_EQ(prog.instructions.back().op, Op::kOptimizerStep);
    }
  }
}

// The input gradient goes upstream right after its B: the send follows the B directly.
TEST(ZeroBubble, InputGradientIsSentRightAfterItsB) {
  for (const Shape& s : shapes())
    for (const Program& prog : zeroBubble(s.p, s.m)) {
      const auto& ins = prog.instructions;
      for (size_t i = 0; i < ins.size(); ++i) {
        if (ins[i].op != Op::kBackward || prog.rank == 0) continue;
        ASSERT_LT(i + 1, ins.size());
        EXPECT_EQ(ins[i + 1].op, Op::kSendGradient) << name(s) << " rank " << prog.rank;
        EXPECT_EQ(ins[i + 1].microbatch, ins[i].microbatch);
      }
    }
}

// Stash from F to W: at most min(p, m) on every stage, which is 1F1B's peak (stage 0); the
// simulator's count agrees with the one read off the programs.
TEST(ZeroBubble, PeakInFlightIsNoMoreThanOneFOneBs) {
  for (const Shape& s : shapes()) {
    const auto programs = zeroBubble(s.p, s.m);
    const auto peak = peakInFlightPerStage(programs, s.p, 1);
    const auto peak1f1b = peakInFlightPerStage(oneFOneB(s.p, s.m), s.p, 1);
    const int worst1f1b = *std::max_element(peak1f1b.begin(), peak1f1b.end());
    EXPECT_EQ(worst1f1b, std::min(s.p, s.m)) << name(s);
    for (int stage = 0; stage < s.p; ++stage)
      EXPECT_LE(peak[static_cast<size_t>(stage)], worst1f1b) << name(s) << " stage " << stage;
    EXPECT_EQ(peak[0], peak1f1b[0]) << name(s) << ": stage 0 keeps 1F1B's memory";
    const SimulationResult r = simulate(programs, costs(s.p, 1, 1));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.peakInFlightPerStage, peak) << name(s);
  }
}

// t_F = t_B = t_W: bubble over ideal (p-1)/(3m), a third of 1F1B's (p-1)/m, when m >= p.
TEST(ZeroBubble, UniformCostsGiveAThirdOfOneFOneBsBubble) {
  for (const Shape& s : shapes()) {
    if (s.m < s.p) continue;
    const SimulationResult zb = simulate(zeroBubble(s.p, s.m), costs(s.p, 1, 1));
    const SimulationResult base = simulate(oneFOneB(s.p, s.m), costs(s.p, 1, 1));
    ASSERT_TRUE(zb.ok && base.ok);
    EXPECT_NEAR(base.bubbleOverIdeal, double(s.p - 1) / s.m, 1e-12) << name(s);
    EXPECT_NEAR(zb.bubbleOverIdeal, double(s.p - 1) / (3.0 * s.m), 1e-12) << name(s);
    EXPECT_NEAR(zb.stepSeconds, 3.0 * s.m + (s.p - 1), 1e-9) << name(s);
  }
}

// Whatever the split of the backward and the latency, never slower than 1F1B.
TEST(ZeroBubble, NeverSlowerThanOneFOneB) {
  for (const Shape& s : shapes())
    for (double w : {0.0, 0.5, 1.0, 2.0})
      for (double latency : {0.0, 0.1, 0.5}) {
        CostModel c = costs(s.p, 1.0, w);
        c.link.latencySeconds = latency;
        const SimulationResult zb = simulate(zeroBubble(s.p, s.m), c);
        const SimulationResult base = simulate(oneFOneB(s.p, s.m), c);
        ASSERT_TRUE(zb.ok && base.ok);
        EXPECT_LE(zb.stepSeconds, base.stepSeconds + 1e-9)
            << name(s) << " t_W=" << w << " latency=" << latency;
      }
}

TEST(ZeroBubble, TwoStageOrderIsTheExpectedOne) {
  // Rank 0 runs each W right after its B; rank 1 (the last stage) holds W back by one.
  const auto programs = zeroBubble(2, 3);
  EXPECT_EQ(formatProgram(programs[0], 2),
            "rank 0: 0LOAD0 0F0 0SEND_A0>1 0LOAD1 0F1 0SEND_A1>1 0RECV_G0<1 0B0 0W0 0LOAD2 0F2 0SEND_A2>1 "
            "0RECV_G1<1 0B1 0W1 0RECV_G2<1 0B2 0W2 STEP");
  EXPECT_EQ(formatProgram(programs[1], 2),
            "rank 1: 1LOAD0 1RECV_A0<0 1F0 1B0 1SEND_G0>0 1LOAD1 1RECV_A1<0 1F1 1B1 1SEND_G1>0 1W0 1LOAD2 "
            "1RECV_A2<0 1F2 1B2 1SEND_G2>0 1W1 1W2 STEP");
}

TEST(ZeroBubble, DataParallelReducesAfterTheLastW) {
  ScheduleSpec s = spec(ScheduleKind::kZeroBubble, 3, 5);
  s.dataParallelSize = 2;
  for (const Program& prog : buildPrograms(s)) {
    const auto& ins = prog.instructions;
    ASSERT_GE(ins.size(), 3u);
    EXPECT_EQ(ins[ins.size() - 2].op, Op::kReduceGradients);
    EXPECT_EQ(ins[ins.size() - 3].op, Op::kBackwardWeight);
  }
}

TEST(ZeroBubble, SimulatorRejectsAWBeforeItsBAndAMissingW) {
  auto programs = zeroBubble(2, 2);
  auto& ins = programs[0].instructions;
  auto find = [&](Op op, int mb) {
    return std::find_if(ins.begin(), ins.end(), [&](const Instruction& in) { return in.op == op && in.microbatch == mb; });
  };
  {
    auto broken = programs;
    auto& b = broken[0].instructions;
    const auto w = find(Op::kBackwardWeight, 0) - ins.begin();
    const auto bwd = find(Op::kBackward, 0) - ins.begin();
    std::swap(b[static_cast<size_t>(w)], b[static_cast<size_t>(bwd)]);
    const SimulationResult r = simulate(broken, costs(2, 1, 1));
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.errors.front().find("before the input gradient"), std::string::npos) << r.errors.front();
  }
  {
    auto broken = programs;
    auto& b = broken[0].instructions;
    b.erase(b.begin() + (find(Op::kBackwardWeight, 1) - ins.begin()));
    const SimulationResult r = simulate(broken, costs(2, 1, 1));
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.errors.front().find("weight-gradient passes (W)"), std::string::npos) << r.errors.front();
  }
}

TEST(ZeroBubble, ParsesItsNameAndRejectsVirtualStages) {
  EXPECT_EQ(parseScheduleKind("zero_bubble"), ScheduleKind::kZeroBubble);
  EXPECT_STREQ(scheduleKindName(ScheduleKind::kZeroBubble), "zero_bubble");
  try {
    parseScheduleKind("zb");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("simple, interleaved or zero_bubble"), std::string::npos) << e.what();
  }
  ScheduleSpec s = spec(ScheduleKind::kZeroBubble, 2, 4);
  s.virtualStages = 2;
  try {
    buildPrograms(s);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("virtual_stages must be 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::pipeline
