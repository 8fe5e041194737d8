// PosixBacking on real files in a temp dir: non-regular files, files rewritten while read, and a
// stalled file system below part of the dataset (a bindfs mount whose daemon is SIGSTOPped).
#include "cache/backing/backing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "cache/plan/path_check.h"
#include "conf/config.h"
#include "fs/status_errno.h"
#include "tests/unit/test_util.h"

extern char** environ;

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::TempDir;

std::chrono::milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

std::unique_ptr<PosixBacking> OpenBacking(const std::string& root, IoOptions io = {},
                                          Stats* stats = nullptr) {
  auto b = PosixBacking::Open(root, io, stats);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(b.value()) : nullptr;
}

TEST(PosixBacking, ReadsAFileWithItsVersion) {
  TempDir dir;
  WriteFile(dir.path() + "/a", "hello");
  auto backing = OpenBacking(dir.path());
  auto blob = backing->Read("a", ByteRange::Whole());
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  EXPECT_EQ(std::string(blob.value()->data(), blob.value()->size()), "hello");
  struct stat st;
  ASSERT_TRUE(backing->Lstat("a", &st).ok());
  EXPECT_EQ(blob.value()->version(), VersionOf(st));
  auto range = backing->Read("a", {1, 3});
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(std::string(range.value()->data(), range.value()->size()), "ell");
  EXPECT_EQ(range.value()->version(), VersionOf(st));
  EXPECT_EQ(backing->Read("a", {3, 3}).status().code(), Code::kInvalidArgument);  // past the end
  EXPECT_EQ(backing->Read("a", {6, 1}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backing->Read("missing", ByteRange::Whole()).status().code(), Code::kNotFound);
}

// A FIFO swapped in for a file: without O_NONBLOCK open() blocks until a writer appears.
// LstatMany (one I/O call, by directory) reports exactly what Lstat reports, path by path:
// files, symlinks (not followed), paths through a symlink or a file, missing names, odd names.
TEST(PosixBacking, LstatManyAgreesWithLstat) {
  TempDir dir;
  const std::string r = dir.path();
  ASSERT_EQ(mkdir((r + "/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((r + "/b").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((r + "/a/deep").c_str(), 0755), 0);
  WriteFile(r + "/top", "1");
  WriteFile(r + "/a/x", "22");
  WriteFile(r + "/b/y", "333");
  WriteFile(r + "/a/deep/z", "4444");
  ASSERT_EQ(symlink("x", (r + "/a/link").c_str()), 0);
  ASSERT_EQ(symlink("../b", (r + "/a/dirlink").c_str()), 0);
  ASSERT_EQ(symlink("/etc", (r + "/out").c_str()), 0);
  auto backing = OpenBacking(r);
  const std::vector<std::string> paths = {
      "a/x",         "b/y",  "top",        "a/deep/z",  "a/link",    "a/dirlink",
      "a/dirlink/y", "out",  "out/passwd", "a/missing", "missing/x", "top/x",
      "a/.",         "a/..", "a/",         "b/y",       "a/deep"};
  std::vector<struct stat> st;
  std::vector<Status> status;
  std::vector<std::string> given = paths;
  backing->LstatMany(&given, &st, &status);
  EXPECT_EQ(given, paths);  // given back
  ASSERT_EQ(st.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat one {};
    const Status s = backing->Lstat(paths[i], &one);
    ASSERT_EQ(status[i].ok(), s.ok())
        << paths[i] << ": " << status[i].ToString() << " vs " << s.ToString();
    if (s.ok()) {
      EXPECT_EQ(st[i].st_ino, one.st_ino) << paths[i];
      EXPECT_EQ(st[i].st_mode, one.st_mode) << paths[i];
      EXPECT_EQ(VersionOf(st[i]), VersionOf(one)) << paths[i];
    } else {
      EXPECT_EQ(status[i].code(), s.code()) << paths[i];
      EXPECT_EQ(status[i].os_errno(), s.os_errno()) << paths[i];
    }
  }
  EXPECT_TRUE(S_ISLNK(st[4].st_mode));  // a/link: the symlink itself
}

TEST(PosixBacking, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir.path() + "/fifo").c_str(), 0644), 0);
  ASSERT_EQ(mkdir((dir.path() + "/sub").c_str(), 0755), 0);
  WriteFile(dir.path() + "/sub/f", "data");
  auto backing = OpenBacking(dir.path(), {.timeout = 2s});

  struct stat st;
  ASSERT_TRUE(backing->Lstat("fifo", &st).ok());  // still listed and stat-able
  EXPECT_TRUE(S_ISFIFO(st.st_mode));

  auto start = Clock::now();
  auto blob = backing->Read("fifo", ByteRange::Whole());
  EXPECT_EQ(blob.status().code(), Code::kInvalidArgument) << blob.status().ToString();
  EXPECT_NE(blob.status().message().find("not a regular file"), std::string::npos);
  auto fd = backing->OpenFile("fifo");
  EXPECT_EQ(fd.status().code(), Code::kInvalidArgument) << fd.status().ToString();
  EXPECT_LT(Since(start), 1000ms);

  // A directory is no file to read, but still opens as a directory.
  EXPECT_EQ(backing->Read("sub", ByteRange::Whole()).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backing->OpenFile("sub").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backing->OpenDir("fifo").status().os_errno(), ENOTDIR);
  auto d = backing->OpenDir("sub");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(S_ISDIR(d.value().st.st_mode));
  std::vector<std::string> names;
  for (off_t off = 0;;) {  // one entry per batch (bytes 1): every position is resumed from
    auto batch = backing->ReadDir(d.value().handle, "sub", off, 1);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (batch.value().empty()) break;
    ASSERT_EQ(batch.value().size(), 1u);
    names.push_back(batch.value()[0].name);
    off = batch.value()[0].next;
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".", "..", "f"}));

  // A regular file opens with its attributes and reads through its handle.
  auto f = backing->OpenFile("sub/f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f.value().st.st_size, 4);
  auto bytes = backing->ReadAt(f.value().handle, "sub/f", 8, 1);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(std::string(bytes.value().data.get(), bytes.value().size), "ata");
  ASSERT_TRUE(backing->Fstat(f.value().handle, "sub/f", &st).ok());
  EXPECT_EQ(st.st_ino, f.value().st.st_ino);
}

