// faultfs: a read-only FUSE passthrough over a directory that injects faults set at run time.
// It exists for tests/fault/fault_matrix.py, to put a failing backend below a clairfs dataset.
//
//   faultfs -f --rules=FILE [-o FUSE_OPTIONS] SOURCE MOUNTPOINT
//
// Contract:
// - MOUNTPOINT shows SOURCE read-only (getattr, readlink, opendir/readdir, open/read, statfs;
//   every mutation fails with EROFS or ENOSYS). Symlinks are never followed inside SOURCE.
//   Inode numbers are SOURCE's (use_ino); the kernel caches neither entries, attributes nor
//   data (timeouts 0, direct_io), so every access reaches faultfs and sees SOURCE as it is now.
// - FILE holds the rules, one per line; '#' starts a comment; the first matching rule wins:
//       OPS GLOB ACTION [MS]
//   OPS is a comma-separated subset of stat (getattr, readlink), open (open, opendir),
//   read (read, readdir) or "all". GLOB is an fnmatch(3) pattern without FNM_PATHNAME
//   ('*' crosses '/') matched against the path relative to SOURCE ("" is the root).
//   ACTION: "eio" fails the request with EIO; "stall" holds it until the rule set no longer
//   stalls it (then the new rules apply to it); "stall MS" holds it for MS milliseconds or
//   until the rules change, then serves it (slow reads: "read * stall 20").
// - FILE is reread whenever it changes (polled every 10 ms; replace it atomically with
//   rename). A file that does not parse changes nothing. After each read of FILE faultfs
//   writes FILE.applied atomically: the text it applied, or "error: LINE: REASON". A test
//   waits for FILE.applied to hold its text before relying on the rules.
// - Each request is answered exactly once; a held request is answered EIO when the session
//   ends (SIGTERM, unmount). kill -9 leaves the mount to fail every access with ENOTCONN.
// - The first 20 faults injected under each rule set are logged to stderr.
#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class Op : unsigned { kStat = 1, kOpen = 2, kRead = 4 };
enum class Action { kEio, kStall };

struct Rule {
  unsigned ops = 0;  // bit set of Op
  std::string glob;
  Action action = Action::kEio;
  long stall_ms = -1;  // kStall: -1 until the rules change, else the most it holds
  std::string text;    // the line, for the log
};

struct RuleSet {
  std::vector<Rule> rules;
  uint64_t generation = 0;
};

// Parses the rules text; on error returns false and sets *error to "LINE: REASON".
bool ParseRules(const std::string& text, std::vector<Rule>* out, std::string* error) {
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string ops, glob, action, extra;
    if (!(words >> ops)) continue;
    Rule rule;
    rule.text = line;
    std::istringstream op_list(ops);
    for (std::string op; std::getline(op_list, op, ',');) {
      if (op == "stat") {
        rule.ops |= static_cast<unsigned>(Op::kStat);
      } else if (op == "open") {
        rule.ops |= static_cast<unsigned>(Op::kOpen);
      } else if (op == "read") {
        rule.ops |= static_cast<unsigned>(Op::kRead);
      } else if (op == "all") {
        rule.ops |= 7;
      } else {
        *error = std::to_string(number) + ": unknown operation '" + op + "'";
        return false;
      }
    }
    if (!(words >> glob >> action)) {
      *error = std::to_string(number) + ": expected OPS GLOB ACTION [MS]";
      return false;
    }
    rule.glob = glob;
    if (action == "eio") {
      rule.action = Action::kEio;
    } else if (action == "stall") {
      rule.action = Action::kStall;
      if (words >> extra) {
        char* end = nullptr;
        rule.stall_ms = std::strtol(extra.c_str(), &end, 10);
        if (*end != '\0' || rule.stall_ms < 0 || rule.stall_ms > 3600 * 1000) {
          *error = std::to_string(number) + ": MS must be 0..3600000, not '" + extra + "'";
          return false;
        }
      }
    } else {
      *error = std::to_string(number) + ": unknown action '" + action + "'";
      return false;
    }
    if (words >> extra) {
      *error = std::to_string(number) + ": trailing '" + extra + "'";
      return false;
    }
    out->push_back(std::move(rule));
  }
  return true;
}

bool WriteAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

class Faults {
 public:
  explicit Faults(std::string rules_path) : rules_path_(std::move(rules_path)) {}

