#include "pipeline/heap_policy.h"

#include <gtest/gtest.h>

namespace strata::pipeline {
namespace {

TEST(HeapPolicy, KeepsFreedMemoryByDefault) {
  const HeapPolicy p = heapPolicyFor(/*keepFreed=*/true, /*userTunedMalloc=*/false);
  EXPECT_TRUE(p.apply);
  // Large weight-gradient temporaries (tens of MB) come from the heap, several stay mapped.
  EXPECT_EQ(p.mmapThresholdBytes, size_t{32} << 20);
  EXPECT_EQ(p.trimThresholdBytes, size_t{256} << 20);
  EXPECT_GE(p.trimThresholdBytes, 2 * p.mmapThresholdBytes);
}

TEST(HeapPolicy, OffWhenTheUserSaysSo) {
  const HeapPolicy p = heapPolicyFor(/*keepFreed=*/false, /*userTunedMalloc=*/false);
  EXPECT_FALSE(p.apply);
  EXPECT_NE(p.reason.find("STRATA_KEEP_FREED_MEMORY=0"), std::string::npos) << p.reason;
}

TEST(HeapPolicy, TheUsersMallocTunablesWin) {
  const HeapPolicy p = heapPolicyFor(/*keepFreed=*/true, /*userTunedMalloc=*/true);
  EXPECT_FALSE(p.apply);
  EXPECT_NE(p.reason.find("MALLOC_"), std::string::npos) << p.reason;
}

}  // namespace
}  // namespace strata::pipeline
