#include "slurm/node_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace clairfs::slurm {
namespace {

std::string JobsDir(const std::string& state_dir, const std::string& name) {
  return state_dir + "/" + name + ".jobs";
}

bool ParseJob(const char* s, uint32_t* job) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v == 0 || v > UINT32_MAX) return false;
  *job = static_cast<uint32_t>(v);
  return true;
}

std::string ReadSmall(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

DatasetLock::~DatasetLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

std::string DatasetLock::Acquire(const std::string& state_dir, const std::string& name,
                                 std::chrono::steady_clock::time_point deadline) {
  const std::string path = state_dir + "/" + name + ".lock";
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) return "cannot open " + path + ": " + std::strerror(errno);
  for (;;) {
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return "";
    if (errno != EWOULDBLOCK && errno != EINTR)
      return "cannot lock " + path + ": " + std::strerror(errno);
    if (std::chrono::steady_clock::now() >= deadline)
      return "another job held " + path + " past the deadline (timeout= in plugstack.conf)";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return "cannot create " + part + ": " + std::strerror(errno);
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + " is not a directory";
  return "";
}

bool JobAlive(uint32_t job) {
  const std::string prefix = "slurmstepd: [" + std::to_string(job);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return true;  // cannot tell: keep the job (its epilog will drop it)
  bool alive = false;
  while (dirent* e = readdir(proc)) {
    uint32_t pid;
    if (!ParseJob(e->d_name, &pid)) continue;
    const std::string cmd = ReadSmall(std::string("/proc/") + e->d_name + "/cmdline");
    if (cmd.size() > prefix.size() && cmd.compare(0, prefix.size(), prefix) == 0 &&
        (cmd[prefix.size()] == '.' || cmd[prefix.size()] == ']')) {
      alive = true;
      break;
    }
  }
  closedir(proc);
  return alive;
}

std::vector<uint32_t> JobsOf(const std::string& state_dir, const std::string& name) {
  std::vector<uint32_t> jobs;
  DIR* d = opendir(JobsDir(state_dir, name).c_str());
  if (d == nullptr) return jobs;
  while (dirent* e = readdir(d)) {
    uint32_t job;
    if (ParseJob(e->d_name, &job)) jobs.push_back(job);
  }
  closedir(d);
  return jobs;
}

std::string AddJob(const std::string& state_dir, const std::string& name, uint32_t job) {
  const std::string dir = JobsDir(state_dir, name);
  if (auto e = MakeDirs(dir); !e.empty()) return e;
  const std::string path = dir + "/" + std::to_string(job);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  close(fd);
  return "";
}

void RemoveJob(const std::string& state_dir, const std::string& name, uint32_t job) {
  unlink((JobsDir(state_dir, name) + "/" + std::to_string(job)).c_str());
}

std::vector<uint32_t> PruneJobs(const std::string& state_dir, const std::string& name,
                                uint32_t keep) {
  std::vector<uint32_t> left;
  for (uint32_t job : JobsOf(state_dir, name)) {
    if (job == keep || JobAlive(job)) {
      left.push_back(job);
    } else {
      RemoveJob(state_dir, name, job);
    }
  }
  return left;
}

std::vector<std::string> KnownDatasets(const std::string& state_dir) {
  std::vector<std::string> names;
  DIR* d = opendir(state_dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string entry = e->d_name;
    if (entry.size() > 5 && entry.ends_with(".jobs"))
      names.push_back(entry.substr(0, entry.size() - 5));
  }
  closedir(d);
  return names;
}

void ForgetDataset(const std::string& state_dir, const std::string& name) {
  rmdir(JobsDir(state_dir, name).c_str());
}

}  // namespace clairfs::slurm
