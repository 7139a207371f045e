// The NCCL transport (compiled when CUDA and NCCL are found; no_nccl.cpp otherwise).
//
// Bootstrap: rank 0's ncclGetUniqueId travels through our Store (exchangeUniqueId),
// then every rank initialises a *non-blocking* communicator (ncclConfig_t.blocking = 0)
// and polls it. A blocking ncclCommInitRank would wait forever for a peer that died
// after fetching the id; polling lets us abort at the deadline instead. The price is
// that any NCCL call may return ncclInProgress, so every call on the communicator goes
// through settle(), which polls ncclCommGetAsyncError until the call has taken effect.
//
// Every CUDA and NCCL return code is converted where it is produced:
//   STRATA_CUDA_CHECK(call)   any cudaError_t other than cudaSuccess -> BackendError
//   STRATA_NCCL_CHECK(call)   any ncclResult_t other than ncclSuccess -> BackendError
//   STRATA_NCCL_COMM(call)    a call on comm_: waits out ncclInProgress; on error
//                             aborts the communicator, then throws BackendError
// Messages carry the rank tag, the call text and CUDA's or NCCL's own description.
#include <c10/util/StringUtil.h>
#include <cuda_runtime.h>
#include <nccl.h>  // the system header (angle brackets skip this folder's nccl.h)

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "core/errors.h"
#include "core/logging.h"
#include "transport/nccl/nccl.h"

// Our enums carry NCCL's values so the pure mapping (nccl_select.cpp) is tested without
// CUDA; here we make sure the two never drift apart.
#define STRATA_SAME_VALUE(ours, theirs) \
  static_assert(static_cast<int>(ours) == static_cast<int>(theirs), #ours " != " #theirs)
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kInt8, ncclInt8);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kUint8, ncclUint8);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kInt32, ncclInt32);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kUint32, ncclUint32);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kInt64, ncclInt64);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kUint64, ncclUint64);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kFloat16, ncclFloat16);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kFloat32, ncclFloat32);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kFloat64, ncclFloat64);
STRATA_SAME_VALUE(strata::nccl::NcclDataType::kBfloat16, ncclBfloat16);
STRATA_SAME_VALUE(strata::nccl::NcclRedOp::kSum, ncclSum);
STRATA_SAME_VALUE(strata::nccl::NcclRedOp::kProd, ncclProd);
STRATA_SAME_VALUE(strata::nccl::NcclRedOp::kMax, ncclMax);
STRATA_SAME_VALUE(strata::nccl::NcclRedOp::kMin, ncclMin);
STRATA_SAME_VALUE(strata::nccl::NcclRedOp::kAvg, ncclAvg);
#undef STRATA_SAME_VALUE

#define STRATA_CUDA_CHECK(call)                                                                \
  do {                                                                                         \
    const cudaError_t strataCudaErr_ = (call);                                                 \
    if (strataCudaErr_ != cudaSuccess) {                                                       \
      (void)cudaGetLastError(); /* clear a non-sticky error */                                 \
      STRATA_THROW(BackendError, #call, " failed: ", cudaGetErrorString(strataCudaErr_), " (", \
                   cudaGetErrorName(strataCudaErr_), ")");                                     \
    }                                                                                          \
  } while (0)

#define STRATA_NCCL_CHECK(call)                                                          \
  do {                                                                                   \
    const ncclResult_t strataNcclRes_ = (call);                                          \
    if (strataNcclRes_ != ncclSuccess) {                                                 \
      STRATA_THROW(BackendError, #call,                                                  \
                   " failed: ", ::strata::nccl::ncclErrorText(strataNcclRes_, nullptr)); \
    }                                                                                    \
  } while (0)

// Member use only (NcclCommImpl): a call on comm_, converted by settle().
#define STRATA_NCCL_COMM(call) settle((call), #call, opDeadline())

