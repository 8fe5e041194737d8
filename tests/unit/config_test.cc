#include "conf/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

TEST(ParseSize, OverflowAndNegativeNumbers) {
  // The largest exact sizes, and one past them.
  EXPECT_EQ(ParseSize("9223372036854775807").value(), 9223372036854775807ull);
  EXPECT_FALSE(ParseSize("9223372036854775808").ok());
  EXPECT_FALSE(ParseSize("18446744073709551616").ok());  // wraps a uint64_t
  EXPECT_EQ(ParseSize("8388607TiB").value(), 8388607ull << 40);
  EXPECT_FALSE(ParseSize("8388608TiB").ok());   // 2^63
  EXPECT_FALSE(ParseSize("16777216TiB").ok());  // 2^64: would wrap to 0
  EXPECT_FALSE(ParseSize("1e3").ok());
  EXPECT_FALSE(ParseSize("9.3e18").ok());
  EXPECT_FALSE(ParseSize("9000000.5TiB").ok());  // past llround's range
  EXPECT_EQ(ParseSize("0.5KiB").value(), 512u);
  EXPECT_EQ(ParseSize(" 7 ").value(), 7u);
  for (const char* text : {"-1", "-0", "-1GiB", "- 5", "-0.5MiB"}) {
    auto r = ParseSize(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("negative"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize(".5").ok());
}

// Each numeric key: the bounds are accepted, the values just outside them are refused with
// the key, the value and the range in the message.
TEST(Config, RangeBoundaries) {
  struct Case {
    std::string key;               // dotted, as in the message
    std::string yaml;              // with VALUE in place of the value
    std::string lo, hi;            // accepted bounds, as written in YAML
    std::vector<std::string> bad;  // refused values
    std::string range;             // the allowed range as the message states it
  } cases[] = {
      {"fuse.threads", "fuse: {threads: VALUE}", "1", "1024", {"0", "1025", "-1"}, "1 .. 1024"},
      {"fuse.entry_timeout",
       "fuse: {entry_timeout: VALUE}",
       "0",
       "86400",
       {"-0.5", "86401", "1e300", ".nan", ".inf"},
       "0 .. 86400 seconds"},
      {"fuse.attr_timeout",
       "fuse: {attr_timeout: VALUE}",
       "0",
       "86400",
       {"-1", "1e9"},
       "0 .. 86400 seconds"},
      {"cache.tiers[0].threads",
       "cache: {tiers: [{kind: ram, threads: VALUE}]}",
       "0",
       "256",
       {"-1", "257"},
       "0 .. 256"},
      {"cache.tiers[0].capacity",
       "cache: {tiers: [{kind: ram, capacity: VALUE}]}",
       "0",
       "1125899906842624",
       {"1125899906842625", "2PiB0"},
       ""},
      {"cache.staging.threads",
       "cache: {staging: {threads: VALUE}}",
       "0",
       "256",
       {"-1", "257"},
       "0 .. 256"},
      {"cache.staging.capacity",
       "cache: {staging: {capacity: VALUE}, chunk_size: 64KiB}",
       "64KiB",
       "1024TiB",
       {"0", "65535", "1025TiB", "-1"},
       ""},
      {"cache.demand_threads",
       "cache: {demand_threads: VALUE}",
       "1",
       "256",
       {"0", "257"},
       "1 .. 256"},
      {"cache.fetch_timeout",
       "cache: {fetch_timeout: VALUE}",
       "0.01",
       "86400",
       {"0.0001", "0.0099", "0", "-1", "86400.5", "1e300", ".nan", ".inf"},
       "0.01 .. 86400 seconds"},
      {"cache.chunk_size",
       "cache: {chunk_size: VALUE, staging: {capacity: 2GiB}}",
       "64KiB",
       "1GiB",
       {"0", "65535", "1025MiB"},
       ""},
      {"cache.record_chunk_size",
       "cache: {record_chunk_size: VALUE, staging: {capacity: 2GiB}}",
       "64KiB",
       "1GiB",
       {"0", "65535", "1025MiB"},
       ""},
      {"cache.consumption_lag",
       "cache: {consumption_lag: VALUE}",
       "1",
       "1073741824",
       {"0", "1073741825"},
       ""},
      {"cache.max_streams",
       "cache: {max_streams: VALUE}",
       "1",
       "4096",
       {"0", "4097"},
       "1 .. 4096 streams"},
      {"cluster.plan_timeout",
       "cluster: {plan_timeout: VALUE}",
       "0",
       "86400",
       {"-1", "1e300"},
       "0 .. 86400 seconds"},
      {"cluster.peer_timeout",
       "cluster: {peer_timeout: VALUE}",
       "0.01",
       "86400",
       {"0", "0.001", "100000"},
       "0.01 .. 86400 seconds"},
      {"warn.no_plan_after",
       "warn: {no_plan_after: VALUE}",
       "0",
       "86400",
       {"-1", "86401"},
       "0 .. 86400 seconds"},
      {"warn.order_slack",
       "warn: {order_slack: VALUE}",
       "1",
       "1073741824",
       {"0"},
       "1 .. 1073741824 reads"},
      {"cluster.down_for",
       "cluster: {down_for: VALUE}",
       "0",
       "86400",
       {"-0.1", "86401"},
       "0 .. 86400 seconds"},
      {"cluster.serve_threads",
       "cluster: {serve_threads: VALUE}",
       "1",
       "256",
       {"0", "257"},
       "1 .. 256"},
      {"cluster.backing_advantage",
       "cluster: {backing_advantage: VALUE}",
       "0",
       "1000000",
       {"-1", "1000001", ".nan"},
       "0 .. 1e+06"},
  };
  const auto with = [](std::string yaml, const std::string& value) {
    yaml.replace(yaml.find("VALUE"), 5, value);
    return yaml;
  };
  for (const auto& c : cases) {
    for (const auto& ok : {c.lo, c.hi}) {
      auto r = ParseConfig(with(c.yaml, ok));
      EXPECT_TRUE(r.ok()) << c.key << " = " << ok << ": " << r.status().message();
    }
    for (const auto& bad : c.bad) {
      auto r = ParseConfig(with(c.yaml, bad));
      ASSERT_FALSE(r.ok()) << c.key << " = " << bad << " was accepted";
      const std::string& m = r.status().message();
      EXPECT_NE(m.find("'" + c.key + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(c.range), std::string::npos) << m;
    }
  }
  // The message carries the value as given.
  auto r = ParseConfig("cache: {fetch_timeout: 0.0001}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("0.0001 is out of range (0.01 .. 86400 seconds)"),
            std::string::npos)
      << r.status().message();
  r = ParseConfig("cache: {staging: {capacity: 0}}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'cache.staging.capacity': 0 is out of range (65536 .. "),
            std::string::npos)
      << r.status().message();
  // Out of an int's range is the wrong type, not a wrapped value.
  r = ParseConfig("fuse: {threads: 4294967297}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'fuse.threads'"), std::string::npos);
}

TEST(Config, EmptyGivesRamAndSsdWithMachineDefaults) {
  auto c = ParseConfig("");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->cache.tiers.size(), 2u);
  EXPECT_EQ(c->cache.tiers[0].kind, "ram");
  EXPECT_EQ(c->cache.tiers[1].kind, "ssd");
  EXPECT_TRUE(c->fuse.keep_cache);
  EXPECT_TRUE(c->cache.prefetch.keep_copies);
  EXPECT_EQ(c->cache.io.pages, IoOptions::Pages::kDrop);
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

// conf/clairfs.yaml, as shipped (tests/unit/meson.build sets CLAIRFS_SOURCE_ROOT).
std::string ShippedConfigPath() {
  const char* root = std::getenv("CLAIRFS_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/conf/clairfs.yaml";
}

// The one source of defaults (docs/configuration.md, "Defaults"): the shipped file says
// exactly what the option structs' member initialisers say. Config's operator== is defaulted
// down to every option struct, so a member added anywhere is compared without touching this
// test; the per-part checks only say where a difference is.
TEST(Config, ShippedFileEqualsTheBuiltInDefaults) {
  auto shipped = LoadConfigFile(ShippedConfigPath());
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  const Config defaults;
  EXPECT_TRUE(shipped->fuse == defaults.fuse) << "fuse.* or control.*";
  EXPECT_TRUE(shipped->cache.tiers == defaults.cache.tiers) << "cache.tiers";
  EXPECT_TRUE(shipped->cache.prefetch.watch == defaults.cache.prefetch.watch) << "warn.*";
  EXPECT_TRUE(shipped->cache.prefetch == defaults.cache.prefetch) << "cache.*";
  EXPECT_TRUE(shipped->cache.io == defaults.cache.io) << "cache.backing_timeout";
  EXPECT_EQ(shipped->cache.prefetch.tune_staging_capacity,
            defaults.cache.prefetch.tune_staging_capacity)
      << "cache.staging.capacity";
  EXPECT_EQ(shipped->cache.page_cache_lag, defaults.cache.page_cache_lag);
  EXPECT_TRUE(shipped->cluster == defaults.cluster) << "cluster.*";
  EXPECT_TRUE(shipped->log == defaults.log) << "log.*";
  EXPECT_TRUE(*shipped == defaults);
  EXPECT_TRUE(*shipped == ParseConfig("").value());  // no file: the same
}

// The comparison above can fail: one value changed in the shipped text is told apart, in every
// section.
TEST(Config, ShippedFileComparisonSeesOneChangedValue) {
  auto text = [] {
    std::FILE* f = std::fopen(ShippedConfigPath().c_str(), "r");
    std::string out;
    if (f == nullptr) return out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
    std::fclose(f);
    return out;
  }();
  ASSERT_FALSE(text.empty()) << ShippedConfigPath();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"stat_ahead: 256", "stat_ahead: 255"},
           {"clone_fd: true", "clone_fd: false"},
           {"demand_threads: 4", "demand_threads: 5"},
           {"fetch_timeout: 60", "fetch_timeout: 61"},
           {"backing_timeout: 30", "backing_timeout: 31"},
           {"page_cache_lag: 4096", "page_cache_lag: 4095"},
           {"down_for: 60", "down_for: 61"},
           {"backing_advantage: 0", "backing_advantage: 1"},
           {"max_files: 4", "max_files: 5"},
           {"order_slack: 8192", "order_slack: 8191"},
           {"max_samples: 65536", "max_samples: 65535"},
           {"send_timeout: 10", "send_timeout: 11"},
           {"max_buffer_bytes: 1GiB", "max_buffer_bytes: 2GiB"}}) {
    std::string changed = text;
    const size_t at = changed.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
    auto c = ParseConfig(changed);
    ASSERT_TRUE(c.ok()) << to << ": " << c.status().message();
    EXPECT_FALSE(*c == Config{}) << to;
  }
}

