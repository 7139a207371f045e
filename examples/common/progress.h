// Rank 0's progress line for the examples: a bar on a terminal, a line every 10% otherwise
// (logs, CI). Other ranks print nothing.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strata/runtime.h"

namespace examples {

class Progress {
 public:
  // mpirun hands ranks a pseudo-terminal even when nobody watches, so also ask for a
  // real terminal type and no CI.
  static bool interactive() {
    const char* term = std::getenv("TERM");
    return isatty(1) && term && std::string(term) != "dumb" && !std::getenv("CI");
  }

  // `label` starts every line ("epoch 1", "train"); `total` steps make 100%.
  Progress(int64_t total, std::string label)
      : total_(std::max<int64_t>(total, 1)), label_(std::move(label)), tty_(interactive()), start_(Clock::now()) {}

  // `done` steps of `total`, `samples` processed since the start (for the rate).
  void update(int64_t done, int64_t samples, double loss) {
    if (strata::rank() != 0) return;
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = static_cast<double>(samples) / std::max(secs, 1e-9);
    const double eta = done > 0 ? secs * static_cast<double>(total_ - done) / static_cast<double>(done) : 0;
    const int width = 30, filled = static_cast<int>(std::clamp<int64_t>(width * done / total_, 0, width));
    if (tty_) {
      std::printf("\r%s [%s%s] %lld/%lld %7.0f samples/s loss %.4f ETA %4.0fs", label_.c_str(),
                  std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), (long long)done,
                  (long long)total_, rate, loss, eta);
      std::fflush(stdout);
    } else if (done == total_ || done * 10 / total_ != lastDecile_) {
      lastDecile_ = done * 10 / total_;
      std::printf("%s step %lld/%lld %.0f samples/s loss %.4f ETA %.0fs\n", label_.c_str(), (long long)done,
                  (long long)total_, rate, loss, eta);
      std::fflush(stdout);
    }
  }

  // Ends the bar's line.
  void finish() {
    if (strata::rank() == 0 && tty_) std::printf("\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  std::string label_;
  bool tty_;
  Clock::time_point start_;
  int64_t lastDecile_ = 0;
};

}  // namespace examples
