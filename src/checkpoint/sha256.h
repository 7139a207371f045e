// SHA-256 of byte streams (OpenSSL EVP), for the checksums in checkpoint manifests.
//
// Threading: one object per thread; the free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::checkpoint {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  // The digest as 64 lowercase hex digits. Call once; update() afterwards throws.
  std::string hexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256Hex(const void* data, size_t size);

// Streams the file through SHA-256: its hex digest, and its size in *bytes. Throws
// strata::Error naming the path when it cannot be read.
std::string sha256File(const std::string& path, uint64_t* bytes);

}  // namespace strata::checkpoint
