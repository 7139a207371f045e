#include "pipeline/simulator.h"

#include <algorithm>
#include <deque>
#include <set>

#include "core/errors.h"
#include "pipeline/schedule.h"

namespace strata::pipeline {
namespace {


struct InFlightMessage {
  uint64_t tag = 0;
  double arrivalSeconds = 0;
  int senderIndex = 0;  // instruction index on the sending rank
};

std::string describeTag(uint64_t tag) {
  const bool gradient = ((tag >> 48) & 0xff) != 0;
  const uint64_t mb = (tag >> 24) & 0xffffff;
  const uint64_t stage = tag & 0xffffff;
  return c10::str(gradient ? "gradient" : "activation", " of microbatch ", mb, " across the boundary into stage ",
                  gradient ? stage - 1 : stage);
}

// Per-rank execution state.
struct RankState {
  size_t pc = 0;
  double clock = 0;
  double busy = 0;
  std::vector<int> live;  // stashed microbatches per chunk
  int liveTotal = 0;
  size_t liveBytes = 0;
  // (stage, microbatch) whose input activation / output gradient is available here.
  std::set<std::pair<int, int>> activationIn, gradientIn, forwardDone, backwardDone, weightDone, loaded;
  bool split = false;  // the program has W's (zero_bubble): B's cost less, W's free the stash
};

class Simulation {
 public:
  Simulation(const std::vector<Program>& programs, const CostModel& costs)
      : programs_(programs), costs_(costs), p_(costs.partitions), v_(costs.virtualStages), stages_(p_ * v_) {
    channels_.assign(toIndex(p_), std::vector<std::deque<InFlightMessage>>(toIndex(p_)));
    linkFree_.assign(toIndex(p_), std::vector<double>(toIndex(p_), 0));
    ranks_.assign(toIndex(p_), RankState{});
    for (int r = 0; r < p_; ++r) {
      ranks_[toIndex(r)].live.assign(toIndex(v_), 0);
      for (const Instruction& in : programs_[toIndex(r)].instructions)
        if (in.op == Op::kBackwardWeight) ranks_[toIndex(r)].split = true;
    }
    result_.ranks.assign(toIndex(p_), RankStats{});
    result_.peakInFlightPerStage.assign(toIndex(stages_), 0);
    result_.peakStashBytesPerStage.assign(toIndex(stages_), 0);
  }

  SimulationResult run() {
    bool progress = true;
    while (progress && result_.errors.empty()) {
      progress = false;
      for (int r = 0; r < p_ && result_.errors.empty(); ++r)
        while (result_.errors.empty() && step(r)) progress = true;
    }
    if (result_.errors.empty()) reportStuck();
    if (result_.errors.empty()) reportLeftovers();
    finish();
    return std::move(result_);
  }

