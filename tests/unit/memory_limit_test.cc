// CgroupMemoryLimit on fake /proc and /sys trees (v1, v2, hybrid, nested, unlimited,
// unreadable), and FitMemory: the capacity check against a memory limit.
#include "conf/memory_limit.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "conf/config.h"
#include "conf/memory_budget.h"

namespace clairfs {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1ull << 20;

class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/clairfs-cgroup-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  void Groups(const std::string& text) { Write("/proc/self/cgroup", text); }
  // mountinfo lines: id parent dev root mountpoint options - fstype source superoptions
  void Mounts(const std::string& text) { Write("/proc/self/mountinfo", text); }
  std::string root_;
};

const char* kV1Mounts =
    "22 1 0:20 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
    "25 22 0:23 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    "26 22 0:24 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";

TEST_F(FakeRoot, V1TakesTheTightestOfTheGroupAndItsAncestors) {
  Groups("5:cpu,cpuacct:/slurm/job1\n4:memory:/slurm/uid_0/job_7/step_0\n0::/\n");
  Mounts(kV1Mounts);
  const std::string m = "/sys/fs/cgroup/memory";
  Write(m + "/memory.limit_in_bytes", "9223372036854771712\n");  // the root: unlimited
  Write(m + "/slurm/memory.limit_in_bytes", "9223372036854771712\n");
  Write(m + "/slurm/uid_0/memory.limit_in_bytes", std::to_string(4096 * kMiB) + "\n");
  Write(m + "/slurm/uid_0/job_7/memory.limit_in_bytes", std::to_string(256 * kMiB) + "\n");
  Write(m + "/slurm/uid_0/job_7/step_0/memory.limit_in_bytes", "9223372036854771712\n");
  // A cpu hierarchy's files never count.
  Write("/sys/fs/cgroup/cpu,cpuacct/slurm/job1/memory.limit_in_bytes", "1048576\n");
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_EQ(got.limit, 256 * kMiB);
  EXPECT_EQ(got.source, root_ + m + "/slurm/uid_0/job_7/memory.limit_in_bytes");
  EXPECT_TRUE(got.notes.empty());
}

TEST_F(FakeRoot, V1MountFoundWhereverMountinfoSaysAndWithARootedMount) {
  // The hierarchy mounted elsewhere (escaped space in the path), showing only /docker/abc.
  Groups("3:memory:/docker/abc/inner\n");
  Mounts("30 1 0:40 /docker/abc /run/my\\040cgroups rw - cgroup cgroup rw,memory,nosuid\n");
  Write("/run/my cgroups/memory.limit_in_bytes", std::to_string(512 * kMiB));
  Write("/run/my cgroups/inner/memory.limit_in_bytes", std::to_string(768 * kMiB));
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_EQ(got.limit, 512 * kMiB);
  EXPECT_EQ(got.source, root_ + "/run/my cgroups/memory.limit_in_bytes");
}

TEST_F(FakeRoot, V2ReadsMaxAndHighUpToTheRoot) {
  Groups("0::/kubepods/pod1/ctr\n");
  Mounts("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n");
  Write("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");  // the root: no memory.max
  Write("/sys/fs/cgroup/kubepods/memory.max", "max\n");
  Write("/sys/fs/cgroup/kubepods/pod1/memory.max", std::to_string(1024 * kMiB) + "\n");
  Write("/sys/fs/cgroup/kubepods/pod1/memory.high", "max\n");
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/memory.high", std::to_string(300 * kMiB) + "\n");
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_EQ(got.limit, 300 * kMiB);
  EXPECT_EQ(got.source, root_ + "/sys/fs/cgroup/kubepods/pod1/ctr/memory.high");
  EXPECT_TRUE(got.notes.empty());
}

// In a container with its own cgroup namespace the group is "/" and its limit lies at the
// mount's root.
TEST_F(FakeRoot, V2NamespaceRootCountsItsOwnLimit) {
  Groups("0::/\n");
  Mounts("30 1 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
  Write("/sys/fs/cgroup/memory.max", std::to_string(512 * kMiB) + "\n");
  EXPECT_EQ(CgroupMemoryLimit(root_).limit, 512 * kMiB);
}

TEST_F(FakeRoot, HybridTakesTheSmallerOfV1AndV2) {
  Groups("4:memory:/job\n0::/job\n");
  Mounts(std::string(kV1Mounts) +
         "31 22 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n");
  Write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(900 * kMiB));
  Write("/sys/fs/cgroup/unified/job/memory.max", std::to_string(600 * kMiB));
  EXPECT_EQ(CgroupMemoryLimit(root_).limit, 600 * kMiB);
}

