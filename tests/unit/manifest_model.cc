#include "tests/unit/manifest_model.h"

#include <algorithm>
#include <cstddef>

namespace clairfs::manifest_model {
namespace {

std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find('/', i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool IsMarker(std::string_view line, std::string_view m) {
  return line.substr(0, m.size()) == m &&
         (line.size() == m.size() || line[m.size()] == ' ' || line[m.size()] == '\t');
}

}  // namespace

const std::vector<std::string> kAliases = {"/data/set", "/mnt/set"};

std::map<std::string, Node> Tree() {
  return {{"", {Kind::kDir, ""}},
          {"a", {Kind::kFile, ""}},
          {"b", {Kind::kDir, ""}},
          {"b/c", {Kind::kFile, ""}},
          {"b/d", {Kind::kFile, ""}},
          {"#h", {Kind::kFile, ""}},
          {"e f", {Kind::kFile, ""}},
          {"caf\xc3\xa9", {Kind::kFile, ""}},
          {"dir", {Kind::kDir, ""}},
          {"dir/sub", {Kind::kDir, ""}},
          {"dir/sub/g", {Kind::kFile, ""}},
          {"empty", {Kind::kDir, ""}},
          {"fifo", {Kind::kFifo, ""}},
          {"b/fifo", {Kind::kFifo, ""}},
          {"l_a", {Kind::kLink, "a"}},
          {"l_b", {Kind::kLink, "b"}},
          {"b/l_up", {Kind::kLink, "../a"}},
          {"b/l_dotdot", {Kind::kLink, ".."}},
          {"l_abs", {Kind::kLink, "/data/set/b/c"}},
          {"l_mnt", {Kind::kLink, "/mnt/set/dir/sub"}},
          {"l_out", {Kind::kLink, "../outside"}},
          {"l_absout", {Kind::kLink, "/etc/passwd"}},
          {"l_loop", {Kind::kLink, "l_loop"}},
          {"l_ping", {Kind::kLink, "l_pong"}},
          {"l_pong", {Kind::kLink, "l_ping"}},
          {"l_dangling", {Kind::kLink, "nope"}},
          {"l_fifo", {Kind::kLink, "fifo"}},
          {"l_chain", {Kind::kLink, "l_l_a"}},
          {"l_l_a", {Kind::kLink, "l_a"}},
          {"dir/sub/l_top", {Kind::kLink, "../../b"}}};
}

std::optional<std::string> ModelResolve(const std::map<std::string, Node>& tree, std::string path) {
  if (!path.empty() && path[0] == '/') {
    bool found = false;
    for (const auto& a : kAliases) {
      if (path == a || path.compare(0, a.size() + 1, a + "/") == 0) {
        path = path.substr(a.size());
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  const bool must_be_dir = !path.empty() && path.back() == '/';
  std::vector<std::string> stack;
  std::vector<std::string> todo = Split(path);
  std::reverse(todo.begin(), todo.end());  // a stack: next component at the back
  auto here = [&] {
    std::string s;
    for (const auto& c : stack) s += (s.empty() ? "" : "/") + c;
    return s;
  };
  const Node* cur = &tree.at("");
  int hops = 0;
  while (!todo.empty()) {
    std::string c = todo.back();
    todo.pop_back();
    if (c.size() > 255) return std::nullopt;
    if (cur->kind != Kind::kDir) return std::nullopt;
    if (c == ".") continue;
    if (c == "..") {
      if (stack.empty()) return std::nullopt;
      stack.pop_back();
      cur = &tree.at(here());
      continue;
    }
    stack.push_back(c);
    auto it = tree.find(here());
    if (it == tree.end()) return std::nullopt;
    cur = &it->second;
    if (cur->kind == Kind::kLink) {  // manifest paths follow every symlink, the final one too
      if (++hops > 40) return std::nullopt;
      stack.pop_back();
      std::string t = cur->target;
      if (t[0] == '/') {
        std::optional<std::string> rel;
        for (const auto& a : kAliases) {
          if (t == a || t.compare(0, a.size() + 1, a + "/") == 0) rel = t.substr(a.size());
        }
        if (!rel) return std::nullopt;
        stack.clear();
        t = *rel;
      }
      auto parts = Split(t);
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) todo.push_back(*p);
      cur = &tree.at(here());
    }
  }
  if (must_be_dir || cur->kind != Kind::kFile) return std::nullopt;
  return here();
}

ModelResult Model(const std::map<std::string, Node>& tree, std::string_view text) {
  ModelResult r;
  std::vector<std::string> lines;
  std::vector<uint64_t> ends;  // of each line, past its '\n' (UINT64_MAX: none)
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    ends.push_back(j == std::string_view::npos ? UINT64_MAX : j + 1);
    if (j == std::string_view::npos) j = text.size();
    lines.emplace_back(text.substr(i, j - i));
    i = j + 1;
  }
  auto fail = [&](uint64_t n) {
    r.ok = false;
    r.first_error_line = std::min(r.first_error_line, n);
  };
  auto lexical = [&](uint64_t n) {
    fail(n);
    r.first_lexical_end = std::min(r.first_lexical_end, ends[n - 1]);
  };
  bool header = false, trailer = false, epoch_open = false;
  std::map<std::string, std::optional<std::string>> resolved;
  for (uint64_t n = 1; n <= lines.size(); ++n) {
    std::string line = lines[n - 1];
    // A UTF-8 BOM at the start of the text and one CR at the end of each line are dropped.
    if (n == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line = line.substr(3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trailer || line.size() >= 4096 || line.empty() || line.find('\0') != std::string::npos) {
      lexical(n);
      continue;
    }
    if (line[0] == '#') {
      if (IsMarker(line, "#end")) {
        trailer = true;
        const std::string digits = line.substr(std::min<size_t>(5, line.size()));
        const bool canonical = line.size() > 5 && line[4] == ' ' && !digits.empty() &&
                               digits.size() < 20 &&
                               digits.find_first_not_of("0123456789") == std::string::npos &&
                               (digits.size() == 1 || digits[0] != '0');
        if (!canonical || std::stoull(digits) != r.entries.size()) lexical(n);
      } else if (IsMarker(line, "#begin")) {
        if (n == 1) {
          header = true;
        } else {
          lexical(n);
        }
      } else if (IsMarker(line, "#epoch")) {
        if (epoch_open && r.epochs.back() == r.entries.size()) {
          lexical(n);
        } else {
          epoch_open = true;
          r.epochs.push_back(static_cast<uint32_t>(r.entries.size()));
        }
      }
      continue;
    }
    // A range entry: the path before the last TAB, "<offset>+<length>" after it.
    std::optional<std::pair<unsigned __int128, unsigned __int128>> range;
    if (const size_t tab = line.rfind('\t'); tab != std::string::npos) {
      const std::string suffix = line.substr(tab + 1);
      const size_t plus = suffix.find('+');
      auto number = [](const std::string& d) -> std::optional<unsigned __int128> {
        if (d.empty() || d.size() > 25 || d.find_first_not_of("0123456789") != std::string::npos ||
            (d.size() > 1 && d[0] == '0')) {
          return std::nullopt;
        }
        unsigned __int128 v = 0;
        for (char c : d) v = v * 10 + static_cast<unsigned>(c - '0');
        return v;
      };
      const auto off = plus == std::string::npos ? std::nullopt : number(suffix.substr(0, plus));
      const auto len = plus == std::string::npos ? std::nullopt : number(suffix.substr(plus + 1));
      line = line.substr(0, tab);
      if (!off || !len || *len == 0 || *off + *len > UINT64_MAX || line.empty()) {
        lexical(n);
        continue;
      }
      range.emplace(*off, *len);
    }
    if (line.rfind("./#", 0) == 0) line = line.substr(2);
    if (!epoch_open) {
      epoch_open = true;
      r.epochs.push_back(0);
    }
    auto [it, fresh] = resolved.try_emplace(line);
    if (fresh) {
      it->second = ModelResolve(tree, line);
      if (!it->second) fail(n);
    }
    // Files hold "contents of <path>"; a range must end inside.
    if (it->second && range && range->first + range->second > 12 + it->second->size()) fail(n);
    // Every file is smaller than a chunk: a range reads the whole file, one object.
    r.entries.push_back(it->second.value_or(""));
  }
  if (!r.epochs.empty() && r.epochs.back() == r.entries.size()) fail(lines.size());
  if (header && !trailer) fail(lines.size());
  return r;
}

std::vector<std::vector<std::string>> EntryLines(std::string_view text) {
  std::vector<std::vector<std::string>> epochs;
  bool open = false;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view line = text.substr(i, j - i);
    // The text's BOM and CRs are line syntax: a compact item has neither.
    if (i == 0 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    i = j + 1;
    if (!line.empty() && line[0] == '#') {
      if (IsMarker(line, "#epoch")) {
        epochs.emplace_back();
        open = true;
      }
      continue;
    }
    if (!open) epochs.emplace_back();
    open = true;
    epochs.back().emplace_back(line);
  }
  return epochs;
}

}  // namespace clairfs::manifest_model
