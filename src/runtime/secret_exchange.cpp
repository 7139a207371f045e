#include "runtime/secret_exchange.h"

#include <cstring>

#include "core/errors.h"
#include "core/hex.h"

namespace strata::runtime {

std::string encodeOffer(const SecretOffer& offer) {
  return std::string(offer.hasSecret ? "1" : "0") + (offer.encryptInterHost ? "1" : "0") + ":" +
         toHex(offer.publicKey);
}

SecretOffer decodeOffer(const std::string& text, int rank) {
  const auto key = text.size() == 3 + 2 * auth::kX25519Bytes && text[2] == ':'
                       ? fromHex(std::string_view(text).substr(3))
                       : std::nullopt;
  STRATA_CHECK(key && (text[0] == '0' || text[0] == '1') && (text[1] == '0' || text[1] == '1'),
               "rank ", rank, " sent a malformed secret-exchange offer over MPI (", text.size(),
               " bytes): are all ranks the same Strata version?");
  SecretOffer offer;
  offer.hasSecret = text[0] == '1';
  offer.encryptInterHost = text[1] == '1';
  std::memcpy(offer.publicKey.data(), key->data(), offer.publicKey.size());
  return offer;
}

std::string sealForRanks(const auth::EphemeralKey& rank0, const std::vector<SecretOffer>& offers,
                         const std::string& secret) {
  std::string out;
  for (size_t r = 1; r < offers.size(); ++r)
    out += "," + toHex(auth::sealSecret(rank0, offers[r].publicKey, static_cast<int32_t>(r), secret));
  return out;  // entry r after the r-th comma; rank 0's (before the first) is empty
}

std::string openFromRank0(const auth::EphemeralKey& mine, const auth::X25519Public& rank0, int myRank,
                          const std::string& rank0Message) {
  size_t begin = 0;
  for (int r = 0; r < myRank && begin != std::string::npos; ++r) {
    begin = rank0Message.find(',', begin);
    if (begin != std::string::npos) ++begin;
  }
  STRATA_CHECK(begin != std::string::npos, "rank 0's secret-exchange message over MPI has no copy for rank ",
               myRank);
  const size_t end = rank0Message.find(',', begin);
  const auto sealed = fromHex(std::string_view(rank0Message).substr(begin, end == std::string::npos ? end : end - begin));
  STRATA_CHECK(sealed.has_value(), "rank 0's sealed job secret for rank ", myRank, " is not hexadecimal");
  return auth::openSecret(mine, rank0, myRank, *sealed);
}

}  // namespace strata::runtime