// The pages a file's read left in the page cache, counted with mincore.
size_t ResidentPages(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return SIZE_MAX;
  struct stat st;
  fstat(fd, &st);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = (static_cast<size_t>(st.st_size) + page - 1) / page;
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return SIZE_MAX;
  std::vector<unsigned char> in(n);
  size_t resident = SIZE_MAX;
  if (mincore(map, static_cast<size_t>(st.st_size), in.data()) == 0) {
    resident = static_cast<size_t>(
        std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; }));
  }
  munmap(map, static_cast<size_t>(st.st_size));
  return resident;
}

// IoOptions::pages: kDrop lets the kernel drop the pages of a file read whole once the bytes
// are in the blob (the daemon holds them now), unless the file was modified within the last
// second; kKeep leaves them.
TEST(PosixBacking, AWholeReadDropsTheFilesPagesUnlessModifiedJustNow) {
  TempDir dir;
  const std::string data(256 << 10, 'x');
  WriteFile(dir.path() + "/old", data);
  WriteFile(dir.path() + "/kept", data);
  for (const char* name : {"old", "kept"}) {  // clean pages: neither advice drops dirty ones
    const int fd = open((dir.path() + "/" + name).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
  }
  struct stat st;
  ASSERT_EQ(stat((dir.path() + "/kept").c_str(), &st), 0);
  const auto changed = std::chrono::system_clock::time_point(
      std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec));
  ASSERT_TRUE(
      testing::WaitFor([&] { return std::chrono::system_clock::now() > changed + 1200ms; }, 10s));
  auto drop = OpenBacking(dir.path(), {.pages = IoOptions::Pages::kDrop});
  auto keep = OpenBacking(dir.path(), {.pages = IoOptions::Pages::kKeep});
  ASSERT_TRUE(keep->Read("kept", ByteRange::Whole()).ok());
  EXPECT_GT(ResidentPages(dir.path() + "/kept"), 0u);
  ASSERT_TRUE(drop->Read("old", ByteRange::Whole()).ok());
  EXPECT_EQ(ResidentPages(dir.path() + "/old"), 0u);
  // Just written: its pages stay (a writer may be at work).
  WriteFile(dir.path() + "/new", data);
  const int fd = open((dir.path() + "/new").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fsync(fd), 0);
  close(fd);
  ASSERT_TRUE(drop->Read("new", ByteRange::Whole()).ok());
  EXPECT_GT(ResidentPages(dir.path() + "/new"), 0u);
}

