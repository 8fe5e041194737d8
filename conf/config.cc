#include "conf/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace clairfs {
namespace {

Status CheckKeys(const YAML::Node& node, const std::string& where,
                 const std::set<std::string>& allowed) {
  if (!node.IsMap()) return BadKey(where.empty() ? "(top level)" : where, "must be a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) {
      return BadKey(where.empty() ? key : where + "." + key, "unknown key");
    }
  }
  return Status::Ok();
}

template <typename T>
Status Get(const YAML::Node& node, const char* name, const std::string& key, T* out) {
  if (!node[name]) return Status::Ok();
  try {
    *out = node[name].as<T>();
  } catch (const YAML::Exception&) {
    return BadKey(key, "has the wrong type");
  }
  return Status::Ok();
}

// A capacity or thread count given as "auto": the same as leaving it out (sized at start by
// conf/memory_budget.h, tuned at run time by cache/prefetch/autotune.h).
bool IsAuto(const YAML::Node& value) {
  return value && value.IsScalar() && value.Scalar() == "auto";
}

Status GetSize(const YAML::Node& node, const char* name, const std::string& key, uint64_t* out) {
  if (!node[name]) return Status::Ok();
  if (!node[name].IsScalar()) return BadKey(key, "must be a size such as 4GiB");
  auto r = ParseSize(node[name].Scalar());
  if (!r.ok()) return BadKey(key, r.status().message());
  *out = r.value();
  return Status::Ok();
}

// fuse.access_check: "open" or "kernel".
Status GetAccessCheck(const YAML::Node& node, AccessCheck* out) {
  if (!node["access_check"]) return Status::Ok();
  std::string value;
  if (Status s = Get(node, "access_check", "fuse.access_check", &value); !s.ok()) return s;
  if (value == "open") {
    *out = AccessCheck::kOpen;
  } else if (value == "kernel") {
    *out = AccessCheck::kKernel;
  } else {
    return BadKey("fuse.access_check", "'" + value + "' is not one of: open, kernel");
  }
  return Status::Ok();
}

// fuse.open_mode: "none" or "per_open". Not given: none, unless keep_cache is false (which
// only per_open can honour: in none mode the kernel keeps every file's pages). keep_cache is
// read before.
Status GetOpenMode(const YAML::Node& node, bool keep_cache, OpenMode* out) {
  if (!node["open_mode"]) {
    *out = keep_cache ? OpenMode::kNone : OpenMode::kPerOpen;
    return Status::Ok();
  }
  std::string value;
  if (Status s = Get(node, "open_mode", "fuse.open_mode", &value); !s.ok()) return s;
  if (value == "none") {
    *out = OpenMode::kNone;
  } else if (value == "per_open") {
    *out = OpenMode::kPerOpen;
  } else {
    return BadKey("fuse.open_mode", "'" + value + "' is not one of: none, per_open");
  }
  if (*out == OpenMode::kNone && !keep_cache) {
    return BadKey("fuse.keep_cache",
                  "false needs fuse.open_mode: per_open (with none the kernel keeps every file's "
                  "pages across opens)");
  }
  return Status::Ok();
}

// cache.backing_pages: "drop" or "keep" (IoOptions::pages).
Status GetBackingPages(const YAML::Node& node, IoOptions::Pages* out) {
  if (!node["backing_pages"]) return Status::Ok();
  std::string value;
  if (Status s = Get(node, "backing_pages", "cache.backing_pages", &value); !s.ok()) return s;
  if (value == "drop") {
    *out = IoOptions::Pages::kDrop;
  } else if (value == "keep") {
    *out = IoOptions::Pages::kKeep;
  } else {
    return BadKey("cache.backing_pages", "'" + value + "' is not one of: drop, keep");
  }
  return Status::Ok();
}

#define CLAIRFS_TRY(expr)    \
  do {                       \
    Status _s = (expr);      \
    if (!_s.ok()) return _s; \
  } while (0)

template <typename T>
std::string Show(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    std::ostringstream out;
    out << v;
    return out.str();
  }
}