namespace strata::nccl {
namespace {

using Clock = std::chrono::steady_clock;

// synchronize() and settle() first re-poll back to back (yielding the core) so short
// collectives return within microseconds, then sleep between polls so a long wait does
// not burn a core the training loop needs.
constexpr int kSpinPolls = 1000;
constexpr auto kPollSleep = std::chrono::microseconds(50);

// Waits up to `deadline` for `done()`; returns false on timeout.
template <typename Done>
bool pollUntil(Clock::time_point deadline, Done&& done) {
  for (int polls = 0;; ++polls) {
    if (done()) {
      return true;
    }
    if (Clock::now() >= deadline) {
      return false;
    }
    if (polls < kSpinPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPollSleep);
    }
  }
}

long long msSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// NCCL's description of `res` plus its last detailed message (may be unrelated to
// this call, so it is labelled as such).
std::string ncclErrorText(ncclResult_t res, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  if (last == nullptr || *last == '\0') {
    return c10::str(ncclGetErrorString(res), " (ncclResult_t ", static_cast<int>(res), ")");
  }
  return c10::str(ncclGetErrorString(res), " (ncclResult_t ", static_cast<int>(res),
                  "; NCCL's last error: ", last, ")");
}

// No driver, a stub driver or no device: a machine without a GPU, not an error.
bool meansNoGpu(cudaError_t err) {
  return err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice ||
         err == cudaErrorStubLibrary;
}

int probeDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess) {
    return count;
  }
  (void)cudaGetLastError();
  if (meansNoGpu(err)) {
    STRATA_LOG(kInfo, kInit, "no usable CUDA device: ", cudaGetErrorString(err));
  } else {
    STRATA_LOG(kWarn, kInit, "cudaGetDeviceCount failed: ", cudaGetErrorString(err), " (",
               cudaGetErrorName(err), "); treating this host as having no CUDA device");
  }
  return 0;
}

ncclDataType_t toNccl(DType dtype) { return static_cast<ncclDataType_t>(toNcclDataType(dtype)); }

ncclRedOp_t toNccl(ReduceOp op) { return static_cast<ncclRedOp_t>(toNcclRedOp(op)); }

// Makes `device` current for the scope, restoring the previous device on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    STRATA_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) {
      STRATA_CUDA_CHECK(cudaSetDevice(device));
    }
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ != device_ && cudaSetDevice(previous_) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

class NcclCommImpl final : public NcclComm {
 public:
  NcclCommImpl(int rank, int worldSize, int device, std::chrono::milliseconds timeout)
      : rank_(rank), worldSize_(worldSize), device_(device), timeout_(timeout) {}
  ~NcclCommImpl() override;

  // Second construction phase (create()): a failure here still runs the destructor,
  // which releases whatever was created.
  void init(const ncclUniqueId& id, Clock::time_point deadline);

  int rank() const override { return rank_; }
  int worldSize() const override { return worldSize_; }
  int device() const override { return device_; }
  void* stream() const override { return stream_; }

  void allReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override;
  void allGather(const void* send, void* recv, size_t sendCount, DType dtype) override;
  void reduceScatter(const void* send, void* recv, size_t recvCount, DType dtype,
                     ReduceOp op) override;
  void send(const void* data, size_t count, DType dtype, int peer) override;
  void recv(void* data, size_t count, DType dtype, int peer) override;
  void groupStart() override;
  void groupEnd() override;
  void waitFor(void* cudaStream) override;
  void synchronize(std::chrono::milliseconds timeout) override;
  void abort() override;
  bool aborted() const override { return aborted_; }

 private:
  // Common prologue of every enqueue: usable, buffers valid, device set by `guard`,
  // ordered after the legacy default stream. Returns the new collective's seq.
  uint64_t begin(const char* what, size_t count, const void* a, const void* b);
  void checkUsable(const char* what) const;
  void checkPeer(const char* what, const char* role, int peer) const;
  // begin() and the log line of a send or recv (after checkPeer, on the device `guard` set).
  void beginP2p(const char* what, const void* data, size_t count, DType dtype, int peer);
  Clock::time_point opDeadline() const { return Clock::now() + timeout_; }
  // Converts the result of a call on comm_; see STRATA_NCCL_COMM.
  void settle(ncclResult_t res, const char* call, Clock::time_point deadline);
  [[noreturn]] void failAndThrow(const std::string& message);
  void abortNoThrow(const std::string& reason);
  void destroyNoThrow();
  std::string where() const {
    return c10::str("(NCCL rank ", rank_, "/", worldSize_, ", device ", device_, ")");
  }

