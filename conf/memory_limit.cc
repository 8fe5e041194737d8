#include "conf/memory_limit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace clairfs {
namespace {

constexpr uint64_t kUnlimitedFrom = 1ull << 62;  // v1 reports "none" as ~2^63 rounded to pages

// Reads a whole small file (at most 16 MiB). Not found: false with *missing set; other failures:
// false with the reason in *why.
bool ReadSmall(const std::string& path, std::string* out, bool* missing, std::string* why) {
  *missing = false;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      *missing = true;
    } else {
      *why = std::strerror(errno);
    }
    return false;
  }
  out->clear();
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::strerror(errno);  // e.g. EISDIR
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (16u << 20)) break;  // mountinfo of a huge mount table: enough
  }
  close(fd);
  return true;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool HasOption(const std::string& list, const std::string& name) {
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item == name) return true;
  }
  return false;
}

struct Mount {
  std::string root;        // the part of the hierarchy mounted there ("/" usually)
  std::string mountpoint;  // where
};

// The cgroup mounts: v2 (fstype cgroup2) and v1 memory (fstype cgroup, "memory" in the
// superblock options).
void FindMounts(const std::string& mountinfo, std::vector<Mount>* v2, std::vector<Mount>* v1) {
  std::stringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::stringstream left(line.substr(0, dash)), right(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, super;
    if (!(left >> id >> parent >> dev >> root >> point)) continue;
    if (!(right >> fstype >> source)) continue;
    right >> super;
    const Mount m{Unescape(root), Unescape(point)};
    if (fstype == "cgroup2") {
      v2->push_back(m);
    } else if (fstype == "cgroup" && HasOption(super, "memory")) {
      v1->push_back(m);
    }
  }
}

// The directory of cgroup path under the first mount whose root contains it, or "".
std::string CgroupDir(const std::vector<Mount>& mounts, const std::string& path,
                      std::string* mount_dir) {
  for (const Mount& m : mounts) {
    std::string rel;
    if (m.root == "/") {
      rel = path == "/" ? "" : path;
    } else if (path == m.root) {
      rel = "";
    } else if (path.rfind(m.root + "/", 0) == 0) {
      rel = path.substr(m.root.size());
    } else {
      continue;
    }
    *mount_dir = m.mountpoint;
    return m.mountpoint + rel;
  }
  return "";
}

// Reads name in dir and each ancestor of dir down to top (inclusive) and keeps the smallest.
void WalkUp(const std::string& root, const std::string& top, std::string dir,
            const std::vector<std::string>& names, CgroupMemory* out) {
  while (true) {
    for (const std::string& name : names) {
      const std::string file = root + dir + "/" + name;
      std::string text, why;
      bool missing = false;
      if (!ReadSmall(file, &text, &missing, &why)) {
        if (!missing) out->notes.push_back(file + ": " + why + "; taken as no limit");
        continue;
      }
      uint64_t bytes = 0;
      if (!ParseCgroupLimit(text, &bytes)) {
        out->notes.push_back(file + ": not a memory limit ('" + text.substr(0, 40) +
                             "'); taken as no limit");
        continue;
      }
      if (bytes != 0 && (!out->limited() || bytes < out->limit)) {
        out->limit = bytes;
        out->source = file;
      }
    }
    if (dir.size() <= top.size()) return;  // the mount's root was read last
    dir.resize(dir.rfind('/'));            // dir starts with top: a '/' lies past it
    if (dir.size() < top.size()) dir = top;
  }
}

}  // namespace

bool ParseCgroupLimit(const std::string& text, uint64_t* bytes) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
  const std::string t = text.substr(0, end);
  if (t == "max") {
    *bytes = 0;
    return true;
  }
  if (t.empty() || t.size() > 20) return false;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *bytes = v >= kUnlimitedFrom ? 0 : v;
  return true;
}

CgroupMemory CgroupMemoryLimit(const std::string& root) {
  CgroupMemory out;
  std::string groups, mountinfo, why;
  bool missing = false;
  if (!ReadSmall(root + "/proc/self/cgroup", &groups, &missing, &why)) {
    if (!missing) out.notes.push_back(root + "/proc/self/cgroup: " + why);
    return out;  // no cgroups (or no /proc): no limit known
  }
  if (!ReadSmall(root + "/proc/self/mountinfo", &mountinfo, &missing, &why)) {
    out.notes.push_back(root + "/proc/self/mountinfo: " + (missing ? "missing" : why) +
                        "; cgroup limits not read");
    return out;
  }
  std::vector<Mount> v2, v1;
  FindMounts(mountinfo, &v2, &v1);
  std::stringstream lines(groups);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path (the path may itself hold ':')
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    const bool unified = id == "0" && controllers.empty();
    if (!unified && !HasOption(controllers, "memory")) continue;
    std::string top;
    const std::string dir = CgroupDir(unified ? v2 : v1, path, &top);
    if (dir.empty()) {
      if (!(unified ? v2 : v1).empty()) {
        out.notes.push_back(std::string("cgroup ") + (unified ? "v2" : "v1 memory") + " path '" +
                            path + "' lies outside every mount of its hierarchy; not read");
      }
      continue;
    }
    if (unified) {
      WalkUp(root, top, dir, {"memory.max", "memory.high"}, &out);
    } else {
      WalkUp(root, top, dir, {"memory.limit_in_bytes"}, &out);
    }
  }
  return out;
}

}  // namespace clairfs
