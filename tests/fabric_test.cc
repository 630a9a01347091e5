// The fabric spec (proto/fabric.proto) read once (proto/fabric_spec.h): each
// mistake refused by name, racks and placement turned into the rack of each
// rank, oversubscription into uplink rates; the cost model on a fabric
// (allreduce/cost_model.h) against figures worked by hand; `testbed traffic`
// and `testbed model` reading the flags and the files in experiments/fabrics/.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "experiments/cli/fabric_flags.h"
#include "proto/fabric_spec.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::RunCli;

proto::Fabric Racks(std::uint32_t racks, std::uint32_t hosts = 0) {
  proto::Fabric f;
  f.set_racks(racks);
  f.set_hosts_per_rack(hosts);
  return f;
}

TEST(FabricSpec, EachMistakeIsRefusedNamingTheField) {
  EXPECT_EQ(ValidateFabric(Racks(9), 8).message(),
            "bad fabric: racks 9 is more than the 8 workers: a rack would hold none");
  EXPECT_EQ(ValidateFabric(Racks(3, 2), 8).message(),
            "bad fabric: racks 3 x hosts_per_rack 2 hold fewer hosts than the 8 workers");
  EXPECT_EQ(ValidateFabric(Racks(3, 4), 8).message(),
            "bad fabric: racks 3 x hosts_per_rack 4 leave a rack without workers at 8 workers; "
            "use fewer racks");
  proto::Fabric ratio = Racks(2);
  ratio.set_oversubscription(-1);
  EXPECT_EQ(ValidateFabric(ratio, 8).message(),
            "bad fabric: oversubscription -1 is not a ratio above 0");
  proto::Fabric flat_uplink;
  flat_uplink.set_uplink_rate_bps(1000);
  EXPECT_EQ(ValidateFabric(flat_uplink, 8).message(),
            "bad fabric: an uplink needs racks: set racks to 2 or more");
  proto::Fabric link;
  link.add_host_links()->set_worker(8);
  EXPECT_EQ(ValidateFabric(link, 8).message(),
            "bad fabric: host_links names worker 8, outside 0..7");
  link.mutable_host_links(0)->set_worker(2);
  EXPECT_EQ(ValidateFabric(link, 8).message(),
            "bad fabric: host_links of worker 2 needs a link_rate_bps above 0");
  EXPECT_EQ(ValidateFabric(Racks(70000), 1024).message(),
            "bad fabric: racks 70000 is over the limit of 8192 (common/limits.h)");
  proto::Fabric queue;
  queue.set_link_queue_us(500);
  EXPECT_EQ(ValidateFabric(queue, 8).message(),
            "bad fabric: link_queue_us must be 1000 .. 10000000 (1 ms .. 10 s), not 500");
  queue.set_link_queue_us(100'000);
  EXPECT_TRUE(ValidateFabric(queue, 8).ok());
  EXPECT_EQ(LinkQueueMicros(queue), 100'000u);
  EXPECT_EQ(LinkQueueMicros(proto::Fabric()), 20'000u);  // the default
  EXPECT_EQ(FabricSummary(queue), "flat, 100 ms link queues");
  EXPECT_TRUE(ValidateFabric(proto::Fabric(), 1).ok());
  EXPECT_TRUE(ValidateFabric(Racks(2, 4), 8).ok());
  EXPECT_TRUE(ValidateFabric(Racks(3), 8).ok());
}

TEST(FabricSpec, RacksAndPlacementGiveTheRackOfEachRank) {
  EXPECT_TRUE(PlacementOf(proto::Fabric(), 5).rack_of_rank.empty());
  EXPECT_EQ(PlacementOf(Racks(2, 4), 8).rack_of_rank, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(PlacementOf(Racks(3), 8).rack_of_rank, (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(PlacementOf(Racks(2, 4), 6).rack_of_rank, (std::vector<int>{0, 0, 0, 0, 1, 1}));
  proto::Fabric dealt = Racks(2, 4);
  dealt.set_placement(proto::RankPlacement::round_robin);
  EXPECT_EQ(PlacementOf(dealt, 8).rack_of_rank, (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
}

TEST(FabricSpec, OversubscriptionAndHostLinksGiveEveryLinksRate) {
  proto::Fabric f = Racks(2);
  f.set_oversubscription(4);
  f.add_host_links()->set_worker(5);
  f.mutable_host_links(0)->set_link_rate_bps(25'000'000);
  // Racks of 3 and 2 at 100 Mbit/s, 4:1: 75 and 50 Mbit/s uplinks.
  const LinkRates rates = LinkRatesOf(f, 5, 100e6);
  EXPECT_EQ(rates.host_bps, (std::vector<double>{100e6, 100e6, 100e6, 100e6, 100e6}));
  EXPECT_EQ(rates.uplink_bps, (std::vector<double>{75e6, 50e6}));
  EXPECT_EQ(LinkRatesOf(f, 6, 100e6).host_bps[5], 25e6);
  EXPECT_EQ(FabricSummary(f), "2 racks, 4:1 uplinks, packed, worker 5's link 25mbit");
  EXPECT_EQ(FabricSummary(proto::Fabric()), "flat");
}

// 2 racks x 4 at 100 Mbit/s behind 25 Mbit/s uplinks (16:1), 4 MiB, alpha 0.
// A rack-order ring: 14 rounds of M/8 on every host link and on each uplink
// once: 14 x (M/8)/25 Mbit/s. Hierarchical: 3 + 3 intra-rack rounds of M/4
// at 100 Mbit/s, and 2 rounds in which 4 holders send M/8 each through the
// uplink: 2 x (M/2)/25 Mbit/s.
TEST(FabricModel, ARoundLastsAsLongAsItsSlowestLinkUplinksIncluded) {
  constexpr double kM = 4 << 20;
  const Placement packed = Placement::Packed({4, 4});
  const LinkRates rates{std::vector<double>(8, 100e6), {25e6, 25e6}};
  const auto seconds = [](double bytes, double bps) { return 8 * bytes / bps; };
  const CostEstimate ring =
      EstimateOnFabric(*FindCollective("ring"), 8, 4 << 20, 4, 0, packed, rates);
  EXPECT_NEAR(ring.time_s, 14 * seconds(kM / 8, 25e6), 1e-9);
  const CostEstimate hierarchical =
      EstimateOnFabric(*FindCollective("hierarchical"), 8, 4 << 20, 4, 0, packed, rates);
  EXPECT_NEAR(hierarchical.time_s, 6 * seconds(kM / 4, 100e6) + 2 * seconds(kM / 2, 25e6), 1e-9);
  // Without uplink limits the fabric model is the flat one.
  const LinkRates flat{std::vector<double>(8, 100e6), {}};
  const LinkModel link{0, 8 / 100e6};
  EXPECT_NEAR(EstimateOnFabric(*FindCollective("ring"), 8, 4 << 20, 4, 0, packed, flat).time_s,
              EstimateCollective(*FindCollective("ring"), 8, 4 << 20, 4, link).time_s, 1e-9);
}

// One host at a quarter of the rate: every ring round waits for it; ps's
// worker link carries its whole push and its values.
TEST(FabricModel, ASlowHostLinkDecidesEveryRingRoundAndItsOwnPsShare) {
  constexpr double kM = 16 << 20;
  LinkRates rates{std::vector<double>(4, 100e6), {}};
  rates.host_bps[2] = 25e6;
  const CostEstimate ring = EstimateOnFabric(*FindCollective("ring"), 4, 16 << 20, 4, 0,
                                             Placement::Flat(), rates);
  EXPECT_NEAR(ring.time_s, 6 * 8 * (kM / 4) / 25e6, 1e-9);
  // Its first chunks to the 4 shards, then its values in (16 MiB) over its rest out.
  const CostEstimate ps = EstimateParameterServerOnFabric(4, 4, 16 << 20, 4, 0, Placement::Flat(),
                                                          rates, {100e6, false});
  EXPECT_NEAR(ps.time_s, 8 * (4 << 20) / 25e6 + 8 * kM / 25e6, 1e-9);
}

// Every link at one rate B, N = 4, 16 MiB. k = 4 dedicated shards: the first
// chunks (4 MiB into each shard), then M/B - BytePS's bound. Colocated, a
// host carries its own push to the 3 other shards and its shard's values to
// the 3 other workers: 3 MiB, then 9 + 12 MiB - the ring's 24 MiB in all.
TEST(FabricModel, DedicatedShardsBeatColocatedOnesAsBytePSSays) {
  constexpr double kMiB = 1 << 20;
  const LinkRates even{std::vector<double>(4, 100e6), {}};
  const auto seconds = [](double bytes) { return 8 * bytes / 100e6; };
  EXPECT_NEAR(EstimateParameterServerOnFabric(4, 4, 16 << 20, 4, 0, Placement::Flat(), even,
                                              {100e6, false}).time_s,
              seconds(4 * kMiB) + seconds(16 * kMiB), 1e-9);
  EXPECT_NEAR(EstimateParameterServerOnFabric(4, 4, 16 << 20, 4, 0, Placement::Flat(), even,
                                              {100e6, true}).time_s,
              seconds(3 * kMiB) + seconds(21 * kMiB), 1e-9);
  // One dedicated shard: N·M/S = 64 MiB through its link.
  EXPECT_NEAR(EstimateParameterServerOnFabric(4, 1, 16 << 20, 4, 0, Placement::Flat(), even,
                                              {100e6, false}).time_s,
              seconds(4 * kMiB) + seconds(64 * kMiB), 1e-9);
}

TEST(FabricCli, TrafficCountsEachUplinkFromTheSchedules) {
  const auto [status, output] = RunCli(
      "traffic -n 8 -b 4MiB --racks 2 --hosts-per-rack 4 -a ring,hierarchical --format json");
  ASSERT_EQ(status, 0) << output;
  const std::vector<std::string> rows = Lines(output);
  ASSERT_EQ(rows.size(), 2u) << output;
  EXPECT_EQ(JsonField(rows[0], "max_uplink_bytes"), std::to_string(7 * (4 << 20) / 4));
  EXPECT_EQ(JsonField(rows[1], "max_uplink_bytes"), std::to_string(4 << 20));
  EXPECT_EQ(JsonField(rows[1], "cross_rack_bytes"), std::to_string(2 * (4 << 20)));
  // 2(K-1) inside the racks of 4, 2(R-1) across the 2 racks, one wave.
  EXPECT_EQ(JsonField(rows[1], "formula_rounds"), "8");
  EXPECT_EQ(JsonField(rows[1], "rounds"), "8");
}

// Hierarchical, 2 racks of 2, 4 elements: its middle phase alone crosses,
// 2(R-1)M = 8 elements; the ring crosses on 2 of its 4 hops, 12 of 24.
TEST(FabricCli, TraceMarksAndCountsTheSendsBetweenRacks) {
  const auto [status, output] = RunCli("trace -a hierarchical -n 4 --racks 2 -c 4");
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("Racks: R0 = ranks 0 1; R1 = ranks 2 3\n"), std::string::npos) << output;
  EXPECT_NE(output.find("round 1 (inter-rack all-reduce)\n  rank 0 -> rank 2: elements [1,2) = "
                        "c1; rank 2 adds them into its [1,2)  (R0 -> R1, across racks)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("4 rounds (formula 4); 24 elements "
                        "sent in total (formula 2(N-1)M, 2(R-1)M of it across R racks = 24); 8 of "
                        "them across racks\n"),
            std::string::npos)
      << output;
  const auto ring = RunCli("trace -a ring -n 4 --racks 2 -c 4");
  EXPECT_NE(ring.second.find("; 12 of them across racks\n"), std::string::npos) << ring.second;
}

TEST(FabricCli, ModelReadsAFabricFileAndTheFlagsOverrideIt) {
  const std::string file = std::string(TESTBED_SOURCE_DIR) +
                           "/experiments/fabrics/two_racks_round_robin.textproto";
  const auto [status, output] =
      RunCli("model -n 8 -b 4MiB --link-rate 100mbit --alpha 0 -a ring --format json --fabric " +
             file);
  ASSERT_EQ(status, 0) << output;
  // Round-robin, 4:1: 100 Mbit/s uplinks carrying 4 ring hops each per round.
  EXPECT_NEAR(std::stod(JsonField(output, "model_time_us")),
              14 * 4 * 8.0 * ((4 << 20) / 8) / 100e6 * 1e6, 1);
  const auto [packed_status, packed] = RunCli(
      "model -n 8 -b 4MiB --link-rate 100mbit --alpha 0 -a ring --format json --placement packed "
      "--fabric " + file);
  ASSERT_EQ(packed_status, 0) << packed;
  EXPECT_NEAR(std::stod(JsonField(packed, "model_time_us")),
              14 * 8.0 * ((4 << 20) / 8) / 100e6 * 1e6, 1);
}

TEST(FabricCli, EveryFabricFileParsesAndBadFlagsAreRefused) {
  for (const char* name : {"two_racks_4to1", "two_racks_round_robin", "straggler_link"}) {
    const auto [status, output] = RunCli(std::string("traffic -n 8 -a ring --fabric ") +
                                         TESTBED_SOURCE_DIR + "/experiments/fabrics/" + name +
                                         ".textproto");
    EXPECT_EQ(status, 0) << name << ": " << output;
  }
  const auto both = RunCli("traffic -n 8 --racks 2 --uplink-rate 1gbit --oversubscription 4");
  EXPECT_EQ(both.first, 2);
  EXPECT_NE(both.second.find("give --uplink-rate or --oversubscription, not both"),
            std::string::npos) << both.second;
  const auto link = RunCli("traffic -n 8 --host-link three=1mbit");
  EXPECT_NE(link.second.find("write WORKER=RATE (3=25mbit), not 'three=1mbit'"),
            std::string::npos) << link.second;
  const auto crowded = RunCli("local -n 2 --servers 4 --server-placement colocated -a ps");
  EXPECT_EQ(crowded.first, 2) << crowded.second;
  EXPECT_NE(crowded.second.find("servers colocated with the workers need servers <= workers, not "
                                "4 servers for 2 workers"),
            std::string::npos) << crowded.second;
  const auto loopback = RunCli("local -n 2 --racks 2 --oversubscription 4");
  EXPECT_EQ(loopback.first, 2) << loopback.second;
  EXPECT_NE(loopback.second.find("uplink and host link rates and link queues need the netns"),
            std::string::npos) << loopback.second;
  const auto queue = RunCli("local -n 2 --link-queue 100ms");
  EXPECT_EQ(queue.first, 2) << queue.second;
  EXPECT_NE(queue.second.find("link queues need the netns network"), std::string::npos)
      << queue.second;
  const auto shallow = RunCli("traffic -n 8 --link-queue 100us");
  EXPECT_EQ(shallow.first, 2) << shallow.second;
  EXPECT_NE(shallow.second.find("link_queue_us must be 1000 .. 10000000"), std::string::npos)
      << shallow.second;
}

}  // namespace
}  // namespace testbed