  const int rank_;
  const int worldSize_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputReady_ = nullptr;  // recorded on a producer stream, waited on by stream_
  bool aborted_ = false;
  std::string abortReason_;
  uint64_t seq_ = 0;  // collectives and p2p calls enqueued; logged to spot drifting ranks
  int groupDepth_ = 0;
};

void NcclCommImpl::init(const ncclUniqueId& id, Clock::time_point deadline) {
  const auto start = Clock::now();
  // One process (or thread) per GPU: the device stays current for the caller.
  STRATA_CUDA_CHECK(cudaSetDevice(device_));
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&inputReady_, cudaEventDisableTiming));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  settle(ncclCommInitRankConfig(&comm_, worldSize_, id, rank_, &config),
         "ncclCommInitRankConfig(&comm_, worldSize_, id, rank_, &config)", deadline);
  int version = 0;
  STRATA_NCCL_CHECK(ncclGetVersion(&version));
  STRATA_LOG(kInfo, kInit, "NCCL ", version, " communicator ready ", where(), " in ",
             msSince(start), " ms");
}

NcclCommImpl::~NcclCommImpl() {
  try {
    destroyNoThrow();
  } catch (const std::exception& e) {  // DeviceGuard; logging
    STRATA_LOG(kError, kInit, "NCCL communicator teardown failed ", where(), ": ", e.what());
  }
}

// Finalize is global (it waits for the peers to quiesce), so it runs only on a healthy,
// idle communicator and is bounded by timeout_; otherwise we abort.
void NcclCommImpl::destroyNoThrow() {
  DeviceGuard guard(device_);
  if (comm_ != nullptr) {
    ncclResult_t state = ncclSuccess;
    const bool healthy = ncclCommGetAsyncError(comm_, &state) == ncclSuccess &&
                         state == ncclSuccess && cudaStreamQuery(stream_) == cudaSuccess;
    (void)cudaGetLastError();
    bool finalized = false;
    if (healthy) {
      const ncclResult_t res = ncclCommFinalize(comm_);
      finalized = (res == ncclSuccess || res == ncclInProgress) &&
                  pollUntil(opDeadline(),
                            [&] {
                              return ncclCommGetAsyncError(comm_, &state) != ncclSuccess ||
                                     state != ncclInProgress;
                            }) &&
                  state == ncclSuccess;
    }
    if (finalized) {
      const ncclResult_t res = ncclCommDestroy(comm_);
      if (res != ncclSuccess) {
        STRATA_LOG(kWarn, kInit, "ncclCommDestroy failed ", where(), ": ",
                   ncclErrorText(res, nullptr));
      }
      comm_ = nullptr;
    } else {
      abortNoThrow(healthy ? "ncclCommFinalize did not complete in time"
                           : "destroyed with pending or failed work");
    }
  }
  if (inputReady_ != nullptr && cudaEventDestroy(inputReady_) != cudaSuccess) {
    STRATA_LOG(kWarn, kInit, "cudaEventDestroy failed ", where(), ": ",
               cudaGetErrorString(cudaGetLastError()));
  }
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess) {
    STRATA_LOG(kWarn, kInit, "cudaStreamDestroy failed ", where(), ": ",
               cudaGetErrorString(cudaGetLastError()));
  }
  inputReady_ = nullptr;
  stream_ = nullptr;
}

void NcclCommImpl::abortNoThrow(const std::string& reason) {
  if (comm_ == nullptr) {
    return;
  }
  const ncclResult_t res = ncclCommAbort(comm_);
  comm_ = nullptr;
  aborted_ = true;
  abortReason_ = reason;
  if (res == ncclSuccess) {
    STRATA_LOG(kWarn, kInit, "aborted NCCL communicator ", where(), ": ", reason);
  } else {
    STRATA_LOG(kError, kInit, "ncclCommAbort failed ", where(), " (", reason,
               "): ", ncclErrorText(res, nullptr));
  }
}

