#include "slurm/job_cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "slurm/mount_ops.h"
#include "slurm/node_state.h"

namespace clairfs::slurm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kKeyBytes = 32;
constexpr size_t kSecretMin = 32, kSecretMax = 4096;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string JobsRoot(const Settings& s) { return s.mount_root + "/jobs"; }

// A directory owned by owner/group with exactly `mode`, made when missing; an existing entry
// of another type, owner or mode is an error (never followed, never widened).
std::string EnsureDir(const std::string& path, uid_t owner, gid_t group, mode_t mode) {
  if (mkdir(path.c_str(), mode) == 0) {
    if (chown(path.c_str(), owner, group) != 0 || chmod(path.c_str(), mode) != 0)
      return Errno("cannot set the owner of " + path);
    return "";
  }
  if (errno != EEXIST) return Errno("cannot make " + path);
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Errno("cannot inspect " + path);
  if (!S_ISDIR(st.st_mode) || st.st_uid != owner || (st.st_mode & 07777) != mode)
    return path + " exists but is not a directory of uid " + std::to_string(owner) + " with mode " +
           std::to_string(mode) + " (octal as decimal): remove it";
  return "";
}

// Reads the administrator's secret: a regular file of root's, no group or other bits, 32..4096
// bytes. Returns "" or why it cannot be used.
std::string ReadSecret(const std::string& path, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Errno("cluster_secret " + path);
  struct stat st {};
  std::string problem;
  if (fstat(fd, &st) != 0) {
    problem = Errno("cluster_secret " + path);
  } else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0) {
    problem = "cluster_secret " + path +
              " must be a regular file of root's with no group or "
              "other permission (chmod 600)";
  } else if (st.st_size < static_cast<off_t>(kSecretMin) ||
             st.st_size > static_cast<off_t>(kSecretMax)) {
    problem = "cluster_secret " + path + " must hold 32 to 4096 bytes (head -c 64 /dev/urandom)";
  } else {
    out->resize(static_cast<size_t>(st.st_size));
    if (pread(fd, out->data(), out->size(), 0) != st.st_size)
      problem = "cluster_secret " + path + ": short read";
  }
  close(fd);
  return problem;
}

// The job's key: HMAC-SHA256(secret, "clairfs-slurm job key 1" NUL job NUL uid).
std::string DeriveKey(const std::string& secret, uint32_t job, uid_t uid, std::string* key) {
  const std::string label = std::string("clairfs-slurm job key 1") + '\0' + std::to_string(job) +
                            '\0' + std::to_string(uid);
  std::array<unsigned char, kKeyBytes> mac{};
  size_t len = 0;
  char digest[] = "SHA256";
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, digest, nullptr, secret.data(), secret.size(),
                reinterpret_cast<const unsigned char*>(label.data()), label.size(), mac.data(),
                mac.size(), &len) == nullptr ||
      len != kKeyBytes)
    return "cannot derive the job's key (libcrypto HMAC-SHA256)";
  key->assign(reinterpret_cast<const char*>(mac.data()), len);
  return "";
}

// Writes the key file (the user's, 0600) unless one with these bytes is there.
std::string WriteKey(const std::string& path, const std::string& key, const Credentials& user) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    std::string problem;
    if (fchown(fd, user.uid, user.gid) != 0 ||
        write(fd, key.data(), key.size()) != static_cast<ssize_t>(key.size()))
      problem = Errno("cannot write " + path);
    close(fd);
    if (!problem.empty()) unlink(path.c_str());
    return problem;
  }
  if (errno != EEXIST) return Errno("cannot make " + path);
  fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Errno("cannot open " + path);
  struct stat st {};
  std::string have(key.size() + 1, '\0');
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == user.uid &&
                  (st.st_mode & 07777) == 0600 &&
                  pread(fd, have.data(), have.size(), 0) == static_cast<ssize_t>(key.size()) &&
                  have.compare(0, key.size(), key) == 0;
  close(fd);
  return ok ? "" : path + " exists and is not this job's key: remove it";
}

std::string RemoveTree(const std::string& path, int depth);
std::string ReadTail(const std::string& path, size_t max);

