// TcpTransport: rendezvous through the store, one socket per peer pair, and one I/O
// progress thread (IoLoop) for all connections.
//
// connect() of rank r, bounded as a whole by opts.timeout:
//   1. listen on a fresh port (one per connect() call, so concurrent groups never
//      receive each other's connections) and publish "tcp/addr/<r>" = host:port;
//   2. dial every peer of higher rank and send our Hello; the peer's kernel completes
//      the TCP handshake from its listen backlog, so dialing never waits for its accept();
//   3. accept every peer of lower rank, checking its Hello (rank and job secret);
//   4. read the status byte of each Hello we sent.
// No step waits on a later step of another rank, so connect() cannot deadlock.
//
// With opts.tls (STRATA_TLS=1) each connection first runs a TLS handshake (tls.h), the
// dialer as client right after its TCP connect, the acceptor as server right after
// accept; the Hello and all later bytes then travel inside TLS. A dial now waits for the
// higher rank to reach step 3, which it does once its own dials (to still higher ranks)
// are done: the waits point upwards only, so this cannot deadlock either.
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

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "bootstrap/store.h"
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

std::string addressKey(int rank) { return "tcp/addr/" + std::to_string(rank); }

milliseconds remaining(Clock::time_point deadline) { return milliseconds(remainingMs(deadline)); }

// Peers of a connect() call whose Hello we still wait for, by rank -> index in `peers`.
std::string rankList(const std::map<int, size_t>& ranks) {
  std::string text;
  for (const auto& entry : ranks) text += (text.empty() ? "" : ",") + std::to_string(entry.first);
  return text;
}

// A connected socket and, with TLS, its session.
struct Endpoint {
  Fd fd;
  std::unique_ptr<TlsSession> tls;
};

