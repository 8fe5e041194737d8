#include "conf/config.h"

#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace clairfs {
namespace {

Status Bad(const std::string& key, const std::string& why) {
  return Status::Error(Code::kInvalidArgument, "config key '" + key + "': " + why);
}

Status CheckKeys(const YAML::Node& node, const std::string& where,
                 const std::set<std::string>& allowed) {
  if (!node.IsMap()) return Bad(where.empty() ? "(top level)" : where, "must be a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) {
      return Bad(where.empty() ? key : where + "." + key, "unknown key");
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
    return Bad(key, "has the wrong type");
  }
  return Status::Ok();
}

Status GetSize(const YAML::Node& node, const char* name, const std::string& key, uint64_t* out) {
  if (!node[name]) return Status::Ok();
  if (!node[name].IsScalar()) return Bad(key, "must be a size such as 4GiB");
  auto r = ParseSize(node[name].Scalar());
  if (!r.ok()) return Bad(key, r.status().message());
  *out = r.value();
  return Status::Ok();
}

#define CLAIRFS_TRY(expr)    \
  do {                       \
    Status _s = (expr);      \
    if (!_s.ok()) return _s; \
  } while (0)

Status ParseInto(const YAML::Node& root, Config* c) {
  if (!root || root.IsNull()) return Status::Ok();
  CLAIRFS_TRY(CheckKeys(root, "", {"fuse", "cache", "cluster", "log"}));
  if (const auto k = root["cluster"]) {
    CLAIRFS_TRY(CheckKeys(
        k, "cluster",
        {"plan_timeout", "peer_timeout", "down_for", "serve_threads", "backing_advantage"}));
    CLAIRFS_TRY(Get(k, "plan_timeout", "cluster.plan_timeout", &c->cluster.plan_timeout));
    CLAIRFS_TRY(Get(k, "peer_timeout", "cluster.peer_timeout", &c->cluster.peer_timeout));
    CLAIRFS_TRY(Get(k, "down_for", "cluster.down_for", &c->cluster.down_for));
    CLAIRFS_TRY(Get(k, "serve_threads", "cluster.serve_threads", &c->cluster.serve_threads));
    CLAIRFS_TRY(
        Get(k, "backing_advantage", "cluster.backing_advantage", &c->cluster.backing_advantage));
  }
  if (const auto f = root["fuse"]) {
    CLAIRFS_TRY(CheckKeys(f, "fuse", {"threads", "entry_timeout", "attr_timeout", "keep_cache"}));
    CLAIRFS_TRY(Get(f, "threads", "fuse.threads", &c->fuse.threads));
    CLAIRFS_TRY(Get(f, "entry_timeout", "fuse.entry_timeout", &c->fuse.entry_timeout));
    CLAIRFS_TRY(Get(f, "attr_timeout", "fuse.attr_timeout", &c->fuse.attr_timeout));
    CLAIRFS_TRY(Get(f, "keep_cache", "fuse.keep_cache", &c->fuse.keep_cache));
  }
  if (const auto k = root["cache"]) {
    CLAIRFS_TRY(CheckKeys(k, "cache",
                          {"tiers", "staging", "demand_threads", "fetch_timeout", "max_file_size",
                           "backing_timeout"}));
    if (const auto tiers = k["tiers"]) {
      if (!tiers.IsSequence()) return Bad("cache.tiers", "must be a list");
      c->cache.tiers.clear();
      for (size_t i = 0; i < tiers.size(); ++i) {
        const std::string at = "cache.tiers[" + std::to_string(i) + "]";
        TierConfig t;
        CLAIRFS_TRY(CheckKeys(tiers[i], at, {"kind", "capacity", "threads", "dir"}));
        CLAIRFS_TRY(Get(tiers[i], "kind", at + ".kind", &t.kind));
        CLAIRFS_TRY(Get(tiers[i], "dir", at + ".dir", &t.dir));
        CLAIRFS_TRY(GetSize(tiers[i], "capacity", at + ".capacity", &t.capacity));
        CLAIRFS_TRY(Get(tiers[i], "threads", at + ".threads", &t.threads));
        c->cache.tiers.push_back(t);
      }
    }
    if (const auto s = k["staging"]) {
      CLAIRFS_TRY(CheckKeys(s, "cache.staging", {"capacity", "threads"}));
      CLAIRFS_TRY(GetSize(s, "capacity", "cache.staging.capacity", &c->cache.staging_capacity));
      CLAIRFS_TRY(Get(s, "threads", "cache.staging.threads", &c->cache.staging_threads));
    }
    CLAIRFS_TRY(Get(k, "demand_threads", "cache.demand_threads", &c->cache.demand_threads));
    CLAIRFS_TRY(Get(k, "fetch_timeout", "cache.fetch_timeout", &c->cache.fetch_timeout));
    CLAIRFS_TRY(GetSize(k, "max_file_size", "cache.max_file_size", &c->cache.max_file_size));
    CLAIRFS_TRY(Get(k, "backing_timeout", "cache.backing_timeout", &c->cache.backing_timeout));
  }
  if (const auto l = root["log"]) {
    CLAIRFS_TRY(CheckKeys(l, "log", {"level", "file"}));
    CLAIRFS_TRY(Get(l, "level", "log.level", &c->log.level));
    CLAIRFS_TRY(Get(l, "file", "log.file", &c->log.file));
  }
  return c->Validate();
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return Status::Error(Code::kInvalidArgument, "'" + s + "' is not a size");
  double number;
  try {
    size_t used = 0;
    number = std::stod(s.substr(0, i), &used);
    if (used != i) throw std::invalid_argument("number");
  } catch (const std::exception&) {
    return Status::Error(Code::kInvalidArgument, "'" + s + "' is not a size");
  }
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"K", 1024.0},
                                                          {"KiB", 1024.0},
                                                          {"M", 1 << 20},
                                                          {"MiB", 1 << 20},
                                                          {"G", 1 << 30},
                                                          {"GiB", 1 << 30},
                                                          {"T", 1099511627776.0},
                                                          {"TiB", 1099511627776.0},
                                                          {"kB", 1e3},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"TB", 1e12}};
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) {
      const double bytes = number * factor;
      if (!std::isfinite(bytes) || bytes > 1.8e19) {
        return Status::Error(Code::kInvalidArgument, "'" + s + "' is too large");
      }
      return static_cast<uint64_t>(std::llround(bytes));
    }
  }
  return Status::Error(Code::kInvalidArgument, "unknown unit '" + unit + "' in '" + s +
                                                   "' (use KiB, MiB, GiB, TiB, kB, MB, GB, TB)");
}

