#include "checkpoint/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "core/hex.h"

namespace strata::checkpoint {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool finished = false;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  STRATA_CHECK(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1,
               "SHA-256: OpenSSL could not initialise a digest context");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(const void* data, size_t size) {
  STRATA_CHECK(!ctx_->finished, "SHA-256: update after hexDigest");
  if (size > 0) EVP_DigestUpdate(ctx_->md, data, size);
}

std::string Sha256::hexDigest() {
  STRATA_CHECK(!ctx_->finished, "SHA-256: hexDigest called twice");
  ctx_->finished = true;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx_->md, digest, &length);
  return toHex(digest, length);
}

std::string sha256Hex(const void* data, size_t size) {
  Sha256 sha;
  sha.update(data, size);
  return sha.hexDigest();
}

std::string sha256File(const std::string& path, uint64_t* bytes) {
  // Large reads: checkpoint shards are hundreds of MB, and the digest runs at ~1-2 GB/s.
  constexpr size_t kReadBytes = size_t{4} << 20;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  STRATA_CHECK(f != nullptr, "cannot open ", path, ": ", std::strerror(errno));
  std::vector<char> buffer(kReadBytes);
  Sha256 sha;
  uint64_t total = 0;
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) {
    sha.update(buffer.data(), n);
    total += n;
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  STRATA_CHECK(!failed, "reading ", path, " failed");
  if (bytes) *bytes = total;
  return sha.hexDigest();
}

}  // namespace strata::checkpoint
