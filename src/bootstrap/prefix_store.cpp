// PrefixStore: namespaces every key of an inner store under "prefix/", one namespace per
// group, so that groups sharing one store never read each other's keys.
//
// Thread-safety: as thread-safe as the inner store (every Store is); holds no state of its
// own beyond the immutable prefix.
#include <utility>

#include "bootstrap/store.h"
#include "core/errors.h"

namespace strata::bootstrap {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}

  void set(const std::string& key, const Bytes& value) override {
    inner_->set(prefix_ + key, value);
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }

  bool check(const std::string& key) override { return inner_->check(prefix_ + key); }

 private:
  const std::string prefix_;  // includes the trailing '/'
  const std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> inner) {
  STRATA_CHECK(inner != nullptr, "makePrefixStore(\"", prefix, "\"): the inner store is null");
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace strata::bootstrap
