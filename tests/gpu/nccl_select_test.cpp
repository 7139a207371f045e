// Pure parts of the NCCL path (transport/nccl/nccl_select.h): backend selection,
// device assignment and the DType / ReduceOp mapping. No GPU, no threads.
#include "transport/nccl/nccl_select.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"

namespace strata::nccl {
namespace {

SelectInput cpuJob(int numHosts, int maxRanksPerHost, std::string forced = "auto") {
  SelectInput in;
  in.tensorOnCuda = false;
  in.ncclCompiled = true;
  in.cudaDevices = 8;
  in.numHosts = numHosts;
  in.allRanksOnOneHost = numHosts == 1;
  in.maxRanksPerHost = maxRanksPerHost;
  in.forcedTransport = std::move(forced);
  return in;
}

SelectInput cudaJob(int numHosts, int maxRanksPerHost, bool ncclCompiled, int cudaDevices,
                    std::string forced = "auto") {
  SelectInput in = cpuJob(numHosts, maxRanksPerHost, std::move(forced));
  in.tensorOnCuda = true;
  in.ncclCompiled = ncclCompiled;
  in.cudaDevices = cudaDevices;
  return in;
}

struct SelectCase {
  const char* name;
  SelectInput input;
  Backend expected;       // when errorPart is empty
  const char* errorPart;  // non-empty: selection fails with a message containing it
};

std::vector<SelectCase> selectCases() {
  SelectInput inconsistent = cpuJob(2, 1);
  inconsistent.allRanksOnOneHost = true;
  return {
      // CPU tensors.
      {"cpu_one_host", cpuJob(1, 4), Backend::kShm, ""},
      {"cpu_one_host_one_rank", cpuJob(1, 1), Backend::kShm, ""},
      {"cpu_forced_tcp", cpuJob(1, 4, "tcp"), Backend::kTcp, ""},
      {"cpu_forced_shm", cpuJob(1, 4, "shm"), Backend::kShm, ""},
      {"cpu_hosts_with_local_ranks", cpuJob(2, 4), Backend::kHierarchical, ""},
      {"cpu_one_rank_per_host", cpuJob(3, 1), Backend::kTcp, ""},
      {"cpu_forced_tcp_many_hosts", cpuJob(2, 4, "tcp"), Backend::kTcp, ""},
      {"cpu_forced_shm_many_hosts", cpuJob(2, 4, "shm"), Backend::kShm,
       "needs all ranks on one host"},
      {"cpu_forced_nccl", cpuJob(1, 2, "nccl"), Backend::kShm, "carries only CUDA tensors"},
      // CUDA tensors.
      {"cuda_nccl", cudaJob(1, 4, true, 4), Backend::kNccl, ""},
      {"cuda_forced_nccl", cudaJob(1, 2, true, 2, "nccl"), Backend::kNccl, ""},
      {"cuda_many_hosts", cudaJob(2, 8, true, 8), Backend::kNccl, ""},
      {"cuda_not_compiled", cudaJob(1, 1, false, 1), Backend::kNccl, "built without NCCL"},
      {"cuda_no_device", cudaJob(1, 1, true, 0), Backend::kNccl, "no CUDA device is visible"},
      {"cuda_forced_tcp", cudaJob(1, 1, true, 1, "tcp"), Backend::kNccl,
       "cannot carry CUDA tensors"},
      {"cuda_forced_shm", cudaJob(1, 1, true, 1, "shm"), Backend::kNccl,
       "cannot carry CUDA tensors"},
      {"cuda_more_ranks_than_devices", cudaJob(1, 4, true, 2), Backend::kNccl,
       "one CUDA device per rank"},
      // Invalid input.
      {"unknown_transport", cpuJob(1, 1, "infiniband"), Backend::kShm, "\"infiniband\""},
      {"inconsistent_hosts", inconsistent, Backend::kShm, "inconsistent topology"},
      {"zero_hosts", cpuJob(0, 1), Backend::kShm, "numHosts=0"},
      {"zero_ranks_per_host", cpuJob(1, 0), Backend::kShm, "maxRanksPerHost=0"},
  };
}

class SelectBackendTest : public testing::TestWithParam<SelectCase> {};

TEST_P(SelectBackendTest, Table) {
  const SelectCase& c = GetParam();
  const Selection s = selectBackend(c.input);
  if (std::string(c.errorPart).empty()) {
    ASSERT_TRUE(s.ok()) << s.error;
    EXPECT_EQ(s.backend, c.expected)
        << "got " << backendName(s.backend) << ", expected " << backendName(c.expected);
  } else {
    ASSERT_FALSE(s.ok()) << "selected " << backendName(s.backend);
    EXPECT_NE(s.error.find(c.errorPart), std::string::npos) << s.error;
  }
}

INSTANTIATE_TEST_SUITE_P(NcclSelect, SelectBackendTest, testing::ValuesIn(selectCases()),
                         [](const testing::TestParamInfo<SelectCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(NcclSelect, ErrorsEchoTheirInputs) {
  EXPECT_NE(selectBackend(cudaJob(1, 1, true, 0)).error.find("cudaDevices=0"), std::string::npos);
  const Selection tooMany = selectBackend(cudaJob(1, 4, true, 2));
  EXPECT_NE(tooMany.error.find("runs 4 ranks"), std::string::npos) << tooMany.error;
  EXPECT_NE(tooMany.error.find("sees 2 device"), std::string::npos) << tooMany.error;
  const Selection shm = selectBackend(cpuJob(3, 2, "shm"));
  EXPECT_NE(shm.error.find("spans 3 hosts"), std::string::npos) << shm.error;
}

TEST(NcclSelect, BackendNames) {
  EXPECT_STREQ(backendName(Backend::kShm), "shm");
  EXPECT_STREQ(backendName(Backend::kTcp), "tcp");
  EXPECT_STREQ(backendName(Backend::kHierarchical), "hierarchical");
  EXPECT_STREQ(backendName(Backend::kNccl), "nccl");
}

TEST(NcclSelect, DeviceForLocalRankIsRoundRobin) {
  EXPECT_EQ(deviceForLocalRank(0, 4), 0);
  EXPECT_EQ(deviceForLocalRank(3, 4), 3);
  EXPECT_EQ(deviceForLocalRank(5, 4), 1);
  EXPECT_EQ(deviceForLocalRank(7, 1), 0);
  for (int localRank = 0; localRank < 16; ++localRank) {
    EXPECT_EQ(deviceForLocalRank(localRank, 8), localRank % 8);
  }
}

TEST(NcclSelect, DeviceForLocalRankRejectsNoDeviceAndNegativeRank) {
  EXPECT_THROW(deviceForLocalRank(0, 0), BackendError);
  EXPECT_THROW(deviceForLocalRank(2, -1), BackendError);
  EXPECT_THROW(deviceForLocalRank(-1, 2), Error);
  try {
    deviceForLocalRank(3, 0);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaDevices=0"), std::string::npos) << e.what();
  }
}

// One row of a Strata-to-NCCL enum mapping: the enumerator expected, and its number in nccl.h.
template <typename From, typename To>
struct MappingRow {
  From from;
  To expected;
  int ncclValue;
};

// Every row maps as expected, and a value outside the enum (200) is an Error.
template <typename From, typename To, size_t N>
void expectMapping(const MappingRow<From, To> (&rows)[N], To (*map)(From), const char* (*name)(From)) {
  for (const auto& row : rows) {
    EXPECT_EQ(map(row.from), row.expected) << name(row.from);
    EXPECT_EQ(static_cast<int>(map(row.from)), row.ncclValue) << name(row.from);
  }
  EXPECT_THROW(map(static_cast<From>(200)), Error);
}

// The values are NCCL's (nccl.h); nccl_comm.cpp static_asserts the same table.
TEST(NcclSelect, DTypeMapping) {
  const MappingRow<DType, NcclDataType> rows[] = {
      {DType::kFloat32, NcclDataType::kFloat32, 7}, {DType::kFloat64, NcclDataType::kFloat64, 8},
      {DType::kFloat16, NcclDataType::kFloat16, 6}, {DType::kBFloat16, NcclDataType::kBfloat16, 9},
      {DType::kInt32, NcclDataType::kInt32, 2},     {DType::kInt64, NcclDataType::kInt64, 4},
      {DType::kUInt8, NcclDataType::kUint8, 1},
  };
  expectMapping(rows, &toNcclDataType, &dtypeName);
}

TEST(NcclSelect, ReduceOpMapping) {
  const MappingRow<ReduceOp, NcclRedOp> rows[] = {
      {ReduceOp::kSum, NcclRedOp::kSum, 0}, {ReduceOp::kProd, NcclRedOp::kProd, 1},
      {ReduceOp::kMax, NcclRedOp::kMax, 2}, {ReduceOp::kMin, NcclRedOp::kMin, 3},
      {ReduceOp::kAvg, NcclRedOp::kAvg, 4},
  };
  expectMapping(rows, &toNcclRedOp, &reduceOpName);
}

}  // namespace
}  // namespace strata::nccl