void NcclCommImpl::failAndThrow(const std::string& message) {
  abortNoThrow(message);
  STRATA_THROW(BackendError, message, " ", where(), "; communicator aborted");
}

void NcclCommImpl::settle(ncclResult_t res, const char* call, Clock::time_point deadline) {
  if (res == ncclInProgress && comm_ != nullptr) {
    ncclResult_t query = ncclSuccess;
    const bool settled = pollUntil(deadline, [&] {
      query = ncclCommGetAsyncError(comm_, &res);
      return query != ncclSuccess || res != ncclInProgress;
    });
    if (query != ncclSuccess) {
      failAndThrow(
          c10::str("ncclCommGetAsyncError after ", call, " failed: ", ncclErrorText(query, comm_)));
    }
    if (!settled) {
      abortNoThrow(c10::str(call, " timed out"));
      STRATA_THROW(TimeoutError, call, " did not complete within ", timeout_.count(), " ms ",
                   where(),
                   " (a peer did not join or stopped progressing); "
                   "communicator aborted");
    }
  }
  if (res != ncclSuccess) {
    failAndThrow(c10::str(call, " failed: ", ncclErrorText(res, comm_)));
  }
}

void NcclCommImpl::checkUsable(const char* what) const {
  if (aborted_) {
    STRATA_THROW(BackendError, what, " on an aborted NCCL communicator ", where(), " (",
                 abortReason_, "); create a new one");
  }
}

void NcclCommImpl::checkPeer(const char* what, const char* role, int peer) const {
  STRATA_CHECK(peer >= 0 && peer < worldSize_, what, ": ", role, "=", peer, " outside [0, ",
               worldSize_, ")");
}

uint64_t NcclCommImpl::begin(const char* what, size_t count, const void* a, const void* b) {
  checkUsable(what);
  STRATA_CHECK(count == 0 || (a != nullptr && b != nullptr), what,
               ": null buffer with count=", count);
  waitFor(nullptr);
  return ++seq_;
}

void NcclCommImpl::waitFor(void* cudaStream) {
  checkUsable("waitFor");
  DeviceGuard guard(device_);
  cudaStream_t producer =
      cudaStream == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(cudaStream);
  STRATA_CUDA_CHECK(cudaEventRecord(inputReady_, producer));
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(stream_, inputReady_, 0));
}

void NcclCommImpl::allReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  DeviceGuard guard(device_);
  const uint64_t seq = begin("allReduce", count, send, recv);
  STRATA_LOG(kDebug, kColl, "nccl allreduce seq=", seq, " count=", count,
             " dtype=", dtypeName(dtype), " op=", reduceOpName(op));
  STRATA_NCCL_COMM(ncclAllReduce(send, recv, count, toNccl(dtype), toNccl(op), comm_, stream_));
}

void NcclCommImpl::broadcast(const void* send, void* recv, size_t count, DType dtype, int root) {
  checkPeer("broadcast", "root", root);
  DeviceGuard guard(device_);
  const uint64_t seq = begin("broadcast", count, rank_ == root ? send : recv, recv);
  STRATA_LOG(kDebug, kColl, "nccl broadcast seq=", seq, " count=", count,
             " dtype=", dtypeName(dtype), " root=", root);
  STRATA_NCCL_COMM(ncclBroadcast(send, recv, count, toNccl(dtype), root, comm_, stream_));
}

void NcclCommImpl::allGather(const void* send, void* recv, size_t sendCount, DType dtype) {
  DeviceGuard guard(device_);
  const uint64_t seq = begin("allGather", sendCount, send, recv);
  STRATA_LOG(kDebug, kColl, "nccl allgather seq=", seq, " sendCount=", sendCount,
             " dtype=", dtypeName(dtype));
  STRATA_NCCL_COMM(ncclAllGather(send, recv, sendCount, toNccl(dtype), comm_, stream_));
}

