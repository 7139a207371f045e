// Rule-engine throughput: synthetic 24 h x 64 ranks at 500 ms (8 hosts x 8 GPUs; 64 system rows
// per tick, ~11 M) plus ~1 M framework events, through every bottleneck rule (ProfilerReport),
// generated lazily in time order (nothing but the engine's open windows in memory).
//
// bench/run_rules.sh runs it and keeps the output: `rules_bench [hours] [ranks]`.
// Prints "# rules 24h x 64 ranks seconds: N" and "# rules 24h x 64 ranks peak GiB: N".

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "rules/engine.h"
#include "rules/memory_sources.h"

namespace {

using strata::rules::FrameworkEvent;
using strata::rules::MetricBatch;
using strata::rules::SystemSample;

constexpr int64_t kTickUs = 500000;
constexpr int kGpusPerHost = 8;

// Per host and tick: 2 CPU cores, 1 I/O wait, 2 GPU utilisation, 2 GPU memory, host memory
// (8 rows, so 64 ranks on 8 hosts give 64 rows per tick). Per rank a step every `stepUs` with a
// Forward event inside it.
class Generator final : public strata::rules::MetricSource {
 public:
  Generator(int64_t hours, int ranks) : endUs_(t0_ + hours * 3600 * 1000000), ranks_(ranks) {
    hosts_ = std::max(1, ranks / kGpusPerHost);
    // ~1 M events over 24 h x 64 ranks: one step + one forward event per rank every 11 s.
    stepUs_ = 11 * 1000000LL;
  }

  bool poll(MetricBatch& out, size_t maxItems) override {
    size_t n = 0;
    while (n < maxItems && tUs_ < endUs_) {
      for (int h = 0; h < hosts_; ++h) {
        const std::string& node = nodeName(h);
        const double busy = std::sin(static_cast<double>(tUs_) / 3.6e9 + h) * 20 + 50;
        push(out, node, "CPUUtilization", "cpu0", busy + noise());
        push(out, node, "CPUUtilization", "cpu1", busy + noise());
        push(out, node, "I/OWaitPercentage", "cpu0", 2 + noise() / 10);
        push(out, node, "GPUUtilization", "gpu0", 85 + noise());
        push(out, node, "GPUUtilization", "gpu1", (h == 3 ? 40 : 85) + noise());
        push(out, node, "GPUMemoryUtilization", "gpu0", 40 + noise() / 10);
        push(out, node, "GPUMemoryUtilization", "gpu1", 40 + noise() / 10);
        push(out, node, "", "MemoryUsedPercent", 50 + noise() / 10);
        n += 8;
      }
      if (tUs_ >= nextStepUs_) {
        for (int r = 0; r < ranks_; ++r) {
          const int64_t start = tUs_ + r * 1000;
          const int64_t dur = (r == 5 ? 900000 : 600000) + static_cast<int64_t>(noise() * 1000) + (step_ % 997 == 0 ? 5000000 : 0);
          out.events.push_back(event(r, "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start, dur));
          out.events.push_back(event(r, "Forward", "layers", start + 1000, dur / 3));
          n += 2;
        }
        ++step_;
        nextStepUs_ += stepUs_;
      }
      tUs_ += kTickUs;
    }
    rows_ += n;
    return n > 0;
  }
  int64_t watermarkUs() const override { return tUs_; }
  bool finished() const override { return tUs_ >= endUs_; }
  int64_t rows() const { return rows_; }

 private:
  const std::string& nodeName(int h) {
    while (static_cast<int>(names_.size()) <= h) names_.push_back("algo-" + std::to_string(names_.size() + 1));
    return names_[static_cast<size_t>(h)];
  }
  double noise() { return dist_(rng_); }
  void push(MetricBatch& out, const std::string& node, const char* dim, const char* name, double v) {
    out.samples.push_back(strata::rules::makeSample(tUs_, node, dim, name, v));
  }
  FrameworkEvent event(int rank, const char* phase, const char* name, int64_t start, int64_t dur) {
    FrameworkEvent e;
    e.rank = rank;
    e.node = "algo-" + std::to_string(rank / kGpusPerHost + 1) + "-" + std::to_string(rank);
    e.phase = phase;
    e.name = name;
    e.startUs = start;
    e.endUs = start + dur;
    e.step = step_;
    return e;
  }

  const int64_t t0_ = 1700000040LL * 1000000;
  int64_t tUs_ = t0_, nextStepUs_ = t0_ + 30 * 1000000LL, endUs_;
  int ranks_, hosts_;
  int64_t stepUs_, step_ = 0, rows_ = 0;
  std::vector<std::string> names_;
  std::mt19937 rng_{42};
  std::normal_distribution<double> dist_{0.0, 3.0};
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t hours = argc > 1 ? std::atoll(argv[1]) : 24;
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 64;
  strata::rules::Engine engine;
  engine.addRules({strata::rules::RuleSpec("ProfilerReport")});
  auto gen = std::make_unique<Generator>(hours, ranks);
  Generator* g = gen.get();
  engine.setMetricSource(std::move(gen));
  const auto start = std::chrono::steady_clock::now();
  engine.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double gib = static_cast<double>(ru.ru_maxrss) * 1024 / (1024.0 * 1024 * 1024);
  int issues = 0;
  for (const auto& s : engine.summary()) {
    std::printf("%-24s %-14s triggered %lld datapoints %lld\n", s.name.c_str(), strata::rules::statusName(s.status),
                static_cast<long long>(s.ruleTriggered), static_cast<long long>(s.datapoints));
    issues += s.status == strata::rules::RuleStatus::kIssuesFound;
  }
  std::printf("items generated: %lld (system rows + framework events)\n", static_cast<long long>(g->rows()));
  std::printf("# rules %lldh x %d ranks seconds: %.1f\n", static_cast<long long>(hours), ranks, seconds);
  std::printf("# rules %lldh x %d ranks peak GiB: %.2f\n", static_cast<long long>(hours), ranks, gib);
  return 0;
}