// A file rewritten in place while it is read: every blob holds exactly one version's bytes.
// Each version is written by one pwrite of the whole file, alternately all 'A' and all 'B'.
TEST(PosixBacking, NeverReturnsAMixOfVersions) {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  constexpr size_t kSize = 1 << 20;
  WriteFile(path, std::string(kSize, 'A'));
  auto backing = OpenBacking(dir.path());
  std::atomic<bool> stop{false};
  std::atomic<int> rewrites{0};
  std::thread writer([&] {
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const std::string a(kSize, 'A'), b(kSize, 'B');
    for (int round = 1; !stop.load(); ++round) {
      const std::string& version = round % 2 ? b : a;
      ASSERT_EQ(pwrite(fd, version.data(), kSize, 0), static_cast<ssize_t>(kSize));
      rewrites.fetch_add(1);
    }
    close(fd);
  });
  int ok = 0, changed = 0, mixed = 0;
  const auto end = Clock::now() + 3s;
  while (Clock::now() < end || rewrites.load() < 20) {
    auto blob = backing->Read("f", ByteRange::Whole());
    if (!blob.ok()) {
      EXPECT_EQ(blob.status().code(), Code::kIoError) << blob.status().ToString();
      EXPECT_NE(blob.status().message().find("changed while being read"), std::string::npos);
      ++changed;
      continue;
    }
    ++ok;
    const BlobPtr& b = blob.value();
    ASSERT_EQ(b->size(), kSize);
    const char first = b->data()[0];
    if (std::find_if(b->data(), b->data() + kSize, [&](char c) { return c != first; }) !=
        b->data() + kSize) {
      ++mixed;
    }
  }
  stop = true;
  writer.join();
  EXPECT_EQ(mixed, 0) << ok << " whole reads, " << changed << " refused";
  // Once the file is left alone it reads again (the retry waits out a coarse clock tick).
  auto last = backing->Read("f", ByteRange::Whole());
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  struct stat st;
  ASSERT_TRUE(backing->Lstat("f", &st).ok());
  EXPECT_EQ(last.value()->version(), VersionOf(st));
}

// A descriptor read at the version it was opened at: exactly the bytes that version holds
// in the range (clipped to its size), or ESTALE once the file is another version. Never
// fewer bytes than the version holds there: a reader of a truncated file would get zeros.
TEST(PosixBacking, ReadAtVersionServesTheVersionOpenedOrEstale) {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  WriteFile(path, std::string(8192, 'A'));
  auto backing = OpenBacking(dir.path());
  auto f = backing->OpenFile("f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const FileVersion opened = VersionOf(f.value().st);
  auto r = backing->ReadAtVersion(f.value().handle, "f", 4096, 6144, opened);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::string(r.value().data.get(), r.value().size), std::string(2048, 'A'));
  r = backing->ReadAtVersion(f.value().handle, "f", 10, 8192, opened);  // at the end
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().size, 0u);
  // Truncated, then written again up to half its size: the read comes back short.
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  WriteFile(path, std::string(4096, 'B'));
  r = backing->ReadAtVersion(f.value().handle, "f", 8192, 0, opened);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kStale) << r.status().ToString();
  EXPECT_EQ(ToErrno(r.status()), ESTALE);
  // Written back to the same size (an fstat shows the change, the bytes are whole but of
  // another version than the one opened).
  WriteFile(path, std::string(8192, 'B'));
  r = backing->ReadAtVersion(f.value().handle, "f", 4096, 0, opened);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kStale) << r.status().ToString();
  EXPECT_EQ(ToErrno(r.status()), ESTALE);
  // The version it is now reads (once its stamps are no longer recent: within ~10 ms).
  struct stat st;
  ASSERT_TRUE(backing->Fstat(f.value().handle, "f", &st).ok());
  r = backing->ReadAtVersion(f.value().handle, "f", 4096, 4096, VersionOf(st));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::string(r.value().data.get(), r.value().size), std::string(4096, 'B'));
}

