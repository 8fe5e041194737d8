// A fuzzer's run, bounded in time so that its verdict does not depend on the machine's speed.
//
// A fuzz test asks for `target` inputs (what an idle machine runs well inside the test's timeout)
// but stops early once its time budget is spent: CLAIRFS_FUZZ_SECONDS (default 30 s a test,
// meson's timeout is 120 s a file of at most two tests) — so a loaded or sanitized build runs
// fewer inputs and still passes or fails on what it checked. Below a floor of inputs it goes on
// regardless: a run that checked nearly nothing is not a pass. The generator's seed comes from
// CLAIRFS_FUZZ_SEED when set (to replay a failure), else the test's fixed seed; Report prints it
// with the count, so every run's log says what it covered and how to repeat it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace clairfs::testing {

class FuzzBudget {
 public:
  static constexpr int kFloor = 500;  // inputs run however slow the machine
  static constexpr double kDefaultSeconds = 30;

  FuzzBudget(uint64_t default_seed, int target) : target_(target) {
    seed_ = default_seed;
    if (const char* s = std::getenv("CLAIRFS_FUZZ_SEED"); s != nullptr && *s != '\0') {
      seed_ = std::strtoull(s, nullptr, 0);
    }
    seconds_ = kDefaultSeconds;
    if (const char* s = std::getenv("CLAIRFS_FUZZ_SECONDS"); s != nullptr && *s != '\0') {
      seconds_ = std::strtod(s, nullptr);
    }
  }

  uint64_t seed() const { return seed_; }
  int target() const { return target_; }

  // Whether to run input number `done` (0-based): under the floor always, then while under the
  // target and inside the time budget.
  bool More(int done) const {
    if (done >= target_) return false;
    return done < kFloor || Elapsed() < seconds_;
  }

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // One line for the log: inputs run of the target, seconds, and the seed to replay them.
  void Report(const char* test, int done, const std::string& detail) const {
    std::printf(
        "%s: %d of %d inputs in %.1f s (budget %.0f s), seed 0x%llx (CLAIRFS_FUZZ_SEED)%s%s\n",
        test, done, target_, Elapsed(), seconds_, static_cast<unsigned long long>(seed_),
        detail.empty() ? "" : "; ", detail.c_str());
  }

 private:
  int target_;
  uint64_t seed_ = 0;
  double seconds_ = kDefaultSeconds;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace clairfs::testing