// Fails unless lo <= value <= hi (NaN fails too), naming the key, the value and the range.
template <typename T>
Status InRange(const std::string& key, T value, T lo, T hi, const char* unit = "") {
  if (value >= lo && value <= hi) return Status::Ok();
  const std::string u = *unit ? std::string(" ") + unit : "";
  return BadKey(key, Show(value) + " is out of range (" + Show(lo) + " .. " + Show(hi) + u + ")");
}

constexpr double kDay = 86400;              // seconds: the longest duration any key takes
constexpr uint64_t kMaxBytes = 1ull << 50;  // 1 PiB: the largest capacity any key takes

// The range of a duration key, in seconds as the file gives it. Durations are whole
// milliseconds in the code, so a timeout below 10 ms (rounding to 0) or above a day
// (overflowing a deadline) is refused.
struct Seconds {
  double lo, hi;
  bool zero_ok = false;  // 0 (never) is allowed besides [lo, hi]
};
constexpr Seconds kFetchTimeout{0.01, kDay};
// Below 0.1 s a busy disk would fail healthy calls; above an hour a stall is never noticed.
constexpr Seconds kBackingTimeout{0.1, 3600.0};
constexpr Seconds kStreamIdle{0.1, 365 * kDay, true};
constexpr Seconds kPlanTimeout{0.0, kDay};
constexpr Seconds kPeerTimeout{0.01, kDay};
constexpr Seconds kDownFor{0.0, kDay};
constexpr Seconds kNoPlanAfter{0.0, kDay};
// A reply a client does not take within this long cuts it off: at least 0.1 s, at most an hour.
constexpr Seconds kBatchSendTimeout{0.1, 3600.0};

Status InSeconds(const std::string& key, double seconds, const Seconds& range) {
  if (range.zero_ok && seconds == 0) return Status::Ok();
  return InRange(key, seconds, range.lo, range.hi, "seconds");
}

Status InSeconds(const std::string& key, std::chrono::milliseconds ms, const Seconds& range) {
  return InSeconds(key, static_cast<double>(ms.count()) / 1000, range);
}

// A duration key, in seconds in the file: checked against range as given (the message carries
// the value as written), then held as whole milliseconds, as the components take it.
Status GetSeconds(const YAML::Node& node, const char* name, const std::string& key,
                  const Seconds& range, std::chrono::milliseconds* out) {
  if (!node[name]) return Status::Ok();
  double seconds = 0;
  CLAIRFS_TRY(Get(node, name, key, &seconds));
  CLAIRFS_TRY(InSeconds(key, seconds, range));
  *out = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  return Status::Ok();
}

