// The config fitted to the machine and the dataset (conf/config.h: SubstituteRank,
// DefaultSsdDir, ResolveForDataset): the control group's id, default SSD directories and the
// capacities left to the default. Parsing and validation: conf/config.cc.
#include <grp.h>
#include <pwd.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "conf/config.h"
#include "conf/memory_budget.h"
#include "conf/memory_limit.h"

namespace clairfs {
namespace {

// control.group -> its id, through the system's group database (files, LDAP, ...).
Status ResolveControlGroup(FsOptions* fuse) {
  if (fuse->control_group.empty()) return Status::Ok();
  std::vector<char> buf(16384);
  struct group entry;
  struct group* found = nullptr;
  int err;
  while ((err = getgrnam_r(fuse->control_group.c_str(), &entry, buf.data(), buf.size(), &found)) ==
             ERANGE &&
         buf.size() < (1u << 24)) {
    buf.resize(buf.size() * 2);
  }
  if (err != 0) {
    return BadKey("control.group",
                  "cannot look up '" + fuse->control_group + "': " + std::strerror(err));
  }
  if (!found) return BadKey("control.group", "no group named '" + fuse->control_group + "'");
  fuse->control_gid = found->gr_gid;
  return Status::Ok();
}

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

// The default SSD cache directory of a dataset (absolute, normalized path): under
// /var/tmp/clairfs for root, else under the user's own cache directory ($XDG_CACHE_HOME/clairfs,
// or ~/.cache/clairfs), named <dataset name>-<XXH3-64 of the path, 16 hex digits>[-rank<N>].
// XXH3 is stable across builds and machines (std::hash is not, and a new name loses the cache).
std::string DefaultSsdDir(const std::string& dataset, int instance) {
  std::string base = "/var/tmp/clairfs";
  if (geteuid() != 0) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    std::string home_dir = home && home[0] == '/' ? home : "";
    if (home_dir.empty()) {
      if (const struct passwd* pw = getpwuid(geteuid()); pw && pw->pw_dir) home_dir = pw->pw_dir;
    }
    if (xdg && xdg[0] == '/') {
      base = std::string(xdg) + "/clairfs";
    } else if (!home_dir.empty() && home_dir != "/") {
      base = home_dir + "/.cache/clairfs";
    }
  }
  std::string name = std::filesystem::path(dataset).filename().string();
  if (name.empty()) name = "root";
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(dataset.data(), dataset.size())));
  return base + "/" + name + "-" + hash + (instance >= 0 ? "-rank" + std::to_string(instance) : "");
}

Status ResolveForDataset(Config* c, const std::string& dataset, int instance, MemoryFit* fit) {
  if (Status s = ResolveControlGroup(&c->fuse); !s.ok()) return s;
  struct sysinfo si {};
  sysinfo(&si);
  const uint64_t memory = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  // The memory the daemon may use: the machine's, or its cgroup's limit if lower.
  const CgroupMemory group = CgroupMemoryLimit();
  MemoryFit local;
  if (fit == nullptr) fit = &local;
  for (const std::string& note : group.notes) fit->warnings.push_back("memory limit: " + note);
  std::string what = "the machine's memory (" + HumanBytes(memory) + ")";
  uint64_t limit = memory;
  if (group.limited() && group.limit < memory) {
    limit = group.limit;
    what =
        "the memory limit of the daemon's cgroup (" + HumanBytes(limit) + ", " + group.source + ")";
  }
  if (Status s = FitMemory(c, limit, what, fit); !s.ok()) return s;
  for (size_t i = 0; i < c->cache.tiers.size(); ++i) {
    TierConfig& t = c->cache.tiers[i];
    const std::string at = "cache.tiers[" + std::to_string(i) + "]";
    if (t.kind == "ram") continue;  // FitMemory sized or checked it
    if (t.dir.empty()) t.dir = DefaultSsdDir(dataset, instance);
    const uint64_t available = FreeBytes(t.dir) + DirBytes(t.dir);
    if (t.capacity == 0) t.capacity = available / 2;
    if (t.capacity > available) {
      return BadKey(at + ".capacity", Human(t.capacity) + " is more than '" + t.dir +
                                          "' can hold (" + Human(available) + " free)");
    }
  }
  return Status::Ok();
}

}  // namespace clairfs
