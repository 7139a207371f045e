// allreduce_bench: float32 in-place sum allreduce, side by side in one mpirun job:
//   strata  strata::world().allreduce (STRATA_ALLREDUCE_ALGO / STRATA_TRANSPORT / ... apply);
//           with --buffer shared on a Group::allocateShared buffer (the zero-copy path)
//   strata_private  the same on ordinary memory (with --buffer shared: the staged path beside it)
//   strata_rs  strata::world().reduceScatterShared in place on Strata's buffer: with --buffer
//           shared the zero-copy reduction without its push (each rank's shard only; its
//           busbw column uses the AllReduce's factor, so compare times), else an AllReduce
//   mpi     MPI_Allreduce(MPI_IN_PLACE) on MPI_COMM_WORLD
//   gloo    c10d::ProcessGroupGloo from libtorch, as torch.distributed "gloo" runs it
//   memcpy  each rank copies its S bytes to a private buffer, all ranks concurrently; its
//           column is S/t. A copy writes lines it has not read (with write-allocate stores
//           each costs a read too: 3 memory transfers per byte, 2 with glibc's non-temporal
//           stores for large copies), so it is not the bound of an in-place AllReduce
//   inplace each rank updates its S bytes in place (reads a line, writes it back), all ranks
//           concurrently; its column is S/t. The traffic of shm_direct (per byte each rank
//           reads 1 and writes 1, its writes to lines it has just read), so busbw/inplace <=
//           2(n-1)/n bounds that path: about 1 at n = 2 (docs/collectives.md)
// busbw = algbw * 2(n-1)/n. Usage: see bench/RESULTS.md or --help.
// MPI is initialised here (--mpi-thread, default single: Open MPI is 0.3 us slower per small
// call above that level) before strata::init, which then only bootstraps from it.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common.h"
#include "gloo_baseline.h"
#include "core/malloc_policy.h"
#include "strata/runtime.h"

namespace sb = strata::bench;