Status ParseInto(const YAML::Node& root, Config* c) {
  if (!root || root.IsNull()) return Status::Ok();
  CLAIRFS_TRY(CheckKeys(root, "", {"fuse", "cache", "cluster", "log", "control", "warn", "batch"}));
  if (const auto k = root["cluster"]) {
    CLAIRFS_TRY(CheckKeys(k, "cluster",
                          {"enabled", "key_file", "plan_timeout", "peer_timeout", "down_for",
                           "serve_threads", "backing_advantage"}));
    CLAIRFS_TRY(Get(k, "enabled", "cluster.enabled", &c->cluster.enabled));
    CLAIRFS_TRY(Get(k, "key_file", "cluster.key_file", &c->cluster.key_file));
    CLAIRFS_TRY(GetSeconds(k, "plan_timeout", "cluster.plan_timeout", kPlanTimeout,
                           &c->cluster.peer.plan_timeout));
    CLAIRFS_TRY(GetSeconds(k, "peer_timeout", "cluster.peer_timeout", kPeerTimeout,
                           &c->cluster.peer.peer_timeout));
    CLAIRFS_TRY(GetSeconds(k, "down_for", "cluster.down_for", kDownFor, &c->cluster.peer.down_for));
    CLAIRFS_TRY(Get(k, "serve_threads", "cluster.serve_threads", &c->cluster.peer.serve_threads));
    CLAIRFS_TRY(
        Get(k, "backing_advantage", "cluster.backing_advantage", &c->cluster.backing_advantage));
  }
  if (const auto f = root["fuse"]) {
    CLAIRFS_TRY(CheckKeys(f, "fuse",
                          {"threads", "clone_fd", "entry_timeout", "attr_timeout", "keep_cache",
                           "access_check", "open_mode", "watch_backing", "stat_ahead",
                           "stat_max_age", "revalidate_interval", "immutable"}));
    CLAIRFS_TRY(Get(f, "threads", "fuse.threads", &c->fuse.threads));
    CLAIRFS_TRY(Get(f, "clone_fd", "fuse.clone_fd", &c->fuse.clone_fd));
    CLAIRFS_TRY(Get(f, "entry_timeout", "fuse.entry_timeout", &c->fuse.entry_timeout));
    CLAIRFS_TRY(Get(f, "attr_timeout", "fuse.attr_timeout", &c->fuse.attr_timeout));
    CLAIRFS_TRY(Get(f, "keep_cache", "fuse.keep_cache", &c->fuse.keep_cache));
    CLAIRFS_TRY(Get(f, "watch_backing", "fuse.watch_backing", &c->fuse.watch_backing));
    CLAIRFS_TRY(Get(f, "stat_ahead", "fuse.stat_ahead", &c->fuse.stat_ahead));
    CLAIRFS_TRY(Get(f, "stat_max_age", "fuse.stat_max_age", &c->fuse.stat_max_age));
    CLAIRFS_TRY(
        Get(f, "revalidate_interval", "fuse.revalidate_interval", &c->fuse.revalidate_interval));
    CLAIRFS_TRY(Get(f, "immutable", "fuse.immutable", &c->fuse.immutable));
    CLAIRFS_TRY(GetAccessCheck(f, &c->fuse.access_check));
    CLAIRFS_TRY(GetOpenMode(f, c->fuse.keep_cache, &c->fuse.open_mode));
  }
  if (const auto k = root["control"]) {
    CLAIRFS_TRY(CheckKeys(k, "control", {"group"}));
    CLAIRFS_TRY(Get(k, "group", "control.group", &c->fuse.control_group));
    if (k["group"] && c->fuse.control_group.empty()) return BadKey("control.group", "is empty");
  }
  if (const auto k = root["cache"]) {
    CLAIRFS_TRY(
        CheckKeys(k, "cache",
                  {"tiers", "staging", "demand_threads", "fetch_timeout", "chunk_size",
                   "record_chunk_size", "consumption_lag", "page_cache_lag", "backing_timeout",
                   "max_file_size", "stream_idle", "max_streams", "keep_copies", "backing_pages"}));
    if (k["max_file_size"]) {
      return BadKey("cache.max_file_size",
                    "was removed: files of any size are now cached, in chunks of cache.chunk_size; "
                    "delete the line");
    }
    if (const auto tiers = k["tiers"]) {
      if (!tiers.IsSequence()) return BadKey("cache.tiers", "must be a list");
      c->cache.tiers.clear();
      for (size_t i = 0; i < tiers.size(); ++i) {
        const std::string at = "cache.tiers[" + std::to_string(i) + "]";
        TierConfig t;
        CLAIRFS_TRY(CheckKeys(tiers[i], at, {"kind", "capacity", "threads", "dir"}));
        CLAIRFS_TRY(Get(tiers[i], "kind", at + ".kind", &t.kind));
        CLAIRFS_TRY(Get(tiers[i], "dir", at + ".dir", &t.dir));
        if (!IsAuto(tiers[i]["capacity"])) {  // "auto": sized at start, as omitted
          CLAIRFS_TRY(GetSize(tiers[i], "capacity", at + ".capacity", &t.capacity));
        }
        CLAIRFS_TRY(Get(tiers[i], "threads", at + ".threads", &t.threads));
        c->cache.tiers.push_back(t);
      }
    }
    if (const auto s = k["staging"]) {
      CLAIRFS_TRY(CheckKeys(s, "cache.staging", {"capacity", "threads"}));
      if (s["capacity"] && !IsAuto(s["capacity"])) {
        CLAIRFS_TRY(
            GetSize(s, "capacity", "cache.staging.capacity", &c->cache.prefetch.staging_capacity));
        c->cache.prefetch.tune_staging_capacity = false;
      }
      if (s["threads"] && !IsAuto(s["threads"])) {  // "auto": tuned at run time, as omitted
        CLAIRFS_TRY(Get(s, "threads", "cache.staging.threads", &c->cache.prefetch.staging_threads));
        c->cache.prefetch.tune_staging_threads = false;
      }
    }
    PrefetchOptions& p = c->cache.prefetch;
    CLAIRFS_TRY(Get(k, "demand_threads", "cache.demand_threads", &p.demand_threads));
    CLAIRFS_TRY(
        GetSeconds(k, "fetch_timeout", "cache.fetch_timeout", kFetchTimeout, &p.fetch_timeout));
    CLAIRFS_TRY(GetSize(k, "chunk_size", "cache.chunk_size", &p.chunk_size));
    if (!k["chunk_size"]) p.chunk_size = std::min(p.chunk_size, p.staging_capacity);
    CLAIRFS_TRY(GetSize(k, "record_chunk_size", "cache.record_chunk_size", &p.record_chunk_size));
    if (!k["record_chunk_size"]) {
      p.record_chunk_size = std::min(p.record_chunk_size, p.staging_capacity);
    }
    CLAIRFS_TRY(Get(k, "consumption_lag", "cache.consumption_lag", &p.consumption_lag));
    CLAIRFS_TRY(Get(k, "page_cache_lag", "cache.page_cache_lag", &c->cache.page_cache_lag));
    CLAIRFS_TRY(GetSeconds(k, "backing_timeout", "cache.backing_timeout", kBackingTimeout,
                           &c->cache.io.timeout));
    CLAIRFS_TRY(GetSeconds(k, "stream_idle", "cache.stream_idle", kStreamIdle, &p.stream_idle));
    CLAIRFS_TRY(Get(k, "max_streams", "cache.max_streams", &p.max_streams));
    CLAIRFS_TRY(Get(k, "keep_copies", "cache.keep_copies", &p.keep_copies));
    CLAIRFS_TRY(GetBackingPages(k, &c->cache.io.pages));
  }
  if (const auto l = root["log"]) {
    CLAIRFS_TRY(CheckKeys(l, "log", {"level", "file", "max_size", "max_files"}));
    CLAIRFS_TRY(Get(l, "level", "log.level", &c->log.level));
    CLAIRFS_TRY(Get(l, "file", "log.file", &c->log.file));
    CLAIRFS_TRY(GetSize(l, "max_size", "log.max_size", &c->log.max_size));
    CLAIRFS_TRY(Get(l, "max_files", "log.max_files", &c->log.max_files));
  }
  if (const auto b = root["batch"]) {
    CLAIRFS_TRY(CheckKeys(b, "batch",
                          {"enabled", "max_clients", "max_clients_per_user", "max_samples",
                           "max_buffer_bytes", "send_timeout"}));
    BatchOptions& o = c->batch;
    CLAIRFS_TRY(Get(b, "enabled", "batch.enabled", &o.enabled));
    CLAIRFS_TRY(Get(b, "max_clients", "batch.max_clients", &o.max_clients));
    CLAIRFS_TRY(
        Get(b, "max_clients_per_user", "batch.max_clients_per_user", &o.max_clients_per_user));
    CLAIRFS_TRY(Get(b, "max_samples", "batch.max_samples", &o.max_samples));
    CLAIRFS_TRY(GetSize(b, "max_buffer_bytes", "batch.max_buffer_bytes", &o.max_buffer_bytes));
    CLAIRFS_TRY(
        GetSeconds(b, "send_timeout", "batch.send_timeout", kBatchSendTimeout, &o.send_timeout));
  }
  if (const auto w = root["warn"]) {
    CLAIRFS_TRY(CheckKeys(w, "warn", {"no_plan_after", "check_reads", "order_slack"}));
    ReadWatchOptions& watch = c->cache.prefetch.watch;
    CLAIRFS_TRY(
        GetSeconds(w, "no_plan_after", "warn.no_plan_after", kNoPlanAfter, &watch.no_plan_after));
    CLAIRFS_TRY(Get(w, "check_reads", "warn.check_reads", &watch.check_reads));
    CLAIRFS_TRY(Get(w, "order_slack", "warn.order_slack", &watch.order_slack));
  }
  return c->Validate();
}

}  // namespace

