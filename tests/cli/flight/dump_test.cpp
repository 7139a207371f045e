// A flight recorder dump written by the recorder (collectives/flight_format.h) and read back
// by `strata flight` (cli/flight/dump.h): the round trip with world ranks, and bad dumps named
// by field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/flight/dump.h"
#include "collectives/flight_format.h"
#include "collectives/flight_recorder.h"

namespace strata::cli::flight {
namespace {

using namespace collectives::flight;

TEST(FlightDumpFormat, RoundTripsWithWorldRanks) {
  Recorder rec(16);
  const uint32_t g = rec.registerGroup("group/1,3/0", {1, 3}, 0);
  OpInfo bcast;
  bcast.group = g;
  bcast.seq = 1;
  bcast.count = 8;
  bcast.numBytes = 32;
  bcast.dtype = DType::kFloat32;
  bcast.op = Op::kBroadcast;
  bcast.peer = 1;  // group rank 1 = world rank 3
  rec.finish(rec.record(bcast, State::kStarted), true);
  OpInfo send;
  send.group = g;
  send.seq = 1;
  send.numBytes = 100;
  send.count = 100;
  send.tag = 42;
  send.peer = 1;
  send.op = Op::kSend;
  rec.record(send, State::kStarted);
  DumpHeader h{1, 4, "hostA", 77, "signal", "SIGUSR2"};
  const auto doc = dumpToJson(rec.snapshot(), h);
  const RankDump d = parseDump(nlohmann::json::parse(dumpText(doc)), "test");
  EXPECT_EQ(d.header.rank, 1);
  EXPECT_EQ(d.header.worldSize, 4);
  EXPECT_EQ(d.header.host, "hostA");
  EXPECT_EQ(d.header.trigger, "signal");
  EXPECT_FALSE(d.wrapped());
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].ranks, (std::vector<int>{1, 3}));
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[0].op, "broadcast");
  EXPECT_EQ(d.entries[0].root, 3);
  EXPECT_EQ(d.entries[0].dtype, "float32");
  EXPECT_EQ(d.entries[0].state, "completed");
  EXPECT_GT(d.entries[0].endNs, 0);
  EXPECT_EQ(d.entries[1].op, "send");
  EXPECT_EQ(d.entries[1].peer, 3);
  EXPECT_EQ(d.entries[1].tag, 42u);
  EXPECT_EQ(d.entries[1].endNs, 0);
  EXPECT_TRUE(d.entries[1].isP2p());
  // One line per entry: a dump stays readable with grep.
  const std::string text = dumpText(doc);
  EXPECT_NE(text.find("\n    {\"id\":2,\"group\":\"group/1,3/0\",\"seq\":1,\"op\":\"send\""), std::string::npos) << text;
}

TEST(FlightDumpFormat, BadDumpsNameTheField) {
  const auto fails = [](const std::string& text, const std::string& expected) {
    try {
      parseDump(nlohmann::json::parse(text), "rank-0.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  fails(R"({"format": "other"})", "rank-0.json: not a flight recorder dump");
  fails(R"({"format": "strata.flight_recorder", "version": 9})", "dump version 9 is not supported");
  fails(R"({"format": "strata.flight_recorder", "version": 1, "rank": 3, "world_size": 2})",
        "rank 3 is not a rank of a world of 2");
  fails(R"({"format": "strata.flight_recorder", "version": 1, "rank": 0, "world_size": 1,
            "clock": {"dump_unix_ns": 1}, "capacity": 1, "recorded": 1, "groups": [],
            "entries": [{"id": 1, "group": "world", "seq": "x"}]})",
        "/entries/0/seq is not a non-negative integer");
}

}  // namespace
}  // namespace strata::cli::flight
