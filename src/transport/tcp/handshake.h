// The first bytes on a new transport connection (issue #17): who is calling, whether the
// pair uses TLS, and a challenge-response proving both ends hold the job secret without
// sending it (core/auth.h). The dialer is the lower rank.
//
//   dialer   -> acceptor  Hello      u32 magic "STRH" | u16 version 2 | u8 flags (1: the
//                                    dialer wants TLS) | u8 0 | i32 fromRank | i32 toRank |
//                                    nonce Nd                                      (48 B, plain)
//   acceptor -> dialer    Status     u8 kAccepted (go on), kWrongRank or kTlsMismatch (plain)
//   [both: the TLS handshake (tls.h) when the pair uses TLS; everything below inside it]
//   acceptor -> dialer    Challenge  nonce Na | prove(Kt, "tcp-acceptor", from, to, Nd, Na)
//   dialer   -> acceptor  Proof      prove(Kt, "tcp-dialer", from, to, Nd, Na); a dialer that
//                                    finds the acceptor's proof wrong closes instead
//   acceptor -> dialer    Verdict    u8 kAccepted or kWrongSecret
//
// Kt = deriveKey(secret, kTransportAuth). The acceptor proves first, so a dialer never
// answers a stranger's challenge; the roles differ, so a reflected proof fails; both nonces
// are fresh, so a replayed one fails; the ranks are bound, so a proof for one pair is
// useless for another. transport.cpp orders the steps so that no rank waits on a later
// step of another (see there).
//
// Thread-safety: stateless free functions over one socket (and its TLS session).
#pragma once

#include <cstdint>
#include <string>

#include "core/auth.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tls.h"

namespace strata::transport::tcp {

struct Hello {
  int fromRank = -1;
  int toRank = -1;
  bool wantsTls = false;
  auth::Nonce nonce{};
};

enum class HelloStatus : uint8_t { kAccepted = 0, kWrongSecret = 1, kWrongRank = 2, kTlsMismatch = 3 };
const char* helloStatusText(HelloStatus status);

// The proof each side sends (pure; the roles and ranks are bound in).
auth::Mac acceptorProof(const auth::Key& key, const Hello& hello, const auth::Nonce& acceptorNonce);
auth::Mac dialerProof(const auth::Key& key, const Hello& hello, const auth::Nonce& acceptorNonce);

// Plain bytes, before any TLS.
IoStatus sendHello(int fd, const Hello& hello, Clock::time_point deadline, int* err);
// False (with *why) on a timeout, a closed socket or bytes that are not a Hello of ours.
bool recvHello(int fd, Hello* hello, Clock::time_point deadline, std::string* why);

// One status byte; inside `tls` when given.
IoStatus sendStatus(int fd, HelloStatus status, Clock::time_point deadline, int* err, TlsSession* tls = nullptr);
IoStatus recvStatus(int fd, HelloStatus* status, Clock::time_point deadline, int* err, TlsSession* tls = nullptr);

// Raw bytes of the challenge-response; inside `tls` when given.
IoStatus sendBytes(int fd, TlsSession* tls, const void* data, size_t numBytes, Clock::time_point deadline,
                   int* err);
IoStatus recvBytes(int fd, TlsSession* tls, void* data, size_t numBytes, Clock::time_point deadline, int* err);

// Pure: whether a connection between two ranks uses TLS. Only ranks of different hosts
// (`host`: the runtime's host identity, pretend hosts of STRATA_HOSTS included) encrypt;
// ranks of one host talk plain.
bool pairUsesTls(bool encryptInterHost, const std::string& selfHost, const std::string& peerHost);

}  // namespace strata::transport::tcp
