// The NCCL transport in a build without CUDA or NCCL (nccl_comm.cpp otherwise):
// nothing is available, and creating anything throws BackendError saying why.
#include "core/errors.h"
#include "transport/nccl/nccl.h"

namespace strata::nccl {

namespace {

constexpr const char* kNotBuilt =
    "Strata was built without NCCL (CUDA toolkit or NCCL not found, or STRATA_WITH_NCCL=OFF); "
    "CUDA tensors cannot be communicated. Rebuild with CUDA and NCCL, or use CPU tensors";

}  // namespace

bool isCompiled() { return false; }

int deviceCount() { return 0; }

bool isAvailable() { return false; }

std::unique_ptr<NcclComm> NcclComm::create(bootstrap::Store& store, int rank, int worldSize,
                                           int device, std::chrono::milliseconds timeout) {
  STRATA_THROW(BackendError, "NcclComm::create(rank=", rank, ", worldSize=", worldSize,
               ", device=", device, "): ", kNotBuilt);
}

std::unique_ptr<DeviceBuffer> DeviceBuffer::allocate(int device, size_t numBytes) {
  STRATA_THROW(BackendError, "DeviceBuffer::allocate(device=", device, ", numBytes=", numBytes,
               "): ", kNotBuilt);
}

}  // namespace strata::nccl