 private:
  // Executes rank r's next instruction; false when it is done or blocked.
  bool step(int r) {
    RankState& st = ranks_[toIndex(r)];
    const Program& prog = programs_[toIndex(r)];
    if (st.pc >= prog.instructions.size()) return false;
    const Instruction& in = prog.instructions[st.pc];
    const int g = globalStage(r, in.chunk, p_);
    const std::pair<int, int> key{g, in.microbatch};
    const double start = st.clock;
    double duration = 0;
    switch (in.op) {
      case Op::kLoadMicrobatch:
        if (g != 0 && g != stages_ - 1) return fail(r, "loads a microbatch on stage ", g, ", which is neither first nor last");
        st.loaded.insert(key);
        duration = costs_.loadSeconds;
        break;
      case Op::kForward: {
        if (st.forwardDone.count(key)) return fail(r, "runs the forward twice");
        if (g == 0 && !st.loaded.count(key)) return fail(r, "runs the first stage before loading the microbatch");
        if (g == stages_ - 1 && !st.loaded.count(key)) return fail(r, "runs the last stage before loading the target");
        if (g > 0 && !st.activationIn.count(key)) return fail(r, "runs before its input activation arrived");
        st.forwardDone.insert(key);
        if (g + 1 < stages_ && (g + 1) % p_ == r) st.activationIn.insert({g + 1, in.microbatch});
        duration = costs_.stages[toIndex(g)].forwardSeconds;
        st.live[toIndex(in.chunk)] += 1;
        st.liveTotal += 1;
        st.liveBytes += costs_.stages[toIndex(g)].stashBytes;
        noteInFlight(r, g, in.chunk);
        break;
      }
      case Op::kBackward: {
        if (!st.forwardDone.count(key)) return fail(r, "runs a backward before its forward");
        if (st.backwardDone.count(key)) return fail(r, "runs the backward twice");
        if (g + 1 < stages_ && !st.gradientIn.count(key)) return fail(r, "runs before its output gradient arrived");
        st.backwardDone.insert(key);
        if (g > 0 && (g - 1) % p_ == r) st.gradientIn.insert({g - 1, in.microbatch});
        const StageCost& cost = costs_.stages[toIndex(g)];
        duration = st.split ? cost.backwardSeconds - cost.weightGradientSeconds : cost.backwardSeconds;
        if (!st.split) release(st, g, in.chunk);
        break;
      }
      case Op::kBackwardWeight: {
        if (!st.backwardDone.count(key)) return fail(r, "runs the weight gradients before the input gradient (B)");
        if (st.weightDone.count(key)) return fail(r, "runs the weight gradients twice");
        st.weightDone.insert(key);
        duration = costs_.stages[toIndex(g)].weightGradientSeconds;
        release(st, g, in.chunk);
        break;
      }
      case Op::kSendActivation:
      case Op::kSendGradient: {
        const bool gradient = in.op == Op::kSendGradient;
        const std::set<std::pair<int, int>>& done = gradient ? st.backwardDone : st.forwardDone;
        if (!done.count(key)) return fail(r, "sends before computing what it sends");
        const int target = gradient ? g - 1 : g + 1;
        if (target < 0 || target >= stages_ || target % p_ != in.peer)
          return fail(r, "sends to rank ", in.peer, " but stage ", target, " is not there");
        const size_t bytes = costs_.stages[toIndex(gradient ? g - 1 : g)].outputBytes;
        double& linkFree = linkFree_[toIndex(r)][toIndex(in.peer)];
        const double linkStart = std::max(st.clock, linkFree);
        linkFree = linkStart + static_cast<double>(bytes) / costs_.link.bytesPerSecond;
        channels_[toIndex(r)][toIndex(in.peer)].push_back(
            {instructionTag(in, r, p_), linkFree + costs_.link.latencySeconds, static_cast<int>(st.pc)});
        break;
      }
      case Op::kRecvActivation:
      case Op::kRecvGradient: {
        std::deque<InFlightMessage>& ch = channels_[toIndex(in.peer)][toIndex(r)];
        if (ch.empty()) return false;  // blocked (a deadlock if the sender never sends)
        const InFlightMessage msg = ch.front();
        const uint64_t want = instructionTag(in, r, p_);
        if (msg.tag != want)
          return fail(r, "expects the ", describeTag(want), " from rank ", in.peer, " but the next message on that channel is the ",
                      describeTag(msg.tag), " (rank ", in.peer, " instruction ", msg.senderIndex, " ",
                      formatInstruction(programs_[toIndex(in.peer)].instructions[toIndex(msg.senderIndex)], in.peer, p_), ")");
        ch.pop_front();
        st.clock = std::max(st.clock, msg.arrivalSeconds);
        (in.op == Op::kRecvGradient ? st.gradientIn : st.activationIn).insert(key);
        record(r, start, st.clock);
        ++st.pc;
        return true;
      }
      case Op::kReduceGradients:
        duration = costs_.reduceSeconds.empty() ? 0 : costs_.reduceSeconds[toIndex(r)];
        break;
      case Op::kOptimizerStep:
        duration = costs_.optimizerSeconds;
        break;
    }
    st.clock += duration;
    st.busy += duration;
    record(r, start, st.clock);
    ++st.pc;
    return true;
  }

  void release(RankState& st, int g, int chunk) {
    st.live[toIndex(chunk)] -= 1;
    st.liveTotal -= 1;
    st.liveBytes -= costs_.stages[toIndex(g)].stashBytes;
  }

  void noteInFlight(int r, int g, int chunk) {
    const RankState& st = ranks_[toIndex(r)];
    RankStats& stats = result_.ranks[toIndex(r)];
    stats.peakInFlight = std::max(stats.peakInFlight, st.liveTotal);
    stats.peakStashBytes = std::max(stats.peakStashBytes, st.liveBytes);
    int& stagePeak = result_.peakInFlightPerStage[toIndex(g)];
    stagePeak = std::max(stagePeak, st.live[toIndex(chunk)]);
    result_.peakStashBytesPerStage[toIndex(g)] = static_cast<size_t>(stagePeak) * costs_.stages[toIndex(g)].stashBytes;
  }