TEST(Config, BatchKeys) {
  auto c = ParseConfig(
      "batch: {enabled: false, max_clients: 8, max_clients_per_user: 2, max_samples: 1024,\n"
      "        max_buffer_bytes: 256MiB, send_timeout: 2.5}");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->batch.enabled);
  EXPECT_EQ(c->batch.max_clients, 8u);
  EXPECT_EQ(c->batch.max_clients_per_user, 2u);
  EXPECT_EQ(c->batch.max_samples, 1024u);
  EXPECT_EQ(c->batch.max_buffer_bytes, 256ull << 20);
  EXPECT_EQ(c->batch.send_timeout, std::chrono::milliseconds(2500));
  const Config d;
  EXPECT_TRUE(d.batch.enabled);
  EXPECT_EQ(d.batch.max_clients, 256u);
  EXPECT_EQ(d.batch.max_clients_per_user, 64u);
  EXPECT_EQ(d.batch.max_samples, 65536u);
  EXPECT_EQ(d.batch.max_buffer_bytes, 1ull << 30);
  EXPECT_EQ(d.batch.send_timeout, std::chrono::seconds(10));
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

// The default is the fast mode; keep_cache false, which only per_open honours, implies it.
TEST(Config, OpenModeDefaultsToNoneUnlessKeepCacheIsOff) {
  auto d = ParseConfig("log: {level: info}");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->fuse.open_mode, OpenMode::kNone);
  EXPECT_TRUE(d->fuse.watch_backing);
  EXPECT_EQ(d->fuse.stat_ahead, 256u);
  EXPECT_EQ(d->fuse.stat_max_age, 1.0);
  EXPECT_EQ(d->fuse.revalidate_interval, 60.0);
  EXPECT_FALSE(d->fuse.immutable);
  auto off = ParseConfig("fuse: {keep_cache: false}");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->fuse.open_mode, OpenMode::kPerOpen);
  auto both = ParseConfig("fuse: {keep_cache: true, open_mode: per_open}");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->fuse.open_mode, OpenMode::kPerOpen);
}

