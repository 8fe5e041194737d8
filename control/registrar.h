// Registrar: the writable control file <mount>/.clairfs/manifest (docs/control-interface.md),
// without FUSE. A writer's text is a stream of the plan (text or compact form): its paths are
// checked with the writer's rights by the write() that brings them, the text is validated at each
// close() (which reserves the stream's place) and installed at the last one (release); other
// streams are kept. The report of the last validation is ErrorsText (the `errors` file, which
// control/views.h renders with the other generated files).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/base/stats.h"
#include "cache/manifest/compact_manifest.h"
#include "cache/plan/path_check.h"
#include "cache/plan/resolve.h"
#include "cache/prefetch/prefetcher.h"

namespace clairfs {

class Registrar {
 public:
  // One open file description of the manifest for writing. Each has its own parser, so
  // concurrent writers never mix their texts; installations are serialized. The paths of the
  // complete lines (or compact items) a write() brings are checked by that write; the text is
  // validated at every Flush (each close() of a descriptor of it) and installed only at
  // Release (the last close), so a dup or a forked child closing its copy installs nothing.
  class Writer {
   public:
    Writer(bool append, bool truncate, std::shared_ptr<const Backing> view)
        : append_(append), truncate_(truncate), view_(std::move(view)) {}

   private:
    friend class Registrar;
    // Taken before Registrar::reserve_mu_, commit_mu_, errors_mu_ and pending_mu_.
    std::mutex mu_;
    ManifestInput parser_;  // the text or compact form, by its first byte
    const bool append_;     // opened with O_APPEND: the text's epochs are added to the plan
    bool truncate_;         // O_TRUNC or ftruncate(0): even an empty text replaces the plan
    // The dataset as the writer may see it (AccessPolicy::WriterView): every path of the text
    // is resolved and checked through it. Null: the control plane's own (the daemon's user).
    const std::shared_ptr<const Backing> view_;
    uint64_t written_ = 0;  // bytes of the text, the offset the next non-append write must have
    bool dirty_ = false;    // written since the last validation
    Status last_;           // the last validation's result
    std::shared_ptr<const ResolvedManifest> valid_;  // what it validated, if it was accepted
    // The outcomes of parser_.paths()[0, checks_.size()): each write() checks the paths of
    // the lines it completed before it returns (a validation takes them).
    PathChecks checks_;
    std::vector<PathResolver> resolvers_;  // of checks_: made at the first, kept (their memo)
    // The stream this writer holds a place for (Registrar::Reserve), from the validation
    // that accepted its text until the text is installed, written on, truncated or released.
    std::optional<std::string> reserved_;
    uint64_t report_ = 0;  // the sequence number of its last validation (Report)
    // A write() found the text certain to be rejected (Refuse): every later write and close()
    // fails with EINVAL, nothing is installed, until ftruncate(0) starts the text over.
    bool refused_ = false;
  };

  Registrar(const Backing& backing, Prefetcher& prefetcher, Stats& stats,
            std::vector<std::string> root_aliases);

