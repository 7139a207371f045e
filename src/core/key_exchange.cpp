#include "core/key_exchange.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>

#include "core/auth.h"
#include "core/errors.h"

namespace strata::auth {
namespace {

// Wire contract (docs/security.md lists them): a later format gets new labels.
constexpr char kExchangeSalt[] = "strata secret exchange v1";
constexpr char kSealLabel[] = "seal v1";
constexpr size_t kAesKeyBytes = 32;
constexpr size_t kGcmNonceBytes = 12;

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyDeleter>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, PkeyDeleter>;

std::shared_ptr<EVP_PKEY> own(EVP_PKEY* key, const char* what) {
  STRATA_CHECK(key != nullptr, "OpenSSL could not ", what, " an X25519 key");
  return std::shared_ptr<EVP_PKEY>(key, PkeyDeleter{});
}

std::string asBytes(const void* data, size_t size) { return std::string(static_cast<const char*>(data), size); }

void putI32(std::string& out, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(u >> (8 * i)));
}

// The AES-256-GCM key for one sealed copy (see the header comment).
std::vector<uint8_t> sealKey(const SharedSecret& shared, int32_t toRank, const X25519Public& sender,
                             const X25519Public& recipient) {
  std::string info(kSealLabel, sizeof(kSealLabel));  // with its NUL, as the proofs' label
  putI32(info, toRank);
  info += asBytes(sender.data(), sender.size());
  info += asBytes(recipient.data(), recipient.size());
  std::string input = asBytes(shared.data(), shared.size());
  std::vector<uint8_t> key = hkdfSha256(input, kExchangeSalt, info, kAesKeyBytes);
  OPENSSL_cleanse(input.data(), input.size());
  return key;
}

std::string rankAad(int32_t rank) {
  std::string aad;
  putI32(aad, rank);
  return aad;
}

}  // namespace

EphemeralKey::EphemeralKey() : key_(own(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519"), "generate")) {
  size_t len = public_.size();
  STRATA_CHECK(EVP_PKEY_get_raw_public_key(key_.get(), public_.data(), &len) == 1 && len == public_.size(),
               "OpenSSL could not read an X25519 public key");
}

EphemeralKey::EphemeralKey(const X25519Private& privateKey)
    : key_(own(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, privateKey.data(), privateKey.size()),
               "import")) {
  size_t len = public_.size();
  STRATA_CHECK(EVP_PKEY_get_raw_public_key(key_.get(), public_.data(), &len) == 1 && len == public_.size(),
               "OpenSSL could not read an X25519 public key");
}

SharedSecret EphemeralKey::agree(const X25519Public& peer) const {
  auto peerKey = own(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer.data(), peer.size()), "import");
  PkeyCtx ctx(EVP_PKEY_CTX_new(key_.get(), nullptr));
  SharedSecret shared{};
  size_t len = shared.size();
  // OpenSSL refuses a low-order peer key (an all-zero result); checked again below.
  const bool ok = ctx && EVP_PKEY_derive_init(ctx.get()) == 1 && EVP_PKEY_derive_set_peer(ctx.get(), peerKey.get()) == 1 &&
                  EVP_PKEY_derive(ctx.get(), shared.data(), &len) == 1 && len == shared.size();
  const SharedSecret zero{};
  STRATA_CHECK(ok && CRYPTO_memcmp(shared.data(), zero.data(), zero.size()) != 0,
               "X25519 key agreement failed: the peer's public key is invalid (a low-order point?)");
  return shared;
}

std::vector<uint8_t> sealSecret(const EphemeralKey& sender, const X25519Public& recipient, int32_t toRank,
                                const std::string& secret) {
  SharedSecret shared = sender.agree(recipient);
  std::vector<uint8_t> key = sealKey(shared, toRank, sender.publicKey(), recipient);
  OPENSSL_cleanse(shared.data(), shared.size());
  const std::string aad = rankAad(toRank);
  const uint8_t nonce[kGcmNonceBytes] = {0};
  std::vector<uint8_t> out(secret.size() + kSealTagBytes);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int n = 0, tail = 0;
  const bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const uint8_t*>(aad.data()), static_cast<int>(aad.size())) == 1 &&
      EVP_EncryptUpdate(ctx.get(), out.data(), &n, reinterpret_cast<const uint8_t*>(secret.data()),
                        static_cast<int>(secret.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), out.data() + n, &tail) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kSealTagBytes, out.data() + secret.size()) == 1;
  OPENSSL_cleanse(key.data(), key.size());
  STRATA_CHECK(ok && static_cast<size_t>(n + tail) == secret.size(), "AES-256-GCM sealing failed");
  return out;
}

std::string openSecret(const EphemeralKey& recipient, const X25519Public& sender, int32_t myRank,
                       const std::vector<uint8_t>& sealed) {
  STRATA_CHECK(sealed.size() >= kSealTagBytes, "the sealed job secret for rank ", myRank, " is ", sealed.size(),
               " bytes, shorter than its tag");
  SharedSecret shared = recipient.agree(sender);
  std::vector<uint8_t> key = sealKey(shared, myRank, sender, recipient.publicKey());
  OPENSSL_cleanse(shared.data(), shared.size());
  const std::string aad = rankAad(myRank);
  const uint8_t nonce[kGcmNonceBytes] = {0};
  const size_t textBytes = sealed.size() - kSealTagBytes;
  std::string secret(textBytes, '\0');
  uint8_t tag[kSealTagBytes];
  std::memcpy(tag, sealed.data() + textBytes, kSealTagBytes);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int n = 0, tail = 0;
  const bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const uint8_t*>(aad.data()), static_cast<int>(aad.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<uint8_t*>(secret.data()), &n, sealed.data(),
                        static_cast<int>(textBytes)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kSealTagBytes, tag) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<uint8_t*>(secret.data()) + n, &tail) == 1;
  OPENSSL_cleanse(key.data(), key.size());
  if (!ok) {
    OPENSSL_cleanse(secret.data(), secret.size());
    STRATA_THROW(Error, "the job secret sealed for rank ", myRank,
                 " does not open: it was sealed for another rank or key, or altered on the way");
  }
  return secret;
}

}  // namespace strata::auth