  void record(int r, double start, double end) {
    result_.timeline.push_back({r, static_cast<int>(ranks_[toIndex(r)].pc), start, end});
  }

  template <typename... Args>
  bool fail(int r, const Args&... what) {
    const RankState& st = ranks_[toIndex(r)];
    const Instruction& in = programs_[toIndex(r)].instructions[st.pc];
    result_.errors.push_back(c10::str("rank ", r, " instruction ", st.pc, " (", formatInstruction(in, r, p_),
                                      ") ", what...));
    return false;
  }

  void reportStuck() {
    bool stuck = false;
    for (int r = 0; r < p_; ++r) {
      const RankState& st = ranks_[toIndex(r)];
      const Program& prog = programs_[toIndex(r)];
      if (st.pc >= prog.instructions.size()) continue;
      stuck = true;
      const Instruction& in = prog.instructions[st.pc];
      result_.errors.push_back(c10::str("deadlock: rank ", r, " waits at instruction ", st.pc, " (",
                                        formatInstruction(in, r, p_), ") for the ",
                                        describeTag(instructionTag(in, r, p_)), " from rank ", in.peer,
                                        ", which is ", describePosition(in.peer)));
    }
    (void)stuck;
  }

  std::string describePosition(int r) const {
    const RankState& st = ranks_[toIndex(r)];
    const Program& prog = programs_[toIndex(r)];
    if (st.pc >= prog.instructions.size()) return "finished";
    return c10::str("waiting at its instruction ", st.pc, " (",
                    formatInstruction(prog.instructions[st.pc], r, p_), ")");
  }

  void reportLeftovers() {
    for (int q = 0; q < p_; ++q)
      for (int r = 0; r < p_; ++r)
        for (const InFlightMessage& msg : channels_[toIndex(q)][toIndex(r)])
          result_.errors.push_back(c10::str("rank ", q, " sends the ", describeTag(msg.tag), " to rank ", r,
                                            " (its instruction ", msg.senderIndex, "), which never receives it"));
    for (int r = 0; r < p_; ++r) {
      const RankState& st = ranks_[toIndex(r)];
      if (st.forwardDone.size() != st.backwardDone.size())
        result_.errors.push_back(c10::str("rank ", r, " runs ", st.forwardDone.size(), " forwards but ",
                                          st.backwardDone.size(), " backwards"));
      if (st.split && st.weightDone.size() != st.backwardDone.size())
        result_.errors.push_back(c10::str("rank ", r, " runs ", st.backwardDone.size(), " input-gradient passes (B) but ",
                                          st.weightDone.size(), " weight-gradient passes (W)"));
    }
  }

  void finish() {
    result_.ok = result_.errors.empty();
    double step = 0;
    for (const RankState& st : ranks_) step = std::max(step, st.clock);
    result_.stepSeconds = step;
    double idle = 0, busy = 0;
    for (int r = 0; r < p_; ++r) {
      const RankState& st = ranks_[toIndex(r)];
      RankStats& stats = result_.ranks[toIndex(r)];
      stats.busySeconds = st.busy;
      stats.finishSeconds = st.clock;
      stats.idleSeconds = step - st.busy;
      for (int c = 0; c < v_; ++c) stats.staticBytes += costs_.stages[toIndex(c * p_ + r)].staticBytes;
      stats.peakMemoryBytes = stats.staticBytes + stats.peakStashBytes;
      idle += stats.idleSeconds;
      busy += st.busy;
    }
    result_.bubbleFraction = step > 0 ? idle / (step * p_) : 0;
    result_.bubbleOverIdeal = busy > 0 ? idle / busy : 0;
  }

