// TcpTransport: rendezvous through the store, one socket per peer pair, and one I/O
// progress thread (IoLoop) for all connections.
//
// connect() of rank r, bounded as a whole by opts.timeout, in steps (handshake.h has the
// messages):
//   A. listen on a fresh port (one per connect() call, so concurrent groups never receive
//      each other's connections), publish "tcp/addr/<r>" = host:port, dial every peer of
//      higher rank and send our Hello; the peer's kernel completes the TCP handshake from
//      its listen backlog, so dialing never waits for its accept();
//   B. accept every peer of lower rank: read its Hello, check rank and encryption setting,
//      answer the status, run the TLS server handshake when the pair uses TLS, and send our
//      challenge with our proof;
//   C. for each dialed peer in rank order: read its status, run the TLS client handshake
//      when the pair uses TLS, check its proof, send ours;
//   D. read each accepted peer's proof and answer the verdict; a peer that fails is
//      refused and logged, and its rank is accepted again (back to B for it);
//   E. read the verdict of each dialed peer.
// A waits on nothing; B on A of lower ranks (the Hello) and, with TLS, on their C; C on B
// of higher ranks; D on C of lower ranks; E on D of higher ranks. The only step that waits
// on a later step of another rank is B with TLS, and that chain ends at rank 0, which
// accepts no one: connect() cannot deadlock.
//
// Address peers connect to: $STRATA_TCP_IFADDR, else opts.advertiseHost, else a specific
// opts.bindHost, else the hostname's IPv4 address, else 127.0.0.1. We listen on
// opts.bindHost (empty: 0.0.0.0).
//
// Threading contract: connect() calls on one transport are serialised; concurrent calls
// wait their turn. The store must give every group its own namespace (PrefixStore).
// Destroying the transport stops the I/O thread and closes every socket: pending and
// later ops on its connections fail with NetworkError, and peers see the connections close.
#include "transport/transport.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "bootstrap/store.h"
#include "core/auth.h"
#include "core/errors.h"
#include "core/logging.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/io_loop.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tls.h"

namespace strata::transport {
namespace tcp {
namespace {

using std::chrono::milliseconds;

// A silent incoming connection may hold up the accept loop at most this long.
constexpr milliseconds kHandshakeTimeout{10000};
constexpr size_t kChallengeBytes = auth::kNonceBytes + auth::kMacBytes;

std::string addressKey(int rank) { return "tcp/addr/" + std::to_string(rank); }

milliseconds remaining(Clock::time_point deadline) { return milliseconds(remainingMs(deadline)); }

std::string rankList(const std::map<int, size_t>& ranks) {
  std::string text;
  for (const auto& entry : ranks) text += (text.empty() ? "" : ",") + std::to_string(entry.first);
  return text;
}

std::string ioText(IoStatus io, int err) { return std::string(ioStatusText(io)) + (err != 0 ? " " + errnoText(err) : ""); }

// A connected socket and, with TLS, its session.
struct Endpoint {
  Fd fd;
  std::unique_ptr<TlsSession> tls;
};

// A connection we dialed (steps A, C, E).
struct Dialed {
  Endpoint end;
  Hello hello;
  size_t index = 0;     // in `peers`
  std::string address;  // the peer's published host:port
};

// An accepted connection that passed step B (then D).
struct Candidate {
  Endpoint end;
  Hello hello;
  auth::Nonce nonce{};  // our challenge
  std::string from;     // the peer's address
};

const char* const kSecretHint =
    "every rank needs the same job secret (STRATA_JOB_SECRET, STRATA_JOB_SECRET_FILE or security.job_secret_file)";

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TransportOptions opts)
      : opts_(std::move(opts)), key_(auth::deriveKey(opts_.jobSecret, auth::KeyUse::kTransportAuth)) {
    checkTlsOptions(opts_.encryptInterHost, opts_.jobSecret);
  }

  ~TcpTransport() override {
    try {
      if (loop_) loop_->stop();
    } catch (const std::exception& e) {
      STRATA_LOG(kError, kNet, "tcp transport shutdown: ", e.what());
    }
  }

  std::string_view name() const override { return "tcp"; }

