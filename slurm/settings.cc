#include "slurm/settings.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace clairfs::slurm {
namespace {

std::string Canonical(const std::string& path, std::string* error) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    *error = std::strerror(errno);
    return "";
  }
  return buf;
}

bool Under(const std::string& path, const std::string& prefix) {
  if (prefix == "/") return true;
  return path == prefix ||
         (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
          path[prefix.size()] == '/');
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string NameOf(const std::string& source) {
  std::string base = source.substr(source.rfind('/') + 1);
  if (base.empty()) base = "root";
  if (base.size() > 64) base.resize(64);
  for (char& c : base) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (base[0] == '.') base[0] = '_';
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv1a(source)));
  return base + "-" + hex;
}

bool AbsolutePath(const std::string& v) { return !v.empty() && v[0] == '/'; }

}  // namespace

std::string ParseSettings(const std::vector<std::string>& args, Settings* out) {
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return "argument '" + arg + "' is not key=value";
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    if (key == "mount_root" || key == "state_dir" || key == "clairfs" || key == "config" ||
        key == "helper" || key == "cluster_secret" || key == "cluster_config" || key == "srun" ||
        key == "cluster_ssd") {
      if (!AbsolutePath(value)) return "'" + key + "' needs an absolute path, got '" + value + "'";
      std::string& field = key == "mount_root"       ? out->mount_root
                           : key == "state_dir"      ? out->state_dir
                           : key == "clairfs"        ? out->clairfs
                           : key == "config"         ? out->config
                           : key == "cluster_secret" ? out->cluster_secret
                           : key == "cluster_config" ? out->cluster_config
                           : key == "srun"           ? out->srun
                           : key == "cluster_ssd"    ? out->cluster_ssd
                                                     : out->helper;
      field = value;
    } else if (key == "multinode") {
      if (!ParseMultiNode(value, &out->multinode))
        return "'multinode' needs 'cluster' or 'node', got '" + value + "'";
    } else if (key == "cluster_ssd_tier") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 0 || v > 15)
        return "'cluster_ssd_tier' needs a tier number from 0 to 15, got '" + value + "'";
      out->cluster_ssd_tier = static_cast<int>(v);
    } else if (key == "cluster_env") {
      const size_t inner = value.find('=');
      if (inner == 0 || inner == std::string::npos)
        return "'cluster_env' needs NAME=value, got '" + value + "'";
      out->cluster_env.push_back(value);
    } else if (key == "option" || key == "options") {
      if (value.empty()) return "'" + key + "' is empty";
      out->options.push_back(value);
    } else if (key == "allow") {
      size_t start = 0;
      while (start <= value.size()) {
        size_t end = value.find(':', start);
        if (end == std::string::npos) end = value.size();
        const std::string prefix = value.substr(start, end - start);
        start = end + 1;
        if (prefix.empty()) continue;
        if (!AbsolutePath(prefix)) return "'allow' needs absolute paths, got '" + prefix + "'";
        // A prefix missing on this node (a file system not mounted yet) allows nothing here;
        // it must not stop the releases of the node's mounts.
        std::string error;
        const std::string canonical = Canonical(prefix, &error);
        if (!canonical.empty()) out->allow.push_back(canonical);
      }
    } else if (key == "cgroup") {
      if (value != "none" && !AbsolutePath(value))
        return "'cgroup' needs 'none' or a path starting with '/', got '" + value + "'";
      if (value.find("/../") != std::string::npos || value.ends_with("/.."))
        return "'cgroup' may not contain '..'";
      out->cgroup = value;
    } else if (key == "timeout") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 1 || v > 3600)
        return "'timeout' needs seconds from 1 to 3600, got '" + value + "'";
      out->timeout = std::chrono::seconds(v);
    } else {
      return "unknown setting '" + key + "'";
    }
  }
  return "";
}

std::string ResolveDataset(const Settings& s, const std::string& arg, Dataset* out) {
  if (!AbsolutePath(arg)) return "--clairfs needs an absolute path, got '" + arg + "'";
  if (s.allow.empty())
    return "no dataset may be mounted on this node: the administrator allowed no prefix that "
           "exists here (allow= in plugstack.conf)";
  std::string error;
  const std::string source = Canonical(arg, &error);
  if (source.empty()) return "dataset '" + arg + "': " + error;
  struct stat st {};
  if (stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "dataset '" + arg + "' is not a directory";
  bool allowed = false;
  for (const auto& prefix : s.allow) allowed = allowed || Under(source, prefix);
  if (!allowed) {
    std::string list;
    for (const auto& prefix : s.allow) list += (list.empty() ? "" : ", ") + prefix;
    return "dataset '" + arg + "'" + (source != arg ? " (" + source + ")" : "") +
           " is outside the prefixes this node allows (" + list + ")";
  }
  out->source = source;
  out->name = NameOf(source);
  out->mountpoint = MountpointOf(s, out->name);
  return "";
}

bool ParseMultiNode(const std::string& value, MultiNode* out) {
  if (value == "cluster") {
    *out = MultiNode::kCluster;
  } else if (value == "node") {
    *out = MultiNode::kNode;
  } else {
    return false;
  }
  return true;
}

std::string MountpointOf(const Settings& s, const std::string& name) {
  return s.mount_root + "/" + name;
}

}  // namespace clairfs::slurm
