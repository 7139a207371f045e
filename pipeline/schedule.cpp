#include "pipeline/schedule.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/named_values.h"

namespace strata::pipeline {
namespace {

// One forward, backward or (zero_bubble) weight-gradient pass of (local chunk, microbatch)
// on a rank: the compute-only order. A weight unit has forward == false and weight == true.
struct Unit {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
  bool weight = false;
};
using ComputeOrder = std::vector<std::vector<Unit>>;  // [rank] -> units in program order


ComputeOrder simpleOrder(const ScheduleSpec& spec) {
  const int p = spec.partitions, m = spec.microbatches, v = spec.virtualStages;
  ComputeOrder order(toIndex(p));
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < m; ++mb) order[toIndex(r)].push_back({true, c, mb});
    for (int c = v - 1; c >= 0; --c)
      for (int mb = 0; mb < m; ++mb) order[toIndex(r)].push_back({false, c, mb});
  }
  return order;
}

// Forward and backward unit lists of one rank, in the order it may run them.
struct RankLists {
  std::vector<Unit> forwards;
  std::vector<Unit> backwards;
  int cap = 1;  // chunk-microbatches stashed at once
};

std::vector<RankLists> interleavedLists(const ScheduleSpec& spec) {
  const int p = spec.partitions, m = spec.microbatches, v = spec.virtualStages;
  std::vector<RankLists> lists(toIndex(p));
  for (int r = 0; r < p; ++r) {
    RankLists& l = lists[toIndex(r)];
    if (v == 1) {
      for (int mb = 0; mb < m; ++mb) {
        l.forwards.push_back({true, 0, mb});
        l.backwards.push_back({false, 0, mb});
      }
      l.cap = std::max(1, resolvedActiveMicrobatches(spec) - r);
      continue;
    }
    // Megatron: groups of p microbatches go through chunk 0, then chunk 1, ... A group
    // smaller than p makes rank 0 wait for its own next chunk, so when m % p != 0 the
    // max(1, m / p) groups share the m microbatches as evenly as possible (each >= p when
    // m >= p), as torch's interleaved schedules do with "microbatches per round".
    const int rounds = std::max(1, m / p);
    int start = 0;
    for (int round = 0; round < rounds; ++round) {
      const int end = start + m / rounds + (round < m % rounds ? 1 : 0);
      for (int c = 0; c < v; ++c)
        for (int mb = start; mb < end; ++mb) l.forwards.push_back({true, c, mb});
      for (int c = v - 1; c >= 0; --c)
        for (int mb = start; mb < end; ++mb) l.backwards.push_back({false, c, mb});
      start = end;
    }
    const int firstGroup = m / rounds + (m % rounds > 0 ? 1 : 0);
    l.cap = 2 * (p - r - 1) + (v - 1) * firstGroup + 1;
  }
  return lists;
}

