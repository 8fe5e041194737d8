// clairfs-fuse-ceiling: the physical limit of a FUSE READ on this machine, for the benchmarks
// (tools/bench/fuse_compare.sh, docs/benchmarks.md "The ceiling of a READ").
//
// The smallest low-level libfuse file system that serves a dataset directory from memory: at
// start it loads the whole tree (names, attributes, file bytes) and then answers every request
// from that copy, with no check, no version, no tier and no lock. It mounts with the options,
// kernel capabilities, timeouts, open mode and thread model clairfs uses by default (daemon/
// serve.cc, fs/clairfs_fs.cc Init, fs/core/fs_options.h), so a reader that reads through both
// sees what clairfs costs over FUSE itself.
//
// Not a file system to use: it never looks at the directory again after loading it.
// Its READ count (requests on regular files) is the root's extended attribute user.ceiling.reads,
// for the benchmarks' "daemon CPU per 100,000 READs".
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

struct Node {
  struct stat st {};
  std::string bytes;                       // a regular file's contents
  std::string target;                      // a symlink's
  std::map<std::string, fuse_ino_t> kids;  // a directory's entries
};

struct Tree {
  std::vector<Node> nodes;  // node i has inode number i + 1 (FUSE_ROOT_ID == 1)
  double timeout = 3600;    // entry and attribute timeouts, seconds (clairfs's defaults)
  bool open_none = true;    // answer OPEN with ENOSYS: clairfs's default no-open mode
  std::atomic<uint64_t> reads{0};
};

Tree* TreeOf(fuse_req_t req) { return static_cast<Tree*>(fuse_req_userdata(req)); }

Node* NodeOf(fuse_req_t req, fuse_ino_t ino) {
  Tree* t = TreeOf(req);
  return ino >= 1 && ino <= t->nodes.size() ? &t->nodes[ino - 1] : nullptr;
}

// Loads path (lstat'ed as st) as a node and, for a directory, everything below it. Returns its
// inode number.
fuse_ino_t Load(Tree& t, const std::filesystem::path& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "clairfs-fuse-ceiling: cannot stat %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  t.nodes.emplace_back();
  const fuse_ino_t ino = t.nodes.size();
  st.st_ino = ino;
  t.nodes[ino - 1].st = st;
  if (S_ISREG(st.st_mode)) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      std::fprintf(stderr, "clairfs-fuse-ceiling: cannot read %s\n", path.c_str());
      std::exit(1);
    }
    t.nodes[ino - 1].bytes = std::move(bytes);
  } else if (S_ISLNK(st.st_mode)) {
    t.nodes[ino - 1].target = std::filesystem::read_symlink(path).string();
  } else if (S_ISDIR(st.st_mode)) {
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      const fuse_ino_t kid = Load(t, e.path());
      t.nodes[ino - 1].kids.emplace(e.path().filename().string(), kid);
    }
  }
  return ino;
}

void Init(void*, fuse_conn_info* conn) {
  // The capabilities clairfs asks for (ClairFs::Init, AccessPolicy::Init).
  for (unsigned cap : {FUSE_CAP_ATOMIC_O_TRUNC, FUSE_CAP_CACHE_SYMLINKS, FUSE_CAP_PARALLEL_DIROPS,
                       FUSE_CAP_AUTO_INVAL_DATA, FUSE_CAP_POSIX_ACL}) {
    if (conn->capable & cap) conn->want |= cap;
  }
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Node* dir = NodeOf(req, parent);
  if (!dir) return (void)fuse_reply_err(req, ENOENT);
  auto it = dir->kids.find(name);
  if (it == dir->kids.end()) return (void)fuse_reply_err(req, ENOENT);
  fuse_entry_param e{};
  e.ino = it->second;
  e.attr = NodeOf(req, it->second)->st;
  e.attr_timeout = e.entry_timeout = TreeOf(req)->timeout;
  fuse_reply_entry(req, &e);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Node* n = NodeOf(req, ino);
  if (!n) return (void)fuse_reply_err(req, ENOENT);
  fuse_reply_attr(req, &n->st, TreeOf(req)->timeout);
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  Node* n = NodeOf(req, ino);
  if (!n || !S_ISLNK(n->st.st_mode)) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, n->target.c_str());
}