void NcclCommImpl::reduceScatter(const void* send, void* recv, size_t recvCount, DType dtype,
                                 ReduceOp op) {
  DeviceGuard guard(device_);
  const uint64_t seq = begin("reduceScatter", recvCount, send, recv);
  STRATA_LOG(kDebug, kColl, "nccl reducescatter seq=", seq, " recvCount=", recvCount,
             " dtype=", dtypeName(dtype), " op=", reduceOpName(op));
  STRATA_NCCL_COMM(
      ncclReduceScatter(send, recv, recvCount, toNccl(dtype), toNccl(op), comm_, stream_));
}

void NcclCommImpl::beginP2p(const char* what, const void* data, size_t count, DType dtype, int peer) {
  const uint64_t seq = begin(what, count, data, data);
  STRATA_LOG(kDebug, kP2p, "nccl ", what, " seq=", seq, " count=", count, " dtype=", dtypeName(dtype),
             " peer=", peer);
}

void NcclCommImpl::send(const void* data, size_t count, DType dtype, int peer) {
  checkPeer("send", "peer", peer);
  DeviceGuard guard(device_);
  beginP2p("send", data, count, dtype, peer);
  STRATA_NCCL_COMM(ncclSend(data, count, toNccl(dtype), peer, comm_, stream_));
}

void NcclCommImpl::recv(void* data, size_t count, DType dtype, int peer) {
  checkPeer("recv", "peer", peer);
  DeviceGuard guard(device_);
  beginP2p("recv", data, count, dtype, peer);
  STRATA_NCCL_COMM(ncclRecv(data, count, toNccl(dtype), peer, comm_, stream_));
}

void NcclCommImpl::groupStart() {
  checkUsable("groupStart");
  STRATA_NCCL_CHECK(ncclGroupStart());
  ++groupDepth_;
}

void NcclCommImpl::groupEnd() {
  checkUsable("groupEnd");
  STRATA_CHECK(groupDepth_ > 0, "groupEnd without a matching groupStart ", where());
  --groupDepth_;
  DeviceGuard guard(device_);
  STRATA_NCCL_COMM(ncclGroupEnd());
}

void NcclCommImpl::synchronize(std::chrono::milliseconds timeout) {
  checkUsable("synchronize");
  STRATA_CHECK(groupDepth_ == 0, "synchronize inside groupStart/groupEnd ", where());
  DeviceGuard guard(device_);
  const auto start = Clock::now();
  ncclResult_t query = ncclSuccess;
  ncclResult_t state = ncclSuccess;
  cudaError_t streamState = cudaErrorNotReady;
  const bool done = pollUntil(start + timeout, [&] {
    query = ncclCommGetAsyncError(comm_, &state);
    if (query != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      return true;
    }
    streamState = cudaStreamQuery(stream_);
    return streamState != cudaErrorNotReady;
  });
  if (query != ncclSuccess) {
    failAndThrow(
        c10::str("ncclCommGetAsyncError(comm_, &state) failed: ", ncclErrorText(query, comm_)));
  }
  if (state != ncclSuccess && state != ncclInProgress) {
    failAndThrow(c10::str("NCCL reported an asynchronous error after seq=", seq_, ": ",
                          ncclErrorText(state, comm_)));
  }
  if (!done) {
    abortNoThrow(c10::str("synchronize timed out after seq=", seq_));
    STRATA_THROW(TimeoutError, "NCCL synchronize: work up to seq=", seq_,
                 " did not complete within ", timeout.count(), " ms ", where(),
                 "; communicator aborted");
  }
  if (streamState != cudaSuccess) {
    (void)cudaGetLastError();
    failAndThrow(c10::str("cudaStreamQuery(stream_) failed after seq=", seq_, ": ",
                          cudaGetErrorString(streamState), " (", cudaGetErrorName(streamState),
                          ")"));
  }
  STRATA_LOG(kTrace, kColl, "nccl synchronize up to seq=", seq_, " took ", msSince(start), " ms");
}

void NcclCommImpl::abort() {
  try {
    DeviceGuard guard(device_);
    abortNoThrow("abort() called");
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kInit, "NcclComm::abort ", where(), ": ", e.what());
  }
}

