#include "slurm/mount_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "slurm/node_state.h"
#include "slurm/spawn.h"

namespace clairfs::slurm {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out.push_back(static_cast<char>(v));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

struct MountEntry {
  std::string point;
  std::string fstype;
  std::string super_options;
};

std::vector<MountEntry> Mounts() {
  std::vector<MountEntry> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, word;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> word && word != "-") {
    }
    MountEntry m;
    m.point = Unescape(point);
    fields >> m.fstype >> word >> m.super_options;
    mounts.push_back(std::move(m));
  }
  return mounts;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether pid is still running (a zombie waiting for its reaper has exited).
bool Exists(int pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

std::string LastLines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  constexpr size_t kMax = 2000;
  if (text.size() > kMax) text = "..." + text.substr(text.size() - kMax);
  return text;
}

}  // namespace

bool IsClairfsMount(const std::string& path) {
  for (const auto& m : Mounts()) {
    if (m.point == path && m.fstype == "fuse.clairfs") return true;
  }
  return false;
}

bool MountAnswers(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string CgroupProcFiles(const std::string& cgroup, std::vector<std::string>* out) {
  if (cgroup == "none") return "";
  std::set<std::string> seen;  // one hierarchy may be mounted more than once
  for (const auto& m : Mounts()) {
    if (m.fstype != "cgroup" && m.fstype != "cgroup2") continue;
    if (!seen.insert(m.fstype + " " + m.super_options).second) continue;
    const std::string dir = cgroup == "/" ? m.point : m.point + cgroup;
    if (auto e = MakeDirs(dir); !e.empty()) return "cgroup=" + cgroup + ": " + e;
    out->push_back(dir + "/cgroup.procs");
  }
  return "";
}

std::string StartDaemon(const Settings& s, const Dataset& d, Deadline deadline) {
  if (auto e = MakeDirs(d.mountpoint); !e.empty()) return e;
  SpawnSpec spec;
  spec.argv = {s.clairfs};
  if (!s.config.empty()) spec.argv.insert(spec.argv.end(), {"-c", s.config});
  spec.argv.insert(spec.argv.end(), {"-o", "allow_other"});
  for (const auto& o : s.options) spec.argv.insert(spec.argv.end(), {"-o", o});
  spec.argv.insert(spec.argv.end(), {d.source, d.mountpoint});
  spec.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
              "HOME=/root"};
  spec.new_session = true;
  if (auto e = CgroupProcFiles(s.cgroup, &spec.cgroup_procs); !e.empty()) return e;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  spec.timeout = std::max(left, std::chrono::milliseconds(1000));
  const SpawnResult r = Spawn(spec);
  if (!r.error.empty()) return r.error;
  if (r.status != 0) {
    const std::string said = LastLines(r.err + r.out);
    rmdir(d.mountpoint.c_str());
    return "clairfs could not mount " + d.source + " (exit status " + std::to_string(r.status) +
           ")" + (said.empty() ? "" : ":\n" + said);
  }
  if (!IsClairfsMount(d.mountpoint))
    return "clairfs exited 0 but no clairfs mount is at " + d.mountpoint;
  return "";
}

std::vector<int> DaemonPids(const Settings& s, const std::string& path) {
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string cmd = ReadFile(std::string("/proc/") + e->d_name + "/cmdline");
    std::vector<std::string> args;
    for (size_t start = 0; start < cmd.size();) {
      const size_t nul = cmd.find('\0', start);
      args.push_back(cmd.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
      if (nul == std::string::npos) break;
      start = nul + 1;
    }
    if (args.size() < 2 || args[0] != s.clairfs) continue;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == path) {
        pids.push_back(static_cast<int>(pid));
        break;
      }
    }
  }
  closedir(proc);
  return pids;
}

std::string StopDaemon(const Settings& s, const std::string& path, Deadline deadline) {
  const std::vector<int> pids = DaemonPids(s, path);
  std::string problem;
  if (umount2(path.c_str(), UMOUNT_NOFOLLOW) != 0) {
    if (errno == EBUSY) {
      problem = path + " was busy: detached (lazy unmount)";
      umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    } else if (errno != EINVAL) {  // EINVAL: not mounted (any more)
      problem = "umount " + path + ": " + std::strerror(errno);
    }
  }
  for (int pid : pids) {
    while (Exists(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Exists(pid)) {
      kill(pid, SIGKILL);
      problem += (problem.empty() ? "" : "; ") + std::string("clairfs (pid ") +
                 std::to_string(pid) + ") did not exit after the unmount: killed";
    }
  }
  if (rmdir(path.c_str()) != 0 && errno != ENOENT && problem.empty())
    problem = "rmdir " + path + ": " + std::strerror(errno);
  return problem;
}

}  // namespace clairfs::slurm
