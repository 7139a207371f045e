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
//   mpirun launch      rank 0 draws a random 256-bit secret and delivers it to every rank by an
//                      X25519 exchange over MPI (secret_exchange.h): never in clear, nothing to
//                      configure; but with encrypt_inter_node_traffic across several hosts the
//                      job is refused (an unauthenticated exchange cannot stop an active
//                      attacker, which is what TLS is for): give it a secret;
//   env launch (torchrun-style variables): refused with a ConfigError naming the ways to give
//                      a secret, loopback MASTER_ADDR included (any local user could join),
//                      unless security.allow_unauthenticated is true (then warned);
//   single process     nothing to authenticate.
// A demanding user expects a job to be closed to strangers by default, and a clear one-line
// fix when it is not configured.
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
  kExchange,  // mpirun: rank 0 draws one, an X25519 exchange over MPI delivers it
  kWarn,      // runs unauthenticated (security.allow_unauthenticated), rank 0 warns
  kRefuse,    // ConfigError (noSecretRefusal)
};
struct NoSecretSituation {
  LaunchKind kind = LaunchKind::kSingle;
  bool severalHosts = false;      // mpirun: the ranks' host names differ (known before the secret)
  bool encryptInterHost = false;  // any rank asks for encrypt_inter_node_traffic
  bool allowUnauthenticated = false;
};
NoSecretAction decideWithoutSecret(const NoSecretSituation& situation);
// The ConfigError text of a refusal: why, and every way to give the job a secret.
// `masterAddr` is the env launch's store address.
std::string noSecretRefusal(const NoSecretSituation& situation, const std::string& masterAddr);

// Pure: an upper estimate of a secret's entropy in bits, from its length and the smallest
// character set that holds it (hex digits of one case 16, digits 10, else the sum of the
// classes present: lower 26, upper 26, digits 10, other printable ASCII 33; any other byte
// 256). `openssl rand -hex 32` gives 256; a passphrase of words has far less than its
// estimate, so a secret below kMinSecretBits is surely weak, not the converse.
double secretStrengthBits(const std::string& secret);
constexpr double kMinSecretBits = 128;
// The warning for a configured secret below kMinSecretBits, "" when it is not.
std::string weakSecretWarning(const std::string& secret, SecretOrigin origin);

// Pure, for mpirun launches (every rank tells whether it has a configured secret): "" when
// all or none have one, else the error naming which ranks have none.
std::string secretPresenceMismatch(const std::vector<bool>& hasSecret);

// Pure: whether a host name or address is a loopback one ("localhost", 127.x.y.z, ::1).
bool isLoopbackHost(const std::string& host);

}  // namespace strata::runtime
