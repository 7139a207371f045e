// The step observers (src/adapter/observe/observers.h): the fan-out with recording observers and no
// model, then the events a real data-parallel step of DistributedModel reports, in order.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "adapter/observe/observers.h"
#include "strata/distributed_model.h"
#include "strata/runtime.h"

namespace strata::observe {
namespace {

// Writes one line per event it receives.
class Recording : public StepObserver {
 public:
  explicit Recording(bool times = false, bool tensors = false) : times_(times), tensors_(tensors) {}
  std::vector<std::string> events;
  int64_t clockUs = 1000;

  bool timing() const override { return times_; }
  int64_t nowUs() const override { return times_ ? clockUs : -1; }
  bool wantsLayerTensors(const void*) override { return tensors_; }
  bool wantsTensors() const override { return tensors_; }
  void stepBegin(int64_t step, Mode mode, int64_t modeStep) override {
    add("stepBegin " + std::to_string(step) + " " + modeName(mode) + " " + std::to_string(modeStep));
  }
  void stepEnd(int64_t step) override { add("stepEnd " + std::to_string(step)); }
  void parameters(const std::string& top, const NamedTensors& p) override {
    add("parameters " + top + " " + std::to_string(p.size()));
  }
  void loss(const torch::Tensor&) override { add("loss"); }
  void gradients(const std::string& top, const NamedTensors& p) override {
    add("gradients " + top + " " + std::to_string(p.size()));
  }
  void optimizerStep(int64_t step, Span) override { add("optimizerStep " + std::to_string(step)); }
  void batchRequested() override { add("batchRequested"); }
  void moduleInput(const std::string& path, const torch::Tensor&) override { add("input " + path); }
  void moduleOutput(const std::string& path, const torch::Tensor&) override { add("output " + path); }
  void layerForward(const std::string& path, Span) override { add("layerForward " + path); }
  void chainForward(const LayerChain& chain, Span) override { add("chainForward " + chain.topName); }
  void layerBackward(const std::string& path, Span) override { add("layerBackward " + path); }
  void chainBackward(const std::string& top, Span) override { add("chainBackward " + top); }
  void gradientSync(Span, const std::vector<BucketRun>& b) override {
    add("gradientSync " + std::to_string(b.size()));
  }
  void stageBackward(const StageWork& w) override { add("stageBackward " + std::to_string(w.stage)); }
  void transfer(const Transfer& t) override { add(std::string("transfer ") + transferName(t.kind)); }
  void sendsWaited(Span, int64_t sends) override { add("sendsWaited " + std::to_string(sends)); }

