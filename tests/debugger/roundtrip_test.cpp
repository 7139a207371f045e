// Hook -> files -> Trial: values for every dtype and rank 0..4, stored reductions, scalars.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "debugger/file_util.h"
#include "debugger/hook.h"
#include "debugger/naming.h"
#include "debugger/trial.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::TempDir;

// Deterministic element i of `dtype`, as raw bytes, and the value it should read back as.
struct Element {
  std::string bytes;
  double value;
};

Element element(DType dtype, size_t i) {
  const double v = (static_cast<double>(i % 11) - 5.0) * 0.5;  // -2.5 .. 2.5, exact in halfs
  Element e;
  auto put = [&](auto x) {
    e.bytes.assign(reinterpret_cast<const char*>(&x), sizeof(x));
    e.value = static_cast<double>(x);
  };
  switch (dtype) {
    case DType::kFloat32: put(static_cast<float>(v)); break;
    case DType::kFloat64: put(v * 1.000001); break;
    case DType::kFloat16: {
      const uint16_t h = floatToHalf(static_cast<float>(v));
      e.bytes.assign(reinterpret_cast<const char*>(&h), 2);
      e.value = v;
      break;
    }
    case DType::kBFloat16: {
      const float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const auto top = static_cast<uint16_t>(bits >> 16);  // exact: v has few mantissa bits
      e.bytes.assign(reinterpret_cast<const char*>(&top), 2);
      e.value = v;
      break;
    }
    case DType::kInt8: put(static_cast<int8_t>(static_cast<int>(i * 13 % 256) - 128)); break;
    case DType::kInt16: put(static_cast<int16_t>(static_cast<int>(i * 37 % 60000) - 30000)); break;
    case DType::kInt32: put(static_cast<int32_t>(i * 1000003 % 2000000) - 1000000); break;
    case DType::kInt64: put(static_cast<int64_t>(i) * 10000000000LL - 7); break;
    case DType::kUInt8: put(static_cast<uint8_t>(i * 7 % 256)); break;
    case DType::kBool: put(static_cast<uint8_t>(i % 3 == 0)); break;
    case DType::kString: break;
  }
  return e;
}

const DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                         DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                         DType::kUInt8,   DType::kBool};
const std::vector<std::vector<int64_t>> kShapes = {{}, {5}, {2, 3}, {2, 1, 4}, {2, 3, 1, 2}};

std::string tensorName(DType d, size_t rank) {
  return std::string("t_") + dtypeName(d) + "_rank" + std::to_string(rank);
}

TEST(RoundTrip, EveryDtypeAndRankReadsBack) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [{"name": "all"}]})"), testing::hookOptions(dir.path()));
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(hook.beginStep(Mode::kTrain));
      for (DType d : kDTypes) {
        for (size_t r = 0; r < kShapes.size(); ++r) {
          std::string buf;
          for (size_t i = 0; i < numelOf(kShapes[r]); ++i) buf += element(d, i + step).bytes;
          ASSERT_TRUE(hook.saveTensor(tensorName(d, r), d, kShapes[r], buf.data()));
        }
      }
      hook.endStep();
    }
    hook.close(true);
    EXPECT_EQ(hook.firstError(), "");
  }
  Trial trial(dir.path());
  EXPECT_TRUE(trial.problems().empty());
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(trial.steps(Mode::kTrain), (std::vector<int64_t>{0, 1}));
  for (DType d : kDTypes) {
    for (size_t r = 0; r < kShapes.size(); ++r) {
      const std::string name = tensorName(d, r);
      ASSERT_TRUE(trial.hasTensor(name)) << name;
      for (int step = 0; step < 2; ++step) {
        const TensorData t = trial.tensor(name).value(step);
        EXPECT_EQ(t.dtype, storedDType(d)) << name;  // bf16 -> f32, int8/16 -> int32
        EXPECT_EQ(t.shape, kShapes[r]) << name;
        const auto values = t.toDoubles();
        ASSERT_EQ(values.size(), numelOf(kShapes[r])) << name;
        for (size_t i = 0; i < values.size(); ++i)
          EXPECT_EQ(values[i], element(d, i + step).value) << name << "[" << i << "] step " << step;
      }
    }
  }
}