  // view: the dataset as the writer may see it (AccessPolicy::WriterView; null: this plane's
  // backing, for the daemon's own user).
  std::unique_ptr<Writer> OpenWriter(bool append, bool truncate,
                                     std::shared_ptr<const Backing> view = nullptr);
  // Adds bytes at offset to w's text. A write without O_APPEND (append_write) must continue
  // the text exactly where it ends (ESPIPE otherwise: the text has no holes and is never
  // rewritten); an O_APPEND write always adds at the end, whatever the offset.
  // Checks the paths of the complete lines (compact items) it brings against the dataset, as
  // the writer sees it, before it returns. EINVAL (the report in `errors`) when the text
  // written so far is certain to be rejected at close(): a complete line (or compact field or
  // item) the parser refuses, or a path of one that does not name a regular file the writer
  // may read; w is then refused (Writer::refused_). Never for what validation at close()
  // would accept.
  Status Write(Writer& w, std::string_view bytes, uint64_t offset, bool append_write);
  // ftruncate: size 0 discards what w wrote, which then starts over as a replacement (or, if
  // opened with O_APPEND, an append) with nothing written; any other size is EINVAL.
  Status Truncate(Writer& w, uint64_t size);
  // close() of a descriptor of w: validates the text written so far (nothing when nothing was
  // written) and returns the result; installs nothing. The report goes to `errors`. A text it
  // accepts that adds a stream reserves the stream's place (Reserve), so that its installation
  // at Release cannot be refused for cache.max_streams; a text that would take a place the
  // plan and the other reservations leave no more of is refused here.
  Status Flush(Writer& w);
  // The last close of w: installs w's text if it is valid (reusing the last validation when
  // nothing was written since), or, for a replacement that never wrote, an empty plan. Gives
  // back w's reservation once the plan has its stream.
  void Release(Writer& w);
  // Waits for writers whose close() succeeded to be released and installed, so that a read
  // of plan, stats or errors, or an open of a dataset file, just after close() sees their
  // plan: up to kReleaseWait after their flush for the release to come (a descriptor another
  // process still holds delays it without end), then up to kInstallWait after it came for the
  // installation (planning a 100-million-entry manifest takes seconds). Without such writers
  // it returns at once, taking no lock.
  void AwaitReleases();
  static constexpr std::chrono::milliseconds kReleaseWait{1000};
  static constexpr std::chrono::milliseconds kInstallWait{120'000};

  // The report of the last validation or installation: empty when it was accepted.
  std::string ErrorsText() const;

 private:
  const Backing& backing_;
  Prefetcher& prefetcher_;
  Stats& stats_;
  const std::vector<std::string> aliases_;
  // Validates w's text as it is now; sets w.last_ and w.valid_ and the `errors` report.
  void Validate(Writer& w);
  // After a write: checks the paths w's parser has that are not checked yet (w.checks_).
  void CheckNewPaths(Writer& w);
  // After a write: refuses w (and reports why) if what it wrote is certain to be rejected.
  Status CheckWritten(Writer& w);
  // The dataset as w's writer sees it.
  const Backing& BackingOf(const Writer& w) const { return w.view_ ? *w.view_ : backing_; }
  // Takes a place among cache.max_streams for m's stream, written by w, if m adds a stream:
  // kInvalidArgument (the report) when the plan's streams and the places reserved by other
  // accepted texts leave none. A stream's place is one whatever number of writers reserve it.
  // Gives back w's earlier reservation first.
  Status Reserve(Writer& w, const ResolvedManifest& m);
  // Gives back w's reservation, if it has one.
  void Unreserve(Writer& w);
  void DropReservation(Writer& w);  // Unreserve's work, reserve_mu_ held, w.reserved_ set
  // `errors` becomes text (empty: accepted) for the validation or commit numbered seq, unless
  // a later-numbered one reported already: a release arriving late for an earlier close()
  // never clears the rejection of a later one.
  void Report(uint64_t seq, std::string text);
  void SetPending(const Writer& w, bool pending);

  // Reservations: per stream name, the writers holding a place for it (Reserve). Before the
  // Prefetcher's own locks (it reads the plan); never taken inside Prefetcher::Update.
  std::mutex reserve_mu_;
  std::map<std::string, uint32_t, std::less<>> reserved_;
  std::mutex commit_mu_;          // serializes installations; before errors_mu_
  mutable std::mutex errors_mu_;  // leaf
  std::string errors_;
  uint64_t errors_seq_ = 0;           // the sequence number of what errors_ reports
  std::atomic<uint64_t> reports_{0};  // validations and commits numbered so far
  std::mutex pending_mu_;             // leaf
  std::condition_variable pending_cv_;
  // Writers validated and accepted at a close(), with nothing written since and not yet
  // installed: since the time of that close, or, releasing, since their release began.
  struct Pending {
    std::chrono::steady_clock::time_point since;
    bool releasing = false;
  };
  std::map<const Writer*, Pending> pending_;
  std::atomic<size_t> pending_count_{0};  // pending_.size(), stored under pending_mu_
};

}  // namespace clairfs