// Backward-first list scheduling under nominal costs (forward 1, backward 2, no latency):
// every rank runs the next unit of its lists that can start earliest, a backward on ties,
// a forward only while fewer than `cap` chunk-microbatches are stashed. Units are committed
// in global start-time order, so the result is a feasible execution. Returns false when
// the caps leave every rank waiting (cannot happen for v == 1: the last stage runs each
// backward right after its forward, which frees every cap upstream in turn).
bool greedyOrder(const ScheduleSpec& spec, const std::vector<RankLists>& lists, ComputeOrder& order) {
  const int p = spec.partitions, m = spec.microbatches, v = spec.virtualStages, stages = p * v;
  constexpr double kForward = 1, kBackward = 2, kUnknown = -1;
  std::vector<std::vector<double>> fDone(toIndex(stages), std::vector<double>(toIndex(m), kUnknown));
  std::vector<std::vector<double>> bDone = fDone;
  std::vector<double> freeAt(toIndex(p), 0);
  std::vector<size_t> fNext(toIndex(p), 0), bNext(toIndex(p), 0);
  std::vector<int> stashed(toIndex(p), 0);
  order.assign(toIndex(p), {});
  size_t remaining = 0;
  for (const RankLists& l : lists) remaining += l.forwards.size() + l.backwards.size();
  while (remaining > 0) {
    int bestRank = -1;
    bool bestForward = false;
    double bestStart = std::numeric_limits<double>::infinity();
    for (int r = 0; r < p; ++r) {
      const RankLists& l = lists[toIndex(r)];
      if (bNext[toIndex(r)] < l.backwards.size()) {
        const Unit& u = l.backwards[bNext[toIndex(r)]];
        const int g = u.chunk * p + r;
        const double own = fDone[toIndex(g)][toIndex(u.microbatch)];
        const double next = g + 1 < stages ? bDone[toIndex(g + 1)][toIndex(u.microbatch)] : 0;
        if (own != kUnknown && next != kUnknown) {
          const double start = std::max({freeAt[toIndex(r)], own, next});
          if (start < bestStart) {
            bestStart = start;
            bestRank = r;
            bestForward = false;
          }
        }
      }
      if (fNext[toIndex(r)] < l.forwards.size() && stashed[toIndex(r)] < l.cap) {
        const Unit& u = l.forwards[fNext[toIndex(r)]];
        const int g = u.chunk * p + r;
        const double prev = g > 0 ? fDone[toIndex(g - 1)][toIndex(u.microbatch)] : 0;
        if (prev != kUnknown) {
          const double start = std::max(freeAt[toIndex(r)], prev);
          if (start < bestStart) {  // strict: a backward wins ties
            bestStart = start;
            bestRank = r;
            bestForward = true;
          }
        }
      }
    }
    if (bestRank < 0) return false;
    const size_t r = toIndex(bestRank);
    const Unit u = bestForward ? lists[r].forwards[fNext[r]++] : lists[r].backwards[bNext[r]++];
    const int g = u.chunk * p + bestRank;
    const double end = bestStart + (bestForward ? kForward : kBackward);
    (bestForward ? fDone : bDone)[toIndex(g)][toIndex(u.microbatch)] = end;
    freeAt[r] = end;
    stashed[r] += bestForward ? 1 : -1;
    order[r].push_back(u);
    --remaining;
  }
  return true;
}

// Whether every rank can run its units in the given order (sends are eager, so only the
// data dependencies can block).
bool feasible(const ScheduleSpec& spec, const ComputeOrder& order) {
  const int p = spec.partitions, m = spec.microbatches, stages = p * spec.virtualStages;
  std::vector<std::vector<char>> fDone(toIndex(stages), std::vector<char>(toIndex(m), 0));
  std::vector<std::vector<char>> bDone = fDone;
  std::vector<size_t> next(toIndex(p), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r)
      while (next[toIndex(r)] < order[toIndex(r)].size()) {
        const Unit& u = order[toIndex(r)][next[toIndex(r)]];
        const int g = u.chunk * p + r;
        const bool ready = u.forward ? (g == 0 || fDone[toIndex(g - 1)][toIndex(u.microbatch)])
                                     : (fDone[toIndex(g)][toIndex(u.microbatch)] &&
                                        (g + 1 == stages || bDone[toIndex(g + 1)][toIndex(u.microbatch)]));
        if (!ready) break;
        (u.forward ? fDone : bDone)[toIndex(g)][toIndex(u.microbatch)] = 1;
        ++next[toIndex(r)];
        progress = true;
      }
  }
  for (int r = 0; r < p; ++r)
    if (next[toIndex(r)] < order[toIndex(r)].size()) return false;
  return true;
}

// Megatron's interleaved 1F1B: rank r runs `warmup` forwards, then alternates one forward and
// one backward, then drains the backwards.
ComputeOrder megatronOrder(const std::vector<RankLists>& lists, const std::vector<int>& warmup) {
  ComputeOrder order(lists.size());
  for (size_t r = 0; r < lists.size(); ++r) {
    const RankLists& l = lists[r];
    const size_t total = l.forwards.size();
    const size_t w = std::min(total, static_cast<size_t>(warmup[r]));
    std::vector<Unit>& o = order[r];
    for (size_t k = 0; k < w; ++k) o.push_back(l.forwards[k]);
    for (size_t k = 0; k + w < total; ++k) {
      o.push_back(l.forwards[k + w]);
      o.push_back(l.backwards[k]);
    }
    for (size_t k = total - w; k < total; ++k) o.push_back(l.backwards[k]);
  }
  return order;
}

