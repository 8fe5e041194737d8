// clairfs-cache: offline maintenance of an SSD cache directory (no daemon may be using it).
//
//   clairfs-cache verify DIR [--json] [--repair]
//
// verify reads every object of the cache and checks it against its record
// (cache/tiers/ssd_verify.h);
// --repair also deletes the bad ones (the daemon refetches them). It holds the directory's
// lock meanwhile, so no daemon can start on it. `clairfs-ctl cache verify` runs it. Exit status
// (VerifyExit): 0 every object is sound, 1 bad objects found (also when --repair deleted them),
// 64 bad usage, 66 not a cache directory, 74 the database cannot be read, 75 in use.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/tiers/ssd_dir.h"
#include "cache/tiers/ssd_verify.h"

namespace {

enum class VerifyExit : int {
  kClean = 0,
  kCorrupt = 1,
  kUsage = 64,    // EX_USAGE
  kNoInput = 66,  // EX_NOINPUT: not a cache directory
  kIoError = 74,  // EX_IOERR: the database cannot be opened or read
  kInUse = 75,    // EX_TEMPFAIL: a daemon (or another check) holds the directory
};

constexpr char kUsageText[] =
    "usage: clairfs-cache verify DIR [--json] [--repair]\n"
    "  verify   read every object of the SSD cache in DIR and check it against its xxh3;\n"
    "           exit 0 sound, 1 bad objects found, 66 not a cache, 74 unreadable, 75 in use\n"
    "  --json   the report as one JSON object\n"
    "  --repair delete the bad objects (a daemon refetches them)\n";

int Exit(VerifyExit e) { return static_cast<int>(e); }

int Usage(const std::string& why) {
  std::fprintf(stderr, "clairfs-cache: %s\n%s", why.c_str(), kUsageText);
  return Exit(VerifyExit::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsageText, stdout);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--version") {
    std::printf("clairfs-cache %s\n", CLAIRFS_VERSION);
    return 0;
  }
  if (args.empty() || args[0] != "verify") return Usage("the command is verify");
  std::string dir;
  bool json = false;
  clairfs::VerifyMode mode = clairfs::VerifyMode::kCheck;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--repair") {
      mode = clairfs::VerifyMode::kRepair;
    } else if (args[i] == "--") {
      if (i + 2 != args.size() || !dir.empty()) return Usage("one DIR");
      dir = args[++i];
    } else if (!args[i].empty() && args[i][0] == '-') {
      return Usage("unknown option " + args[i]);
    } else if (dir.empty()) {
      dir = args[i];
    } else {
      return Usage("one DIR");
    }
  }
  if (dir.empty()) return Usage("DIR is missing");
  // RocksDB's warnings (through RocksLogger) and ours on stderr; the report on stdout.
  spdlog::set_default_logger(spdlog::stderr_color_st("clairfs-cache"));
  spdlog::set_pattern("clairfs-cache: %v");
  spdlog::set_level(spdlog::level::warn);

  auto report = clairfs::VerifySsdCache(dir, mode);
  if (!report.ok()) {
    const clairfs::Status& s = report.status();
    if (s.code() == clairfs::Code::kLocked) {
      const long pid = clairfs::LockHolderPid(clairfs::NormalCacheDir(dir));
      std::fprintf(stderr, "clairfs-cache: '%s' is in use by %s; unmount it first\n", dir.c_str(),
                   pid > 0 ? ("pid " + std::to_string(pid)).c_str() : "a process");
      return Exit(VerifyExit::kInUse);
    }
    std::fprintf(stderr, "clairfs-cache: %s\n", s.message().c_str());
    return Exit(s.code() == clairfs::Code::kNotFound ? VerifyExit::kNoInput : VerifyExit::kIoError);
  }
  const clairfs::VerifyReport& r = report.value();
  if (json) {
    nlohmann::json bad = nlohmann::json::array();
    for (const auto& b : r.bad) bad.push_back({{"object", b.key}, {"reason", b.reason}});
    nlohmann::json out = {{"dir", clairfs::NormalCacheDir(dir)},
                          {"objects", r.objects},
                          {"bytes", r.bytes},
                          {"bad", bad},
                          {"deleted", r.deleted},
                          {"clean", r.clean()}};
    std::printf("%s\n", out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const auto& b : r.bad) std::printf("bad: %s: %s\n", b.key.c_str(), b.reason.c_str());
    std::printf("%s: %llu objects, %llu bytes checked; %zu bad%s\n",
                clairfs::NormalCacheDir(dir).c_str(), static_cast<unsigned long long>(r.objects),
                static_cast<unsigned long long>(r.bytes), r.bad.size(),
                r.deleted ? (", " + std::to_string(r.deleted) + " deleted").c_str() : "");
  }
  return Exit(r.clean() ? VerifyExit::kClean : VerifyExit::kCorrupt);
}
