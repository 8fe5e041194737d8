#include "cache/backing/resolver.h"

#include <deque>

namespace clairfs {
namespace {

constexpr int kMaxSymlinkHops = 40;  // the kernel's MAXSYMLINKS
constexpr size_t kNameMax = 255;     // NAME_MAX: a longer component fails with ENAMETOOLONG

Status NotADirectory(const std::string& path) {
  return Status::Error(Code::kNotFound, "not a directory: " + (path.empty() ? "." : path), ENOTDIR);
}

void SplitInto(std::string_view path, std::deque<std::string>* out, bool front) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  if (front) {
    out->insert(out->begin(), parts.begin(), parts.end());
  } else {
    out->insert(out->end(), parts.begin(), parts.end());
  }
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) {
    if (!s.empty()) s += '/';
    s += p;
  }
  return s;
}

}  // namespace

PathResolver::PathResolver(const Backing& backing, std::vector<std::string> root_aliases)
    : backing_(backing), aliases_(std::move(root_aliases)) {
  for (auto& a : aliases_) {
    while (a.size() > 1 && a.back() == '/') a.pop_back();
  }
}

bool PathResolver::StripAlias(std::string_view absolute, std::string* relative) const {
  for (const auto& a : aliases_) {
    if (a == "/") {
      *relative = std::string(absolute.substr(1));
      return true;
    }
    if (absolute.substr(0, a.size()) == a &&
        (absolute.size() == a.size() || absolute[a.size()] == '/')) {
      *relative = std::string(absolute.substr(std::min(absolute.size(), a.size() + 1)));
      return true;
    }
  }
  return false;
}

Result<std::string> PathResolver::Resolve(std::string_view path, bool follow_final,
                                          struct stat* st) {
  std::string rel;
  if (!path.empty() && path[0] == '/') {
    if (!StripAlias(path, &rel)) {
      return Status::Error(Code::kOutsideRoot, "absolute path outside the dataset");
    }
  } else {
    rel = std::string(path);
  }
  // As for the kernel, a trailing slash requires a directory (following a final symlink):
  // "x/" is "x/.".
  if (!rel.empty() && rel.back() == '/') {
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    rel += rel.empty() ? "." : "/.";
  }
  // Memoize the directory part: datasets have few directories and many files.
  size_t slash = rel.rfind('/');
  std::string dir_canon;
  std::string_view last = rel;
  int hops = 0;
  if (slash != std::string::npos) {
    std::string dir = rel.substr(0, slash);
    last = std::string_view(rel).substr(slash + 1);
    auto it = dir_cache_.find(dir);
    if (it != dir_cache_.end()) {
      dir_canon = it->second.first;
      hops = it->second.second;
    } else {
      struct stat dst;
      auto d = Walk("", dir, true, &dst, &hops);
      if (!d.ok()) return d.status();
      if (!S_ISDIR(dst.st_mode)) return NotADirectory(dir);
      dir_canon = d.value();
      dir_cache_.emplace(std::move(dir), std::make_pair(dir_canon, hops));
    }
  }
  return Walk(dir_canon, last, follow_final, st, &hops);
}

