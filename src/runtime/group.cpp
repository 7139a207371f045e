#include "strata/group.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "collectives/communicator.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/rank_tag.h"

namespace strata {

// Work that completes when a posted transport operation does.
class PendingOpWork : public Work {
 public:
  PendingOpWork(std::unique_ptr<transport::PendingOp> op, std::chrono::milliseconds timeout)
      : op_(std::move(op)), timeout_(timeout) {}
  bool isCompleted() override { return op_->done(); }
  void wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(waitMu_);
    op_->wait(std::min(timeout, timeout_));
  }

 private:
  std::mutex waitMu_;
  std::unique_ptr<transport::PendingOp> op_;
  std::chrono::milliseconds timeout_;
};

struct Group::Impl {
  std::unique_ptr<collectives::Communicator> comm;
  // Threads of this rank waiting for (or running inline) one of this group's collectives;
  // the communicator's waits sleep while none does (collectives/shm_domain.h).
  std::shared_ptr<std::atomic<int>> callersWaiting = std::make_shared<std::atomic<int>>(0);
  std::mutex execMu;  // held while a collective runs, inline or on the worker
  std::mutex queueMu;
  std::condition_variable queueCv;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work>>> queue;
  size_t inflight = 0;  // queued or running asynchronous operations
  bool stop = false;
  std::thread worker;
  std::string tag;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(queueMu);
      stop = true;
    }
    queueCv.notify_all();
    if (worker.joinable()) worker.join();
  }

  void workerLoop() {
    pthread_setname_np(pthread_self(), "strata-comm");
    setThreadRankTagFrom(tag);
    for (;;) {
      std::pair<std::function<void()>, std::shared_ptr<Work>> item;
      {
        std::unique_lock<std::mutex> lock(queueMu);
        queueCv.wait(lock, [this] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stop requested and nothing left
        item = std::move(queue.front());
        queue.pop_front();
      }
      std::exception_ptr error = execute(item.first, *item.second);
      {
        std::lock_guard<std::mutex> lock(queueMu);
        --inflight;
      }
      item.second->finish(error);
    }
  }

  static void setThreadRankTagFrom(const std::string& tag) {
    int rank = 0, size = 0;
    if (std::sscanf(tag.c_str(), "[r%d/%d]", &rank, &size) == 2) setThreadRankTag(rank, size);
  }

  std::shared_ptr<Work> enqueue(std::function<void()> fn) {
    auto work = std::make_shared<Work>();
    work->countWaitsIn(callersWaiting);
    {
      std::lock_guard<std::mutex> lock(queueMu);
      if (!worker.joinable()) worker = std::thread([this] { workerLoop(); });
      ++inflight;
      queue.emplace_back(std::move(fn), work);
    }
    queueCv.notify_one();
    return work;
  }

  // kHereIfIdle and nothing queued or running: runs fn now on this thread, recorded in a
  // Work as the communication thread records what it runs. Else: enqueue.
  std::shared_ptr<Work> launch(std::function<void()> fn, Group::Launch where) {
    if (where == Group::Launch::kQueue || !idle()) return enqueue(std::move(fn));
    auto work = std::make_shared<Work>();
    work->countWaitsIn(callersWaiting);
    WaitCount running(callersWaiting.get());  // a caller runs it: the waits need not sleep
    work->finish(execute(fn, *work));
    return work;
  }

  // Runs fn under execMu, timed from here in `work`; returns its error (finishing `work` is
  // the caller's, after its own bookkeeping).
  std::exception_ptr execute(const std::function<void()>& fn, Work& work) {
    work.markStarted();
    try {
      std::lock_guard<std::mutex> lock(execMu);
      fn();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }

  bool idle() {
    std::lock_guard<std::mutex> lock(queueMu);
    return inflight == 0;
  }

  // Runs inline when nothing is queued (the fast path), else after the queued work.
  void run(std::function<void()> fn) {
    if (idle()) {
      WaitCount running(callersWaiting.get());
      std::lock_guard<std::mutex> lock(execMu);
      fn();
      return;
    }
    enqueue(std::move(fn))->wait();
  }
};

Group::Group(std::unique_ptr<collectives::Communicator> comm) : impl_(std::make_unique<Impl>()) {
  impl_->comm = std::move(comm);
  impl_->comm->setCallersWaiting(impl_->callersWaiting);
  impl_->tag = rankTag();
}

Group::~Group() = default;

int Group::rank() const { return impl_->comm->rank(); }
int Group::size() const { return impl_->comm->size(); }
collectives::Communicator& Group::communicator() { return *impl_->comm; }
std::chrono::milliseconds Group::timeout() const { return impl_->comm->options().timeout; }

std::string Group::describe() const { return impl_->comm->topology().describe(); }

std::string Group::lastAllreduceAlgorithm() const {
  return collectives::algoName(impl_->comm->lastAllReduceAlgo());
}

SharedBuffer::SharedBuffer(std::shared_ptr<collectives::SharedRegion> region) : region_(std::move(region)) {}
SharedBuffer::~SharedBuffer() = default;
void* SharedBuffer::data() const { return region_->mine(); }
size_t SharedBuffer::size() const { return region_->size(); }
uint64_t SharedBuffer::id() const { return region_->id(); }
bool SharedBuffer::peerMapped() const { return region_->peerMapped(); }
void* SharedBuffer::part(int localRank) const {
  STRATA_CHECK(localRank >= 0 && localRank < region_->localSize(), "SharedBuffer::part(", localRank,
               "): the buffer has ", region_->localSize(), " local part(s)");
  return region_->part(localRank);
}
int SharedBuffer::localRank() const { return region_->localRank(); }
int SharedBuffer::localSize() const { return region_->localSize(); }

std::shared_ptr<SharedBuffer> Group::allocateShared(size_t numBytes) {
  std::shared_ptr<collectives::SharedRegion> region;
  impl_->run([&] { region = impl_->comm->allocateShared(numBytes); });
  return std::make_shared<SharedBuffer>(std::move(region));
}

void Group::allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  impl_->run([=] { impl_->comm->allReduce(in, out, count, dtype, op); });
}