// A writer rewrites the file in 16 KiB pieces (half the rounds truncating first; pauses between
// rewrites) while reads of 64 KiB at the version fstat'ed just before run beside it. A read
// never comes back short of that version, and its bytes are each of some version; a read may
// return a step of a rewrite (the front of one version and the rest of another) when the
// writer pauses between two pieces past the 10 ms a single write is given, as a read of the
// file itself would (docs/reliability.md, "Reads that overlap a write": the mixes seen and the
// writer's longest pause are printed). Left alone, the file reads whole.
TEST(PosixBacking, ReadAtVersionNeverReadsShortAndReadsWholeOnceLeftAlone) {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  constexpr size_t kSize = 256 << 10;
  WriteFile(path, std::string(kSize, 'A'));
  auto backing = OpenBacking(dir.path());
  auto f = backing->OpenFile("f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::atomic<bool> stop{false};
  std::atomic<int> rewrites{0};
  std::atomic<int64_t> longest_pause_us{0};  // between two pieces of one rewrite
  std::thread writer([&] {
    for (int round = 1; !stop.load(); ++round) {
      const std::string version(kSize, static_cast<char>('A' + round % 26));
      const int fd = open(path.c_str(), O_WRONLY | (round % 2 ? O_TRUNC : 0));
      ASSERT_GE(fd, 0);
      auto last = Clock::now();
      for (size_t off = 0; off < kSize; off += 16384) {
        ASSERT_EQ(pwrite(fd, version.data() + off, 16384, static_cast<off_t>(off)), 16384);
        const auto now = Clock::now();
        const int64_t us =
            std::chrono::duration_cast<std::chrono::microseconds>(now - last).count();
        if (us > longest_pause_us.load()) longest_pause_us.store(us);
        last = now;
      }
      close(fd);
      rewrites.fetch_add(1);
      // Between two versions, a pause of 0-29 ms (the workload's shape, not a wait): reads in
      // the longer ones find the file quiet past the 10 ms a single write may take, and are
      // served; the rest find it changing and get ESTALE.
      std::this_thread::sleep_for(std::chrono::milliseconds(round * 7 % 30));
    }
  });
  int ok = 0, stale = 0, mixed = 0, short_reads = 0, foreign = 0;
  const auto end = Clock::now() + 2s;
  while (Clock::now() < end || rewrites.load() < 20) {
    struct stat st;
    ASSERT_TRUE(backing->Fstat(f.value().handle, "f", &st).ok());
    const uint64_t off = static_cast<uint64_t>(ok + stale) % 4 * 65536;
    auto r = backing->ReadAtVersion(f.value().handle, "f", 65536, off, VersionOf(st));
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), Code::kStale) << r.status().ToString();
      ++stale;
      continue;
    }
    ++ok;
    const size_t want = std::min<uint64_t>(
        65536, st.st_size > static_cast<off_t>(off) ? static_cast<uint64_t>(st.st_size) - off : 0);
    if (r.value().size != want) ++short_reads;
    const char* b = r.value().data.get();
    if (r.value().size && std::find_if(b, b + r.value().size, [&](char c) { return c != b[0]; }) !=
                              b + r.value().size) {
      ++mixed;
    }
    foreign += static_cast<int>(std::count_if(b, b + r.value().size, [](char c) {
      return c < 'A' || c > 'Z';  // a byte no version held (zeros of a short read padded)
    }));
  }
  stop = true;
  writer.join();
  const std::string seen = std::to_string(ok) + " reads (" + std::to_string(mixed) + " mixed), " +
                           std::to_string(stale) + " stale, writer's longest pause " +
                           std::to_string(longest_pause_us.load()) + " us";
  std::printf("%s\n", seen.c_str());
  EXPECT_EQ(short_reads, 0) << seen;
  EXPECT_EQ(foreign, 0) << seen;
  EXPECT_GT(ok, 0) << seen;  // reads were served, not all refused
  // Left alone, it reads whole again, of one version.
  struct stat st;
  ASSERT_TRUE(backing->Fstat(f.value().handle, "f", &st).ok());
  auto last = backing->ReadAtVersion(f.value().handle, "f", kSize, 0, VersionOf(st));
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_EQ(last.value().size, kSize);
  const char* d = last.value().data.get();
  EXPECT_EQ(std::count(d, d + kSize, d[0]), static_cast<std::ptrdiff_t>(kSize));
}