void PathResolver::ResolveMany(const std::vector<std::string_view>& paths, bool follow_final,
                               std::vector<Result<std::string>>* out,
                               std::vector<struct stat>* st) {
  out->assign(paths.size(), Status::Error(Code::kUnavailable, "not resolved"));
  st->assign(paths.size(), {});
  // A relative path whose last component is a plain name (not empty, ".", ".." or too long)
  // in a directory resolved before is canonical as that directory's canonical path and the
  // name, unless the name is a symlink to follow: one stat decides.
  std::vector<size_t> batched;
  std::vector<std::string> full;
  full.reserve(paths.size());
  // The directory of the previous path found in the memo (consecutive paths often share one).
  std::string_view last_dir;
  const std::string* last_canon = nullptr;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string_view p = paths[i];
    const size_t slash = p.rfind('/');
    const std::string_view last = slash == std::string_view::npos ? p : p.substr(slash + 1);
    const bool plain = !p.empty() && p[0] != '/' && !last.empty() && last != "." && last != ".." &&
                       last.size() <= kNameMax;
    const std::string* dir = nullptr;
    if (plain && slash != std::string_view::npos) {
      const std::string_view raw = p.substr(0, slash);
      if (last_canon && raw == last_dir) {
        dir = last_canon;
      } else if (auto it = dir_cache_.find(std::string(raw)); it != dir_cache_.end()) {
        dir = last_canon = &it->second.first;  // a node's address is stable
        last_dir = it->first;
      }
    }
    if (!plain || (slash != std::string_view::npos && !dir)) {
      (*out)[i] = Resolve(p, follow_final, &(*st)[i]);  // memoizes its directory
      continue;
    }
    batched.push_back(i);
    full.push_back(!dir || dir->empty() ? std::string(last) : *dir + "/" + std::string(last));
  }
  std::vector<struct stat> bst;
  std::vector<Status> bstatus;
  backing_.LstatMany(&full, &bst, &bstatus);  // full[k] is read only where bstatus[k] is ok
  for (size_t k = 0; k < batched.size(); ++k) {
    const size_t i = batched[k];
    if (bstatus[k].ok() && !(S_ISLNK(bst[k].st_mode) && follow_final)) {
      (*out)[i] = std::move(full[k]);
      (*st)[i] = bst[k];
    } else if (StoreUnreachable(bstatus[k])) {
      (*out)[i] = bstatus[k];  // the store did not answer: no retry path by path
    } else {
      (*out)[i] = Resolve(paths[i], follow_final, &(*st)[i]);  // symlinks, errors as usual
    }
  }
}

Result<std::string> PathResolver::Walk(std::string_view start_dir, std::string_view rest,
                                       bool follow_final, struct stat* st, int* hops) {
  std::vector<std::string> stack;
  std::deque<std::string> todo;
  {
    std::deque<std::string> start;
    SplitInto(start_dir, &start, false);
    stack.assign(start.begin(), start.end());
  }
  SplitInto(rest, &todo, false);
  Status s = backing_.Lstat(Join(stack), st);
  if (!s.ok()) return s;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c.size() > kNameMax) {
      return Status::Error(Code::kInvalidArgument, "file name too long: " + c.substr(0, 64) + "...",
                           ENAMETOOLONG);
    }
    // "." and ".." are looked up in the directory the walk is at: after anything else they
    // fail as the kernel's lookup does (ENOTDIR), they never erase a file name.
    if ((c == "." || c == "..") && !S_ISDIR(st->st_mode)) return NotADirectory(Join(stack));
    if (c == ".") continue;
    if (c == "..") {
      if (stack.empty()) return Status::Error(Code::kOutsideRoot, "'..' leads out of the dataset");
      stack.pop_back();
      s = backing_.Lstat(Join(stack), st);
      if (!s.ok()) return s;
      continue;
    }
    if (!S_ISDIR(st->st_mode)) return NotADirectory(Join(stack));
    stack.push_back(std::move(c));
    std::string here = Join(stack);
    s = backing_.Lstat(here, st);
    if (!s.ok()) return Status::Error(s.code(), "no such file or directory: " + here);
    if (S_ISLNK(st->st_mode) && (!todo.empty() || follow_final)) {
      if (++*hops > kMaxSymlinkHops) {
        return Status::Error(Code::kInvalidArgument, "too many levels of symbolic links: " + here);
      }
      auto target = backing_.ReadLink(here);
      if (!target.ok()) return target.status();
      stack.pop_back();
      std::string t = target.value();
      if (!t.empty() && t[0] == '/') {
        std::string rel;
        if (!StripAlias(t, &rel)) {
          return Status::Error(Code::kOutsideRoot, "symlink leads out of the dataset: " + here);
        }
        stack.clear();
        t = rel;
      }
      SplitInto(t, &todo, true);
      s = backing_.Lstat(Join(stack), st);
      if (!s.ok()) return s;
    }
  }
  return Join(stack);
}

bool SymlinkStaysInside(PathResolver& resolver, const std::string& link_path) {
  struct stat st;
  auto r = resolver.Resolve(link_path, true, &st);
  return r.ok() || r.status().code() != Code::kOutsideRoot;
}

}  // namespace clairfs