Status Config::Validate() const {
  if (fuse.threads < 1 || fuse.threads > 1024) return Bad("fuse.threads", "must be 1..1024");
  if (fuse.entry_timeout < 0) return Bad("fuse.entry_timeout", "must be >= 0");
  if (fuse.attr_timeout < 0) return Bad("fuse.attr_timeout", "must be >= 0");
  if (cache.tiers.size() > 4) return Bad("cache.tiers", "at most 4 tiers");
  for (size_t i = 0; i < cache.tiers.size(); ++i) {
    const std::string at = "cache.tiers[" + std::to_string(i) + "]";
    const TierConfig& t = cache.tiers[i];
    if (t.kind != "ram" && t.kind != "ssd")
      return Bad(at + ".kind", "unknown kind (supported: ram, ssd)");
    if (t.kind == "ram" && !t.dir.empty())
      return Bad(at + ".dir", "only an ssd tier has a directory");
    if (cache.tiers[i].threads < 0 || cache.tiers[i].threads > 256) {
      return Bad(at + ".threads", "must be 0..256");
    }
  }
  if (cache.staging_threads < 0 || cache.staging_threads > 256) {
    return Bad("cache.staging.threads", "must be 0..256");
  }
  if (cache.demand_threads < 1 || cache.demand_threads > 256) {
    return Bad("cache.demand_threads", "must be 1..256");
  }
  if (!(cache.fetch_timeout > 0)) return Bad("cache.fetch_timeout", "must be > 0 seconds");
  // Below 0.1 s a busy disk would fail healthy calls; above an hour a stall is never noticed.
  if (!(cache.backing_timeout >= 0.1 && cache.backing_timeout <= 3600)) {
    return Bad("cache.backing_timeout", "must be 0.1..3600 seconds");
  }
  if (!(cluster.plan_timeout >= 0)) return Bad("cluster.plan_timeout", "must be >= 0 seconds");
  if (!(cluster.peer_timeout > 0)) return Bad("cluster.peer_timeout", "must be > 0 seconds");
  if (!(cluster.down_for >= 0)) return Bad("cluster.down_for", "must be >= 0 seconds");
  if (cluster.serve_threads < 1 || cluster.serve_threads > 256) {
    return Bad("cluster.serve_threads", "must be 1..256");
  }
  if (!(cluster.backing_advantage >= 0)) return Bad("cluster.backing_advantage", "must be >= 0");
  if (cache.max_file_size == 0) return Bad("cache.max_file_size", "must be > 0");
  static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  if (!kLevels.count(log.level)) return Bad("log.level", "unknown level '" + log.level + "'");
  return Status::Ok();
}

