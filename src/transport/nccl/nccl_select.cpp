// Pure backend selection, device assignment, enum mapping and the store half of the
// NCCL bootstrap. See nccl_select.h. Compiled in every build.
#include "transport/nccl/nccl_select.h"

#include <c10/util/StringUtil.h>

#include "core/errors.h"
#include "core/logging.h"

namespace strata::nccl {
namespace {

Selection fail(std::string why) {
  Selection s;
  s.error = std::move(why);
  return s;
}

Selection pick(Backend backend) {
  Selection s;
  s.backend = backend;
  return s;
}

bool isKnownTransport(const std::string& name) {
  return name == "auto" || name == "shm" || name == "tcp" || name == "nccl";
}

// Rule 1: input that no topology can produce.
std::string checkInput(const SelectInput& in) {
  if (!isKnownTransport(in.forcedTransport)) {
    return c10::str("unknown transport \"", in.forcedTransport,
                    "\" (STRATA_TRANSPORT); expected auto, shm, tcp or nccl");
  }
  if (in.numHosts < 1 || in.maxRanksPerHost < 1) {
    return c10::str("invalid topology: numHosts=", in.numHosts,
                    " maxRanksPerHost=", in.maxRanksPerHost, " (both must be >= 1)");
  }
  if (in.allRanksOnOneHost != (in.numHosts == 1)) {
    return c10::str("inconsistent topology: allRanksOnOneHost=", in.allRanksOnOneHost,
                    " but numHosts=", in.numHosts);
  }
  return {};
}

// Rule 2: CUDA tensors go through NCCL or nowhere.
Selection selectForCuda(const SelectInput& in) {
  if (in.forcedTransport == "shm" || in.forcedTransport == "tcp") {
    return fail(c10::str("transport \"", in.forcedTransport,
                         "\" cannot carry CUDA tensors; use STRATA_TRANSPORT=auto or nccl, "
                         "or move the tensor to the CPU"));
  }
  if (!in.ncclCompiled) {
    return fail(
        "CUDA tensor needs the NCCL backend, but Strata was built without NCCL "
        "(rebuild with CUDA and NCCL found and STRATA_WITH_NCCL=ON)");
  }
  if (in.cudaDevices <= 0) {
    return fail(
        c10::str("CUDA tensor needs the NCCL backend, but no CUDA device is visible "
                 "on this host (cudaDevices=",
                 in.cudaDevices, "; check the driver and CUDA_VISIBLE_DEVICES)"));
  }
  if (in.maxRanksPerHost > in.cudaDevices) {
    return fail(c10::str("NCCL needs one CUDA device per rank, but a host runs ",
                         in.maxRanksPerHost, " ranks and this host sees ", in.cudaDevices,
                         " device(s)"));
  }
  return pick(Backend::kNccl);
}

// Rule 3: CPU tensors never use NCCL.
Selection selectForCpu(const SelectInput& in) {
  if (in.forcedTransport == "nccl") {
    return fail(
        "transport \"nccl\" carries only CUDA tensors, but the tensor is on the CPU; "
        "use STRATA_TRANSPORT=auto, shm or tcp");
  }
  if (in.forcedTransport == "tcp") {
    return pick(Backend::kTcp);
  }
  if (in.forcedTransport == "shm") {
    if (!in.allRanksOnOneHost) {
      return fail(c10::str("transport \"shm\" needs all ranks on one host, but the job spans ",
                           in.numHosts, " hosts; use STRATA_TRANSPORT=auto or tcp"));
    }
    return pick(Backend::kShm);
  }
  if (in.allRanksOnOneHost) {
    return pick(Backend::kShm);
  }
  return pick(in.maxRanksPerHost > 1 ? Backend::kHierarchical : Backend::kTcp);
}

}  // namespace

const char* backendName(Backend backend) {
  switch (backend) {
    case Backend::kShm:
      return "shm";
    case Backend::kTcp:
      return "tcp";
    case Backend::kHierarchical:
      return "hierarchical";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

Selection selectBackend(const SelectInput& in) {
  std::string invalid = checkInput(in);
  if (!invalid.empty()) {
    return fail(std::move(invalid));
  }
  return in.tensorOnCuda ? selectForCuda(in) : selectForCpu(in);
}

int deviceForLocalRank(int localRank, int cudaDevices) {
  STRATA_CHECK(localRank >= 0, "deviceForLocalRank: localRank=", localRank, " must be >= 0");
  STRATA_CHECK_WITH(BackendError, cudaDevices > 0, "no CUDA device for local rank ", localRank,
                    " (cudaDevices=", cudaDevices, ")");
  return localRank % cudaDevices;
}

NcclDataType toNcclDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return NcclDataType::kFloat32;
    case DType::kFloat64:
      return NcclDataType::kFloat64;
    case DType::kFloat16:
      return NcclDataType::kFloat16;
    case DType::kBFloat16:
      return NcclDataType::kBfloat16;
    case DType::kInt32:
      return NcclDataType::kInt32;
    case DType::kInt64:
      return NcclDataType::kInt64;
    case DType::kUInt8:
      return NcclDataType::kUint8;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kBool:
    case DType::kString:
      break;
  }
  STRATA_THROW(Error, "toNcclDataType: invalid DType value ", static_cast<int>(dtype));
}

NcclRedOp toNcclRedOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return NcclRedOp::kSum;
    case ReduceOp::kAvg:
      return NcclRedOp::kAvg;
    case ReduceOp::kMax:
      return NcclRedOp::kMax;
    case ReduceOp::kMin:
      return NcclRedOp::kMin;
    case ReduceOp::kProd:
      return NcclRedOp::kProd;
  }
  STRATA_THROW(Error, "toNcclRedOp: invalid ReduceOp value ", static_cast<int>(op));
}

bootstrap::Bytes exchangeUniqueId(bootstrap::Store& store, int rank,
                                  const std::function<bootstrap::Bytes()>& makeId,
                                  std::chrono::milliseconds timeout) {
  STRATA_CHECK(rank >= 0, "exchangeUniqueId: rank=", rank, " must be >= 0");
  if (rank == 0) {
    STRATA_CHECK(static_cast<bool>(makeId), "exchangeUniqueId: rank 0 needs a makeId function");
    bootstrap::Bytes id = makeId();
    STRATA_CHECK(!id.empty(), "exchangeUniqueId: makeId returned an empty NCCL unique id");
    store.set(kUniqueIdKey, id);
    STRATA_LOG(kDebug, kInit, "published NCCL unique id under \"", kUniqueIdKey, "\" (", id.size(),
               " bytes)");
    return id;
  }
  try {
    bootstrap::Bytes id = store.get(kUniqueIdKey, timeout);
    STRATA_LOG(kDebug, kInit, "fetched NCCL unique id from \"", kUniqueIdKey, "\" (", id.size(),
               " bytes)");
    return id;
  } catch (const TimeoutError& e) {
    STRATA_THROW(TimeoutError, "NCCL bootstrap: rank 0 did not publish \"", kUniqueIdKey,
                 "\" within ", timeout.count(), " ms (", e.what_without_backtrace(), ")");
  }
}

}  // namespace strata::nccl