TEST(Config, FullFileParses) {
  auto c = ParseConfig(R"(
fuse: {threads: 4, clone_fd: false, entry_timeout: 0, attr_timeout: 1.5, keep_cache: false, open_mode: per_open,
       watch_backing: false, stat_ahead: 0, stat_max_age: 0.25, revalidate_interval: 5,
       immutable: true}
cache:
  tiers:
    - {kind: ram, capacity: 2GiB, threads: 3}
  staging: {capacity: 64MiB, threads: 2}
  demand_threads: 2
  fetch_timeout: 5
  chunk_size: 8MiB
  record_chunk_size: 1MiB
  consumption_lag: 1000
  keep_copies: false
  backing_pages: keep
log: {level: debug, file: /tmp/x.log}
warn: {no_plan_after: 5, check_reads: 0, order_slack: 100}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->fuse.threads, 4);
  EXPECT_FALSE(c->fuse.clone_fd);
  EXPECT_EQ(c->fuse.attr_timeout, 1.5);
  EXPECT_FALSE(c->fuse.keep_cache);
  EXPECT_EQ(c->fuse.open_mode, OpenMode::kPerOpen);
  EXPECT_FALSE(c->fuse.watch_backing);
  EXPECT_EQ(c->fuse.stat_ahead, 0u);
  EXPECT_EQ(c->fuse.stat_max_age, 0.25);
  EXPECT_EQ(c->fuse.revalidate_interval, 5.0);
  EXPECT_TRUE(c->fuse.immutable);
  EXPECT_EQ(c->cache.tiers[0].capacity, 2ull << 30);
  EXPECT_EQ(c->cache.tiers[0].threads, 3);
  EXPECT_EQ(c->cache.prefetch.staging_capacity, 64u << 20);
  EXPECT_EQ(c->cache.prefetch.fetch_timeout, std::chrono::seconds(5));
  EXPECT_EQ(c->cache.prefetch.chunk_size, 8u << 20);
  EXPECT_EQ(c->cache.prefetch.record_chunk_size, 1u << 20);
  EXPECT_EQ(c->cache.prefetch.consumption_lag, 1000u);
  EXPECT_FALSE(c->cache.prefetch.keep_copies);
  EXPECT_EQ(c->cache.io.pages, IoOptions::Pages::kKeep);
  EXPECT_EQ(c->log.level, "debug");
  EXPECT_EQ(c->cache.prefetch.watch.no_plan_after, std::chrono::seconds(5));
  EXPECT_EQ(c->cache.prefetch.watch.check_reads, 0u);
  EXPECT_EQ(c->cache.prefetch.watch.order_slack, 100u);
}

