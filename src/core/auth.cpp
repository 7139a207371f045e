#include "core/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

#include "core/errors.h"
#include "core/hex.h"

namespace strata::auth {
namespace {

// The transcript's fixed prefix (with its NUL): a later proof format gets a new label.
constexpr char kProofLabel[] = "strata proof v1";
// RFC 5869: at most 255 blocks of the hash's output.
constexpr size_t kMaxHkdfBytes = 255 * 32;

void putI32(std::vector<uint8_t>& out, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

struct KdfDeleter {
  void operator()(EVP_KDF* k) const { EVP_KDF_free(k); }
  void operator()(EVP_KDF_CTX* c) const { EVP_KDF_CTX_free(c); }
};

}  // namespace

const char* hkdfInfo(KeyUse use) {
  switch (use) {
    case KeyUse::kStoreAuth: return "strata store auth v1";
    case KeyUse::kTransportAuth: return "strata tcp auth v1";
    case KeyUse::kTlsPsk: return "strata tls psk v1";
  }
  return "?";
}

std::vector<uint8_t> hkdfSha256(std::string_view inputKey, std::string_view salt, std::string_view info,
                                size_t numBytes) {
  STRATA_CHECK(numBytes > 0 && numBytes <= kMaxHkdfBytes, "HKDF-SHA256 output of ", numBytes,
               " bytes is outside 1..", kMaxHkdfBytes);
  std::unique_ptr<EVP_KDF, KdfDeleter> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  STRATA_CHECK(kdf != nullptr, "OpenSSL has no HKDF implementation");
  std::unique_ptr<EVP_KDF_CTX, KdfDeleter> ctx(EVP_KDF_CTX_new(kdf.get()));
  STRATA_CHECK(ctx != nullptr, "EVP_KDF_CTX_new failed");
  // OpenSSL takes non-const pointers in OSSL_PARAM but does not write through them.
  char digest[] = "SHA256";
  std::string key(inputKey), saltCopy(salt), infoCopy(info);
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key.data(), key.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, saltCopy.data(), saltCopy.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, infoCopy.data(), infoCopy.size()),
      OSSL_PARAM_construct_end()};
  std::vector<uint8_t> out(numBytes);
  STRATA_CHECK(EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) == 1, "HKDF-SHA256 failed");
  OPENSSL_cleanse(key.data(), key.size());
  return out;
}

Key deriveKey(const std::string& secret, KeyUse use) {
  std::vector<uint8_t> bytes = hkdfSha256(secret, kHkdfSalt, hkdfInfo(use), kKeyBytes);
  Key key{};
  std::memcpy(key.data(), bytes.data(), kKeyBytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

std::vector<uint8_t> transcript(const ProofInput& input) {
  STRATA_CHECK(input.role.size() <= 255, "proof role of ", input.role.size(), " bytes exceeds 255");
  std::vector<uint8_t> out(kProofLabel, kProofLabel + sizeof(kProofLabel));
  out.push_back(static_cast<uint8_t>(input.role.size()));
  out.insert(out.end(), input.role.begin(), input.role.end());
  putI32(out, input.fromRank);
  putI32(out, input.toRank);
  out.insert(out.end(), input.nonceA.begin(), input.nonceA.end());
  out.insert(out.end(), input.nonceB.begin(), input.nonceB.end());
  return out;
}

Mac prove(const Key& key, const ProofInput& input) {
  const std::vector<uint8_t> message = transcript(input);
  Mac mac{};
  unsigned int length = 0;
  STRATA_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
                    mac.data(), &length) != nullptr &&
                   length == kMacBytes,
               "HMAC-SHA256 failed");
  return mac;
}

bool verify(const Key& key, const ProofInput& input, const Mac& mac) {
  const Mac expected = prove(key, input);
  return CRYPTO_memcmp(expected.data(), mac.data(), kMacBytes) == 0;
}

Nonce freshNonce() {
  Nonce nonce{};
  STRATA_CHECK(RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) == 1,
               "OpenSSL's random generator failed (RAND_bytes)");
  return nonce;
}

std::string generateSecret() {
  return toHex(freshNonce());
}

}  // namespace strata::auth
