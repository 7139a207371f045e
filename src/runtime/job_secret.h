// Where the job secret comes from, and what a job without one does (docs/security.md).
//
// Sources, first found wins (the environment overrides the job file, as everywhere):
//   1. STRATA_JOB_SECRET        the secret itself
//   2. STRATA_JOB_SECRET_FILE   a file holding it
//   3. security.job_secret_file a file holding it (the job config)
// A secret file must be a regular file that neither group nor others may read or write
// (mode 0600 or stricter, as ssh demands of private keys); its content, trailing
// whitespace removed, is the secret.
//
// Without one:
//   mpirun launch      rank 0 draws a random 256-bit secret and MPI shares it (MPI's own
//                      launcher channel is trusted): authenticated, nothing to configure;
//   env launch (torchrun-style variables) whose store is on a loopback MASTER_ADDR: runs
//                      unauthenticated, rank 0 warns (only processes of this host can reach it);
//   env launch over a network address: refused with a ConfigError saying how to give a
//                      secret, unless security.allow_unauthenticated is true (then warned);
//   single process     nothing to authenticate.
// A demanding user expects a job reachable from the network to be closed to strangers by
// default, and a clear one-line fix when it is not configured; a job confined to one host
// runs without ceremony but says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/launch.h"

namespace strata::runtime {

enum class SecretOrigin { kNone, kEnvironment, kEnvFile, kConfigFile, kGenerated };
const char* secretOriginName(SecretOrigin origin);

// Pure: which source applies. `value` is the secret (kEnvironment) or the file's path.
struct SecretSource {
  SecretOrigin origin = SecretOrigin::kNone;
  std::string value;
  std::string setting;  // where it was named, for messages: "STRATA_JOB_SECRET_FILE"...
};
SecretSource chooseSecretSource(const std::string& envSecret, const std::string& envFile,
                                const std::optional<std::string>& configFile);

// Reads a secret file (see above). Throws ConfigError naming the path, the setting that
// named it and the fix: missing, not a regular file, readable or writable by group or
// others ("chmod 600 <path>"), or empty.
std::string readSecretFile(const std::string& path, const std::string& setting);

// The secret of this rank per the sources (reading the file when one applies); origin
// kNone and "" when none is configured. Throws ConfigError as readSecretFile does.
struct JobSecret {
  std::string secret;
  SecretOrigin origin = SecretOrigin::kNone;
};
JobSecret loadJobSecret(const std::optional<std::string>& configFile);

// Pure: what a job without a configured secret does.
enum class NoSecretAction {
  kNone,      // a single process: nothing to authenticate
  kGenerate,  // mpirun: rank 0 draws one, MPI shares it
  kWarn,      // runs unauthenticated, rank 0 warns
  kRefuse,    // ConfigError
};
NoSecretAction decideWithoutSecret(LaunchKind kind, bool storeOnLoopback, bool allowUnauthenticated);

// Pure, for mpirun launches (every rank tells whether it has a configured secret): "" when
// all or none have one, else the error naming which ranks have none.
std::string secretPresenceMismatch(const std::vector<bool>& hasSecret);

// Pure: whether a host name or address is a loopback one ("localhost", 127.x.y.z, ::1).
bool isLoopbackHost(const std::string& host);

}  // namespace strata::runtime
