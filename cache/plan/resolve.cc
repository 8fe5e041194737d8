#include "cache/plan/resolve.h"

#include <algorithm>
#include <span>
#include <utility>

#include "cache/plan/plan.h"

namespace clairfs {

namespace {

// What a manifest's validation reports: the errors counted, and the first ones listed.
struct Report {
  std::vector<ManifestError> errors;
  uint64_t count = 0;
};

// Adds the errors of m's paths (path_errors: by path index, ascending) to the parser's: all
// counted, the first kMaxErrors listed. Both lists are in line order: the first kMaxErrors of
// each hold the first overall.
void AddPathErrors(const ParsedManifest& m,
                   const std::vector<std::pair<uint32_t, std::string>>& path_errors,
                   Report& report) {
  report.count += path_errors.size();
  for (const auto& [index, why] : path_errors) {
    if (report.errors.size() >= m.errors.size() + ManifestParser::kMaxErrors) break;
    std::string text = "'";
    text.append(m.paths[index]).append("': ").append(why);
    report.errors.push_back({m.path_line[index], std::move(text)});
  }
}

// Whether every path of m (files: their outcomes) names a regular file and was written
// canonically: then the written paths, distinct, are the files in order.
bool FilesAsWritten(const ParsedManifest& m, const std::vector<CheckedPath>& files) {
  for (size_t i = 0; i < m.paths.size(); ++i) {
    if (!files[i].ok() || files[i].path.data() != m.paths[i].data() ||
        files[i].path.size() != m.paths[i].size()) {
      return false;
    }
  }
  return true;
}

// Compacts files (one outcome per written path) in place to the distinct canonical paths, in
// order of first appearance: two written paths may name one file ("a/b" and "a/./b"). Returns
// each written path's file id, kNoPos for a path that names no file.
std::vector<uint32_t> DistinctFiles(std::vector<CheckedPath>& files) {
  const size_t n = files.size();
  std::vector<uint32_t> file_of(n, kNoPos);
  KeyIndex canon;  // file id by canonical path
  canon.Reset(n);
  const auto canon_key = [&](uint32_t id) { return files[id].path; };
  uint32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!files[i].ok()) continue;
    if (const uint32_t id = canon.Find(files[i].path, canon_key); id != KeyIndex::kNone) {
      file_of[i] = id;
      continue;
    }
    files[next] = files[i];
    file_of[i] = next;
    canon.Insert(next++, canon_key);
  }
  files.resize(next);
  return file_of;
}

// m's targets, in order, on files (file_of: each written path's file id; null when the written
// paths are the files). A range must lie inside its file: one that ends past the file's end is
// an error, counted and listed after the others, by line.
std::vector<ResolvedManifest::Target> ResolveTargets(const ParsedManifest& m,
                                                     const std::vector<CheckedPath>& files,
                                                     const std::vector<uint32_t>* file_of,
                                                     Report& report) {
  std::vector<ResolvedManifest::Target> targets;
  targets.reserve(m.targets.size());
  for (const ManifestTarget& t : m.targets) {
    const uint32_t file = file_of ? (*file_of)[t.path] : t.path;
    if (file == kNoPos) {
      targets.push_back({});
      continue;  // the path's own error is reported
    }
    const uint64_t size = files[file].version.size;
    const ByteRange& r = t.range;
    if (!r.whole() && (r.offset > size || r.length > size - r.offset)) {
      ++report.count;
      if (report.errors.size() < m.errors.size() + 2 * ManifestParser::kMaxErrors) {
        std::string text = "'";
        text.append(m.paths[t.path])
            .append("': range " + std::to_string(r.offset) + "+" + std::to_string(r.length) +
                    " ends past the end of the file (size " + std::to_string(size) + ")");
        report.errors.push_back({t.line, std::move(text)});
      }
    }
    targets.push_back({file, r});
  }
  return targets;
}

// How many of m's entries name a byte range; counted only when some target is one (a 90-epoch
// plan of whole files has 115 M entries to skip).
uint64_t RangeEntries(const ParsedManifest& m) {
  if (std::none_of(m.targets.begin(), m.targets.end(),
                   [](const ManifestTarget& t) { return !t.range.whole(); })) {
    return 0;
  }
  uint64_t count = 0;
  m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
    for (uint32_t s : b) count += !m.targets[s].range.whole();
  });
  return count;
}

}  // namespace

Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver,
                                                                PathChecks checks) {
  const size_t n = m.paths.size();
  if (checks.size() > n) checks = {};  // not this manifest's: check everything
  if (checks.size() < n) {
    auto resolvers = CheckResolvers(resolver);
    CheckPaths(std::span(m.paths).subspan(checks.size()), resolvers, &checks);
  }
  Report report{m.errors, m.error_count};
  AddPathErrors(m, checks.errors, report);
  auto out = std::make_shared<ResolvedManifest>();
  out->lines = m.form == ManifestForm::kCompact ? 0 : m.lines;  // MergePlan reports no item
  // The common case needs no index of canonical paths: the written paths are the files.
  const bool as_written = FilesAsWritten(m, checks.paths);
  std::vector<uint32_t> file_of;
  if (!as_written) file_of = DistinctFiles(checks.paths);
  out->files = std::move(checks.paths);
  out->targets = ResolveTargets(m, out->files, as_written ? nullptr : &file_of, report);
  if (report.count > 0) {
    return Status::Error(Code::kInvalidArgument,
                         ManifestReport(report.count, std::move(report.errors), m.form));
  }
  out->stream = m.stream;
  out->files_as_written = as_written;
  out->arenas = {m.arena, std::move(checks.rewritten)};
  out->epoch_begin = m.epoch_begin;
  out->sequence = m.sequence;  // shares its storage
  out->range_entries = RangeEntries(m);
  return std::shared_ptr<const ResolvedManifest>(std::move(out));
}

}  // namespace clairfs