// The job's disk tier directory on this node (job_cluster.h, "ssd"), linked at c.ssd. Called
// by every step of the job on the node: the first one chooses, under the dataset's lock.
std::string PrepareSsd(const Settings& s, uint32_t job, const Credentials& user, const Dataset& d,
                       const JobCluster& c) {
  const std::string chosen = c.ssd + ".target";
  struct stat st {};
  if (lstat(chosen.c_str(), &st) == 0) return "";  // chosen by an earlier step
  if (auto e = MakeDirs(s.cluster_ssd); !e.empty()) return e;
  const std::string mine = s.cluster_ssd + "/" + std::to_string(user.uid);
  if (auto e = EnsureDir(mine, 0, 0, 0755); !e.empty()) return e;
  DatasetLock lock;
  if (auto e = lock.Acquire(mine, d.name, Clock::now() + s.timeout); !e.empty()) return e;
  if (lstat(chosen.c_str(), &st) == 0) return "";
  const std::string owner_file = mine + "/" + d.name + ".owner";
  std::string target = mine + "/" + d.name;
  const std::string owner = ReadTail(owner_file, 32);
  char* end = nullptr;
  const unsigned long other = std::strtoul(owner.c_str(), &end, 10);
  if (!owner.empty() && *end == '\0' && other != job && other > 0 && other <= UINT32_MAX &&
      JobAlive(static_cast<uint32_t>(other))) {
    target += ".job" + std::to_string(job);  // the shared one is another live job's
  } else {
    const std::string text = std::to_string(job) + "\n";
    const std::string tmp = owner_file + ".new";
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return Errno("cannot write " + tmp);
    const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (!ok || rename(tmp.c_str(), owner_file.c_str()) != 0)
      return Errno("cannot write " + owner_file);
  }
  if (auto e = EnsureDir(target, user.uid, user.gid, 0700); !e.empty()) return e;
  // Bound, not linked: clairfs refuses a cache directory that is a symbolic link.
  if (auto e = EnsureDir(c.ssd, user.uid, user.gid, 0700); !e.empty()) return e;
  if (mount(target.c_str(), c.ssd.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return Errno("cannot bind " + target + " on " + c.ssd);
  const int fd = open(chosen.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Errno("cannot write " + chosen);
  const bool ok = write(fd, target.data(), target.size()) == static_cast<ssize_t>(target.size());
  close(fd);
  return ok ? "" : Errno("cannot write " + chosen);
}

// At the job's end, with the job's processes gone: unbinds its disk tier (before RemoveTree
// would remove what is under it); a directory of the job's own (.job<job>) goes with it; the
// shared one stays for the next job, which no longer finds this one its owner.
std::string ReleaseSsd(const std::string& ssd, const std::string& job) {
  while (umount2(ssd.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
  }
  const std::string target = ReadTail(ssd + ".target", 4096);
  if (target.empty() || target[0] != '/') return "";
  if (target.ends_with(".job" + job)) return RemoveTree(target, 0);
  const std::string owner_file = target + ".owner";
  if (ReadTail(owner_file, 32) == job) unlink(owner_file.c_str());
  return "";
}

// Creates path (root's, 0644) with O_EXCL; true when this call made it.
bool MakeMarker(const std::string& path, std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  if (errno != EEXIST) *error = Errno("cannot make " + path);
  return false;
}

std::string ReadTail(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > max) text = "..." + text.substr(text.size() - max);
  return text;
}

// The supervisor (a process of its own, root): runs the daemons' step as the user with its
// output in the log, and writes the status file when it ends. The step lives as long as the
// job: Slurm ends it with the job; should the job leave the node first (its slurmstepds gone),
// the supervisor kills it. Never returns.
[[noreturn]] void Supervise(const Settings& s, uint32_t job, const Credentials& user,
                            const JobCluster& c, std::vector<std::string> argv,
                            std::vector<std::string> env) {
  // Held until this process ends (the descriptor is never closed before _exit; close-on-exec,
  // so the step does not keep it): the epilog waits for it before removing the directory.
  const int lock =
      open(c.supervisor_lock.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock >= 0) (void)flock(lock, LOCK_EX);
  const int log = open(c.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log >= 0 && fchown(log, user.uid, user.gid) != 0) {
    close(log);
    _exit(1);
  }
  std::vector<char*> av, ev;
  for (auto& a : argv) av.push_back(a.data());
  av.push_back(nullptr);
  for (auto& e : env) ev.push_back(e.data());
  ev.push_back(nullptr);
  std::string outcome;
  const pid_t pid = fork();
  if (pid == 0) {
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    if (setgroups(user.groups.size(), user.groups.data()) != 0 || setgid(user.gid) != 0 ||
        setuid(user.uid) != 0)
      _exit(126);
    execve(av[0], av.data(), ev.data());
    _exit(127);
  }
  if (pid < 0) {
    outcome = Errno("fork");
  } else {
    int wstatus = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &wstatus, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) break;
      if (!JobAlive(job)) kill(pid, SIGTERM);  // Slurm ended the job; its step goes too
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (WIFEXITED(wstatus)) {
      const int code = WEXITSTATUS(wstatus);
      outcome = code == 126   ? "could not become the job's user"
                : code == 127 ? "could not run " + s.srun
                              : s.srun + " exited with status " + std::to_string(code);
    } else {
      outcome = s.srun + " was killed by signal " + std::to_string(WTERMSIG(wstatus));
    }
  }
  const int fd =
      open(c.status.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    outcome += "\n";
    (void)!write(fd, outcome.data(), outcome.size());
    close(fd);
  }
  _exit(0);
}

// Removes a directory of a job's and what is in it, deepest first: each directory met is
// unmounted first (a daemon killed with the job leaves its mount behind: ENOTCONN), nothing is
// followed (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW: a symbolic link is removed, not its target). Run
// in the epilog, when none of the job's processes is left to change the tree meanwhile.
std::string RemoveTree(const std::string& path, int depth) {
  while (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? "" : Errno("cannot open " + path);
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return Errno("cannot read " + path);
  }
  std::string problem;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  for (const auto& name : names) {
    struct stat st {};
    if (fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      // The mountpoint of a daemon that died answers nothing (ENOTCONN): detached, then looked
      // at again, so that neither the mount nor the directory stays.
      const std::string child = path + "/" + name;
      if (umount2(child.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 ||
          fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;
      }
    }
    std::string e;
    if (S_ISDIR(st.st_mode) && depth < 8) {
      e = RemoveTree(path + "/" + name, depth + 1);
    } else if (unlinkat(fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
               errno != ENOENT) {
      e = Errno("cannot remove " + path + "/" + name);
    }
    if (!e.empty()) problem += (problem.empty() ? "" : "; ") + e;
  }
  closedir(d);
  if (rmdir(path.c_str()) != 0 && errno != ENOENT && problem.empty())
    problem = Errno("rmdir " + path);
  return problem;
}

}  // namespace

JobCluster JobClusterOf(const Settings& s, uint32_t job, const Dataset& d) {
  JobCluster c;
  c.dir = JobsRoot(s) + "/" + std::to_string(job);
  c.key = c.dir + "/key";
  c.mountpoint = c.dir + "/" + d.name;
  c.log = c.dir + "/daemons.log";
  c.status = c.dir + "/daemons.status";
  c.supervisor_lock = c.dir + "/supervisor.lock";
  c.run = c.dir + "/run";
  c.ssd = c.dir + "/ssd";
  return c;
}

std::string PrepareJobCluster(const Settings& s, uint32_t job, const Credentials& user,
                              const Dataset& d, PrepareFor what, bool* first, bool* launch) {
  *first = false;
  if (launch != nullptr) *launch = false;
  if (s.cluster_secret.empty())
    return "this cluster has no cluster_secret= in plugstack.conf: a job cannot have one cache "
           "for its nodes (ask for --clairfs-cache=node)";
  std::string secret, key;
  if (auto e = ReadSecret(s.cluster_secret, &secret); !e.empty()) return e;
  if (auto e = DeriveKey(secret, job, user.uid, &key); !e.empty()) return e;
  if (auto e = MakeDirs(s.mount_root); !e.empty()) return e;
  if (auto e = EnsureDir(JobsRoot(s), 0, 0, 0755); !e.empty()) return e;
  const JobCluster c = JobClusterOf(s, job, d);
  if (auto e = EnsureDir(c.dir, 0, 0, 0755); !e.empty()) return e;
  if (auto e = WriteKey(c.key, key, user); !e.empty()) return e;
  // Once the daemon mounted, root cannot even stat the mountpoint (a FUSE mount without
  // allow_other answers its owner alone): the mount table says it is there.
  if (!IsClairfsMount(c.mountpoint)) {
    if (auto e = EnsureDir(c.mountpoint, user.uid, user.gid, 0700); !e.empty()) return e;
  }
  if (auto e = EnsureDir(c.run, user.uid, user.gid, 0700); !e.empty()) return e;
  if (!s.cluster_ssd.empty()) {
    if (auto e = PrepareSsd(s, job, user, d, c); !e.empty()) return e;
  }
  if (what == PrepareFor::kDaemons) return "";
  std::string error;
  *first = MakeMarker(c.dir + "/registered", &error);
  if (error.empty() && what == PrepareFor::kLaunch && launch != nullptr)
    *launch = MakeMarker(c.dir + "/launched", &error);
  return error;
}

std::string LaunchJobCluster(const Settings& s, uint32_t job, const Credentials& user,
                             const Dataset& d, uint32_t nodes) {
  const JobCluster c = JobClusterOf(s, job, d);
  std::vector<std::string> argv = {
      s.srun, "--jobid=" + std::to_string(job), "--job-name=clairfs-cluster", "--overlap",
      "--mpi=pmi2", "--nodes=" + std::to_string(nodes), "--ntasks=" + std::to_string(nodes),
      "--ntasks-per-node=1", "--kill-on-bad-exit=0",
      // the plugin's own step: prepares each node (as root) and
      // neither mounts nor waits
      "--clairfs-daemons=" + d.source, s.clairfs, "--cluster", "-f"};
  if (!s.cluster_config.empty()) argv.insert(argv.end(), {"-c", s.cluster_config});
  argv.insert(argv.end(), {"-o", "cluster.key_file=" + c.key});
  if (!s.cluster_ssd.empty())
    argv.insert(argv.end(),
                {"-o", "cache.tiers." + std::to_string(s.cluster_ssd_tier) + ".dir=" + c.ssd});
  for (const auto& o : s.options) argv.insert(argv.end(), {"-o", o});
  argv.insert(argv.end(), {d.source, c.mountpoint});
  // XDG_RUNTIME_DIR: where a daemon of the user's puts its control mount (node-local, the job's).
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                  "XDG_RUNTIME_DIR=" + c.run};
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr)
    env.push_back(std::string("SLURM_CONF=") + conf);
  env.insert(env.end(), s.cluster_env.begin(), s.cluster_env.end());
  // Two forks: the supervisor is nobody's child that waits (slurmstepd reaps only its tasks).
  const pid_t pid = fork();
  if (pid < 0) return Errno("fork");
  if (pid == 0) {
    setsid();
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    const pid_t supervisor = fork();
    if (supervisor == 0) Supervise(s, job, user, c, std::move(argv), std::move(env));
    _exit(supervisor < 0 ? 1 : 0);
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    return "could not start the supervisor of the daemons' step";
  return "";
}

std::string WaitJobCluster(const Settings& s, uint32_t job, const Dataset& d) {
  const JobCluster c = JobClusterOf(s, job, d);
  const Clock::time_point deadline = Clock::now() + s.timeout;
  const std::string control = c.mountpoint + "/.clairfs/stats";
  for (;;) {
    if (IsClairfsMount(c.mountpoint) && access(control.c_str(), R_OK) == 0) return "";
    struct stat st {};
    if (stat(c.status.c_str(), &st) == 0) {
      const std::string said = ReadTail(c.log, 3000);
      return "the job's cluster cache did not start: " + ReadTail(c.status, 200) +
             (said.empty() ? "" : "; the daemons said:\n" + said);
    }
    if (Clock::now() >= deadline) {
      const std::string said = ReadTail(c.log, 3000);
      return "the job's cluster cache was not mounted on this node within " +
             std::to_string(s.timeout.count()) + " s (timeout= in plugstack.conf)" +
             (said.empty() ? "" : "; the daemons said:\n" + said);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {

// True once no process holds the lock at path (absent, or taken and let go here), false when
// the deadline passed first.
bool AwaitSupervisor(const std::string& path, Clock::time_point deadline) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return true;  // no supervisor ever ran here (or the directory is gone)
  bool ended = true;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) break;  // cannot tell: go on
    if (Clock::now() >= deadline) {
      ended = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  close(fd);
  return ended;
}

}  // namespace

std::string ReleaseJobClusters(const Settings& s, uint32_t job) {
  const std::string root = JobsRoot(s);
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return errno == ENOENT ? "" : Errno("cannot open " + root);
  std::vector<std::string> gone;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(e->d_name, &end, 10);
    if (e->d_name[0] == '\0' || *end != '\0' || id == 0 || id > UINT32_MAX) continue;
    if (id == job || !JobAlive(static_cast<uint32_t>(id))) gone.push_back(e->d_name);
  }
  closedir(d);
  std::string problem;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (const auto& name : gone) {
    // The supervisor writes the status file when the step ends, which may be while this
    // epilog runs: removed before that, the directory would get the file back and stay.
    if (!AwaitSupervisor(root + "/" + name + "/supervisor.lock", deadline))
      problem += std::string(problem.empty() ? "" : "; ") + "the supervisor of job " + name +
                 " did not end within 10 s: its directory may come back";
    if (auto e = ReleaseSsd(root + "/" + name + "/ssd", name); !e.empty())
      problem += (problem.empty() ? "" : "; ") + e;
    if (auto e = RemoveTree(root + "/" + name, 0); !e.empty())
      problem += (problem.empty() ? "" : "; ") + e;
  }
  return problem;
}

}  // namespace clairfs::slurm