  // Reads the rules file if it changed since the last call; returns false on a parse error
  // (the previous rules stay). Called at start and by the watcher thread.
  bool Reload(bool force) {
    struct stat st {};
    if (::stat(rules_path_.c_str(), &st) != 0) {
      std::memset(&st, 0, sizeof st);  // a missing file means no rules
    }
    std::string key = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                      std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
                      ":" + std::to_string(st.st_ctim.tv_nsec);
    if (!force && key == file_key_) return true;
    file_key_ = key;
    std::string text;
    if (st.st_ino != 0) {
      std::ifstream f(rules_path_);
      std::stringstream buf;
      buf << f.rdbuf();
      text = buf.str();
    }
    std::vector<Rule> rules;
    std::string error;
    if (!ParseRules(text, &rules, &error)) {
      std::fprintf(stderr, "faultfs: %s: line %s; rules unchanged\n", rules_path_.c_str(),
                   error.c_str());
      WriteAtomically(rules_path_ + ".applied", "error: " + error + "\n");
      return false;
    }
    {
      std::lock_guard lock(mu_);
      auto next = std::make_shared<RuleSet>();
      next->rules = std::move(rules);
      next->generation = current_ ? current_->generation + 1 : 1;
      std::fprintf(stderr, "faultfs: rules generation %llu: %zu rule(s)\n",
                   static_cast<unsigned long long>(next->generation), next->rules.size());
      current_ = std::move(next);
      logged_ = 0;
    }
    changed_.notify_all();
    WriteAtomically(rules_path_ + ".applied", text);
    return true;
  }

  // Until Stop(): rereads the rules file every 10 ms.
  void StartWatcher() {
    watcher_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        Reload(false);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }

  // Ends the watcher and releases every held request (answered EIO).
  void Stop() {
    stopping_ = true;
    changed_.notify_all();
    if (watcher_.joinable()) {
      watcher_.request_stop();
      watcher_.join();
    }
  }

  // The fault for (op, path): 0 to serve the request, else the errno to answer with.
  // May hold the calling thread (a stall rule); returns EIO when the session ends meanwhile.
  int Check(Op op, const char* path) {
    const char* rel = path[0] == '/' ? path + 1 : path;
    std::unique_lock lock(mu_);
    while (true) {
      const Rule* rule = Match(op, rel);
      if (rule == nullptr) return 0;
      Log(*rule, rel);
      if (rule->action == Action::kEio) return EIO;
      uint64_t generation = current_->generation;
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(rule->stall_ms < 0 ? 0 : rule->stall_ms);
      // Polls the session every 50 ms: SIGTERM or an unmount ends the session without
      // touching the rules.
      while (current_->generation == generation) {
        if (stopping_ || SessionExited()) return EIO;
        auto step = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        if (rule->stall_ms >= 0) {
          if (std::chrono::steady_clock::now() >= deadline) return 0;
          step = std::min(step, deadline);
        }
        changed_.wait_until(lock, step);
      }
      // The rules changed while held: evaluate the request against the new ones.
    }
  }

 private:
  const Rule* Match(Op op, const char* rel) const {
    if (!current_) return nullptr;
    for (const Rule& r : current_->rules) {
      if ((r.ops & static_cast<unsigned>(op)) && fnmatch(r.glob.c_str(), rel, 0) == 0) {
        return &r;
      }
    }
    return nullptr;
  }

  void Log(const Rule& rule, const char* rel) {
    if (logged_ < 20) {
      ++logged_;
      std::fprintf(stderr, "faultfs: '%s' applies to '%s'\n", rule.text.c_str(), rel);
    }
  }

  static bool SessionExited() {
    fuse_context* ctx = fuse_get_context();
    return ctx && ctx->fuse && fuse_session_exited(fuse_get_session(ctx->fuse));
  }

  const std::string rules_path_;
  std::string file_key_;  // only the watcher (or main before the mount) touches it
  std::mutex mu_;         // guards current_, logged_; a leaf lock
  std::condition_variable changed_;
  std::shared_ptr<RuleSet> current_;
  int logged_ = 0;
  std::atomic<bool> stopping_{false};
  std::jthread watcher_;
};

struct State {
  int root_fd = -1;  // O_PATH descriptor of SOURCE
  std::unique_ptr<Faults> faults;
};

State& S() { return *static_cast<State*>(fuse_get_context()->private_data); }

// Path relative to SOURCE for the *at() calls.
const char* Rel(const char* path) { return path[1] == '\0' ? "." : path + 1; }

void* Init(fuse_conn_info*, fuse_config* cfg) {
  cfg->use_ino = 1;
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->kernel_cache = 0;
  State* state = static_cast<State*>(fuse_get_context()->private_data);
  state->faults->StartWatcher();  // here, not in main: -f is not required to survive a fork
  return state;
}

void Destroy(void* data) { static_cast<State*>(data)->faults->Stop(); }

int GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  if (int e = S().faults->Check(Op::kStat, path)) return -e;
  int r = fi ? fstat(static_cast<int>(fi->fh), st)
             : fstatat(S().root_fd, Rel(path), st, AT_SYMLINK_NOFOLLOW);
  return r == 0 ? 0 : -errno;
}

int ReadLink(const char* path, char* buf, size_t size) {
  if (int e = S().faults->Check(Op::kStat, path)) return -e;
  if (size == 0) return -EINVAL;
  ssize_t n = readlinkat(S().root_fd, Rel(path), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  if (int e = S().faults->Check(Op::kOpen, path)) return -e;
  // O_NONBLOCK: a FIFO in SOURCE must not hold a faultfs thread.
  int fd = openat(S().root_fd, Rel(path), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  return 0;
}

int Read(const char* path, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (int e = S().faults->Check(Op::kRead, path)) return -e;
  ssize_t n = pread(static_cast<int>(fi->fh), buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int Release(const char*, fuse_file_info* fi) {
  close(static_cast<int>(fi->fh));
  return 0;
}

int OpenDir(const char* path, fuse_file_info*) {
  if (int e = S().faults->Check(Op::kOpen, path)) return -e;
  struct stat st {};
  if (fstatat(S().root_fd, Rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

// Lists the whole directory in one call (offset 0 mode); the datasets faultfs serves are small.
int ReadDir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
            fuse_readdir_flags) {
  if (int e = S().faults->Check(Op::kRead, path)) return -e;
  int fd = openat(S().root_fd, Rel(path), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    int e = errno;
    close(fd);
    return -e;
  }
  while (dirent* d = readdir(dir)) {
    struct stat st {};
    st.st_ino = d->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(d->d_type));
    if (fill(buf, d->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  closedir(dir);
  return 0;
}

int StatFs(const char*, struct statvfs* st) { return fstatvfs(S().root_fd, st) == 0 ? 0 : -errno; }

// Checked as the caller (its uid and gid as the file-system ids of this thread only), as a
// network file system's server checks the user a request comes from: the daemon's open
// access re-check (fs/core/access_rules.h) asks as the reader. faccessat2 itself, not
// glibc's faccessat, which may emulate AT_EACCESS with the process's effective ids.
int Access(const char* path, int mask) {
  if (mask & W_OK) return -EROFS;
  const fuse_context* caller = fuse_get_context();
  const int gid = setfsgid(caller->gid);
  const int uid = setfsuid(caller->uid);
  const long rc =
      syscall(SYS_faccessat2, S().root_fd, Rel(path), mask, AT_SYMLINK_NOFOLLOW | AT_EACCESS);
  const int err = errno;
  setfsuid(uid);
  setfsgid(gid);
  return rc == 0 ? 0 : -err;
}

struct Options {
  char* rules = nullptr;
  char* source = nullptr;
};

const fuse_opt kOptionSpecs[] = {{"--rules=%s", offsetof(Options, rules), 0}, FUSE_OPT_END};

// The first non-option argument is SOURCE (kept here); the second, the mountpoint, goes on
// to libfuse.
int TakeSource(void* data, const char* arg, int key, fuse_args*) {
  auto* opts = static_cast<Options*>(data);
  if (key == FUSE_OPT_KEY_NONOPT && opts->source == nullptr) {
    opts->source = strdup(arg);
    return 0;
  }
  return 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  Options opts;
  if (fuse_opt_parse(&args, &opts, kOptionSpecs, TakeSource) != 0) return 2;
  if (opts.source == nullptr || opts.rules == nullptr) {
    std::fprintf(stderr, "usage: faultfs -f --rules=FILE [-o OPTS] SOURCE MOUNTPOINT\n");
    fuse_opt_free_args(&args);
    return 2;
  }
  State state;
  state.root_fd = open(opts.source, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (state.root_fd < 0) {
    std::fprintf(stderr, "faultfs: %s: %s\n", opts.source, std::strerror(errno));
    fuse_opt_free_args(&args);
    return 2;
  }
  state.faults = std::make_unique<Faults>(opts.rules);
  if (!state.faults->Reload(true)) {
    fuse_opt_free_args(&args);
    return 2;
  }
  fuse_operations ops{};
  ops.init = Init;
  ops.destroy = Destroy;
  ops.getattr = GetAttr;
  ops.readlink = ReadLink;
  ops.open = Open;
  ops.read = Read;
  ops.release = Release;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.statfs = StatFs;
  ops.access = Access;
  int rc = fuse_main(args.argc, args.argv, &ops, &state);
  state.faults->Stop();  // when the mount failed, Destroy never ran
  close(state.root_fd);
  fuse_opt_free_args(&args);
  free(opts.rules);
  free(opts.source);
  return rc;
}
