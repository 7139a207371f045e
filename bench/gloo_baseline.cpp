#include "gloo_baseline.h"

#include <mpi.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "common.h"

namespace strata::bench {

struct GlooBaseline::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::vector<at::Tensor> tensors;  // the cached from_blob view
  float* cachedBuf = nullptr;
  size_t cachedCount = 0;
  std::string text;
};

GlooBaseline::GlooBaseline(int rank, int size, bool severalHosts) : impl_(new Impl) {
  const std::string storeHost = severalHosts ? processorNameOfRank0() : "127.0.0.1";
  const std::string myHost = severalHosts ? processorName() : "127.0.0.1";
  c10d::TCPStoreOptions so;
  so.isServer = rank == 0;
  so.port = 0;  // rank 0 binds an ephemeral port, everyone else gets it by MPI_Bcast
  so.waitWorkers = false;
  so.timeout = std::chrono::seconds(60);
  int port = 0;
  if (rank == 0) {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(storeHost, so);
    port = impl_->store->getPort();
  }
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank != 0) {
    so.port = static_cast<std::uint16_t>(port);
    impl_->store = c10::make_intrusive<c10d::TCPStore>(storeHost, so);
  }
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(120));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(myHost));
  impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank, size, opts);
  impl_->text = "c10d::ProcessGroupGloo threads=" + std::to_string(opts->threads) + " device=tcp:" + myHost +
                " store=TCPStore:" + storeHost + ":" + std::to_string(port);
}

GlooBaseline::~GlooBaseline() = default;

void GlooBaseline::allreduce(float* buf, size_t count) {
  if (buf != impl_->cachedBuf || count != impl_->cachedCount) {
    impl_->tensors = {torch::from_blob(buf, {static_cast<int64_t>(count)}, torch::kFloat32)};
    impl_->cachedBuf = buf;
    impl_->cachedCount = count;
  }
  impl_->pg->allreduce(impl_->tensors)->wait();
}

const char* GlooBaseline::describe() const { return impl_->text.c_str(); }

}  // namespace strata::bench
