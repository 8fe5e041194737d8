// Registers a job's manifest file on a clairfs mount, run as the job's user (so that both
// the file and the manifest's paths are checked with the user's rights: docs/permissions.md).
#pragma once

#include <cstdint>
#include <string>

namespace clairfs::slurm {

// The stream a job's manifest registers when its text names none.
std::string StreamOf(uint32_t job);

// Copies `file` to <mountpoint>/.clairfs/manifest (O_TRUNC: replaces the job's stream only).
// A text manifest without a `#stream` line gets `#stream slurm-<job>` (after a leading
// `#begin` line), so jobs sharing the mount do not replace each other's plan; a compact one
// (first byte NUL) is copied unchanged. Returns "" or the error for the job's output, with
// clairfs's report from `.clairfs/errors` when it rejected the text.
std::string RegisterManifest(uint32_t job, const std::string& mountpoint, const std::string& file);

// Removes the job's stream from the mount's plan (`#stream slurm-<job>` and no entries); best
// effort, for when the mount stays up for other jobs.
void UnregisterStream(uint32_t job, const std::string& mountpoint);

}  // namespace clairfs::slurm
