#include "tools/slurm/manifest_copy.h"

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

// clairfs's report numbers the lines of the text written; with a `#stream` line added at line
// `added` (0: none), the lines after it are one further on than in the user's file. Rewrites
// each report line's leading `line N:` to the file's numbering.
std::string Renumber(const std::string& report, size_t added) {
  if (added == 0) return report;
  std::string out;
  size_t pos = 0;
  while (pos < report.size()) {
    size_t nl = report.find('\n', pos);
    if (nl == std::string::npos) nl = report.size();
    std::string line = report.substr(pos, nl - pos);
    pos = nl + 1;
    size_t digits = 5;
    while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') ++digits;
    if (line.starts_with("line ") && digits > 5 && digits < line.size() && line[digits] == ':' &&
        digits - 5 < 19) {
      const size_t n = std::stoull(line.substr(5, digits - 5));
      if (n > added) line = "line " + std::to_string(n - 1) + line.substr(digits);
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

std::string Rejected(const std::string& file, const std::string& mountpoint, int err,
                     size_t added) {
  std::string msg = "clairfs rejected the manifest " + file + " (" + std::strerror(err) + ")";
  if (err == EINVAL) {
    const std::string report = Renumber(Report(mountpoint), added);
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
  std::string_view rest = head;
  std::string prefix;
  size_t added = 0;                        // the line number of the `#stream` line added, 0: none
  if (!rest.empty() && rest[0] != '\0') {  // text: name the stream unless it is named
    if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);
    const size_t at = StreamInsertPoint(rest);
    if (at != std::string_view::npos) {
      prefix = std::string(rest.substr(0, at));
      if (!prefix.empty() && prefix.back() != '\n') prefix += '\n';
      added = static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '\n')) + 1;
      prefix += "#stream " + StreamOf(job) + "\n";
      rest.remove_prefix(at);
    }
  }
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
  if (!ok) return Rejected(file, mountpoint, write_err, added);
  if (closed != 0) return Rejected(file, mountpoint, close_err, added);
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
