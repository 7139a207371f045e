// Saves the default CPU generator's state and puts it back on destruction: the seeding a
// pipeline does inside a step (per layer, per microbatch) and the layer profile's trial runs
// must not leak into the user's random stream.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <mutex>

namespace strata::pipeline {

class RngStateGuard {
 public:
  RngStateGuard() : generator_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    state_ = generator_.get_state();
  }
  ~RngStateGuard() {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(state_);
  }
  RngStateGuard(const RngStateGuard&) = delete;
  RngStateGuard& operator=(const RngStateGuard&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor state_;
};

}  // namespace strata::pipeline