void Open(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  if (TreeOf(req)->open_none) return (void)fuse_reply_err(req, ENOSYS);
  fi->keep_cache = 1;
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  Node* n = NodeOf(req, ino);
  if (!n || !S_ISREG(n->st.st_mode)) return (void)fuse_reply_err(req, EINVAL);
  TreeOf(req)->reads.fetch_add(1, std::memory_order_relaxed);
  const auto from = std::min(static_cast<size_t>(off), n->bytes.size());
  fuse_reply_buf(req, n->bytes.data() + from, std::min(size, n->bytes.size() - from));
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  Node* dir = NodeOf(req, ino);
  if (!dir || !S_ISDIR(dir->st.st_mode)) return (void)fuse_reply_err(req, ENOTDIR);
  std::vector<char> buf(size);
  size_t used = 0;
  off_t i = 0;
  for (const auto& [name, kid] : dir->kids) {
    if (i++ < off) continue;
    const size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(),
                                          &NodeOf(req, kid)->st, i);
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (ino != FUSE_ROOT_ID || std::strcmp(name, "user.ceiling.reads") != 0) {
    return (void)fuse_reply_err(req, ENODATA);
  }
  const std::string v = std::to_string(TreeOf(req)->reads.load(std::memory_order_relaxed));
  if (size == 0) return (void)fuse_reply_xattr(req, v.size());
  if (size < v.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, v.data(), v.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "clairfs-fuse-ceiling: a dataset served from memory by the smallest FUSE file "
      "system, the limit of a FUSE READ (benchmarks only)"};
  std::string dataset, mountpoint, open_mode = "none";
  unsigned threads = 8;  // fuse.threads of clairfs
  bool clone_fd = true;  // fuse.clone_fd of clairfs
  Tree tree;
  app.add_option("dataset", dataset, "directory loaded into memory at start")->required();
  app.add_option("mountpoint", mountpoint)->required();
  app.add_option("--threads", threads, "FUSE worker threads (clairfs: fuse.threads)");
  app.add_option("--open-mode", open_mode, "none (clairfs's default) or per_open")
      ->check(CLI::IsMember({"none", "per_open"}));
  app.add_option("--timeout", tree.timeout, "entry and attribute timeouts, seconds");
  app.add_flag("--clone-fd,!--no-clone-fd", clone_fd,
               "one /dev/fuse descriptor per worker thread (clairfs: fuse.clone_fd)");
  CLI11_PARSE(app, argc, argv);
  tree.open_none = open_mode == "none";
  Load(tree, dataset);

  fuse_lowlevel_ops ops{};
  ops.init = Init;
  ops.lookup = Lookup;
  ops.getattr = GetAttr;
  ops.readlink = ReadLink;
  ops.open = Open;
  ops.read = Read;
  ops.readdir = ReadDir;
  ops.getxattr = GetXattr;
  // clairfs's options (daemon/serve.cc MountOptions); no path reaches a shell or an option
  // string unescaped.
  char* opts = nullptr;
  if (fuse_opt_add_opt(&opts, "fsname=clairfs-fuse-ceiling") != 0 ||
      fuse_opt_add_opt(&opts, "default_permissions") != 0 || fuse_opt_add_opt(&opts, "ro") != 0 ||
      (geteuid() == 0 && fuse_opt_add_opt(&opts, "allow_other") != 0)) {
    return 1;
  }
  std::vector<char*> fargv = {argv[0], const_cast<char*>("-o"), opts};
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &tree);
  if (!se) return 1;
  int rc = 1;
  if (fuse_set_signal_handlers(se) == 0) {
    if (fuse_session_mount(se, mountpoint.c_str()) == 0) {
      fuse_loop_config* loop = fuse_loop_cfg_create();
      fuse_loop_cfg_set_max_threads(loop, threads);
      fuse_loop_cfg_set_idle_threads(loop, threads);
      fuse_loop_cfg_set_clone_fd(loop, clone_fd ? 1 : 0);
      rc = fuse_session_loop_mt(se, loop) == 0 ? 0 : 1;
      fuse_loop_cfg_destroy(loop);
      fuse_session_unmount(se);
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  std::free(opts);
  std::fprintf(stderr, "clairfs-fuse-ceiling: %llu READs\n",
               static_cast<unsigned long long>(tree.reads.load()));
  return rc;
}
