#include "cache/plan/resolve.h"

#include <algorithm>
#include <span>
#include <utility>

#include "cache/plan/plan.h"

namespace clairfs {

Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver,
                                                                PathChecks checks) {
  const size_t n = m.paths.size();
  if (checks.size() > n) checks = {};  // not this manifest's: check everything
  if (checks.size() < n) {
    auto resolvers = CheckResolvers(resolver);
    CheckPaths(std::span(m.paths).subspan(checks.size()), resolvers, &checks);
  }
  auto out = std::make_shared<ResolvedManifest>();
  out->lines = m.form == ManifestForm::kCompact ? 0 : m.lines;  // MergePlan reports no item
  std::vector<ManifestError> errors = m.errors;
  uint64_t error_count = m.error_count + checks.errors.size();
  // Both lists are in line order: the first kMaxErrors of each hold the first overall.
  for (const auto& [index, why] : checks.errors) {
    if (errors.size() >= m.errors.size() + ManifestParser::kMaxErrors) break;
    std::string text = "'";
    text.append(m.paths[index]).append("': ").append(why);
    errors.push_back({m.path_line[index], std::move(text)});
  }
  // Files: the distinct canonical paths in order of first appearance, compacted in place (two
  // written paths may name one file: "a/b" and "a/./b").
  std::vector<CheckedPath>& files = checks.paths;
  // The common case needs no index: every path is a regular file written canonically, so the
  // written paths (distinct) are the files, in order.
  bool plain = true;
  for (size_t i = 0; i < n && plain; ++i) {
    plain = files[i].ok() && files[i].path.data() == m.paths[i].data() &&
            files[i].path.size() == m.paths[i].size();
  }
  std::vector<uint32_t> raw_to_id;
  if (!plain) {
    raw_to_id.assign(n, kNoPos);
    KeyIndex canon;  // file id by canonical path
    canon.Reset(n);
    const auto canon_key = [&](uint32_t id) { return files[id].path; };
    uint32_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!files[i].ok()) continue;
      if (const uint32_t id = canon.Find(files[i].path, canon_key); id != KeyIndex::kNone) {
        raw_to_id[i] = id;
        continue;
      }
      files[next] = files[i];
      raw_to_id[i] = next;
      canon.Insert(next++, canon_key);
    }
    files.resize(next);
  }
  out->files = std::move(files);
  // Ranges must lie inside their file. Targets are in order of first appearance; their
  // errors join the list by line.
  out->targets.reserve(m.targets.size());
  for (const ManifestTarget& t : m.targets) {
    const uint32_t file = plain ? t.path : raw_to_id[t.path];
    if (file == kNoPos) {
      out->targets.push_back({});
      continue;  // the path's own error is reported
    }
    const uint64_t size = out->files[file].version.size;
    const ByteRange& r = t.range;
    if (!r.whole() && (r.offset > size || r.length > size - r.offset)) {
      ++error_count;
      if (errors.size() < m.errors.size() + 2 * ManifestParser::kMaxErrors) {
        std::string text = "'";
        text.append(m.paths[t.path])
            .append("': range " + std::to_string(r.offset) + "+" + std::to_string(r.length) +
                    " ends past the end of the file (size " + std::to_string(size) + ")");
        errors.push_back({t.line, std::move(text)});
      }
    }
    out->targets.push_back({file, r});
  }
  if (error_count > 0) {
    return Status::Error(Code::kInvalidArgument,
                         ManifestReport(error_count, std::move(errors), m.form));
  }
  out->stream = m.stream;
  out->files_as_written = plain;
  out->arenas = {m.arena, std::move(checks.rewritten)};
  out->epoch_begin = m.epoch_begin;
  out->sequence = m.sequence;  // shares its storage
  // Entries naming a range, counted only when some target is one (a 90-epoch plan of whole
  // files has 115 M entries to skip).
  if (std::any_of(m.targets.begin(), m.targets.end(),
                  [](const ManifestTarget& t) { return !t.range.whole(); })) {
    m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
      for (uint32_t s : b) out->range_entries += !m.targets[s].range.whole();
    });
  }
  return std::shared_ptr<const ResolvedManifest>(std::move(out));
}

}  // namespace clairfs