ComputeOrder interleavedOrder(const ScheduleSpec& spec) {
  std::vector<RankLists> lists = interleavedLists(spec);
  ComputeOrder order;
  if (spec.virtualStages == 1) {
    const bool ok = greedyOrder(spec, lists, order);
    STRATA_CHECK(ok, "schedule: the 1F1B list scheduler got stuck (internal error)");
    return order;
  }
  // Megatron's warmup (cap - 1) is exact when m % p == 0; a last, partial group of
  // microbatches may need more: one more warmup forward per round until the order is
  // feasible (it is once the warmup covers every forward: breadth-first).
  std::vector<int> warmup;
  for (const RankLists& l : lists) warmup.push_back(l.cap - 1);
  while (true) {
    order = megatronOrder(lists, warmup);
    if (feasible(spec, order)) return order;
    for (int& w : warmup) w += 1;
  }
}

// ZB-H1 (v == 1): 1F1B's warmup and F B alternation on rank r, with each microbatch's W
// held back until r more B's have run (at most r W's pending), then the pending W's. In 1F1B
// rank r idles while the gradient of its next microbatch travels down and back; here the
// held-back W's run in those gaps instead, and the B's (all the upstream ranks wait for)
// are not delayed by W's. Stashed microbatches (F done, W not) peak at
// (p-r-1) + r + 1 = p: no more than stage 0 holds under 1F1B.
ComputeOrder zeroBubbleOrder(const ScheduleSpec& spec) {
  const int p = spec.partitions, m = spec.microbatches;
  ComputeOrder order(toIndex(p));
  for (int r = 0; r < p; ++r) {
    std::vector<Unit>& o = order[toIndex(r)];
    const int warmup = std::min(p - r - 1, m);
    int f = 0, b = 0, w = 0;
    while (f < warmup) o.push_back({true, 0, f++});
    auto backwardThenMaybeWeight = [&] {
      o.push_back({false, 0, b++});
      if (b > r) o.push_back({false, 0, w++, true});
    };
    while (f < m) {
      o.push_back({true, 0, f++});
      backwardThenMaybeWeight();
    }
    while (b < m) backwardThenMaybeWeight();
    while (w < m) o.push_back({false, 0, w++, true});
  }
  return order;
}

struct Message {
  bool gradient = false;
  int microbatch = 0;
  int boundary = 0;  // the higher of the two stages it connects
  bool operator==(const Message& o) const {
    return gradient == o.gradient && microbatch == o.microbatch && boundary == o.boundary;
  }
};

