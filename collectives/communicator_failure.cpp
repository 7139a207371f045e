// What a communicator does when a collective fails: record the first failure in the group's
// store, dump the flight recorder, tell the peers (shared-memory abort, closed connections)
// and rethrow, as the first failing rank's error when another rank failed first.
#include "collectives/communicator.h"
#include "collectives/shm_domain.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::collectives {

namespace {

// A failure record in the group's store: "<kind>|<rank>|<message>".
constexpr const char* kFailureKey = "failure/first";
constexpr const char* kFailureClaimKey = "failure/claimed";
// Reading a failure record must not hang on a store whose host died.
constexpr std::chrono::milliseconds kFailureRecordTimeout{2000};

char kindOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const MismatchError&) {
    return 'M';
  } catch (const TimeoutError&) {
    return 'T';
  } catch (...) {
    return 'N';
  }
}

ShmDomain::AbortKind abortKindOf(char kind) {
  return kind == 'M' ? ShmDomain::AbortKind::kMismatch
                     : kind == 'T' ? ShmDomain::AbortKind::kTimeout : ShmDomain::AbortKind::kNetwork;
}

// The flight recorder's name for a failure of kind 'M', 'T' or 'N' (see kindOf);
// `ownError`, when this rank failed first, tells a dead peer from another error.
std::string flightTrigger(char kind, const std::exception_ptr* ownError) {
  if (kind == 'M') return "mismatch";
  if (kind == 'T') return "timeout";
  if (ownError == nullptr) return "network";
  try {
    std::rethrow_exception(*ownError);
  } catch (const NetworkError&) {
    return "network";
  } catch (...) {
    return "error";
  }
}

std::string messageOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void Communicator::closeConnections(const std::string& why, transport::CloseReason reason) {
  for (auto& conns : links_)
    for (auto& conn : conns)
      if (conn) conn->close(why, reason);
}

void Communicator::failAndRethrow(const CollSignature& sig, std::exception_ptr error) {
  const char kind = kindOf(error);
  const std::string mine = messageOf(error);
  STRATA_LOG(kError, kColl, describe(sig), " failed: ", mine);
  // 1. The first rank to fail records why, before its peers can notice anything.
  std::string firstRecord;
  try {
    if (store_->add(kFailureClaimKey, 1) == 1) {
      bootstrap::setString(*store_, kFailureKey, c10::str(kind, "|", topo_.rank, "|", mine));
    } else {
      firstRecord = bootstrap::getString(*store_, kFailureKey, kFailureRecordTimeout);
    }
  } catch (const std::exception&) {
    // The store went down with its host: our own error is all there is to report.
  }
  const size_t bar1 = firstRecord.find('|'), bar2 = firstRecord.find('|', bar1 + 1);
  const bool secondary = bar1 != std::string::npos && bar2 != std::string::npos &&
                         firstRecord.substr(bar1 + 1, bar2 - bar1 - 1) != std::to_string(topo_.rank);
  const std::string text =
      secondary ? c10::str(describe(sig), " failed because rank ", firstRecord.substr(bar1 + 1, bar2 - bar1 - 1),
                           " failed first: ", firstRecord.substr(bar2 + 1), " (here: ", mine, ")")
                : mine;
  const char finalKind = secondary ? firstRecord[0] : kind;
  failure_ = text;  // written once, before failed_ publishes it to other threads
  lostPeer_ = finalKind != 'M' && finalKind != 'T';
  failed_ = true;
  // 2. The flight recorder's dump, before the peers are told: they may exit (and a
  // launcher kill this rank) as soon as they know.
  reportFlightFailure(flightTrigger(finalKind, secondary ? nullptr : &error), describe(sig), text);
  // 3. Peers on this host and peers over TCP fail at once instead of timing out.
  if (shm_) shm_->abort(-1, text, abortKindOf(finalKind));
  closeConnections(text, finalKind == 'M'   ? transport::CloseReason::kMismatch
                         : finalKind == 'T' ? transport::CloseReason::kTimeout
                                            : transport::CloseReason::kNetwork);
  // 4. A secondary failure reports the first one, with its error type.
  if (!secondary) std::rethrow_exception(error);
  switch (firstRecord[0]) {
    case 'M': STRATA_THROW(MismatchError, text);
    case 'T': STRATA_THROW(TimeoutError, text);
    default: STRATA_THROW(NetworkError, text);
  }
}

void Communicator::abort(const std::string& reason) {
  failure_ = reason;
  lostPeer_ = true;  // the peers see this rank as gone
  failed_ = true;
  if (shm_) shm_->abort(topo_.rank, reason);
  closeConnections(c10::str("rank ", topo_.rank, " aborted the group: ", reason), transport::CloseReason::kNetwork);
}

}  // namespace strata::collectives