void Group::broadcast(void* data, size_t count, DType dtype, int root) {
  impl_->run([=] { impl_->comm->broadcast(data, count, dtype, root); });
}

void Group::allgather(const void* in, void* out, size_t countPerRank, DType dtype) {
  impl_->run([=] { impl_->comm->allGather(in, out, countPerRank, dtype); });
}

void Group::reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype, ReduceOp op) {
  impl_->run([=] { impl_->comm->reduceScatter(in, out, countPerRank, dtype, op); });
}

void Group::reduceScatterShared(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  impl_->run([=] { impl_->comm->reduceScatterShared(in, out, count, dtype, op); });
}

Group::ShardRange Group::sharedShard(size_t count, DType dtype) const {
  const collectives::Range shard = collectives::sharedShardOf(count, size(), rank(), dtype);
  return ShardRange{shard.offset, shard.count};
}

void Group::barrier() {
  impl_->run([=] { impl_->comm->barrier(); });
}

// The asynchronous forms are flight-recorded as enqueued now; the call takes the record
// over when the communication thread runs it.
using collectives::CollKind;

std::shared_ptr<Work> Group::allreduceAsync(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  const auto queued = impl_->comm->flightEnqueued(CollKind::kAllReduce, count, dtype, op, -1);
  return impl_->enqueue([=] { impl_->comm->allReduce(in, out, count, dtype, op, queued); });
}

std::shared_ptr<Work> Group::broadcastAsync(void* data, size_t count, DType dtype, int root) {
  const auto queued = impl_->comm->flightEnqueued(CollKind::kBroadcast, count, dtype, ReduceOp::kSum, root);
  return impl_->enqueue([=] { impl_->comm->broadcast(data, count, dtype, root, queued); });
}

std::shared_ptr<Work> Group::allgatherAsync(const void* in, void* out, size_t countPerRank, DType dtype) {
  const auto queued = impl_->comm->flightEnqueued(CollKind::kAllGather, countPerRank, dtype, ReduceOp::kSum, -1);
  return impl_->enqueue([=] { impl_->comm->allGather(in, out, countPerRank, dtype, queued); });
}

std::shared_ptr<Work> Group::reduceScatterAsync(const void* in, void* out, size_t countPerRank, DType dtype,
                                                ReduceOp op) {
  const auto queued = impl_->comm->flightEnqueued(CollKind::kReduceScatter, countPerRank, dtype, op, -1);
  return impl_->enqueue([=] { impl_->comm->reduceScatter(in, out, countPerRank, dtype, op, queued); });
}

std::shared_ptr<Work> Group::reduceScatterSharedAsync(const void* in, void* out, size_t count, DType dtype,
                                                      ReduceOp op) {
  const auto queued = impl_->comm->flightEnqueued(CollKind::kReduceScatterShared, count, dtype, op, -1);
  return impl_->enqueue([=] { impl_->comm->reduceScatterShared(in, out, count, dtype, op, queued); });
}

namespace {
// Checked here, on the caller's thread, before anything is queued: a bad piece is an error
// of this call on this rank (the message carries the rank tag), and the group stays usable.
std::vector<collectives::InputPiece> toPieces(size_t count, const std::vector<Group::InputPiece>& pieces) {
  std::vector<collectives::InputPiece> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) out.push_back(collectives::InputPiece{p.offset, p.count, p.data});
  collectives::checkInputPieces(count, out);
  return out;
}
}  // namespace

std::shared_ptr<Work> Group::allreduceAsync(void* data, size_t count, DType dtype, ReduceOp op,
                                            std::vector<InputPiece> ownPieces, Launch launch) {
  std::vector<collectives::InputPiece> checked = toPieces(count, ownPieces);
  const auto queued = impl_->comm->flightEnqueued(CollKind::kAllReduce, count, dtype, op, -1);
  return impl_->launch([=, pieces = std::move(checked)] {
    impl_->comm->allReduce(data, data, count, dtype, op, queued, pieces);
  }, launch);
}

std::shared_ptr<Work> Group::reduceScatterSharedAsync(void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                                      std::vector<InputPiece> ownPieces, Launch launch) {
  std::vector<collectives::InputPiece> checked = toPieces(count, ownPieces);
  const auto queued = impl_->comm->flightEnqueued(CollKind::kReduceScatterShared, count, dtype, op, -1);
  return impl_->launch([=, pieces = std::move(checked)] {
    impl_->comm->reduceScatterShared(in, out, count, dtype, op, queued, pieces);
  }, launch);
}

void Group::send(const void* data, size_t numBytes, int dst, uint64_t tag) {
  isend(data, numBytes, dst, tag)->wait();
}

void Group::recv(void* data, size_t numBytes, int src, uint64_t tag) {
  irecv(data, numBytes, src, tag)->wait();
}

std::shared_ptr<Work> Group::isend(const void* data, size_t numBytes, int dst, uint64_t tag) {
  return std::make_shared<PendingOpWork>(impl_->comm->postSend(data, numBytes, dst, tag), timeout());
}

std::shared_ptr<Work> Group::irecv(void* data, size_t numBytes, int src, uint64_t tag) {
  return std::make_shared<PendingOpWork>(impl_->comm->postRecv(data, numBytes, src, tag), timeout());
}

}  // namespace strata