TEST(Config, ChunksMustFitTheStagingWindowAndMaxFileSizeIsGone) {
  auto c = ParseConfig("cache: {chunk_size: 128MiB, staging: {capacity: 64MiB}}");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'cache.chunk_size'"), std::string::npos)
      << c.status().message();
  c = ParseConfig("cache: {max_file_size: 1GiB}");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("removed"), std::string::npos) << c.status().message();
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
  EXPECT_EQ(c->cluster.peer.plan_timeout, std::chrono::seconds(5));
  EXPECT_EQ(c->cluster.peer.peer_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(c->cluster.peer.serve_threads, 3);
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
      {"fuse: {open_mode: lazy}", "'fuse.open_mode'"},
      {"fuse: {open_mode: none, keep_cache: false}", "'fuse.keep_cache'"},
      {"fuse: {watch_backing: sometimes}", "'fuse.watch_backing'"},
      {"fuse: {stat_ahead: -1}", "'fuse.stat_ahead'"},
      {"fuse: {stat_ahead: 2000000}", "'fuse.stat_ahead'"},
      {"fuse: {revalidate_interval: 0}", "'fuse.revalidate_interval'"},
      {"fuse: {revalidate_interval: 100000}", "'fuse.revalidate_interval'"},
      {"fuse: {immutable: maybe}", "'fuse.immutable'"},
      {"fuse: {stat_max_age: 0}", "'fuse.stat_max_age'"},
      {"fuse: {stat_max_age: 61}", "'fuse.stat_max_age'"},
      {"batch: {max_clients: 0}", "'batch.max_clients'"},
      {"batch: {max_clients_per_user: 0}", "'batch.max_clients_per_user'"},
      {"batch: {max_samples: 0}", "'batch.max_samples'"},
      {"batch: {max_samples: 500001}", "'batch.max_samples'"},
      {"batch: {max_buffer_bytes: 1KiB}", "'batch.max_buffer_bytes'"},
      {"batch: {send_timeout: 0}", "'batch.send_timeout'"},
      {"batch: {send_timeout: 3601}", "'batch.send_timeout'"},
      {"batch: {enabled: sometimes}", "'batch.enabled'"},
      {"batch: {socket: /x}", "'batch.socket'"},
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

// -o key=value on the command line: set over the file as if written in it.
TEST(LoadConfig, CommandLineKeysOverTheFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("clairfs-config-test-" + std::to_string(getpid()) + ".yaml"))
                               .string();
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("cache:\n  staging: {capacity: 8MiB}\n  demand_threads: 3\n", f);
    std::fclose(f);
  }
  struct Cleanup {
    std::string p;
    ~Cleanup() { std::remove(p.c_str()); }
  } cleanup{path};

  auto c = LoadConfig(path, {{"cache.staging.capacity", "16MiB"},
                             {"log.level", "debug"},
                             {"cache.tiers.1.capacity", "2GiB"},
                             {"fuse.keep_cache", "false"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cache.prefetch.staging_capacity, 16u << 20);
  EXPECT_EQ(c->cache.prefetch.demand_threads, 3);  // from the file, untouched
  EXPECT_EQ(c->log.level, "debug");
  EXPECT_FALSE(c->fuse.keep_cache);
  // An index into tiers the file does not list reaches the built-in ones.
  ASSERT_EQ(c->cache.tiers.size(), 2u);
  EXPECT_EQ(c->cache.tiers[0].kind, "ram");
  EXPECT_EQ(c->cache.tiers[1].kind, "ssd");
  EXPECT_EQ(c->cache.tiers[1].capacity, 2ull << 30);

  // Later keys win; a whole list as a flow value; no file at all.
  c = LoadConfig(
      "", {{"cache.tiers", "[{kind: ram, capacity: 40MiB}]"}, {"cache.tiers.0.threads", "5"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->cache.tiers.size(), 1u);
  EXPECT_EQ(c->cache.tiers[0].capacity, 40u << 20);
  EXPECT_EQ(c->cache.tiers[0].threads, 5);

  const struct {
    std::vector<ConfigOverride> o;
    const char* needle;
  } bad[] = {
      {{{"cache.nope", "1"}}, "cache.nope"},
      {{{"cache.staging.capacity", "lots"}}, "cache.staging.capacity"},
      {{{"cache.tiers.2.capacity", "1GiB"}}, "2 element"},
      {{{"cache.tiers.ram.capacity", "1GiB"}}, "index"},
      {{{"cache..x", "1"}}, "empty name"},
      {{{"cache.demand_threads.x", "1"}}, "inside a value"},
      {{{"fuse.threads", "[unclosed"}}, "not valid YAML"},
  };
  for (const auto& b : bad) {
    auto r = LoadConfig(path, b.o);
    ASSERT_FALSE(r.ok()) << b.o[0].key;
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos)
        << b.o[0].key << " -> " << r.status().message();
  }
  // An unreadable file says why.
  auto r = LoadConfig("/nonexistent/clairfs.yaml", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("No such file"), std::string::npos) << r.status().message();
}

// "auto" is the same as leaving a capacity out: sized at start (conf/memory_budget.h); an
// explicit size is marked so that the memory check never lowers it.
TEST(Config, AutoCapacities) {
  auto c = ParseConfig("cache: {tiers: [{kind: ram, capacity: auto}], staging: {capacity: auto}}");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cache.tiers[0].capacity, 0u);
  EXPECT_TRUE(c->cache.prefetch.tune_staging_capacity);
  EXPECT_TRUE(ParseConfig("").value().cache.prefetch.tune_staging_capacity);
  auto d = ParseConfig("cache: {staging: {capacity: 64MiB}}");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->cache.prefetch.tune_staging_capacity);
  auto e =
      LoadConfig("", {{"cache.staging.capacity", "32MiB"}, {"cache.tiers.0.capacity", "auto"}});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_FALSE(e->cache.prefetch.tune_staging_capacity);
  EXPECT_EQ(e->cache.prefetch.staging_capacity, 32u << 20);
  EXPECT_EQ(e->cache.tiers[0].capacity, 0u);
  auto f = ParseConfig("cache: {tiers: [{kind: ram, capacity: automatic}]}");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("'cache.tiers[0].capacity'"), std::string::npos);
}

}  // namespace
}  // namespace clairfs