TEST_F(FakeRoot, UnlimitedEverywhereIsNoLimit) {
  Groups("4:memory:/a\n0::/a\n");
  Mounts(std::string(kV1Mounts) + "31 22 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712");
  Write("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", "9223372036854771712");
  Write("/sys/fs/cgroup/unified/a/memory.max", "max");
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_FALSE(got.limited());
  EXPECT_EQ(got.source, "");
  EXPECT_TRUE(got.notes.empty());
}

TEST_F(FakeRoot, NothingToReadIsNoLimit) {
  EXPECT_FALSE(CgroupMemoryLimit(root_).limited());  // no /proc at all
  Groups("0::/\n");
  EXPECT_FALSE(CgroupMemoryLimit(root_).limited());  // no mountinfo
  Mounts("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  EXPECT_FALSE(CgroupMemoryLimit(root_).limited());  // the root group: no memory.max
}

TEST_F(FakeRoot, UnreadableOrGarbageIsNoLimitAtThatLevelAndANote) {
  Groups("4:memory:/a/b\n");
  Mounts(kV1Mounts);
  const std::string m = root_ + "/sys/fs/cgroup/memory";
  fs::create_directories(m + "/a/b/memory.limit_in_bytes");  // a directory: read fails
  Write("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", "lots\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(2048 * kMiB));
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_EQ(got.limit, 2048 * kMiB);  // the readable ancestor still counts
  ASSERT_EQ(got.notes.size(), 2u);
  EXPECT_NE(got.notes[0].find("a/b/memory.limit_in_bytes"), std::string::npos) << got.notes[0];
  EXPECT_NE(got.notes[1].find("not a memory limit"), std::string::npos) << got.notes[1];
}

TEST_F(FakeRoot, PathOutsideEveryMountIsSkippedWithANote) {
  Groups("4:memory:/elsewhere/x\n");
  Mounts("30 1 0:40 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  const CgroupMemory got = CgroupMemoryLimit(root_);
  EXPECT_FALSE(got.limited());
  ASSERT_EQ(got.notes.size(), 1u);
  EXPECT_NE(got.notes[0].find("outside"), std::string::npos);
}

TEST(CgroupLimit, ParsesValues) {
  uint64_t v = 1;
  EXPECT_TRUE(ParseCgroupLimit("max\n", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ParseCgroupLimit("268435456\n", &v));
  EXPECT_EQ(v, 256 * kMiB);
  EXPECT_TRUE(ParseCgroupLimit("9223372036854771712", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_FALSE(ParseCgroupLimit("", &v));
  EXPECT_FALSE(ParseCgroupLimit("-1", &v));
  EXPECT_FALSE(ParseCgroupLimit("99999999999999999999999", &v));
}

// ---------------------------------------------------------------------------- FitMemory

Config Parsed(const std::string& yaml) {
  auto c = ParseConfig(yaml);
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return Config{};
  return std::move(c.value());
}

const char* kOneRamTier = "cache: {tiers: [{kind: ram, capacity: 1GiB}]}";

TEST(FitMemory, AnExplicitRamTierTheLimitCannotHoldIsRefusedWithWhatFits) {
  Config c = Parsed(kOneRamTier);
  MemoryFit fit;
  const Status s = FitMemory(&c, 256 * kMiB,
                             "the memory limit of the daemon's cgroup (256.0 MiB, "
                             "/sys/fs/cgroup/memory/job/memory.limit_in_bytes)",
                             &fit);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'cache.tiers[0].capacity'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1.0 GiB of RAM tiers"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("memory.limit_in_bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("of RAM tiers fit"), std::string::npos) << s.message();
  EXPECT_EQ(c.cache.tiers[0].capacity, 1ull << 30);  // never changed
}

TEST(FitMemory, WhatTheRefusalSaysFitsDoesFit) {
  Config c = Parsed("cache: {tiers: [{kind: ram, capacity: 1GiB}], staging: {capacity: 32MiB}}");
  MemoryFit fit;
  const MemoryNeed need = EstimateMemory(c);
  const uint64_t limit = 256 * kMiB;
  const uint64_t fits = limit - MemoryHeadroom(limit) - need.own() - need.staging;
  c.cache.tiers[0].capacity = fits;
  EXPECT_TRUE(FitMemory(&c, limit, "x", &fit).ok());
  c.cache.tiers[0].capacity = fits + 1;
  EXPECT_FALSE(FitMemory(&c, limit, "x", &fit).ok());
}

TEST(FitMemory, AnExplicitStagingWindowIsNamedWhenItAloneIsTooMuch) {
  Config c = Parsed("cache: {tiers: [{kind: ram}], staging: {capacity: 512MiB}}");
  MemoryFit fit;
  const Status s = FitMemory(&c, 256 * kMiB, "the limit", &fit);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'cache.staging.capacity'"), std::string::npos) << s.message();
}

TEST(FitMemory, DefaultCapacitiesAreSizedToHalfTheLimitWithAWarning) {
  const uint64_t limit = 1024 * kMiB;
  for (const char* yaml : {"",
                           "cache: {tiers: [{kind: ram, capacity: auto}], staging: "
                           "{capacity: auto}}"}) {
    Config c = Parsed(yaml);
    MemoryFit fit;
    ASSERT_TRUE(FitMemory(&c, limit, "the limit", &fit).ok()) << yaml;
    const MemoryNeed need = EstimateMemory(c);
    EXPECT_LE(need.total(), (limit - MemoryHeadroom(limit)) / 2) << yaml;
    EXPECT_GT(need.total(), (limit - MemoryHeadroom(limit)) / 2 - kMiB) << yaml;
    EXPECT_GT(c.cache.tiers[0].capacity, 64 * kMiB) << yaml;
    EXPECT_LT(c.cache.prefetch.staging_capacity, 256 * kMiB) << yaml;
    EXPECT_GE(c.cache.prefetch.staging_capacity, c.cache.prefetch.chunk_size) << yaml;
    EXPECT_EQ(fit.warnings.size(), 2u) << yaml;
    EXPECT_NE(fit.summary.find("within the limit"), std::string::npos) << fit.summary;
  }
  // Where the daemon's own memory takes half already, defaults shrink to the least window and
  // no RAM tier, as long as that fits.
  Config c = Parsed("");
  MemoryFit fit;
  ASSERT_TRUE(FitMemory(&c, 256 * kMiB, "the limit", &fit).ok());
  EXPECT_EQ(c.cache.tiers[0].capacity, 0u);
  EXPECT_EQ(c.cache.prefetch.staging_capacity, c.cache.prefetch.chunk_size);
  EXPECT_EQ(fit.warnings.size(), 2u);
}

TEST(FitMemory, DefaultsAreUnchangedWhenTheyFit) {
  Config c = Parsed("");
  MemoryFit fit;
  ASSERT_TRUE(FitMemory(&c, 64ull << 30, "the machine's memory (64.0 GiB)", &fit).ok());
  EXPECT_EQ(c.cache.tiers[0].capacity, 1ull << 30);
  EXPECT_EQ(c.cache.prefetch.staging_capacity, 256 * kMiB);
  EXPECT_TRUE(fit.warnings.empty());
}

TEST(FitMemory, NothingFitsIsRefusedEvenWithDefaults) {
  Config c = Parsed("");
  MemoryFit fit;
  const Status s = FitMemory(&c, 96 * kMiB, "the limit", &fit);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the daemon's own memory"), std::string::npos) << s.message();
}

TEST(FitMemory, TheDaemonsOwnMemoryFollowsItsThreadsChunksAndTiers) {
  Config c = Parsed(
      "cache: {tiers: [{kind: ram, capacity: 8MiB, threads: 1}], demand_threads: 2,"
      " chunk_size: 1MiB, staging: {capacity: 8MiB}}");
  const MemoryNeed a = EstimateMemory(c);
  EXPECT_EQ(a.in_flight, 3 * kMiB);
  EXPECT_EQ(a.ssd, 0u);
  EXPECT_EQ(a.node_reads, c.fuse.node_read_bytes);
  Config d = Parsed(
      "fuse: {open_mode: per_open}\ncache: {tiers: [{kind: ram, capacity: 8MiB}, "
      "{kind: ssd, dir: /x}]}");
  const MemoryNeed b = EstimateMemory(d);
  EXPECT_GT(b.ssd, 0u);
  EXPECT_EQ(b.node_reads, 0u);
}

}  // namespace
}  // namespace clairfs