 private:
  void add(std::string e) { events.push_back(std::move(e)); }
  bool times_;
  bool tensors_;
};

class Throwing : public StepObserver {
 public:
  void stepBegin(int64_t, Mode, int64_t) override { throw std::runtime_error("observer bug"); }
};

// Registers for the scope.
struct Registered {
  std::shared_ptr<StepObserver> observer;
  explicit Registered(std::shared_ptr<StepObserver> o) : observer(std::move(o)) { observers().add(observer); }
  ~Registered() { observers().remove(observer.get()); }
};

// One training step of `model` on (x, y) with a mean-squared-error loss.
void mseStep(DistributedModel& model, const torch::Tensor& x, const torch::Tensor& y) {
  model.step(x, y, [](DistributedModel& m, const torch::Tensor& in, const torch::Tensor& target) {
    auto loss = (m(in) - target).pow(2).mean();
    m.backward(loss);
    return loss;
  });
}

TEST(Observers, FanOutInRegistrationOrderAndRemove) {
  const size_t before = observers().size();
  auto a = std::make_shared<Recording>();
  auto b = std::make_shared<Recording>();
  {
    Registered ra(a), rb(b);
    EXPECT_EQ(observers().size(), before + 2);
    observers().stepBegin(3, Mode::kEval);
    observers().transfer({Transfer::Kind::kRecvGradient, 1, 2, 0, 64, {}});
    observers().stepEnd(3);
  }
  EXPECT_EQ(observers().size(), before);
  observers().stepBegin(4, Mode::kTrain);  // nobody listening any more
  const std::vector<std::string> expected{"stepBegin 3 EVAL -1", "transfer recv gradient", "stepEnd 3"};
  EXPECT_EQ(a->events, expected);
  EXPECT_EQ(b->events, expected);
}

TEST(Observers, AThrowingObserverNeverStopsTheOthers) {
  auto r = std::make_shared<Recording>();
  Registered t(std::make_shared<Throwing>()), rr(r);
  EXPECT_NO_THROW(observers().stepBegin(0, Mode::kTrain));
  EXPECT_EQ(r->events, (std::vector<std::string>{"stepBegin 0 TRAIN -1"}));
}

TEST(Observers, InterestAndClockComeFromTheObserversThatWantThem) {
  EXPECT_EQ(observers().nowUs(), -1);
  EXPECT_EQ(spanSince(-1).startUs, -1);
  auto quiet = std::make_shared<Recording>();
  Registered rq(quiet);
  EXPECT_FALSE(observers().interest(nullptr).any());
  EXPECT_EQ(observers().nowUs(), -1);
  auto timer = std::make_shared<Recording>(/*times=*/true, /*tensors=*/false);
  auto saver = std::make_shared<Recording>(/*times=*/false, /*tensors=*/true);
  Registered rt(timer), rs(saver);
  const Interest i = observers().interest(nullptr);
  EXPECT_TRUE(i.times);
  EXPECT_TRUE(i.layerTensors);
  EXPECT_TRUE(observers().wantsTensors());
  timer->clockUs = 5000;
  EXPECT_EQ(observers().nowUs(), 5000);
  const Span s = spanSince(4200);
  EXPECT_EQ(s.startUs, 4200);
  EXPECT_EQ(s.durUs, 800);
}

// A job of one process in a directory of its own: ctest runs these tests two at a time, and
// two jobs may not share an output_dir (runtime/output_dir_lock.h).
class PrivateJob {
 public:
  PrivateJob()
      : dir_((std::filesystem::temp_directory_path() /
              ("strata-observers-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                 .string()) {
    InitOptions options;
    options.configJson = "{\"output_dir\": \"" + dir_ + "\"}";
    strata::init(options);
  }
  ~PrivateJob() {
    strata::finalize();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::string dir_;
};

// A real data-parallel step (one process) reports its events in the documented order,
// with per-layer events when an observer wants them.
TEST(Observers, ADataParallelStepReportsItsEventsInOrder) {
  PrivateJob job;
  {
    torch::manual_seed(1);
    torch::nn::Sequential net({{"fc1", torch::nn::Linear(4, 3)},
                               {"relu", torch::nn::ReLU()},
                               {"fc2", torch::nn::Linear(3, 2)}});
    DistributedModel model(net);
    DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
    auto rec = std::make_shared<Recording>(/*times=*/true, /*tensors=*/true);
    Registered r(rec);
    opt.zero_grad();
    mseStep(model, torch::randn({5, 4}), torch::randn({5, 2}));
    opt.step();
    const std::vector<std::string> expected{
        "stepBegin 0 TRAIN 0", "parameters Sequential 4",
        "input Sequential", "layerForward fc1", "input fc1", "output fc1", "layerForward relu", "input relu",
        "output relu", "layerForward fc2", "input fc2", "output fc2", "chainForward Sequential", "output Sequential",
        "chainBackward Sequential", "layerBackward fc2", "layerBackward relu", "layerBackward fc1",
        "gradientSync 1", "loss", "stepEnd 0", "gradients Sequential 4", "optimizerStep 0"};
    EXPECT_EQ(rec->events, expected);
  }
}

// smdebug's hook makes each top-level forward a step of the current mode: an evaluation
// pass after training is EVAL steps (not forwards of the last TRAIN step), set_mode(PREDICT)
// makes PREDICT steps, and a training forward outside step() is no step.
TEST(Observers, EvaluationAndPredictionForwardsAreStepsOfTheirMode) {
  PrivateJob job;
  {
    torch::manual_seed(2);
    torch::nn::Sequential net({{"fc1", torch::nn::Linear(4, 3)}, {"relu", torch::nn::ReLU()}});
    DistributedModel model(net);
    DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
    auto rec = std::make_shared<Recording>(/*times=*/false, /*tensors=*/false);
    Registered r(rec);
    mseStep(model, torch::randn({2, 4}), torch::randn({2, 3}));
    opt.step();
    torch::NoGradGuard noGrad;
    model.eval();
    EXPECT_EQ(model.mode(), Mode::kEval);
    for (int i = 0; i < 2; ++i) model(torch::randn({2, 4}));
    model.set_mode(Mode::kPredict);
    model(torch::randn({1, 4}));
    model.train();
    EXPECT_EQ(model.mode(), Mode::kTrain);
    model(torch::randn({1, 4}));  // training forward outside step(): no step
    std::vector<std::string> steps;
    for (const auto& e : rec->events)
      if (e.rfind("step", 0) == 0) steps.push_back(e);
    const std::vector<std::string> expected{"stepBegin 0 TRAIN 0",   "stepEnd 0", "stepBegin 1 EVAL 0", "stepEnd 1",
                                            "stepBegin 2 EVAL 1",    "stepEnd 2", "stepBegin 3 PREDICT 0",
                                            "stepEnd 3"};
    EXPECT_EQ(steps, expected);
    EXPECT_EQ(model.steps_taken(), 1);  // training steps only (checkpoints, pipeline seeds)
  }
}

}  // namespace
}  // namespace strata::observe