// Adds loads, sends (right after the producing compute) and receives (right before the first
// compute that needs them, in the order the peer sends on that channel).
std::vector<Program> lower(const ScheduleSpec& spec, const ComputeOrder& order) {
  const int p = spec.partitions, v = spec.virtualStages, stages = p * v;
  auto rankOf = [p](int stage) { return stage % p; };
  // channel[q][r]: messages rank q sends to rank r, in send order.
  std::vector<std::vector<std::vector<Message>>> channel(toIndex(p), std::vector<std::vector<Message>>(toIndex(p)));
  for (int q = 0; q < p; ++q)
    for (const Unit& u : order[toIndex(q)]) {
      if (u.weight) continue;  // a W sends nothing
      const int g = u.chunk * p + q;
      if (u.forward && g + 1 < stages && rankOf(g + 1) != q)
        channel[toIndex(q)][toIndex(rankOf(g + 1))].push_back({false, u.microbatch, g + 1});
      if (!u.forward && g > 0 && rankOf(g - 1) != q)
        channel[toIndex(q)][toIndex(rankOf(g - 1))].push_back({true, u.microbatch, g});
    }
  std::vector<Program> programs(toIndex(p));
  for (int r = 0; r < p; ++r) {
    Program& prog = programs[toIndex(r)];
    prog.rank = r;
    std::vector<size_t> received(toIndex(p), 0);  // per sender: messages already received
    auto receiveThrough = [&](int from, const Message& want) {
      const std::vector<Message>& ch = channel[toIndex(from)][toIndex(r)];
      for (size_t i = 0; i < received[toIndex(from)]; ++i)
        if (ch[i] == want) return;  // received earlier, buffered
      while (true) {
        STRATA_CHECK(received[toIndex(from)] < ch.size(), "schedule: rank ", r, " needs a message rank ", from,
                     " never sends (internal error)");
        const Message& msg = ch[received[toIndex(from)]++];
        const int localStage = msg.gradient ? msg.boundary - 1 : msg.boundary;
        prog.instructions.push_back({msg.gradient ? Op::kRecvGradient : Op::kRecvActivation, msg.microbatch,
                                     localStage / p, from});
        if (msg == want) return;
      }
    };
    for (const Unit& u : order[toIndex(r)]) {
      const int g = u.chunk * p + r;
      if (u.weight) {
        prog.instructions.push_back({Op::kBackwardWeight, u.microbatch, u.chunk, -1});
      } else if (u.forward) {
        if (g == 0 || g == stages - 1) prog.instructions.push_back({Op::kLoadMicrobatch, u.microbatch, u.chunk, -1});
        if (g > 0 && rankOf(g - 1) != r) receiveThrough(rankOf(g - 1), {false, u.microbatch, g});
        prog.instructions.push_back({Op::kForward, u.microbatch, u.chunk, -1});
        if (g + 1 < stages && rankOf(g + 1) != r)
          prog.instructions.push_back({Op::kSendActivation, u.microbatch, u.chunk, rankOf(g + 1)});
      } else {
        if (g + 1 < stages && rankOf(g + 1) != r) receiveThrough(rankOf(g + 1), {true, u.microbatch, g + 1});
        prog.instructions.push_back({Op::kBackward, u.microbatch, u.chunk, -1});
        if (g > 0 && rankOf(g - 1) != r)
          prog.instructions.push_back({Op::kSendGradient, u.microbatch, u.chunk, rankOf(g - 1)});
      }
    }
    if (spec.dataParallelSize > 1) prog.instructions.push_back({Op::kReduceGradients, -1, 0, -1});
    if (spec.optimizerStep) prog.instructions.push_back({Op::kOptimizerStep, -1, 0, -1});
  }
  return programs;
}

}  // namespace

constexpr NamedValue<ScheduleKind> kScheduleKinds[] = {{ScheduleKind::kSimple, "simple"},
                                                       {ScheduleKind::kInterleaved, "interleaved"},
                                                       {ScheduleKind::kZeroBubble, "zero_bubble"}};

ScheduleKind parseScheduleKind(const std::string& name) {
  return parseNamed(kScheduleKinds, name, "pipeline: unknown schedule");
}

const char* scheduleKindName(ScheduleKind kind) { return nameOf(kScheduleKinds, kind); }

void validateSpec(const ScheduleSpec& spec) {
  if (spec.partitions < 1) STRATA_THROW(ConfigError, "partitions must be >= 1, got ", spec.partitions);
  if (spec.microbatches < 1) STRATA_THROW(ConfigError, "microbatches must be >= 1, got ", spec.microbatches);
  if (spec.virtualStages < 1)
    STRATA_THROW(ConfigError, "virtual_stages must be >= 1, got ", spec.virtualStages);
  if (spec.activeMicrobatches < 0)
    STRATA_THROW(ConfigError, "active_microbatches must be >= 1 (or unset), got ", spec.activeMicrobatches);
  if (spec.dataParallelSize < 1)
    STRATA_THROW(ConfigError, "data-parallel size must be >= 1, got ", spec.dataParallelSize);
  if (spec.kind == ScheduleKind::kZeroBubble && spec.virtualStages != 1)
    STRATA_THROW(ConfigError, "virtual_stages must be 1 with pipeline \"zero_bubble\" (ZB-H1), got ",
                 spec.virtualStages);
  // Guard the tag fields (24 bits each) and absurd plans.
  constexpr int kMaxField = 1 << 20;
  if (spec.microbatches > kMaxField || spec.numStages() > kMaxField)
    STRATA_THROW(ConfigError, "pipeline too large: microbatches=", spec.microbatches, " stages=", spec.numStages());
}

