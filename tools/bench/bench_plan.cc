#include "bench_plan.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace clairfs::bench {

namespace fs = std::filesystem;

bool LoadList(const std::string& path, Plan* plan, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open list " + path + ": " + std::strerror(errno);
    return false;
  }
  plan->assign(1, {});
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line == "#epoch" && !plan->back().empty()) plan->emplace_back();
      continue;
    }
    plan->back().push_back(std::move(line));
  }
  if (plan->back().empty()) plan->pop_back();
  if (plan->empty()) {
    *error = "list " + path + " holds no paths";
    return false;
  }
  return true;
}

bool WalkRoot(const std::string& root, Plan* plan, std::string* error) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) {
      files.push_back(it->path().lexically_relative(root).string());
    }
  }
  if (ec) {
    *error = "walking " + root + ": " + ec.message();
    return false;
  }
  if (files.empty()) {
    *error = "no regular files under " + root;
    return false;
  }
  std::sort(files.begin(), files.end());
  plan->assign(1, std::move(files));
  return true;
}

}  // namespace clairfs::bench