Status BadKey(const std::string& key, const std::string& why) {
  return Status::Error(Code::kInvalidArgument, "config key '" + key + "': " + why);
}

Result<uint64_t> ParseSize(std::string_view text) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  if (!s.empty() && s.front() == '-') {
    return Status::Error(Code::kInvalidArgument, "'" + s + "' is negative; a size is >= 0");
  }
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  size_t i = digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  if (digits == 0) return Status::Error(Code::kInvalidArgument, "'" + s + "' is not a size");
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::pair<const char*, uint64_t> kUnits[] = {{"", 1},
                                                            {"B", 1},
                                                            {"K", 1ull << 10},
                                                            {"KiB", 1ull << 10},
                                                            {"M", 1ull << 20},
                                                            {"MiB", 1ull << 20},
                                                            {"G", 1ull << 30},
                                                            {"GiB", 1ull << 30},
                                                            {"T", 1ull << 40},
                                                            {"TiB", 1ull << 40},
                                                            {"kB", 1000},
                                                            {"KB", 1000},
                                                            {"MB", 1000000},
                                                            {"GB", 1000000000},
                                                            {"TB", 1000000000000}};
  for (const auto& [name, factor] : kUnits) {
    if (unit != name) continue;
    const Status too_large =
        Status::Error(Code::kInvalidArgument, "'" + s + "' is too large (at most 2^63 - 1 bytes)");
    if (i == digits) {  // an integer: exact, overflow checked
      uint64_t n = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + digits, n);
      uint64_t bytes = 0;
      if (ec != std::errc() || __builtin_mul_overflow(n, factor, &bytes) ||
          bytes > static_cast<uint64_t>(INT64_MAX)) {
        return too_large;
      }
      return bytes;
    }
    const double bytes = std::strtod(s.substr(0, i).c_str(), nullptr) * static_cast<double>(factor);
    if (!std::isfinite(bytes) || bytes >= 9.2e18) return too_large;
    return static_cast<uint64_t>(std::llround(bytes));
  }
  return Status::Error(Code::kInvalidArgument, "unknown unit '" + unit + "' in '" + s +
                                                   "' (use KiB, MiB, GiB, TiB, kB, MB, GB, TB)");
}

