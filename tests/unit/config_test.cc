#include "conf/config.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace clairfs {
namespace {

TEST(ParseSize, UnitsAndErrors) {
  EXPECT_EQ(ParseSize("4096").value(), 4096u);
  EXPECT_EQ(ParseSize("64KiB").value(), 64u << 10);
  EXPECT_EQ(ParseSize("256MiB").value(), 256u << 20);
  EXPECT_EQ(ParseSize("4GiB").value(), 4ull << 30);
  EXPECT_EQ(ParseSize("4G").value(), 4ull << 30);
  EXPECT_EQ(ParseSize("1.5GB").value(), 1'500'000'000u);
  EXPECT_EQ(ParseSize("2 MB").value(), 2'000'000u);
  EXPECT_FALSE(ParseSize("12XB").ok());
  EXPECT_FALSE(ParseSize("GiB").ok());
  EXPECT_FALSE(ParseSize("1.2.3MiB").ok());
  EXPECT_FALSE(ParseSize("-1").ok());
  EXPECT_FALSE(ParseSize("99999999999TiB").ok());
}

TEST(Config, EmptyGivesRamAndSsdWithMachineDefaults) {
  auto c = ParseConfig("");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->cache.tiers.size(), 2u);
  EXPECT_EQ(c->cache.tiers[0].kind, "ram");
  EXPECT_EQ(c->cache.tiers[1].kind, "ssd");
  EXPECT_TRUE(c->fuse.keep_cache);
  ASSERT_TRUE(ResolveForDataset(&c.value(), "/data/imagenet").ok());
  EXPECT_EQ(c->cache.tiers[0].capacity, 1ull << 30);
  EXPECT_EQ(c->cache.tiers[1].dir.rfind("/var/tmp/clairfs/imagenet-", 0), 0u)
      << c->cache.tiers[1].dir;
  EXPECT_GT(c->cache.tiers[1].capacity, 0u);
  Config again = ParseConfig("").value();
  ASSERT_TRUE(ResolveForDataset(&again, "/data/imagenet").ok());
  EXPECT_EQ(again.cache.tiers[1].dir, c->cache.tiers[1].dir);  // stable across starts
  Config other = ParseConfig("").value();
  ASSERT_TRUE(ResolveForDataset(&other, "/other/imagenet").ok());
  EXPECT_NE(other.cache.tiers[1].dir, c->cache.tiers[1].dir);
}

TEST(Config, ImpossibleCapacitiesNameTheKey) {
  auto c = ParseConfig("cache: {tiers: [{kind: ram, capacity: 64TiB}]}");
  ASSERT_TRUE(c.ok());
  Status s = ResolveForDataset(&c.value(), "/data/x");
  EXPECT_NE(s.message().find("'cache.tiers[0].capacity'"), std::string::npos) << s.message();
  auto d = ParseConfig(
      "cache: {tiers: [{kind: ram, capacity: 1MiB}, "
      "{kind: ssd, capacity: 900TiB, dir: /tmp/clairfs-never-created}]}");
  ASSERT_TRUE(d.ok());
  s = ResolveForDataset(&d.value(), "/data/x");
  EXPECT_NE(s.message().find("'cache.tiers[1].capacity'"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists("/tmp/clairfs-never-created"));
}

TEST(Config, FullFileParses) {
  auto c = ParseConfig(R"(
fuse: {threads: 4, entry_timeout: 0, attr_timeout: 1.5, keep_cache: false}
cache:
  tiers:
    - {kind: ram, capacity: 2GiB, threads: 3}
  staging: {capacity: 64MiB, threads: 2}
  demand_threads: 2
  fetch_timeout: 5
  max_file_size: 1GiB
log: {level: debug, file: /tmp/x.log}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->fuse.threads, 4);
  EXPECT_EQ(c->fuse.attr_timeout, 1.5);
  EXPECT_FALSE(c->fuse.keep_cache);
  EXPECT_EQ(c->cache.tiers[0].capacity, 2ull << 30);
  EXPECT_EQ(c->cache.tiers[0].threads, 3);
  EXPECT_EQ(c->cache.staging_capacity, 64u << 20);
  EXPECT_EQ(c->cache.fetch_timeout, 5);
  EXPECT_EQ(c->log.level, "debug");
}

TEST(Config, ClusterKeysAndRankSubstitution) {
  auto c = ParseConfig(R"(
cache:
  tiers:
    - {kind: ram, capacity: 1MiB}
    - {kind: ssd, capacity: 1MiB, dir: "/x/{rank}/c{rank}"}
    - {kind: ssd, capacity: 1MiB}
cluster: {plan_timeout: 5, peer_timeout: 0.5, down_for: 10, serve_threads: 3, backing_advantage: 2}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cluster.plan_timeout, 5);
  EXPECT_EQ(c->cluster.peer_timeout, 0.5);
  EXPECT_EQ(c->cluster.serve_threads, 3);
  EXPECT_EQ(c->cluster.backing_advantage, 2);
  SubstituteRank(&c.value(), 7);
  EXPECT_EQ(c->cache.tiers[1].dir, "/x/7/c7");
  ASSERT_TRUE(ResolveForDataset(&c.value(), "/data/set", 7).ok());
  EXPECT_NE(c->cache.tiers[2].dir.find("-rank7"), std::string::npos) << c->cache.tiers[2].dir;
}

TEST(Config, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* key;
  } cases[] = {
      {"cache: {stagin: {capacity: 1}}", "'cache.stagin'"},
      {"bogus: 1", "'bogus'"},
      {"cache: {staging: {capacity: 12XB}}", "'cache.staging.capacity'"},
      {"cache: {tiers: [{kind: ram, capacity: 1GiB, speed: 3}]}", "'cache.tiers[0].speed'"},
      {"cache: {tiers: [{kind: tape}]}", "'cache.tiers[0].kind'"},
      {"cache: {tiers: [{kind: ram, dir: /x}]}", "'cache.tiers[0].dir'"},
      {"fuse: {threads: 0}", "'fuse.threads'"},
      {"fuse: {threads: many}", "'fuse.threads'"},
      {"cache: {fetch_timeout: 0}", "'cache.fetch_timeout'"},
      {"log: {level: loud}", "'log.level'"},
      {"cache: {tiers: {kind: ram}}", "'cache.tiers'"},
      {"cluster: {peer_timeout: 0}", "'cluster.peer_timeout'"},
      {"cluster: {serve_threads: 0}", "'cluster.serve_threads'"},
      {"cluster: {wait: 3}", "'cluster.wait'"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfig(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.key), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
  EXPECT_FALSE(ParseConfig("fuse: [unclosed").ok());
  EXPECT_EQ(LoadConfigFile("/nonexistent/clairfs.yaml").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace clairfs