TEST(RoundTrip, StoredReductionsEqualAReferenceAndReplaceTheRawTensor) {
  TempDir dir;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> w(3 * 4);
  for (float& x : w) x = normal(rng);
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [{"name": "weights",
        "reductions": ["min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2",
                       "abs_min", "abs_max", "abs_mean", "abs_std", "abs_variance", "abs_sum",
                       "abs_prod", "abs_l1", "abs_l2"]}]})"),
              testing::hookOptions(dir.path()));
    hook.beginStep(Mode::kTrain);
    ASSERT_TRUE(hook.saveTensor("Net_fc1.weight", DType::kFloat32, {3, 4}, w.data()));
    hook.close(true);
  }
  Trial trial(dir.path());
  const TrialTensor& t = trial.tensor("Net_fc1.weight");
  EXPECT_FALSE(t.hasValue(0));  // save_raw_tensor defaults to false with reductions
  EXPECT_EQ(t.storedReductions(0).size(), 18u);
  for (bool abs : {false, true}) {
    std::vector<long double> v;
    for (float x : w) v.push_back(abs ? std::fabs(x) : x);
    long double sum = 0, prod = 1, sq = 0, l1 = 0, mn = v[0], mx = v[0];
    for (long double x : v) {
      sum += x, prod *= x, sq += x * x, l1 += std::fabs(x);
      mn = std::min(mn, x), mx = std::max(mx, x);
    }
    const long double mean = sum / v.size();
    long double dev = 0;
    for (long double x : v) dev += (x - mean) * (x - mean);
    const long double var = dev / v.size();
    const std::pair<ReductionOp, long double> expected[] = {
        {ReductionOp::kMin, mn},          {ReductionOp::kMax, mx},  {ReductionOp::kMean, mean},
        {ReductionOp::kStd, std::sqrt(var)}, {ReductionOp::kVariance, var}, {ReductionOp::kSum, sum},
        {ReductionOp::kProd, prod},       {ReductionOp::kL1, l1},   {ReductionOp::kL2, std::sqrt(sq)}};
    for (const auto& [op, want] : expected)
      EXPECT_NEAR(t.reductionValue(0, op, abs), static_cast<double>(want), 1e-9 * (1 + std::fabs(static_cast<double>(want))))
          << (abs ? "abs_" : "") << reductionOpName(op);
  }
  EXPECT_TRUE(trial.tensorNames().size() == 1u);  // reductions fold into their tensor
}

TEST(RoundTrip, ReductionFromRawWhenNotStored) {
  TempDir dir;
  const double x[4] = {3, -4, 0, 0};
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [{"name": "all"}]})"), testing::hookOptions(dir.path()));
    hook.beginStep(Mode::kTrain);
    hook.saveTensor("x", DType::kFloat64, {2, 2}, x);
    hook.close(true);
  }
  Trial trial(dir.path());
  EXPECT_DOUBLE_EQ(trial.tensor("x").reductionValue(0, ReductionOp::kL2), 5.0);
  EXPECT_DOUBLE_EQ(trial.tensor("x").reductionValue(0, ReductionOp::kVariance), 6.1875);  // mean -0.25, ddof 0
  EXPECT_DOUBLE_EQ(trial.tensor("x").reductionValue(0, ReductionOp::kMean, true), 1.75);
}

TEST(RoundTrip, ScalarsJoinTheirStepAndTensorboard) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"collections": [{"name": "losses", "save_interval": 2}]})"), testing::hookOptions(dir.path()));
    const float loss = 0.75f;
    for (int s = 0; s < 3; ++s) {
      hook.beginStep(Mode::kTrain);
      hook.saveTensor("CrossEntropyLoss_output_0", DType::kFloat32, {}, &loss);
      hook.endStep();
      hook.saveScalar("accuracy", 0.5 + s);  // after the step: still in it
    }
    hook.beginStep(Mode::kEval);
    hook.saveScalar("val_loss", 1.25);
    hook.close(true);
  }
  Trial trial(dir.path());
  EXPECT_EQ(trial.tensor("CrossEntropyLoss_output_0").steps(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(trial.tensor("scalar/accuracy").steps(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(trial.tensor("scalar/accuracy").value(1).scalar(), 1.5);
  EXPECT_EQ(trial.tensor("scalar/accuracy").value(1).shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(trial.tensor("scalar/val_loss").steps(Mode::kEval), (std::vector<int64_t>{0}));
  EXPECT_EQ(trial.tensorNames("losses"), (std::vector<std::string>{"CrossEntropyLoss_output_0"}));
  EXPECT_EQ(trial.steps(Mode::kEval), (std::vector<int64_t>{0}));
  const auto tb = listFilesRecursive(dir.path() + "/tensorboard");
  ASSERT_EQ(tb.size(), 2u);
  EXPECT_EQ(tb[0].rfind("EVAL/worker_0/events.out.tfevents.", 0), 0u) << tb[0];
  EXPECT_EQ(tb[1].rfind("TRAIN/worker_0/events.out.tfevents.", 0), 0u) << tb[1];
}

}  // namespace
}  // namespace strata::debugger
