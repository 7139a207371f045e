// SHA-256 over a stream of bytes (OpenSSL), printed as lowercase hex: the examples' final
// params_sha256, by which runs in different layouts are compared bitwise.
#pragma once

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <string>

namespace examples {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void add(const void* data, size_t numBytes) { EVP_DigestUpdate(ctx_.get(), data, numBytes); }
  void add(const std::string& text) { add(text.data(), text.size()); }
  // The digest of everything added; call once.
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &length);
    std::string out;
    char byte[3];
    for (unsigned int i = 0; i < length; ++i) {
      std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
      out += byte;
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

}  // namespace examples
