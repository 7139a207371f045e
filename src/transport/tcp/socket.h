// The TCP transport uses the socket helpers of strata_core (shared with the TCP store).
#pragma once

#include "core/socket.h"

namespace strata::transport::tcp {

using net::acceptUntil;
using net::Clock;
using net::connectWithRetry;
using net::errnoText;
using net::Fd;
using net::formatHostPort;
using net::hostnameAddress;
using net::IoStatus;
using net::ioStatusText;
using net::listenOn;
using net::localPort;
using net::parseHostPort;
using net::peerAddress;
using net::pollUntil;
using net::recvAll;
using net::remainingMs;
using net::sendAll;
using net::setDataSocketOptions;
using net::setNonBlocking;

}  // namespace strata::transport::tcp
