// The communicator's side of the flight recorder (collectives/flight_recorder.h): joining
// it, queued collectives, point-to-point records, and failure reports. Collectives are
// recorded inline in communicator.cpp (guarded), since that is every call's path.
#include <atomic>

#include "collectives/communicator.h"
#include "core/errors.h"

namespace strata::collectives {

static_assert(static_cast<int>(CollKind::kAllReduce) == static_cast<int>(flight::Op::kAllReduce) &&
                  static_cast<int>(CollKind::kBroadcast) == static_cast<int>(flight::Op::kBroadcast) &&
                  static_cast<int>(CollKind::kAllGather) == static_cast<int>(flight::Op::kAllGather) &&
                  static_cast<int>(CollKind::kReduceScatter) == static_cast<int>(flight::Op::kReduceScatter) &&
                  static_cast<int>(CollKind::kBarrier) == static_cast<int>(flight::Op::kBarrier),
              "flightBegin casts a CollKind to a flight::Op");

// What the recorded point-to-point ops share with their communicator (which may be gone
// before them): the recorder, the group's name and timeout, sequence numbers.
struct FlightP2pShared {
  std::shared_ptr<flight::Recorder> recorder;
  std::string groupName;
  std::vector<int> worldRanks;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<std::atomic<uint64_t>[]> seq;  // sends to peer p at [p], receives from p at [n + p]
  std::atomic<bool> failureReported{false};      // one dump per group, not one per queued op
};

namespace {

// A posted send or receive whose wait() ends its flight record: completed, or failed (and
// reported, so the rank dumps before the error leaves wait()).
class RecordedOp final : public transport::PendingOp {
 public:
  // What the op is, formatted only if it fails.
  struct Desc {
    flight::Op kind;
    int worldPeer;
    size_t numBytes;
    uint64_t tag;
  };
  RecordedOp(std::unique_ptr<transport::PendingOp> op, std::shared_ptr<FlightP2pShared> shared,
             flight::Ticket ticket, Desc desc)
      : op_(std::move(op)), shared_(std::move(shared)), ticket_(ticket), desc_(desc) {}

  void wait(std::chrono::milliseconds timeout) override {
    try {
      op_->wait(timeout);
    } catch (const TimeoutError& e) {
      // A shorter wait is a poll: the op goes on. One as long as the group's timeout fails.
      if (timeout >= shared_->timeout) fail("timeout", e.what());
      throw;
    } catch (const MismatchError& e) {
      fail("mismatch", e.what());
      throw;
    } catch (const NetworkError& e) {
      fail("network", e.what());
      throw;
    } catch (const std::exception& e) {
      fail("error", e.what());
      throw;
    }
    shared_->recorder->finish(ticket_, true);
  }
  bool done() override { return op_->done(); }

 private:
  void fail(const char* trigger, const char* message) {
    shared_->recorder->finish(ticket_, false);
    if (shared_->failureReported.exchange(true)) return;
    const bool send = desc_.kind == flight::Op::kSend;
    const std::string what = c10::str(flight::opName(desc_.kind), send ? " to rank " : " from rank ", desc_.worldPeer,
                                      ": ", desc_.numBytes, " bytes tag ", desc_.tag);
    shared_->recorder->reportFailure(flight::FailureEvent{trigger, shared_->groupName, what, message});
  }

  std::unique_ptr<transport::PendingOp> op_;
  std::shared_ptr<FlightP2pShared> shared_;
  flight::Ticket ticket_;
  Desc desc_;
};

// Marks the group's peer as lost when a wait ends in a NetworkError (a dead or vanished
// peer), so finalize does not wait for a rank that will never arrive (Communicator::lostPeer).
class PeerLossOp final : public transport::PendingOp {
 public:
  PeerLossOp(std::unique_ptr<transport::PendingOp> op, std::shared_ptr<std::atomic<bool>> lost)
      : op_(std::move(op)), lost_(std::move(lost)) {}
  void wait(std::chrono::milliseconds timeout) override {
    try {
      op_->wait(timeout);
    } catch (const NetworkError&) {
      lost_->store(true);
      throw;
    }
  }
  bool done() override { return op_->done(); }

 private:
  std::unique_ptr<transport::PendingOp> op_;
  std::shared_ptr<std::atomic<bool>> lost_;
};

}  // namespace

void Communicator::joinFlightRecorder() {
  const int n = topo_.worldSize;
  std::vector<int> worldRanks = opts_.worldRanks;
  if (worldRanks.empty())
    for (int r = 0; r < n; ++r) worldRanks.push_back(r);
  STRATA_CHECK(static_cast<int>(worldRanks.size()) == n, "group \"", opts_.groupName, "\" has ", n,
               " members but ", worldRanks.size(), " world ranks were given");
  auto shared = std::make_shared<FlightP2pShared>();
  shared->recorder = opts_.flight;
  shared->groupName = opts_.groupName;
  shared->worldRanks = worldRanks;
  shared->timeout = opts_.timeout;
  shared->seq.reset(new std::atomic<uint64_t>[2 * static_cast<size_t>(n)]);
  for (int i = 0; i < 2 * n; ++i) shared->seq[i].store(0);
  flightGroup_ = opts_.flight->registerGroup(opts_.groupName, std::move(worldRanks), topo_.rank);
  flightP2p_ = std::move(shared);
  flight_ = opts_.flight.get();
  flightLane_ = opts_.flight->acquireLane();
}

flight::Ticket Communicator::flightEnqueued(CollKind kind, size_t count, DType dtype, ReduceOp op, int root) {
  flight::Recorder* recorder = flight_;
  if (recorder == nullptr) return {};
  flight::OpInfo info;
  info.group = flightGroup_;
  info.count = count;
  info.numBytes = count * dtypeBytes(dtype);
  info.peer = root;
  info.op = flightOpOf(kind);
  info.dtype = dtype;
  info.reduceOp = op;
  return recorder->record(info, flight::State::kEnqueued);
}

flight::Ticket Communicator::flightP2p(flight::Op kind, size_t numBytes, int peer, uint64_t tag) {
  flight::Recorder* recorder = flight_;
  if (recorder == nullptr) return {};
  const size_t index = static_cast<size_t>(kind == flight::Op::kSend ? peer : topo_.worldSize + peer);
  flight::OpInfo info;
  info.group = flightGroup_;
  info.seq = flightP2p_->seq[index].fetch_add(1, std::memory_order_relaxed) + 1;
  info.count = numBytes;
  info.numBytes = numBytes;
  info.tag = tag;
  info.peer = peer;
  info.op = kind;
  return recorder->record(info, flight::State::kStarted);
}

std::unique_ptr<transport::PendingOp> Communicator::wrapP2p(std::unique_ptr<transport::PendingOp> op,
                                                            flight::Ticket ticket, flight::Op kind,
                                                            size_t numBytes, int peer, uint64_t tag) {
  op = std::make_unique<PeerLossOp>(std::move(op), p2pPeerLost_);
  if (ticket.id == 0) return op;
  const RecordedOp::Desc desc{kind, flightP2p_->worldRanks[peer], numBytes, tag};
  return std::make_unique<RecordedOp>(std::move(op), flightP2p_, ticket, desc);
}

void Communicator::reportFlightFailure(const std::string& trigger, const std::string& op,
                                       const std::string& message) {
  if (flight_ == nullptr) return;
  flight_->reportFailure(flight::FailureEvent{trigger, opts_.groupName, op, message});
}

}  // namespace strata::collectives
