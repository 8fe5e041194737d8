#include "fs/core/node_reads.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace clairfs {
namespace {

std::shared_ptr<OpenContents> Contents() { return std::make_shared<OpenContents>(); }

TEST(NodeReads, BindFindReleaseAndDrop) {
  NodeReads reads(8);
  EXPECT_EQ(reads.Find(5), nullptr);
  auto a = Contents();
  reads.Bind(5, a);
  EXPECT_EQ(reads.Find(5), a);
  // A release for contents the node is no longer bound to changes nothing.
  auto b = Contents();
  reads.Bind(5, b);
  reads.Release(5, a.get());
  EXPECT_EQ(reads.Find(5), b);
  reads.Release(5, b.get());
  EXPECT_EQ(reads.Find(5), nullptr);
  reads.Bind(6, a);
  reads.Drop(6);
  EXPECT_EQ(reads.Find(6), nullptr);
  EXPECT_EQ(reads.size(), 0u);
}

TEST(NodeReads, HoldsAtMostCapacityDroppingTheLeastRecentlyUsed) {
  NodeReads reads(3);
  std::vector<std::shared_ptr<OpenContents>> c;
  for (int i = 0; i < 3; ++i) {
    c.push_back(Contents());
    reads.Bind(i, c.back());
  }
  EXPECT_EQ(reads.Find(0), c[0]);  // 0 is now the most recently used: 1 goes next
  c.push_back(Contents());
  reads.Bind(3, c.back());
  EXPECT_EQ(reads.size(), 3u);
  EXPECT_EQ(reads.Find(1), nullptr);
  EXPECT_EQ(reads.Find(0), c[0]);
  EXPECT_EQ(reads.Find(2), c[2]);
  EXPECT_EQ(reads.Find(3), c[3]);
  // Dropped contents are the caller's to keep alive: the table held only a reference.
  EXPECT_EQ(c[1].use_count(), 1);
}

std::shared_ptr<OpenContents> Holding(size_t n) {
  auto c = Contents();
  c->blob = Blob::Allocate(n, FileVersion{});
  return c;
}

// Readers that leave files half read (a header read, a killed loader) cannot make the table
// hold more than its byte bound: the least recently used go, never the node just bound.
TEST(NodeReads, HoldsAtMostMaxBytesDroppingTheLeastRecentlyUsed) {
  NodeReads reads(4096, 10 << 20);
  std::vector<std::shared_ptr<OpenContents>> c;
  for (int i = 0; i < 40; ++i) {
    c.push_back(Holding(1 << 20));
    reads.Bind(i, c.back());
    EXPECT_LE(reads.bytes(), uint64_t{10} << 20);
  }
  EXPECT_EQ(reads.size(), 10u);
  EXPECT_EQ(reads.Find(29), nullptr);
  EXPECT_EQ(reads.Find(30), c[30]);
  EXPECT_EQ(c[0].use_count(), 1);
  // A chunked file counts its grid's size (the one chunk it holds at a time).
  auto chunked = Contents();
  chunked->chunked = true;
  chunked->chunk_size = 4 << 20;
  reads.Bind(100, chunked);
  EXPECT_EQ(reads.size(), 7u);
  EXPECT_EQ(reads.bytes(), uint64_t{10} << 20);
  // Rebinding a node replaces its count; release and drop give it back.
  reads.Bind(100, Holding(1 << 20));
  EXPECT_EQ(reads.bytes(), uint64_t{7} << 20);
  reads.Drop(100);
  reads.Release(39, c[39].get());
  EXPECT_EQ(reads.bytes(), uint64_t{5} << 20);
  // One object larger than the bound is still held while it is read.
  reads.Bind(200, Holding(20 << 20));
  EXPECT_EQ(reads.size(), 1u);
  EXPECT_NE(reads.Find(200), nullptr);
}

TEST(NodeReads, ConcurrentUseKeepsTheBound) {
  NodeReads reads(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const uint64_t node = (i * 7 + t) % 40;
        if (auto c = reads.Find(node); c && i % 3 == 0) {
          reads.Release(node, c.get());
        } else {
          reads.Bind(node, Contents());
        }
        if (i % 97 == 0) reads.Drop(node);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(reads.size(), 16u);
}

}  // namespace
}  // namespace clairfs