namespace {

float* gBuf = nullptr;  // the in-place buffer of every implementation (Strata: unless --buffer shared)
float* gDst = nullptr;  // memcpy destination
float gInplaceAddend = 0;  // inplace adds it (0): a value the compiler cannot fold away
float* gStrataBuf = nullptr;  // Strata's buffer: gBuf, or its shared buffer

std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

size_t gStrataCount = 0;  // the count of Strata's timed calls

sb::Impl strataImpl() {
  auto run = [](size_t count) {
    gStrataCount = count;
    strata::world().allreduce(gStrataBuf, gStrataBuf, count, strata::DType::kFloat32, strata::ReduceOp::kSum);
  };
  // The implementations' trials interleave, so the group's last call may have been
  // strata_private's: one more (untimed) call of the timed kind names the algorithm.
  return {"strata", false, run,
          [run](size_t count, uint32_t seed) { return sb::checkAllreduce(gStrataBuf, count, seed, [&] { run(count); }); },
          [run] {
            run(gStrataCount);
            return strata::world().lastAllreduceAlgorithm();
          }};
}

// "strata_private": Strata on ordinary memory (the staged algorithms), to run beside
// "strata" on its shared buffer (--buffer shared): the zero-copy path's gain in one run.
sb::Impl strataPrivateImpl() {
  auto run = [](size_t count) {
    strata::world().allreduce(gBuf, gBuf, count, strata::DType::kFloat32, strata::ReduceOp::kSum);
  };
  return {"strata_private", false, run,
          [run](size_t count, uint32_t seed) { return sb::checkAllreduce(gBuf, count, seed, [&] { run(count); }); },
          {}};
}

// "strata_rs": the sharded optimizer's gradient reduction (Group::reduceScatterShared), checked
// on this rank's shard, the part it promises to write.
sb::Impl strataReduceScatterSharedImpl() {
  auto run = [](size_t count) {
    strata::world().reduceScatterShared(gStrataBuf, gStrataBuf, count, strata::DType::kFloat32, strata::ReduceOp::kSum);
  };
  auto check = [run](size_t count, uint32_t seed) {
    const int rank = sb::mpiRank(), n = sb::mpiSize();
    for (size_t i = 0; i < count; ++i) gStrataBuf[i] = sb::seededValue(rank, i, seed);
    run(count);
    const strata::Group::ShardRange mine = strata::world().sharedShard(count, strata::DType::kFloat32);
    int64_t wrong = 0;
    for (size_t i = mine.offset; i < mine.offset + mine.count; ++i) {
      float expect = 0;
      for (int r = 0; r < n; ++r) expect += sb::seededValue(r, i, seed);
      wrong += gStrataBuf[i] != expect;
    }
    return wrong;
  };
  return {"strata_rs", false, run, check, {}};
}

sb::Impl mpiImpl() {
  auto run = [](size_t count) {
    MPI_Allreduce(MPI_IN_PLACE, gBuf, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  return {"mpi", false, run,
          [run](size_t count, uint32_t seed) { return sb::checkAllreduce(gBuf, count, seed, [&] { run(count); }); }, {}};
}

sb::Impl glooImpl(std::shared_ptr<sb::GlooBaseline> gloo) {
  auto run = [gloo](size_t count) { gloo->allreduce(gBuf, count); };
  return {"gloo", false, run,
          [run](size_t count, uint32_t seed) { return sb::checkAllreduce(gBuf, count, seed, [&] { run(count); }); }, {}};
}

sb::Impl memcpyImpl() {
  auto run = [](size_t count) { std::memcpy(gDst, gBuf, count * sizeof(float)); };
  auto check = [run](size_t count, uint32_t seed) {
    for (size_t i = 0; i < count; ++i) gBuf[i] = sb::seededValue(sb::mpiRank(), i, seed);
    run(count);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += gDst[i] != gBuf[i];
    return wrong;
  };
  return {"memcpy", true, run, check, {}};
}

// Adds `a` to every element in place, 64 bytes an iteration in 16-byte vectors (the default
// -O2 leaves a plain loop scalar, which would make the reference compute-bound, not
// memory-bound like the reduction kernels, which are vectorised). `data` is page aligned.
void addInPlace(float* data, size_t count, float a) {
  using V = float __attribute__((vector_size(16)));
  const V add = {a, a, a, a};
  V* v = reinterpret_cast<V*>(data);
  const size_t vectors = count / 4;
  size_t i = 0;
  for (; i + 4 <= vectors; i += 4) {
    v[i] += add;
    v[i + 1] += add;
    v[i + 2] += add;
    v[i + 3] += add;
  }
  for (; i < vectors; ++i) v[i] += add;
  for (size_t j = vectors * 4; j < count; ++j) data[j] += a;
}

sb::Impl inplaceImpl() {
  auto run = [](size_t count) { addInPlace(gDst, count, gInplaceAddend); };
  auto check = [run](size_t count, uint32_t seed) {
    for (size_t i = 0; i < count; ++i) gDst[i] = sb::seededValue(sb::mpiRank(), i, seed);
    run(count);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += gDst[i] != sb::seededValue(sb::mpiRank(), i, seed);
    return wrong;
  };
  return {"inplace", true, run, check, {}};
}

std::string mpiLibrary() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  return s.substr(0, s.find_first_of(",\n"));
}

int runMain(const sb::Options& opts) {
  const int n = sb::mpiSize();
  gBuf = static_cast<float*>(sb::allocPrefaulted(opts.maxBytes));
  gDst = static_cast<float*>(sb::allocPrefaulted(opts.maxBytes));
  std::shared_ptr<strata::SharedBuffer> shared;
  gStrataBuf = gBuf;
  if (opts.buffer == "shared") {
    shared = strata::world().allocateShared(opts.maxBytes);
    gStrataBuf = static_cast<float*>(shared->data());
  }

  sb::BenchSpec spec;
  spec.op = "allreduce";
  spec.busBwFactor = 2.0 * (n - 1) / n;
  spec.headerExtra = "local=" + std::to_string(strata::local_size()) + " hosts=" +
                     std::to_string(strata::num_nodes()) + " transport=" + envOr("STRATA_TRANSPORT", "auto") +
                     " algo=" + envOr("STRATA_ALLREDUCE_ALGO", "auto") + " buffer=" + opts.buffer;
  spec.noteName = "strata-algo";
  spec.ratioSizes = {64u << 10, 1u << 20, 16u << 20, 64u << 20, 256u << 20};
  spec.latencySize = 4u << 10;
  spec.initData = [](size_t count) {
    std::memset(gBuf, 0, count * sizeof(float));
    std::memset(gStrataBuf, 0, count * sizeof(float));
  };
  spec.headerNotes.push_back("strata: " + strata::world().describe() + " shm_slot_bytes=" +
                             envOr("STRATA_SHM_SLOT_BYTES", "default") + " chunk_bytes=" +
                             envOr("STRATA_CHUNK_BYTES", "default") + " direct_block_bytes=" +
                             envOr("STRATA_DIRECT_BLOCK_BYTES", "default") +
                             (shared ? " shared_buffer_peer_mapped=" + std::to_string(shared->peerMapped()) : ""));
  spec.headerNotes.push_back("mpi: " + mpiLibrary());

  std::vector<sb::Impl> impls;
  for (const std::string& name : opts.impls) {
    if (name == "strata") impls.push_back(strataImpl());
    else if (name == "strata_private") impls.push_back(strataPrivateImpl());
    else if (name == "strata_rs")
      impls.push_back(strataReduceScatterSharedImpl());
    else if (name == "mpi") impls.push_back(mpiImpl());
    else if (name == "memcpy") impls.push_back(memcpyImpl());
    else if (name == "inplace") impls.push_back(inplaceImpl());
    else if (name == "gloo") {
      auto gloo = std::make_shared<sb::GlooBaseline>(sb::mpiRank(), n, strata::num_nodes() > 1);
      spec.headerNotes.push_back(std::string("gloo: ") + gloo->describe());
      impls.push_back(glooImpl(gloo));
    } else {
      throw std::invalid_argument("unknown --impl " + name +
                                  " (strata, strata_private, strata_rs, mpi, gloo, memcpy, inplace)");
    }
  }
  const int64_t wrong = sb::runBenchmark(opts, spec, impls);
  impls.clear();  // drops the gloo process group before the runtime goes away
  std::free(gBuf);
  std::free(gDst);
  return wrong == 0 ? 0 : 2;
}

int mpiThreadLevel(const std::string& name) {
  if (name == "single") return MPI_THREAD_SINGLE;
  if (name == "serialized") return MPI_THREAD_SERIALIZED;
  if (name == "multiple") return MPI_THREAD_MULTIPLE;
  if (name == "funneled") return MPI_THREAD_FUNNELED;
  return MPI_THREAD_SINGLE;
}

}  // namespace

int main(int argc, char** argv) {
  sb::Options opts;
  try {
    opts = sb::parseOptions(argc, argv, {"strata", "mpi", "gloo", "memcpy", "inplace"});
  } catch (const std::logic_error& e) {  // bad flags (invalid_argument, out_of_range): every rank
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!r || std::string(r) == "0") std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
  try {  // before anything allocates a baseline's temporaries (bench/common.h, Options::malloc)
    // "keep" is the runtime's "retain" policy (core/malloc_policy.h), applied before MPI_Init
    // so that Open MPI's baseline gets it too; "default" leaves glibc's behaviour.
    if (opts.malloc == "keep") strata::applyMallocPolicy(strata::MallocPolicy::kRetain);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
  // MPI first, at the requested thread level: strata::init then finds it initialised
  // (it uses MPI only to bootstrap, on this thread) and leaves finalising to us.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, mpiThreadLevel(opts.mpiThread), &provided);
  strata::init(argc, argv);
  int rc = 0;
  try {
    rc = runMain(opts);
  } catch (const std::exception& e) {  // possibly on one rank only: do not leave peers waiting
    std::fprintf(stderr, "allreduce_bench rank %d: %s\n", sb::mpiRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  strata::finalize();
  MPI_Finalize();
  return rc;
}