  const std::vector<Program>& programs_;
  const CostModel& costs_;
  const int p_, v_, stages_;
  std::vector<std::vector<std::deque<InFlightMessage>>> channels_;  // [from][to]
  std::vector<std::vector<double>> linkFree_;                       // [from][to]
  std::vector<RankState> ranks_;
  SimulationResult result_;
};

void checkShape(const std::vector<Program>& programs, const CostModel& costs) {
  const int p = costs.partitions, v = costs.virtualStages;
  STRATA_CHECK(p >= 1 && v >= 1, "simulate: partitions=", p, " virtual_stages=", v, " must be >= 1");
  STRATA_CHECK(static_cast<int>(programs.size()) == p, "simulate: ", programs.size(), " programs for ", p,
               " pipeline ranks");
  STRATA_CHECK(static_cast<int>(costs.stages.size()) == p * v, "simulate: cost model has ", costs.stages.size(),
               " stages, expected ", p * v);
  STRATA_CHECK(costs.reduceSeconds.empty() || static_cast<int>(costs.reduceSeconds.size()) == p,
               "simulate: reduceSeconds has ", costs.reduceSeconds.size(), " entries for ", p, " ranks");
  validateLink(costs.link);
  for (int r = 0; r < p; ++r) {
    const Program& prog = programs[toIndex(r)];
    STRATA_CHECK(prog.rank == r, "simulate: programs[", r, "] is rank ", prog.rank, "'s program");
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction& in = prog.instructions[i];
      STRATA_CHECK(in.chunk >= 0 && in.chunk < v, "simulate: rank ", r, " instruction ", i, " has chunk ", in.chunk,
                   " (virtual stages: ", v, ")");
      const bool comm = in.op == Op::kSendActivation || in.op == Op::kRecvActivation ||
                        in.op == Op::kSendGradient || in.op == Op::kRecvGradient;
      if (comm)
        STRATA_CHECK(in.peer >= 0 && in.peer < p && in.peer != r, "simulate: rank ", r, " instruction ", i,
                     " has peer ", in.peer);
      const bool perMicrobatch = in.op != Op::kReduceGradients && in.op != Op::kOptimizerStep;
      if (perMicrobatch)
        STRATA_CHECK(in.microbatch >= 0, "simulate: rank ", r, " instruction ", i, " has microbatch ",
                     in.microbatch);
    }
  }
}

}  // namespace

CostModel uniformCostModel(int partitions, int virtualStages, double forwardSeconds, double backwardSeconds,
                           size_t activationBytes, LinkModel link) {
  CostModel costs;
  costs.partitions = partitions;
  costs.virtualStages = virtualStages;
  costs.link = link;
  StageCost stage;
  stage.forwardSeconds = forwardSeconds;
  stage.backwardSeconds = backwardSeconds;
  stage.weightGradientSeconds = backwardSeconds * kDefaultWeightGradientShare;
  stage.outputBytes = activationBytes;
  stage.stashBytes = activationBytes;
  costs.stages.assign(toIndex(partitions * virtualStages), stage);
  return costs;
}

CostModel costModelFor(const Partition& partition, int partitions, int virtualStages, const LinkModel& link,
                       int dataParallelSize) {
  STRATA_CHECK(partition.ok, "costModelFor: the partition failed: ", partition.reason);
  STRATA_CHECK(static_cast<int>(partition.stages.size()) == partitions * virtualStages, "costModelFor: partition has ",
               partition.stages.size(), " stages, expected partitions x virtual_stages = ", partitions * virtualStages);
  CostModel costs;
  costs.partitions = partitions;
  costs.virtualStages = virtualStages;
  costs.link = link;
  for (const StagePlan& s : partition.stages)
    costs.stages.push_back(
        {s.forwardSeconds, s.backwardSeconds, s.weightGradientSeconds, s.outputBytes, s.stashBytes, s.staticBytes});
  if (dataParallelSize > 1) {
    // Ring AllReduce of the rank's gradients: 2 (d-1) steps of bytes/d each.
    const double d = dataParallelSize;
    for (int r = 0; r < partitions; ++r) {
      size_t grads = 0;
      for (int c = 0; c < virtualStages; ++c) grads += partition.stages[toIndex(c * partitions + r)].gradientBytes;
      costs.reduceSeconds.push_back(2 * (d - 1) * link.latencySeconds +
                                    2 * (d - 1) / d * static_cast<double>(grads) / link.bytesPerSecond);
    }
  }
  return costs;
}

SimulationResult simulate(const std::vector<Program>& programs, const CostModel& costs) {
  checkShape(programs, costs);
  return Simulation(programs, costs).run();
}

}  // namespace strata::pipeline
