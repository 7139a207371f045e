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

// TCP store: rank `isServer` listens on host:port (port 0 picks a free one), every
// rank (server included) connects as a client. `port()` returns the bound port.
class TcpStore : public Store {
 public:
  // Creates the server (when isServer) and a client connected to host:port.
  // Retries the connection until `timeout`; throws StoreError naming host:port.
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