int resolvedActiveMicrobatches(const ScheduleSpec& spec) {
  return spec.activeMicrobatches > 0 ? spec.activeMicrobatches : spec.partitions + 2;
}

std::vector<Program> buildPrograms(const ScheduleSpec& spec) {
  validateSpec(spec);
  switch (spec.kind) {
    case ScheduleKind::kSimple: return lower(spec, simpleOrder(spec));
    case ScheduleKind::kInterleaved: return lower(spec, interleavedOrder(spec));
    case ScheduleKind::kZeroBubble: return lower(spec, zeroBubbleOrder(spec));
  }
  STRATA_THROW(Error, "schedule: unknown kind ", static_cast<int>(spec.kind));
}

std::vector<int> peakInFlightPerStage(const std::vector<Program>& programs, int partitions, int virtualStages) {
  std::vector<int> peak(toIndex(partitions * virtualStages), 0);
  for (const Program& prog : programs) {
    std::vector<int> live(toIndex(virtualStages), 0);
    // A split backward (zero_bubble) keeps the stash until the W.
    const bool split = std::any_of(prog.instructions.begin(), prog.instructions.end(),
                                   [](const Instruction& in) { return in.op == Op::kBackwardWeight; });
    const Op frees = split ? Op::kBackwardWeight : Op::kBackward;
    for (const Instruction& in : prog.instructions) {
      if (in.op != Op::kForward && in.op != frees) continue;
      STRATA_CHECK(in.chunk >= 0 && in.chunk < virtualStages, "rank ", prog.rank, ": chunk ", in.chunk,
                   " out of range");
      int& n = live[toIndex(in.chunk)];
      n += in.op == Op::kForward ? 1 : -1;
      int& best = peak[toIndex(in.chunk * partitions + prog.rank)];
      best = std::max(best, n);
    }
  }
  return peak;
}

uint64_t instructionTag(const Instruction& in, int rank, int partitions) {
  const int g = globalStage(rank, in.chunk, partitions);
  switch (in.op) {
    case Op::kSendActivation: return messageTag(false, in.microbatch, g + 1);
    case Op::kRecvActivation: return messageTag(false, in.microbatch, g);
    case Op::kSendGradient: return messageTag(true, in.microbatch, g);
    case Op::kRecvGradient: return messageTag(true, in.microbatch, g + 1);
    default: break;
  }
  STRATA_THROW(Error, "instructionTag: ", opName(in.op), " is not a send or receive");
}

std::string formatInstruction(const Instruction& in, int rank, int partitions) {
  const int g = globalStage(rank, in.chunk, partitions);
  std::ostringstream out;
  switch (in.op) {
    case Op::kLoadMicrobatch: out << g << "LOAD" << in.microbatch; break;
    case Op::kForward: out << g << "F" << in.microbatch; break;
    case Op::kBackward: out << g << "B" << in.microbatch; break;
    case Op::kBackwardWeight: out << g << "W" << in.microbatch; break;
    case Op::kSendActivation: out << g << "SEND_A" << in.microbatch << ">" << in.peer; break;
    case Op::kRecvActivation: out << g << "RECV_A" << in.microbatch << "<" << in.peer; break;
    case Op::kSendGradient: out << g << "SEND_G" << in.microbatch << ">" << in.peer; break;
    case Op::kRecvGradient: out << g << "RECV_G" << in.microbatch << "<" << in.peer; break;
    case Op::kReduceGradients: out << "REDUCE"; break;
    case Op::kOptimizerStep: out << "STEP"; break;
  }
  return out.str();
}

std::string formatProgram(const Program& program, int partitions) {
  std::ostringstream out;
  out << "rank " << program.rank << ":";
  for (const Instruction& in : program.instructions) out << " " << formatInstruction(in, program.rank, partitions);
  return out.str();
}

}  // namespace strata::pipeline