// Every numeric key has a range here (durations: also checked as written, by GetSeconds).
Status Config::Validate() const {
  CLAIRFS_TRY(InRange("fuse.threads", fuse.threads, 1, 1024));
  CLAIRFS_TRY(InRange("fuse.entry_timeout", fuse.entry_timeout, 0.0, kDay, "seconds"));
  CLAIRFS_TRY(InRange("fuse.attr_timeout", fuse.attr_timeout, 0.0, kDay, "seconds"));
  CLAIRFS_TRY(InRange<uint32_t>("fuse.stat_ahead", fuse.stat_ahead, 0, 1u << 20, "positions"));
  // A stat older than a minute says little about the file; below a millisecond none is used.
  CLAIRFS_TRY(InRange("fuse.stat_max_age", fuse.stat_max_age, 0.001, 60.0, "seconds"));
  // Below 0.1 s the sweep would stat every node held twenty times a second.
  CLAIRFS_TRY(InRange("fuse.revalidate_interval", fuse.revalidate_interval, 0.1, kDay, "seconds"));
  if (cache.tiers.size() > 4) return BadKey("cache.tiers", "at most 4 tiers");
  for (size_t i = 0; i < cache.tiers.size(); ++i) {
    const std::string at = "cache.tiers[" + std::to_string(i) + "]";
    const TierConfig& t = cache.tiers[i];
    if (t.kind != "ram" && t.kind != "ssd")
      return BadKey(at + ".kind", "unknown kind (supported: ram, ssd)");
    if (t.kind == "ram" && !t.dir.empty())
      return BadKey(at + ".dir", "only an ssd tier has a directory");
    CLAIRFS_TRY(InRange(at + ".threads", t.threads, 0, 256));
    // 0 is the machine default (ResolveForDataset); anything else is a real capacity.
    CLAIRFS_TRY(InRange<uint64_t>(at + ".capacity", t.capacity, 0, kMaxBytes, "bytes"));
  }
  const PrefetchOptions& p = cache.prefetch;
  CLAIRFS_TRY(InRange("cache.staging.threads", p.staging_threads, 0, 256));
  CLAIRFS_TRY(InRange<uint64_t>("cache.staging.capacity", p.staging_capacity, 64ull << 10,
                                kMaxBytes, "bytes"));
  CLAIRFS_TRY(InRange("cache.demand_threads", p.demand_threads, 1, 256));
  CLAIRFS_TRY(InSeconds("cache.fetch_timeout", p.fetch_timeout, kFetchTimeout));
  CLAIRFS_TRY(InSeconds("cache.backing_timeout", cache.io.timeout, kBackingTimeout));
  CLAIRFS_TRY(
      InRange<uint64_t>("cache.chunk_size", p.chunk_size, 64ull << 10, 1ull << 30, "bytes"));
  if (p.chunk_size > p.staging_capacity) {
    return BadKey("cache.chunk_size", "is larger than cache.staging.capacity (" +
                                          std::to_string(p.staging_capacity) +
                                          " bytes): the staging window must hold a chunk");
  }
  CLAIRFS_TRY(InRange<uint64_t>("cache.record_chunk_size", p.record_chunk_size, 64ull << 10,
                                1ull << 30, "bytes"));
  if (p.record_chunk_size > p.staging_capacity) {
    return BadKey("cache.record_chunk_size", "is larger than cache.staging.capacity (" +
                                                 std::to_string(p.staging_capacity) +
                                                 " bytes): the staging window must hold a chunk");
  }
  CLAIRFS_TRY(
      InRange<uint32_t>("cache.page_cache_lag", cache.page_cache_lag, 1, 1u << 30, "object reads"));
  CLAIRFS_TRY(
      InRange<uint32_t>("cache.consumption_lag", p.consumption_lag, 1, 1u << 30, "object reads"));
  CLAIRFS_TRY(InSeconds("cache.stream_idle", p.stream_idle, kStreamIdle));
  CLAIRFS_TRY(InRange<uint32_t>("cache.max_streams", p.max_streams, 1, 4096, "streams"));
  CLAIRFS_TRY(InSeconds("cluster.plan_timeout", cluster.peer.plan_timeout, kPlanTimeout));
  CLAIRFS_TRY(InSeconds("cluster.peer_timeout", cluster.peer.peer_timeout, kPeerTimeout));
  CLAIRFS_TRY(InSeconds("cluster.down_for", cluster.peer.down_for, kDownFor));
  CLAIRFS_TRY(InRange("cluster.serve_threads", cluster.peer.serve_threads, 1, 256));
  CLAIRFS_TRY(InRange("cluster.backing_advantage", cluster.backing_advantage, 0.0, 1e6));
  static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  if (!kLevels.count(log.level)) return BadKey("log.level", "unknown level '" + log.level + "'");
  if (log.max_size != 0) {
    CLAIRFS_TRY(InRange<uint64_t>("log.max_size", log.max_size, 4096, kMaxBytes, "bytes"));
  }
  CLAIRFS_TRY(InRange("log.max_files", log.max_files, 1, 1000));
  CLAIRFS_TRY(InRange<uint32_t>("batch.max_clients", batch.max_clients, 1, 65536, "connections"));
  CLAIRFS_TRY(InRange<uint32_t>("batch.max_clients_per_user", batch.max_clients_per_user, 1, 65536,
                                "connections"));
  // A kRead of this many samples must fit a 16 MiB body (24 bytes an item, a path of 1 byte).
  CLAIRFS_TRY(InRange<uint32_t>("batch.max_samples", batch.max_samples, 1, 500'000, "samples"));
  CLAIRFS_TRY(InRange<uint64_t>("batch.max_buffer_bytes", batch.max_buffer_bytes, 4096, 1ull << 40,
                                "bytes"));
  CLAIRFS_TRY(InSeconds("batch.send_timeout", batch.send_timeout, kBatchSendTimeout));
  CLAIRFS_TRY(InSeconds("warn.no_plan_after", p.watch.no_plan_after, kNoPlanAfter));
  CLAIRFS_TRY(InRange<uint32_t>("warn.check_reads", p.watch.check_reads, 0, 1u << 30, "reads"));
  CLAIRFS_TRY(InRange<uint32_t>("warn.order_slack", p.watch.order_slack, 1, 1u << 30, "reads"));
  return Status::Ok();
}

Result<Config> ParseConfig(std::string_view yaml) {
  Config c;
  try {
    Status s = ParseInto(YAML::Load(std::string(yaml)), &c);
    if (!s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return Status::Error(Code::kInvalidArgument,
                         std::string("config is not valid YAML: ") + e.what());
  }
  return c;
}

namespace {

// The whole file, or why it cannot be read (the errno's text).
Result<std::string> ReadConfigText(const std::string& path) {
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    const int err = errno != 0 ? errno : EIO;
    return Status::Error(err == ENOENT ? Code::kNotFound : Code::kIoError,
                         "cannot read config file '" + path + "': " + std::strerror(err), err);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return Status::Error(Code::kIoError, "cannot read config file '" + path + "': read error");
  }
  return ss.str();
}

// The built-in tiers as the YAML list a file would hold, for an override of one of them.
YAML::Node DefaultTiersNode() {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const TierConfig& t : CacheConfig{}.tiers) {
    YAML::Node tier(YAML::NodeType::Map);
    tier["kind"] = t.kind;
    tier["capacity"] = t.capacity;
    tier["threads"] = t.threads;
    if (!t.dir.empty()) tier["dir"] = t.dir;
    list.push_back(tier);
  }
  return list;
}

bool IsIndex(std::string_view s) {
  return !s.empty() && s.size() <= 4 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// Sets root[a][b]...[z] = value for key "a.b...z", making maps where none are. Fails on an
// empty component, an index into something that is not a list, or past its end.
Status SetKey(YAML::Node root, const ConfigOverride& o) {
  const auto bad = [&](const std::string& why) {
    return Status::Error(Code::kInvalidArgument, "option -o " + o.key + "=" + o.value + ": " + why);
  };
  std::vector<std::string> parts;
  for (size_t i = 0;;) {
    const size_t dot = o.key.find('.', i);
    parts.push_back(o.key.substr(i, dot == std::string::npos ? std::string::npos : dot - i));
    if (parts.back().empty()) return bad("an empty name in the key");
    if (dot == std::string::npos) break;
    i = dot + 1;
  }
  YAML::Node value;
  try {
    value = o.value.empty() ? YAML::Node(std::string()) : YAML::Load(o.value);
  } catch (const YAML::Exception& e) {
    return bad(std::string("the value is not valid YAML: ") + e.what());
  }
  YAML::Node at = root;  // the handle moves down with reset(), never assigning through it
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    if (path == "cache" && p == "tiers" && !last && !at["tiers"]) at["tiers"] = DefaultTiersNode();
    path += (path.empty() ? "" : ".") + p;
    if (at.IsSequence()) {
      if (!IsIndex(p)) return bad("'" + path + "': a list element is named by its index");
      const size_t index = std::stoul(p);
      if (index >= at.size()) {
        return bad("'" + path + "': the list has " + std::to_string(at.size()) + " element(s)");
      }
      if (last) {
        at[index] = value;
      } else {
        YAML::Node next = at[index];
        at.reset(next);
      }
      continue;
    }
    if (!at.IsMap()) {
      if (!at.IsNull() && at.IsDefined()) return bad("'" + path + "' is inside a value");
      at = YAML::Node(YAML::NodeType::Map);  // defines an absent or empty node as a map
    }
    if (last) {
      at[p] = value;
    } else {
      YAML::Node next = at[p];
      at.reset(next);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Config> LoadConfig(const std::string& path, const std::vector<ConfigOverride>& overrides) {
  std::string text;
  if (!path.empty()) {
    auto r = ReadConfigText(path);
    if (!r.ok()) return r.status();
    text = std::move(r.value());
  }
  const std::string where = path.empty() ? "" : path + ": ";
  try {
    YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) {
      return Status::Error(Code::kInvalidArgument,
                           where + "config key '(top level)': must be a mapping");
    }
    for (const auto& o : overrides) {
      if (Status s = SetKey(root, o); !s.ok()) return s;
    }
    Config c;
    if (Status s = ParseInto(root, &c); !s.ok()) {
      return Status::Error(
          s.code(), (overrides.empty() ? where : where + "(with the -o keys) ") + s.message());
    }
    return c;
  } catch (const YAML::Exception& e) {
    return Status::Error(Code::kInvalidArgument,
                         where + "config is not valid YAML: " + std::string(e.what()));
  }
}

Result<Config> LoadConfigFile(const std::string& path) { return LoadConfig(path, {}); }

}  // namespace clairfs
