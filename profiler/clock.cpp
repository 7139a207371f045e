#include "profiler/clock.h"

namespace strata::profiler {
namespace {

class AnchoredClock final : public Clock {
 public:
  AnchoredClock()
      : anchorSystemUs_(std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()),
        anchorSteady_(std::chrono::steady_clock::now()) {}

  int64_t nowUs() const noexcept override {
    const auto elapsed = std::chrono::steady_clock::now() - anchorSteady_;
    return anchorSystemUs_ +
           std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  }

 private:
  const int64_t anchorSystemUs_;
  const std::chrono::steady_clock::time_point anchorSteady_;
};

}  // namespace

const std::shared_ptr<const Clock>& processClock() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<AnchoredClock>();
  return clock;
}

}  // namespace strata::profiler