const char* const kTlsHint =
    "every rank needs STRATA_TLS=1 (or none) and the same STRATA_JOB_SECRET";

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TransportOptions opts) : opts_(std::move(opts)) {
    checkTlsOptions(opts_.tls, opts_.jobSecret);
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

    Fd listener = listenOn(opts_.bindHost);
    const std::string address = formatHostPort(advertiseHost(), localPort(listener.get()));
    bootstrap::setString(store, addressKey(self.rank), address);
    STRATA_LOG(kInfo, kNet, "tcp rank ", self.rank, " listening at ", address, " for ",
               peers.size(), " peers");

    std::vector<Endpoint> ends(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      if (peers[i].rank > self.rank) ends[i] = dial(store, self.rank, peers[i].rank, deadline);
    }
    acceptLowerRanks(listener.get(), address, self.rank, peers, deadline, ends);
    for (size_t i = 0; i < peers.size(); ++i) {
      if (peers[i].rank > self.rank) awaitAccepted(ends[i], peers[i].rank, deadline);
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

  // Steps 1-2 for one higher-ranked peer: read its address, connect, send our Hello.
  Endpoint dial(bootstrap::Store& store, int selfRank, int peer, Clock::time_point deadline) {
    std::string text;
    try {
      text = bootstrap::getString(store, addressKey(peer), remaining(deadline));
    } catch (const TimeoutError&) {
      STRATA_THROW(TimeoutError, "tcp connect: rank ", peer,
                   " did not publish its address (store key \"", addressKey(peer), "\") within ",
                   opts_.timeout.count(), " ms");
    }
    std::string host;
    uint16_t port = 0;
    STRATA_CHECK_NET(parseHostPort(text, &host, &port), "tcp connect: rank ", peer,
                     " published a malformed address \"", text, "\"");
    Endpoint end;
    end.fd = connectWithRetry(host, port, deadline, c10::str("tcp connect to rank ", peer));
    if (opts_.tls) {
      std::string why;
      end.tls = TlsSession::handshake(end.fd.get(), false, opts_.jobSecret, deadline, &why);
      STRATA_CHECK_NET(end.tls != nullptr, "tcp connect: TLS with rank ", peer, " at ", text,
                       " failed: ", why, " (", kTlsHint, ")");
    }
    int err = 0;
    const IoStatus io = sendHello(end.fd.get(), Hello{selfRank, peer, opts_.jobSecret}, deadline,
                                  &err, end.tls.get());
    STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: sending the handshake to rank ", peer,
                     " at ", text, " failed: ", ioStatusText(io),
                     err != 0 ? " " + errnoText(err) : "");
    return end;
  }

  // Step 3: accepts until every lower-ranked peer presented a valid Hello. Connections
  // with a wrong secret or an unexpected rank are refused, logged and closed.
  void acceptLowerRanks(int listenFd, const std::string& address, int selfRank,
                        const std::vector<PeerInfo>& peers, Clock::time_point deadline,
                        std::vector<Endpoint>& ends) {
    std::map<int, size_t> waiting;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (peers[i].rank < selfRank) waiting[peers[i].rank] = i;
    }
    while (!waiting.empty()) {
      Fd fd = acceptUntil(listenFd, deadline);
      if (!fd.valid()) {
        STRATA_THROW(TimeoutError, "tcp connect: timed out after ", opts_.timeout.count(),
                     " ms waiting for rank(s) ", rankList(waiting), " to connect to ", address);
      }
      const std::string from = peerAddress(fd.get());
      const auto helloDeadline = std::min(deadline, Clock::now() + kHandshakeTimeout);
      Hello hello;
      std::string why;
      std::unique_ptr<TlsSession> tls;
      if (opts_.tls) {
        tls = TlsSession::handshake(fd.get(), true, opts_.jobSecret, helloDeadline, &why);
        if (tls == nullptr) {
          STRATA_LOG(kWarn, kNet, "tcp connect: dropped a connection from ", from, ": ", why,
                     " (", kTlsHint, ")");
          continue;
        }
      }
      if (!recvHello(fd.get(), &hello, helloDeadline, &why, tls.get())) {
        STRATA_LOG(kWarn, kNet, "tcp connect: dropped a connection from ", from, ": ", why);
        continue;
      }
      HelloStatus status = HelloStatus::kAccepted;
      if (!opts_.jobSecret.empty() && !secretsEqual(hello.secret, opts_.jobSecret)) {
        status = HelloStatus::kWrongSecret;
      } else if (hello.toRank != selfRank || waiting.count(hello.fromRank) == 0) {
        status = HelloStatus::kWrongRank;
      }
      int err = 0;
      const IoStatus io = sendHelloStatus(fd.get(), status, deadline, &err, tls.get());
      if (status != HelloStatus::kAccepted) {
        STRATA_LOG(kWarn, kNet, "tcp connect: refused a connection from ", from, " claiming rank ",
                   hello.fromRank, " (for rank ", hello.toRank, "): ", helloStatusText(status));
        continue;
      }
      STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: answering the handshake of rank ",
                       hello.fromRank, " at ", from, " failed: ", ioStatusText(io),
                       err != 0 ? " " + errnoText(err) : "");
      ends[waiting.at(hello.fromRank)] = Endpoint{std::move(fd), std::move(tls)};
      waiting.erase(hello.fromRank);
    }
  }

  // Step 4: the higher-ranked peer's verdict on our Hello.
  void awaitAccepted(Endpoint& end, int peer, Clock::time_point deadline) {
    const int fd = end.fd.get();
    HelloStatus status = HelloStatus::kAccepted;
    int err = 0;
    const IoStatus io = recvHelloStatus(fd, &status, deadline, &err, end.tls.get());
    if (io == IoStatus::kTimeout) {
      STRATA_THROW(TimeoutError, "tcp connect: rank ", peer, " at ", peerAddress(fd),
                   " did not answer our handshake within ", opts_.timeout.count(), " ms");
    }
    // A TLS peer drops a plain Hello without an answer (and a plain peer a TLS one).
    STRATA_CHECK_NET(io == IoStatus::kOk, "tcp connect: reading rank ", peer,
                     "'s answer to our handshake at ", peerAddress(fd), " failed: ",
                     ioStatusText(io), io == IoStatus::kClosed ? c10::str(" (", kTlsHint, ")") : "");
    STRATA_CHECK_NET(status == HelloStatus::kAccepted, "tcp connect: rank ", peer, " at ",
                     peerAddress(fd), " refused our connection: ", helloStatusText(status));
  }

  std::vector<std::unique_ptr<Connection>> wrap(std::vector<Endpoint> ends,
                                                const std::vector<PeerInfo>& peers) {
    std::vector<std::unique_ptr<Connection>> connections;
    connections.reserve(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      setNonBlocking(ends[i].fd.get());
      auto core = std::make_shared<ConnectionCore>(std::move(ends[i].fd), peers[i].rank,
                                                   loop_->nextId(), std::move(ends[i].tls));
      loop_->add(core);
      connections.push_back(std::make_unique<TcpConnection>(std::move(core), loop_));
    }
    return connections;
  }

  const TransportOptions opts_;
  std::mutex mu_;                 // serialises connect()
  std::shared_ptr<IoLoop> loop_;  // guarded by mu_; created by the first connect()
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Transport> makeTcpTransport(const TransportOptions& opts) {
  return std::make_unique<tcp::TcpTransport>(opts);
}

}  // namespace strata::transport