// A bindfs mount of src at mnt whose daemon can be stopped: every access below mnt then
// blocks in the kernel until it is continued. Teardown continues and unmounts it; a watchdog
// continues it after 60 s so that a call that never times out cannot hang the test forever.
class StalledMount {
 public:
  StalledMount(const std::string& src, const std::string& mnt) : mnt_(mnt) {
    if (access("/dev/fuse", R_OK | W_OK) != 0) return;
    // No kernel caching of names or attributes: every stat must reach bindfs, so that once it
    // is stopped a file read before the stall cannot be stat'ed from the kernel's cache.
    pid_ = Spawn({"bindfs", "-f", "--no-allow-other", "-o",
                  "entry_timeout=0,attr_timeout=0,negative_timeout=0", src, mnt});
    if (pid_ <= 0) return;
    const auto end = Clock::now() + 10s;
    while (!Mounted() && Clock::now() < end) std::this_thread::sleep_for(10ms);
    mounted_ = Mounted();
  }
  ~StalledMount() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    if (Mounted()) Wait(Spawn({"fusermount3", "-u", mnt_}), 20s);
    if (!Wait(pid_, 10s)) {
      kill(pid_, SIGKILL);
      Wait(pid_, 10s);
    }
    if (Mounted()) Wait(Spawn({"fusermount3", "-uz", mnt_}), 20s);
  }
  bool ok() const { return mounted_; }
  void Stop() {
    kill(pid_, SIGSTOP);
    watchdog_ = std::thread([this] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, 60s, [&] { return done_; })) kill(pid_, SIGCONT);
    });
  }

 private:
  static pid_t Spawn(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    return posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0 ? pid : -1;
  }
  static bool Wait(pid_t pid, std::chrono::seconds limit) {
    if (pid <= 0) return true;
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  bool Mounted() const {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(" " + mnt_ + " ") != std::string::npos) return true;
    }
    return false;
  }
  std::string mnt_;
  pid_t pid_ = -1;
  bool mounted_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watchdog_;
};

// A batch of path checks on a store that stops answering: LstatMany is abandoned at its
// deadline (the paths handed to it may not come back) and every path of the batch fails with
// it, promptly; what was checked is never read from paths that were not given back
// (AddressSanitizer checks the reads).
TEST(PosixBacking, PathChecksOnAStalledStoreFailAtTheDeadline) {
  TempDir dir, src;
  WriteFile(dir.path() + "/a", "local file");
  WriteFile(src.path() + "/x", "behind the stalled mount");
  WriteFile(src.path() + "/y", "also behind it");
  ASSERT_EQ(mkdir((dir.path() + "/slow").c_str(), 0755), 0);
  StalledMount mount(src.path(), dir.path() + "/slow");
  if (!mount.ok()) GTEST_SKIP() << "no FUSE or bindfs: cannot stall a file system";
  constexpr auto kTimeout = 1000ms;
  auto backing = OpenBacking(dir.path(), {.timeout = kTimeout, .max_threads = 8});
  PathResolver resolver(*backing, {});
  std::vector<PathResolver> resolvers = {resolver.Fork()};
  PathChecks before;  // the directory is memoized while the store answers
  const std::vector<std::string_view> first = {"slow/x"};
  CheckPaths(first, resolvers, &before);
  ASSERT_TRUE(before.paths[0].ok());
  mount.Stop();

  std::vector<std::string> paths = {"slow/x", "slow/y", "a"};
  std::vector<struct stat> st;
  std::vector<Status> status;
  auto start = Clock::now();
  backing->LstatMany(&paths, &st, &status);
  EXPECT_LT(Since(start), kTimeout + 2s);
  ASSERT_EQ(status.size(), 3u);
  for (const Status& s : status) EXPECT_EQ(s.code(), Code::kTimedOut) << s.ToString();

  const std::vector<std::string_view> batch = {"slow/y", "slow/x", "a"};
  PathChecks checks;
  start = Clock::now();
  CheckPaths(batch, resolvers, &checks);
  EXPECT_LT(Since(start), kTimeout + 2s);
  ASSERT_EQ(checks.size(), batch.size());
  ASSERT_EQ(checks.errors.size(), batch.size());
  for (uint32_t i = 0; i < batch.size(); ++i) {
    EXPECT_FALSE(checks.paths[i].ok()) << batch[i];
    EXPECT_EQ(checks.errors[i].first, i);
  }
}

