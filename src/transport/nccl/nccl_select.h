// Pure decisions for the NCCL path, compiled in every build (with or without CUDA), so
// they are unit-tested on machines without a GPU:
//   - which backend carries a collective (shm, tcp, hierarchical or nccl),
//   - which CUDA device a local rank drives,
//   - our DType / ReduceOp -> NCCL enum mapping (as our own enums whose values equal
//     NCCL's; nccl_comm.cpp static_asserts the equality and casts),
//   - the store half of the NCCL bootstrap (publish / fetch the unique id).
// Nothing here includes a CUDA or NCCL header.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "bootstrap/store.h"
#include "strata/types.h"

namespace strata::nccl {

enum class Backend { kShm, kTcp, kHierarchical, kNccl };

const char* backendName(Backend backend);  // "shm", "tcp", "hierarchical", "nccl"

// Every field must be equal on all ranks (derived from the global topology and the
// job config), so that all ranks select the same backend. cudaDevices is the one
// local value: a host without a usable GPU makes its ranks fail with an error, and
// their peers then time out in the rendezvous instead of hanging.
struct SelectInput {
  bool tensorOnCuda = false;
  bool ncclCompiled = false;  // nccl::isCompiled()
  int cudaDevices = 0;        // nccl::deviceCount() on this host
  bool allRanksOnOneHost = true;
  int numHosts = 1;
  std::string forcedTransport = "auto";  // "auto" | "shm" | "tcp" | "nccl" (STRATA_TRANSPORT)
  int maxRanksPerHost = 1;               // largest number of ranks on any one host
};

// A pure planner's answer: a backend, or an error naming why none fits.
struct Selection {
  Backend backend = Backend::kTcp;  // meaningful only when ok()
  std::string error;                // empty on success
  bool ok() const { return error.empty(); }
};

// Rules, in order:
//   1. forcedTransport must be one of the four names; numHosts >= 1, maxRanksPerHost
//      >= 1, and allRanksOnOneHost == (numHosts == 1).
//   2. A CUDA tensor needs NCCL: it must be compiled in, this host must see a device,
//      each local rank needs a device of its own (NCCL rejects two ranks of one
//      communicator on one GPU), and a forced shm/tcp is an error (no device staging).
//   3. A CPU tensor never uses NCCL (forced "nccl" is an error). Forced shm needs one
//      host. Auto: one host -> shm; several hosts with several ranks on some host ->
//      hierarchical (shm inside a host, tcp between hosts); one rank per host -> tcp.
// Never throws.
Selection selectBackend(const SelectInput& in);

// The CUDA device a local rank drives: round robin, localRank % cudaDevices. Throws
// BackendError when cudaDevices <= 0 (selectBackend reports that case as an error
// first), Error when localRank < 0.
int deviceForLocalRank(int localRank, int cudaDevices);

// NCCL's ncclDataType_t values, spelled with our names (nccl_comm.cpp checks them).
enum class NcclDataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};

// NCCL's ncclRedOp_t values for the built-in operators.
enum class NcclRedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

// Every DType and ReduceOp has an NCCL counterpart. Throw Error on a value outside
// the enum (a corrupted or uninitialised field).
NcclDataType toNcclDataType(DType dtype);
NcclRedOp toNcclRedOp(ReduceOp op);

// Store key of the NCCL unique id. One communicator per store namespace: give each
// communicator (group) its own PrefixStore, since a stale id left by an earlier
// communicator under the same key would be read by the non-zero ranks.
inline constexpr const char* kUniqueIdKey = "nccl/uid";

// Rank 0 calls makeId() (ncclGetUniqueId in NcclComm::create) and publishes the bytes
// under kUniqueIdKey; every other rank waits up to `timeout` for them and never calls
// makeId. Returns the id bytes on every rank. Throws Error when rank < 0 or makeId
// returns no bytes, TimeoutError (naming the key and the timeout) when rank 0 has not
// published in time, StoreError from the store. Thread-safe if the store is.
bootstrap::Bytes exchangeUniqueId(bootstrap::Store& store, int rank,
                                  const std::function<bootstrap::Bytes()>& makeId,
                                  std::chrono::milliseconds timeout);

}  // namespace strata::nccl
