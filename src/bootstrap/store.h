// A small key-value store for rendezvous: ranks publish addresses and shared-memory
// names and read their peers'. MPI (when present) is used only to find the store.
//
// Thread-safety: every Store implementation is safe for concurrent use from many
// threads without external synchronisation.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::bootstrap {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value, overwriting. Throws StoreError if the store is unreachable.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until key exists, then returns its value. Throws TimeoutError after
  // `timeout` (the message names the key), StoreError if the store is unreachable.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the integer stored at key (0 if absent); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether key exists now (never blocks on the key).
  virtual bool check(const std::string& key) = 0;
};

// In-memory store for ranks that are threads of one process (tests).
std::shared_ptr<Store> makeHashStore();

// Namespaces every key of `inner` under "prefix/" (one namespace per group).
std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> inner);

// The TcpStore server appends a line here for every client it refused (its address, the
// rank it claimed, why), so a rank that times out waiting for a peer can say why.
inline constexpr char kStoreRefusalsKey[] = "strata/store/refusals";

// How a TcpStore is created (TcpStore::create).
struct TcpStoreOptions {
  std::string host;  // the server's address, as clients dial it
  uint16_t port = 0;  // with isServer, 0 picks a free port
  bool isServer = false;
  std::chrono::milliseconds timeout{300000};  // connecting, and every request but get
  // Both sides prove they hold it before any request (bootstrap/store_auth.h); it never
  // crosses the wire. "" is a valid but public secret: a job without one is unauthenticated.
  std::string secret;
  int rank = -1;  // ours: bound into our proof, named in the server's refusal log
  // The server's listen address; empty: `host` (the interface the job uses). "0.0.0.0",
  // "::" or "*": every interface.
  std::string bindHost;
};

// TCP store: one rank runs the server, every rank (the server's included) connects as a
// client and authenticates with the job secret. `port()` returns the bound port.
class TcpStore : public Store {
 public:
  // Creates the server (when isServer) and a client connected to host:port. Retries the
  // connection until `timeout`, then throws StoreError naming host:port. Throws at once
  // ConfigError when the server refuses our proof of the secret, StoreError when the server
  // cannot prove it (not this job's store).
  static std::shared_ptr<TcpStore> create(const TcpStoreOptions& options);
  // The same with the public secret "" and the server listening on `host` (tests).
  static std::shared_ptr<TcpStore> create(const std::string& host, uint16_t port, bool isServer,
                                          std::chrono::milliseconds timeout);
  virtual uint16_t port() const = 0;
};

// Helpers over any store.
void setString(Store& store, const std::string& key, const std::string& value);
std::string getString(Store& store, const std::string& key, std::chrono::milliseconds timeout);

// Every rank calls this with the same key: returns once all worldSize ranks arrived.
// Throws TimeoutError naming how many ranks arrived.
void storeBarrier(Store& store, const std::string& key, int worldSize, std::chrono::milliseconds timeout);

}  // namespace strata::bootstrap
