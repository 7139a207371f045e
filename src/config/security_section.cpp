// The "security" section: encryption between hosts and where the job secret comes from
// (docs/security.md). The secret itself never appears in the config (nor in its logs):
// only the path of a file holding it.
#include "config/sections.h"

namespace strata::config::detail {

SecurityConfig parseSecurity(const Validator& v, const Json& section, const std::string& path) {
  SecurityConfig sc;
  const ObjectReader r(v, section, path,
                       {"encrypt_inter_node_traffic", "job_secret_file", "allow_unauthenticated"});
  r.read("encrypt_inter_node_traffic", sc.encryptInterNodeTraffic);
  if (r.has("job_secret_file"))
    sc.jobSecretFile = v.expectString(r.at("job_secret_file"), r.pathOf("job_secret_file"));
  r.read("allow_unauthenticated", sc.allowUnauthenticated);
  return sc;
}

Json securityToJson(const SecurityConfig& security) {
  Json out = {{"encrypt_inter_node_traffic", security.encryptInterNodeTraffic},
              {"allow_unauthenticated", security.allowUnauthenticated}};
  if (security.jobSecretFile) out["job_secret_file"] = *security.jobSecretFile;
  return out;
}

}  // namespace strata::config::detail
