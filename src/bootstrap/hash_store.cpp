// HashStore: the in-memory Store for ranks that are threads of one process (tests).
//
// Thread-safety: every method is safe to call concurrently; one mutex guards the map and
// one condition variable wakes the readers blocked in get() whenever a key is written.
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "bootstrap/store.h"
#include "core/errors.h"

namespace strata::bootstrap {
namespace {

class HashStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      data_[key] = value;
    }
    keySet_.notify_all();
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> lock(mu_);
    const bool found = keySet_.wait_until(lock, deadline, [&] { return data_.count(key) != 0; });
    if (!found) {
      STRATA_THROW(TimeoutError, "HashStore get(\"", key, "\") timed out after ", timeout.count(),
                   " ms: the key was never set");
    }
    return data_.at(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Bytes& slot = data_[key];
      result = decodeInt(key, slot) + delta;
      const std::string text = std::to_string(result);
      slot.assign(text.begin(), text.end());
    }
    keySet_.notify_all();
    return result;
  }

  bool check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return data_.count(key) != 0;
  }

 private:
  // Counters are stored as decimal text, as in TcpStore, so getString() reads them.
  static int64_t decodeInt(const std::string& key, const Bytes& value) {
    if (value.empty()) return 0;
    const std::string text(value.begin(), value.end());
    try {
      size_t used = 0;
      const int64_t parsed = std::stoll(text, &used);
      if (used == text.size()) return parsed;
    } catch (const std::exception&) {
    }
    STRATA_THROW(StoreError, "HashStore add(\"", key, "\"): the value \"", text,
                 "\" is not an integer counter");
  }

  std::mutex mu_;
  std::condition_variable keySet_;
  std::map<std::string, Bytes> data_;  // guarded by mu_
};

}  // namespace

std::shared_ptr<Store> makeHashStore() { return std::make_shared<HashStore>(); }

}  // namespace strata::bootstrap
