// strata_job_key_probe KEYS_DIR: one rank of tests/multihost/secret_exchange.sh. After
// strata::init it writes the job secret in force and every key derived from it to
// KEYS_DIR/rank<R>.keys (a local file: printed, they would travel to mpirun over the network
// and spoil the capture the test searches for them; revealing them is the point here, the
// secret is a throw-away one drawn for this job), then runs one AllReduce over the world, so
// the store's and the transport's handshakes are in the capture too. Prints
//
//   allreduce ok|WRONG
//
// and the file holds one line:
//   job-key rank=R secret=<hex of the secret's bytes> store=<hex> tcp=<hex> tls=<hex>
//
// Exit codes: 0 the AllReduce was right; 1 it was not; strata::exit_code_for(e) on an error
// (78: a config error, such as a refused launch).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/hex.h"
#include "runtime/runtime_internal.h"
#include "strata/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: strata_job_key_probe KEYS_DIR\n");
    return 2;
  }
  try {
    strata::init(argc, argv);
    namespace auth = strata::auth;
    const std::string secret = strata::runtime::jobSecretForCaptureTest();
    std::ofstream(std::string(argv[1]) + "/rank" + std::to_string(strata::rank()) + ".keys")
        << "job-key rank=" << strata::rank() << " secret=" << strata::toHex(secret)
        << " store=" << strata::toHex(auth::deriveKey(secret, auth::KeyUse::kStoreAuth))
        << " tcp=" << strata::toHex(auth::deriveKey(secret, auth::KeyUse::kTransportAuth))
        << " tls=" << strata::toHex(auth::deriveKey(secret, auth::KeyUse::kTlsPsk)) << "\n";
    std::vector<float> x(4096, 1.0f);
    strata::world().allreduce(x.data(), x.data(), x.size(), strata::DType::kFloat32);
    bool ok = true;
    for (float v : x) ok = ok && v == static_cast<float>(strata::size());
    std::printf("allreduce %s\n", ok ? "ok" : "WRONG");
    std::fflush(stdout);
    strata::finalize();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return strata::exit_code_for(e);
  }
}
