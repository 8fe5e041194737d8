#include "slurm/manifest_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace clairfs::slurm {
namespace {

constexpr size_t kHead = 64 * 1024;  // the header lines looked at for `#stream` and `#begin`

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool IsDirective(std::string_view line, std::string_view word) {
  if (!line.starts_with(word)) return false;
  return line.size() == word.size() || line[word.size()] == ' ' || line[word.size()] == '\t' ||
         line[word.size()] == '\r';
}

// Where `#stream` goes in a text head (after a first `#begin` line), or npos when the header
// (the `#` lines before the first entry) already names a stream.
size_t StreamInsertPoint(std::string_view head) {
  size_t insert = 0, pos = 0;
  bool first = true;
  while (pos < head.size()) {
    size_t nl = head.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? head.size() : nl;
    const std::string_view line = head.substr(pos, end - pos);
    if (line.empty() || line[0] != '#') break;  // an entry: the header is over
    if (IsDirective(line, "#stream")) return std::string_view::npos;
    if (first && IsDirective(line, "#begin")) insert = nl == std::string_view::npos ? end : nl + 1;
    first = false;
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return insert;
}

// The compact form's header (docs/control-interface.md, "Compact form"): magic, u32 version,
// u32 flags, four u64 counts, then at kNameLengthAt a u16 name length L and the name.
constexpr std::string_view kCompactMagic{"\0clairfs", 8};
constexpr size_t kNameLengthAt = 48;
constexpr size_t kCompactHeader = 50;

uint32_t Le(std::string_view b, size_t at, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < bytes; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

// What is written before the rest of the file, so that a manifest naming no stream
// registers the job's: for a text, a `#stream` line (after a first `#begin` line; a UTF-8
// BOM is dropped); for a compact manifest of version 1 with L = 0, the name in the header.
struct Naming {
  std::string prefix;     // written first
  std::string_view rest;  // then this part of the head, then the rest of the file
  size_t line = 0;        // text: the line number of the line added (0: none)
  size_t bytes = 0;       // compact: the bytes added at offset kCompactHeader
};

Naming NameStream(std::string_view head, uint32_t job) {
  Naming n;
  n.rest = head;
  if (head.empty()) return n;
  if (head[0] == '\0') {
    if (head.size() < kCompactHeader || !head.starts_with(kCompactMagic) || Le(head, 8, 4) != 1 ||
        Le(head, kNameLengthAt, 2) != 0)
      return n;  // named already, or not a header this code knows: as it is
    const std::string name = StreamOf(job);
    n.prefix = std::string(head.substr(0, kNameLengthAt));
    n.prefix.push_back(static_cast<char>(name.size() & 0xff));
    n.prefix.push_back(static_cast<char>(name.size() >> 8));
    n.prefix += name;
    n.bytes = name.size();
    n.rest.remove_prefix(kCompactHeader);
    return n;
  }
  if (n.rest.starts_with("\xEF\xBB\xBF")) n.rest.remove_prefix(3);
  const size_t at = StreamInsertPoint(n.rest);
  if (at == std::string_view::npos) return n;
  n.prefix = std::string(n.rest.substr(0, at));
  if (!n.prefix.empty() && n.prefix.back() != '\n') n.prefix += '\n';
  n.line = static_cast<size_t>(std::count(n.prefix.begin(), n.prefix.end(), '\n')) + 1;
  n.prefix += "#stream " + StreamOf(job) + "\n";
  n.rest.remove_prefix(at);
  return n;
}

std::string Report(const std::string& mountpoint) {
  std::string report;
  const int fd = open((mountpoint + "/.clairfs/errors").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return report;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0 && report.size() < 8192;)
    report.append(buf, n);
  close(fd);
  while (!report.empty() && report.back() == '\n') report.pop_back();
  return report;
}

// clairfs's report numbers the lines (text) or byte offsets (compact) of what was written;
// with a line or header bytes added (NameStream), what follows them is further on than in the
// user's file. Rewrites each report line's leading `line N:` or `at byte N:` to the file's
// numbering.
std::string Renumber(const std::string& report, const Naming& named) {
  if (named.line == 0 && named.bytes == 0) return report;
  std::string out;
  size_t pos = 0;
  while (pos < report.size()) {
    size_t nl = report.find('\n', pos);
    if (nl == std::string::npos) nl = report.size();
    std::string line = report.substr(pos, nl - pos);
    pos = nl + 1;
    for (const std::string_view word : {std::string_view("line "), std::string_view("at byte ")}) {
      if (!line.starts_with(word)) continue;
      size_t end = word.size();
      while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
      if (end == word.size() || end >= line.size() || line[end] != ':' || end - word.size() > 18)
        continue;
      const size_t n = std::stoull(line.substr(word.size(), end - word.size()));
      size_t fixed = n;
      if (word[0] == 'l' && named.line != 0 && n > named.line) fixed = n - 1;
      if (word[0] == 'a' && named.bytes != 0 && n >= kCompactHeader + named.bytes)
        fixed = n - named.bytes;
      line = std::string(word) + std::to_string(fixed) + line.substr(end);
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

std::string Rejected(const std::string& file, const std::string& mountpoint, int err,
                     const Naming& named) {
  std::string msg = "clairfs rejected the manifest " + file + " (" + std::strerror(err) + ")";
  if (err == EINVAL) {
    const std::string report = Renumber(Report(mountpoint), named);
    if (!report.empty()) msg += ":\n" + report;
  }
  return msg;
}

}  // namespace

std::string StreamOf(uint32_t job) { return "slurm-" + std::to_string(job); }

std::string RegisterManifest(uint32_t job, const std::string& mountpoint, const std::string& file) {
  const int in = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return "cannot read the manifest " + file + ": " + std::strerror(errno);
  const std::string target = mountpoint + "/.clairfs/manifest";
  const int out = open(target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (out < 0) {
    const int err = errno;
    close(in);
    if (err == EACCES || err == EPERM)
      return "cannot register the manifest: " + target + ": " + std::strerror(err) +
             " (registering needs the mount's owner or a member of control.group: ask the "
             "administrator, docs/slurm.md)";
    return "cannot open " + target + ": " + std::strerror(err);
  }
  std::string head(kHead, '\0');
  ssize_t got;
  while ((got = read(in, head.data(), head.size())) < 0 && errno == EINTR) {
  }
  if (got < 0) {
    const int err = errno;
    close(in), close(out);
    return "cannot read the manifest " + file + ": " + std::strerror(err);
  }
  head.resize(static_cast<size_t>(got));
  const Naming named = NameStream(head, job);
  const std::string& prefix = named.prefix;
  const std::string_view rest = named.rest;
  bool ok = WriteAll(out, prefix.data(), prefix.size()) && WriteAll(out, rest.data(), rest.size());
  char buf[1 << 16];
  while (ok) {
    const ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(in), close(out);
      return "cannot read the manifest " + file + ": " + std::strerror(err);
    }
    if (n == 0) break;
    ok = WriteAll(out, buf, static_cast<size_t>(n));
  }
  const int write_err = ok ? 0 : errno;
  close(in);
  const int closed = close(out);
  const int close_err = errno;
  if (!ok) return Rejected(file, mountpoint, write_err, named);
  if (closed != 0) return Rejected(file, mountpoint, close_err, named);
  return "";
}

void UnregisterStream(uint32_t job, const std::string& mountpoint) {
  const int fd = open((mountpoint + "/.clairfs/manifest").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return;
  const std::string text = "#stream " + StreamOf(job) + "\n";
  WriteAll(fd, text.data(), text.size());
  close(fd);
}

}  // namespace clairfs::slurm