TEST(PosixBacking, StalledFileFailsAtItsDeadlineWhileOthersAreServed) {
  TempDir dir, src;
  WriteFile(dir.path() + "/a", "local file");
  WriteFile(src.path() + "/x", "behind the stalled mount");
  WriteFile(src.path() + "/y", "also behind it");
  ASSERT_EQ(mkdir((dir.path() + "/slow").c_str(), 0755), 0);
  StalledMount mount(src.path(), dir.path() + "/slow");
  if (!mount.ok()) GTEST_SKIP() << "no FUSE or bindfs: cannot stall a file system";
  Stats stats;
  constexpr auto kTimeout = 1000ms;
  auto backing = OpenBacking(dir.path(), {.timeout = kTimeout, .max_threads = 8}, &stats);
  ASSERT_TRUE(backing->Read("slow/x", ByteRange::Whole()).ok());
  mount.Stop();

  // The stuck read ends at its deadline; meanwhile another file is read.
  std::atomic<bool> stuck_returned{false};
  Status stuck_status;
  std::chrono::milliseconds stuck_took{};
  std::thread reader([&] {
    const auto start = Clock::now();
    auto r = backing->Read("slow/y", ByteRange::Whole());
    stuck_took = Since(start);
    stuck_status = r.status();
    stuck_returned = true;
  });
  auto a = backing->Read("a", ByteRange::Whole());
  EXPECT_FALSE(stuck_returned.load());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(std::string(a.value()->data(), a.value()->size()), "local file");
  reader.join();
  EXPECT_EQ(stuck_status.code(), Code::kTimedOut) << stuck_status.ToString();
  EXPECT_GE(stuck_took, kTimeout);
  EXPECT_LT(stuck_took, kTimeout + 2s);

  // The stuck path fails at once now; Lstat and opens elsewhere still work.
  auto start = Clock::now();
  struct stat st;
  EXPECT_EQ(backing->Lstat("slow/y", &st).code(), Code::kTimedOut);
  EXPECT_LT(Since(start), kTimeout / 2);
  EXPECT_TRUE(backing->Lstat("a", &st).ok());
  EXPECT_TRUE(backing->OpenFile("a").ok());
  // Another path below the stalled mount gets its own deadline, then fails.
  start = Clock::now();
  EXPECT_EQ(backing->Lstat("slow/x", &st).code(), Code::kTimedOut);
  EXPECT_LT(Since(start), kTimeout + 2s);
  EXPECT_EQ(stats.errors.backing_timeout.load(), 3u);

  // Destruction does not wait for the two calls still stuck.
  start = Clock::now();
  backing.reset();
  EXPECT_LT(Since(start), 1000ms);
}