namespace {

uint64_t DirBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// Free bytes of the file system dir is (or would be) on: its nearest existing ancestor's.
uint64_t FreeBytes(std::filesystem::path dir) {
  std::error_code ec;
  while (!dir.empty() && !std::filesystem::exists(dir, ec)) dir = dir.parent_path();
  struct statvfs st;
  if (statvfs(dir.empty() ? "/" : dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string Human(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

void SubstituteRank(Config* c, int rank) {
  for (TierConfig& t : c->cache.tiers) {
    for (size_t at; (at = t.dir.find("{rank}")) != std::string::npos;) {
      t.dir.replace(at, 6, std::to_string(rank));
    }
  }
}

Status ResolveForDataset(Config* c, const std::string& dataset, int instance) {
  struct sysinfo si {};
  sysinfo(&si);
  const uint64_t memory = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  const std::string name = std::filesystem::path(dataset).filename().string();
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%08llx",
                static_cast<unsigned long long>(std::hash<std::string>()(dataset) & 0xffffffffu));
  for (size_t i = 0; i < c->cache.tiers.size(); ++i) {
    TierConfig& t = c->cache.tiers[i];
    const std::string at = "cache.tiers[" + std::to_string(i) + "]";
    if (t.kind == "ram") {
      if (t.capacity == 0) t.capacity = 1ull << 30;
      if (t.capacity > memory) {
        return Bad(at + ".capacity", Human(t.capacity) + " is more than the machine's memory (" +
                                         Human(memory) + ")");
      }
      continue;
    }
    if (t.dir.empty()) {
      t.dir = "/var/tmp/clairfs/" + (name.empty() ? "root" : name) + "-" + hash +
              (instance >= 0 ? "-rank" + std::to_string(instance) : "");
    }
    const uint64_t available = FreeBytes(t.dir) + DirBytes(t.dir);
    if (t.capacity == 0) t.capacity = available / 2;
    if (t.capacity > available) {
      return Bad(at + ".capacity", Human(t.capacity) + " is more than '" + t.dir + "' can hold (" +
                                       Human(available) + " free)");
    }
  }
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

Result<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(Code::kNotFound, "cannot read config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = ParseConfig(ss.str());
  if (!r.ok()) return Status::Error(r.status().code(), path + ": " + r.status().message());
  return r;
}

}  // namespace clairfs