class CudaDeviceBuffer final : public DeviceBuffer {
 public:
  CudaDeviceBuffer(int device, size_t numBytes) : device_(device), numBytes_(numBytes) {
    DeviceGuard guard(device_);
    STRATA_CUDA_CHECK(cudaMalloc(&data_, numBytes_ == 0 ? 1 : numBytes_));
  }
  ~CudaDeviceBuffer() override {
    if (cudaFree(data_) != cudaSuccess) {
      STRATA_LOG(kWarn, kInit, "cudaFree failed: ", cudaGetErrorString(cudaGetLastError()));
    }
  }
  void* data() override { return data_; }
  size_t numBytes() const override { return numBytes_; }
  void copyFromHost(const void* host, size_t numBytes) override {
    checkBytes("copyFromHost", numBytes);
    DeviceGuard guard(device_);
    STRATA_CUDA_CHECK(cudaMemcpy(data_, host, numBytes, cudaMemcpyHostToDevice));
  }
  void copyToHost(void* host, size_t numBytes) const override {
    checkBytes("copyToHost", numBytes);
    DeviceGuard guard(device_);
    STRATA_CUDA_CHECK(cudaMemcpy(host, data_, numBytes, cudaMemcpyDeviceToHost));
  }

 private:
  void checkBytes(const char* what, size_t numBytes) const {
    STRATA_CHECK(numBytes <= numBytes_, "DeviceBuffer::", what, ": ", numBytes,
                 " bytes into a buffer of ", numBytes_);
  }

  const int device_;
  const size_t numBytes_;
  void* data_ = nullptr;
};

}  // namespace

bool isCompiled() { return true; }

int deviceCount() {
  static const int count = probeDeviceCount();
  return count;
}

bool isAvailable() { return deviceCount() > 0; }

std::unique_ptr<NcclComm> NcclComm::create(bootstrap::Store& store, int rank, int worldSize,
                                           int device, std::chrono::milliseconds timeout) {
  STRATA_CHECK(worldSize >= 1 && rank >= 0 && rank < worldSize, "NcclComm::create: rank=", rank,
               " worldSize=", worldSize);
  STRATA_CHECK(timeout.count() > 0, "NcclComm::create: timeout=", timeout.count(),
               " ms must be > 0");
  const int devices = deviceCount();
  STRATA_CHECK_WITH(BackendError, device >= 0 && device < devices,
                    "NcclComm::create: device=", device, " but ", devices,
                    " CUDA device(s) are visible");
  const auto deadline = Clock::now() + timeout;
  const bootstrap::Bytes idBytes = exchangeUniqueId(
      store, rank,
      [] {
        ncclUniqueId id;
        STRATA_NCCL_CHECK(ncclGetUniqueId(&id));
        return bootstrap::Bytes(reinterpret_cast<const uint8_t*>(id.internal),
                                reinterpret_cast<const uint8_t*>(id.internal) + sizeof(id));
      },
      timeout);
  STRATA_CHECK_WITH(BackendError, idBytes.size() == sizeof(ncclUniqueId),
                    "NcclComm::create: the NCCL unique id under \"", kUniqueIdKey, "\" has ",
                    idBytes.size(), " bytes, expected ", sizeof(ncclUniqueId),
                    " (another writer of that key, or another NCCL version on rank 0?)");
  ncclUniqueId id;
  std::memcpy(&id, idBytes.data(), sizeof(id));
  auto comm = std::make_unique<NcclCommImpl>(rank, worldSize, device, timeout);
  comm->init(id, deadline);
  return comm;
}

std::unique_ptr<DeviceBuffer> DeviceBuffer::allocate(int device, size_t numBytes) {
  const int devices = deviceCount();
  STRATA_CHECK_WITH(BackendError, device >= 0 && device < devices,
                    "DeviceBuffer::allocate: device=", device, " but ", devices,
                    " CUDA device(s) are visible");
  return std::make_unique<CudaDeviceBuffer>(device, numBytes);
}

}  // namespace strata::nccl