// The calls on a descriptor held open by a handle of the mount (reads, fstat, readdir) have
// the deadline of every call, and dropping the handle never waits for close().
TEST(PosixBacking, HandlesOnAStalledStoreFailAtTheDeadlineAndCloseWithoutWaiting) {
  TempDir dir, src;
  WriteFile(src.path() + "/x", std::string(8 << 20, 'x'));
  ASSERT_EQ(mkdir((src.path() + "/d").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir.path() + "/slow").c_str(), 0755), 0);
  StalledMount mount(src.path(), dir.path() + "/slow");
  if (!mount.ok()) GTEST_SKIP() << "no FUSE or bindfs: cannot stall a file system";
  constexpr auto kTimeout = 500ms;
  auto backing = OpenBacking(dir.path(), {.timeout = kTimeout, .max_threads = 8});
  auto f = backing->OpenFile("slow/x");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto d = backing->OpenDir("slow/d");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // Read near the start only: the range read below is beyond the kernel's readahead.
  ASSERT_TRUE(backing->ReadAt(f.value().handle, "slow/x", 10, 0).ok());
  mount.Stop();

  auto start = Clock::now();
  auto r = backing->ReadAt(f.value().handle, "slow/x", 4096, 7 << 20);
  EXPECT_EQ(r.status().code(), Code::kTimedOut) << r.status().ToString();
  EXPECT_GE(Since(start), kTimeout);
  EXPECT_LT(Since(start), kTimeout + 2s);
  // The same path now fails at once while its read is stuck; the handle stays alive for it.
  struct stat st;
  start = Clock::now();
  EXPECT_EQ(backing->Fstat(f.value().handle, "slow/x", &st).code(), Code::kTimedOut);
  EXPECT_LT(Since(start), kTimeout);
  auto entries = backing->ReadDir(d.value().handle, "slow/d", 0, 4096);
  EXPECT_EQ(entries.status().code(), Code::kTimedOut) << entries.status().ToString();

  // Dropping the last references posts the closes (a FLUSH to the stopped daemon) to I/O
  // threads: this thread goes on at once.
  start = Clock::now();
  f = Status::Error(Code::kUnavailable, "dropped");
  d = Status::Error(Code::kUnavailable, "dropped");
  EXPECT_LT(Since(start), 200ms);
  start = Clock::now();
  backing.reset();  // nor does destruction wait for the stuck calls or closes
  EXPECT_LT(Since(start), 1000ms);
}

// A store that did not answer is told apart by the code alone: a deadline, a dead mount
// (reopened), a server out of reach; an answer about the file is not.
TEST(PosixBacking, StoreUnreachableIsDecidedByTheCode) {
  for (int err : {ENOTCONN, ECONNABORTED, ECONNRESET, ESHUTDOWN, EHOSTDOWN, EHOSTUNREACH, ENETDOWN,
                  ENETUNREACH, ETIMEDOUT}) {
    EXPECT_TRUE(StoreUnreachable(Status::FromErrno(err, "f"))) << err;
  }
  EXPECT_TRUE(StoreUnreachable(Status::Error(Code::kTimedOut, "deadline")));
  EXPECT_TRUE(StoreUnreachable(Status::Error(Code::kDisconnected, "gone")));
  for (int err : {ENOENT, EACCES, EIO, ESTALE, ELOOP, ENOSPC}) {
    EXPECT_FALSE(StoreUnreachable(Status::FromErrno(err, "f"))) << err;
  }
  EXPECT_FALSE(StoreUnreachable(Status::Error(Code::kIoError, "x")));
}

// A caller's view reports what its identity may not see (kPermissionDenied) as missing: the
// identity that cannot be taken here stands for a directory it may not search.
TEST(PosixBacking, CallersViewReportsARefusalAsMissing) {
  TempDir dir;
  WriteFile(dir.path() + "/f", "x");
  auto backing = OpenBacking(dir.path());
  auto view = backing->AsCaller([](const std::function<Status()>&) {
    return Status::FromErrno(EACCES, "cannot take the identity");
  });
  struct stat st;
  const Status s = view->Lstat("f", &st);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_EQ(ToErrno(s), ENOENT);
  std::vector<std::string> paths = {"f", "g/h"};
  std::vector<struct stat> sts;
  std::vector<Status> status;
  view->LstatMany(&paths, &sts, &status);
  ASSERT_EQ(status.size(), 2u);
  for (const Status& one : status) EXPECT_EQ(ToErrno(one), ENOENT) << one.ToString();
  // Any other failure passes through as it is.
  auto failing = backing->AsCaller(
      [](const std::function<Status()>&) { return Status::FromErrno(EIO, "device"); });
  EXPECT_EQ(failing->Lstat("f", &st).code(), Code::kIoError);
}

TEST(BackingConfig, TimeoutIsRangeChecked) {
  auto c = ParseConfig("cache: {backing_timeout: 2.5}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cache.io.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(Config().cache.io.timeout, std::chrono::seconds(30));
  for (const char* bad : {"cache: {backing_timeout: 0}", "cache: {backing_timeout: 0.05}",
                          "cache: {backing_timeout: 3601}", "cache: {backing_timeout: soon}"}) {
    auto r = ParseConfig(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("cache.backing_timeout"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace clairfs