  std::vector<std::unique_ptr<Connection>> connect(bootstrap::Store& store, const PeerInfo& self,
                                                   const std::vector<PeerInfo>& peers) override {
    std::lock_guard<std::mutex> lock(mu_);
    checkPeers(self, peers);
    const auto deadline = Clock::now() + opts_.timeout;
    if (!loop_) loop_ = std::make_shared<IoLoop>(self.rank, static_cast<int>(peers.size()) + 1);
    refusals_.clear();

    Fd listener = listenOn(opts_.bindHost);
    const std::string address = formatHostPort(advertiseHost(), localPort(listener.get()));
    bootstrap::setString(store, addressKey(self.rank), address);
    STRATA_LOG(kInfo, kNet, "tcp rank ", self.rank, " listening at ", address, " for ", peers.size(), " peers");

    std::vector<Dialed> dialed;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (peers[i].rank > self.rank) dialed.push_back(dial(store, self, peers[i], i, deadline));  // A
    }
    // Step C visits the acceptors in ascending rank (the deadlock argument above needs it).
    std::sort(dialed.begin(), dialed.end(),
              [&](const Dialed& a, const Dialed& b) { return peers[a.index].rank < peers[b.index].rank; });
    std::map<int, size_t> waiting;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (peers[i].rank < self.rank) waiting[peers[i].rank] = i;
    }
    std::vector<Endpoint> ends(peers.size());
    auto candidates = acceptCandidates(listener.get(), address, self, peers, waiting, deadline);  // B
    for (Dialed& d : dialed) proveToAcceptor(d, peers[d.index].rank, deadline);                 // C
    for (;;) {
      for (Candidate& c : candidates) {  // D
        if (!finishCandidate(c, deadline)) continue;
        ends[waiting.at(c.hello.fromRank)] = std::move(c.end);
        waiting.erase(c.hello.fromRank);
      }
      if (waiting.empty()) break;
      candidates = acceptCandidates(listener.get(), address, self, peers, waiting, deadline);  // B again
    }
    for (Dialed& d : dialed) {  // E
      awaitVerdict(d, peers[d.index].rank, deadline);
      ends[d.index] = std::move(d.end);
    }
    return wrap(std::move(ends), peers);
  }

 private:
  static void checkPeers(const PeerInfo& self, const std::vector<PeerInfo>& peers) {
    std::set<int> seen;
    for (const PeerInfo& peer : peers) {
      STRATA_CHECK(peer.rank >= 0 && peer.rank != self.rank && seen.insert(peer.rank).second,
                   "tcp connect: invalid peer rank ", peer.rank, " for self rank ", self.rank,
                   " (negative, self or duplicate)");
    }
  }

  // STRATA_TCP_IFADDR, else opts.advertiseHost, else a specific bindHost, else the
  // hostname's address, else 127.0.0.1.
  std::string advertiseHost() const {
    const char* env = std::getenv("STRATA_TCP_IFADDR");
    if (env != nullptr && *env != '\0') return env;
    if (!opts_.advertiseHost.empty()) return opts_.advertiseHost;
    const std::string& bind = opts_.bindHost;
    if (!bind.empty() && bind != "0.0.0.0" && bind != "::") return bind;
    return hostnameAddress();
  }

  bool pairUsesTls(const PeerInfo& self, const PeerInfo& peer) const {
    return tcp::pairUsesTls(opts_.encryptInterHost, self.host, peer.host);
  }

  // Step A for one higher-ranked peer: read its address, connect, send our Hello.
  Dialed dial(bootstrap::Store& store, const PeerInfo& self, const PeerInfo& peer, size_t index,
              Clock::time_point deadline) {
    Dialed d;
    d.index = index;
    try {
      d.address = bootstrap::getString(store, addressKey(peer.rank), remaining(deadline));
    } catch (const TimeoutError&) {
      STRATA_THROW(TimeoutError, "tcp connect: rank ", peer.rank, " did not publish its address (store key \"",
                   addressKey(peer.rank), "\") within ", opts_.timeout.count(), " ms");
    }
    std::string host;
    uint16_t port = 0;
    STRATA_CHECK_NET(parseHostPort(d.address, &host, &port), "tcp connect: rank ", peer.rank,
                     " published a malformed address \"", d.address, "\"");
    d.end.fd = connectWithRetry(host, port, deadline, c10::str("tcp connect to rank ", peer.rank));
    d.hello = Hello{self.rank, peer.rank, pairUsesTls(self, peer), auth::freshNonce()};
    int err = 0;
    const IoStatus io = sendHello(d.end.fd.get(), d.hello, deadline, &err);
    STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: sending the handshake to rank ", peer.rank, " at ",
                     d.address, " failed: ", ioText(io, err));
    return d;
  }

  // Step B: accepts until every rank of `waiting` has one candidate connection that
  // passed the Hello (and TLS) and got our challenge. Others are refused and logged.
  std::vector<Candidate> acceptCandidates(int listenFd, const std::string& address, const PeerInfo& self,
                                          const std::vector<PeerInfo>& peers, const std::map<int, size_t>& waiting,
                                          Clock::time_point deadline) {
    std::map<int, Candidate> got;
    while (got.size() < waiting.size()) {
      Fd fd = acceptUntil(listenFd, deadline);
      if (!fd.valid()) {
        std::map<int, size_t> missing;
        for (const auto& w : waiting)
          if (got.count(w.first) == 0) missing.insert(w);
        STRATA_THROW(TimeoutError, "tcp connect: timed out after ", opts_.timeout.count(),
                     " ms waiting for rank(s) ", rankList(missing), " to connect to ", address,
                     refusals_.empty() ? std::string() : "; refused meanwhile: " + refusals_);
      }
      Candidate c;
      c.from = peerAddress(fd.get());
      c.end.fd = std::move(fd);
      if (!admit(c, self, peers, waiting, got, deadline)) continue;
      const int rank = c.hello.fromRank;
      got.emplace(rank, std::move(c));
    }
    std::vector<Candidate> out;
    for (auto& entry : got) out.push_back(std::move(entry.second));
    return out;
  }

  // Step B for one accepted connection; false (logged) when it is refused or fails.
  bool admit(Candidate& c, const PeerInfo& self, const std::vector<PeerInfo>& peers,
             const std::map<int, size_t>& waiting, const std::map<int, Candidate>& got, Clock::time_point deadline) {
    const int fd = c.end.fd.get();
    std::string why;
    if (!recvHello(fd, &c.hello, std::min(deadline, Clock::now() + kHandshakeTimeout), &why)) {
      refuse(c, "dropped", why);
      return false;
    }
    const Hello& h = c.hello;
    HelloStatus status = HelloStatus::kAccepted;
    bool tls = false;
    if (h.toRank != self.rank || waiting.count(h.fromRank) == 0 || got.count(h.fromRank) != 0) {
      status = HelloStatus::kWrongRank;
    } else {
      tls = pairUsesTls(self, peers[waiting.at(h.fromRank)]);
      if (tls != h.wantsTls) status = HelloStatus::kTlsMismatch;
    }
    int err = 0;
    const IoStatus io = sendStatus(fd, status, deadline, &err);
    if (status != HelloStatus::kAccepted || io != IoStatus::kOk) {
      refuse(c, "refused", status != HelloStatus::kAccepted ? helloStatusText(status) : ioText(io, err));
      return false;
    }
    if (tls) {
      c.end.tls = TlsSession::handshake(fd, true, opts_.jobSecret, deadline, &why);
      if (c.end.tls == nullptr) {
        refuse(c, "refused", why + " (" + kSecretHint + ")");
        return false;
      }
    }
    c.nonce = auth::freshNonce();
    const auth::Mac proof = acceptorProof(key_, h, c.nonce);
    uint8_t challenge[kChallengeBytes];
    std::copy(c.nonce.begin(), c.nonce.end(), challenge);
    std::copy(proof.begin(), proof.end(), challenge + auth::kNonceBytes);
    const IoStatus sent = sendBytes(fd, c.end.tls.get(), challenge, sizeof(challenge), deadline, &err);
    if (sent != IoStatus::kOk) {
      refuse(c, "dropped", "sending our challenge: " + ioText(sent, err));
      return false;
    }
    return true;
  }

  // Logs a refused or dropped connection and remembers it for the timeout message.
  void refuse(const Candidate& c, const char* what, const std::string& why) {
    const std::string who = c.hello.fromRank >= 0 ? c10::str(" claiming rank ", c.hello.fromRank) : std::string();
    STRATA_LOG(kWarn, kNet, "tcp connect: ", what, " a connection from ", c.from, who, ": ", why);
    refusals_ += c10::str(refusals_.empty() ? "" : "; ", c.from, who, ": ", why);
  }

  // Step C for one dialed peer: its status, TLS, its proof checked, ours sent.
  void proveToAcceptor(Dialed& d, int peer, Clock::time_point deadline) {
    const int fd = d.end.fd.get();
    HelloStatus status = HelloStatus::kAccepted;
    int err = 0;
    const IoStatus io = recvStatus(fd, &status, deadline, &err);
    if (io == IoStatus::kTimeout) {
      STRATA_THROW(TimeoutError, "tcp connect: rank ", peer, " at ", d.address, " did not answer our handshake within ",
                   opts_.timeout.count(), " ms");
    }
    STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: reading rank ", peer, "'s answer to our handshake at ",
                     d.address, " failed: ", ioText(io, err));
    STRATA_CHECK_NET(status == HelloStatus::kAccepted, "tcp connect: rank ", peer, " at ", d.address,
                     " refused our connection: ", helloStatusText(status));
    if (d.hello.wantsTls) {
      std::string why;
      d.end.tls = TlsSession::handshake(fd, false, opts_.jobSecret, deadline, &why);
      STRATA_CHECK_NET(d.end.tls != nullptr, "tcp connect: TLS with rank ", peer, " at ", d.address, " failed: ", why,
                       " (", kSecretHint, ")");
    }
    uint8_t challenge[kChallengeBytes];
    const IoStatus got = recvBytes(fd, d.end.tls.get(), challenge, sizeof(challenge), deadline, &err);
    STRATA_CHECK_NET(got == IoStatus::kOk, "tcp connect: reading rank ", peer, "'s challenge at ", d.address,
                     " failed: ", ioText(got, err));
    auth::Nonce nonce{};
    auth::Mac theirs{};
    std::copy(challenge, challenge + auth::kNonceBytes, nonce.begin());
    std::copy(challenge + auth::kNonceBytes, challenge + kChallengeBytes, theirs.begin());
    const auth::Mac expected = acceptorProof(key_, d.hello, nonce);
    STRATA_CHECK_NET(CRYPTO_memcmp(expected.data(), theirs.data(), auth::kMacBytes) == 0, "tcp connect: rank ", peer,
                     " at ", d.address, " could not prove the job secret: its secret differs from ours (", kSecretHint,
                     ")");
    const auth::Mac ours = dialerProof(key_, d.hello, nonce);
    const IoStatus sent = sendBytes(fd, d.end.tls.get(), ours.data(), ours.size(), deadline, &err);
    STRATA_CHECK_NET(sent == IoStatus::kOk, "tcp connect: sending our proof to rank ", peer, " at ", d.address,
                     " failed: ", ioText(sent, err));
  }

  // Step D for one candidate: its proof checked, our verdict sent. False (logged) when
  // it failed; its rank is then accepted again.
  bool finishCandidate(Candidate& c, Clock::time_point deadline) {
    const int fd = c.end.fd.get();
    auth::Mac theirs{};
    int err = 0;
    const IoStatus io = recvBytes(fd, c.end.tls.get(), theirs.data(), theirs.size(), deadline, &err);
    if (io != IoStatus::kOk) {
      refuse(c, "dropped",
             io == IoStatus::kClosed ? std::string("it closed the connection instead of proving the job secret "
                                                   "(it found our proof wrong: the job secrets differ)")
                                     : "reading its proof: " + ioText(io, err));
      return false;
    }
    const auth::Mac expected = dialerProof(key_, c.hello, c.nonce);
    const bool valid = CRYPTO_memcmp(expected.data(), theirs.data(), auth::kMacBytes) == 0;
    const HelloStatus verdict = valid ? HelloStatus::kAccepted : HelloStatus::kWrongSecret;
    const IoStatus sent = sendStatus(fd, verdict, deadline, &err, c.end.tls.get());
    if (!valid) {
      refuse(c, "refused", helloStatusText(verdict));
      return false;
    }
    if (sent != IoStatus::kOk) {
      refuse(c, "dropped", "sending our verdict: " + ioText(sent, err));
      return false;
    }
    return true;
  }

  // Step E: the higher-ranked peer's verdict on our proof.
  void awaitVerdict(Dialed& d, int peer, Clock::time_point deadline) {
    HelloStatus status = HelloStatus::kAccepted;
    int err = 0;
    const IoStatus io = recvStatus(d.end.fd.get(), &status, deadline, &err, d.end.tls.get());
    if (io == IoStatus::kTimeout) {
      STRATA_THROW(TimeoutError, "tcp connect: rank ", peer, " at ", d.address, " did not accept our proof within ",
                   opts_.timeout.count(), " ms");
    }
    STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: reading rank ", peer, "'s verdict at ", d.address,
                     " failed: ", ioText(io, err));
    STRATA_CHECK_NET(status == HelloStatus::kAccepted, "tcp connect: rank ", peer, " at ", d.address,
                     " refused our connection: ", helloStatusText(status), " (", kSecretHint, ")");
  }

  std::vector<std::unique_ptr<Connection>> wrap(std::vector<Endpoint> ends, const std::vector<PeerInfo>& peers) {
    std::vector<std::unique_ptr<Connection>> connections;
    connections.reserve(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      STRATA_LOG(kInfo, kNet, "tcp connection with rank ", peers[i].rank, " (host ", peers[i].host,
                 "): authenticated, ", ends[i].tls ? ends[i].tls->description() : std::string("plain"));
      setNonBlocking(ends[i].fd.get());
      auto core = std::make_shared<ConnectionCore>(std::move(ends[i].fd), peers[i].rank, loop_->nextId(),
                                                   std::move(ends[i].tls));
      loop_->add(core);
      connections.push_back(std::make_unique<TcpConnection>(std::move(core), loop_));
    }
    return connections;
  }

  const TransportOptions opts_;
  const auth::Key key_;           // proves and checks the job secret (handshake.h)
  std::mutex mu_;                 // serialises connect()
  std::shared_ptr<IoLoop> loop_;  // guarded by mu_; created by the first connect()
  std::string refusals_;          // guarded by mu_: this connect()'s refused connections
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Transport> makeTcpTransport(const TransportOptions& opts) {
  return std::make_unique<tcp::TcpTransport>(opts);
}

}  // namespace strata::transport
