#include "control/registrar.h"

#include <malloc.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "cache/backing/resolver.h"
#include "cache/base/log.h"
#include "cache/plan/merge.h"
#include "cache/plan/resolve.h"

namespace clairfs {

using nlohmann::json;

Registrar::Registrar(const Backing& backing, Prefetcher& prefetcher, Stats& stats,
                     std::vector<std::string> root_aliases)
    : backing_(backing),
      prefetcher_(prefetcher),
      stats_(stats),
      aliases_(std::move(root_aliases)) {}

std::unique_ptr<Registrar::Writer> Registrar::OpenWriter(bool append, bool truncate,
                                                         std::shared_ptr<const Backing> view) {
  return std::make_unique<Writer>(append, truncate, std::move(view));
}

void Registrar::DropReservation(Writer& w) {
  if (auto it = reserved_.find(*w.reserved_); it != reserved_.end() && --it->second == 0) {
    reserved_.erase(it);
  }
  w.reserved_.reset();
}

Status Registrar::Reserve(Writer& w, const ResolvedManifest& m) {
  std::lock_guard lock(reserve_mu_);
  if (w.reserved_) DropReservation(w);
  const bool append = w.append_;
  if (!append && m.sequence.empty()) return Status::Ok();  // a removal takes no place
  std::vector<std::string_view> names;
  names.reserve(reserved_.size());
  for (const auto& [name, writers] : reserved_) names.push_back(name);
  // An append to a stream the plan has reserves its name as well: the stream may leave (idle)
  // before the installation, which then adds it again.
  const Status room = StreamRoom(prefetcher_.plan().get(), m,
                                 append ? StreamChange::kAppend : StreamChange::kReplace,
                                 prefetcher_.max_streams(), names);
  if (!room.ok()) return room;
  std::string name = m.stream.empty() ? std::string(kDefaultStream) : m.stream;
  ++reserved_[name];
  w.reserved_ = std::move(name);
  return Status::Ok();
}

void Registrar::Unreserve(Writer& w) {
  if (!w.reserved_) return;
  std::lock_guard lock(reserve_mu_);
  DropReservation(w);
}

void Registrar::SetPending(const Writer& w, bool pending) {
  std::lock_guard lock(pending_mu_);
  if (pending) {
    pending_[&w] = {std::chrono::steady_clock::now(), false};
  } else if (pending_.erase(&w) > 0) {
    pending_cv_.notify_all();
  }
  pending_count_.store(pending_.size(), std::memory_order_release);
}

void Registrar::AwaitReleases() {
  if (pending_count_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock lock(pending_mu_);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    auto until = now;
    for (const auto& [writer, p] : pending_) {
      until = std::max(until, p.since + (p.releasing ? kInstallWait : kReleaseWait));
    }
    if (until <= now) return;
    pending_cv_.wait_until(lock, until);
  }
}

Status Registrar::Write(Writer& w, std::string_view bytes, uint64_t offset, bool append_write) {
  std::lock_guard lock(w.mu_);
  if (w.refused_) {
    return Status::Error(Code::kInvalidArgument,
                         "the manifest was refused at an earlier write (see errors)");
  }
  if (!append_write && offset != w.written_) {
    return Status::Error(Code::kInvalidArgument,
                         "manifest write at offset " + std::to_string(offset) +
                             ": a manifest is written in sequence, its text ends at " +
                             std::to_string(w.written_),
                         ESPIPE);
  }
  w.parser_.Feed(bytes);
  w.written_ += bytes.size();
  w.dirty_ = true;
  w.valid_.reset();
  SetPending(w, false);
  Unreserve(w);  // the text changed: it is validated (and reserves) again at its close()
  if (w.parser_.parsed().error_count == 0) CheckNewPaths(w);
  return CheckWritten(w);
}

void Registrar::CheckNewPaths(Writer& w) {
  // The paths of the complete lines (the items of a compact text, which come first) are
  // checked now, so that the write() that completed a line naming a missing file fails. A
  // text written after a validation (through a dup'ed descriptor) has all its paths checked
  // again: the validation took the outcomes.
  const std::vector<std::string_view>& paths = w.parser_.paths();
  if (paths.size() <= w.checks_.size()) return;
  if (w.resolvers_.empty()) w.resolvers_ = CheckResolvers(PathResolver(BackingOf(w), aliases_));
  CheckPaths(std::span(paths).subspan(w.checks_.size()), w.resolvers_, &w.checks_);
}

Status Registrar::CheckWritten(Writer& w) {
  // Errors the parser records while fed are final, and the outcomes of the path checks are
  // what validation uses: either kind makes the close() certain to fail.
  const ParsedManifest& parsed = w.parser_.parsed();
  if (parsed.error_count == 0 && w.checks_.errors.empty()) return Status::Ok();
  // The report is what close() would say of the complete lines so far, paths included (the
  // end-of-text checks aside: the text has not ended).
  PathResolver resolver(BackingOf(w), aliases_);
  PathChecks checks = std::exchange(w.checks_, PathChecks{});
  w.resolvers_.clear();
  auto resolved = ResolveManifest(parsed, resolver, std::move(checks));
  const std::string report =
      (resolved.ok() ? ManifestReport(parsed.error_count, parsed.errors, parsed.form)
                     : resolved.status().message()) +
      "(refused at write(): the rest of the text is not read)\n";
  stats_.errors.manifest_rejected.fetch_add(1, std::memory_order_relaxed);
  LogWarn("{}", report);  // escaped: see EscapeForReport
  w.refused_ = true;
  w.dirty_ = false;
  w.valid_.reset();
  w.parser_ = ManifestInput();  // the text is not read further: its memory goes now
  w.last_ = Status::Error(Code::kInvalidArgument, report);
  w.report_ = ++reports_;
  Report(w.report_, report);
  return w.last_;
}

Status Registrar::Truncate(Writer& w, uint64_t size) {
  if (size != 0) {
    return Status::Error(Code::kInvalidArgument, "the manifest can only be truncated to size 0");
  }
  std::lock_guard lock(w.mu_);
  Unreserve(w);
  w.checks_ = PathChecks{};
  w.resolvers_.clear();
  w.parser_ = ManifestInput();
  w.written_ = 0;
  w.dirty_ = false;
  w.last_ = Status::Ok();
  w.valid_.reset();
  w.refused_ = false;
  if (!w.append_) w.truncate_ = true;
  SetPending(w, false);
  return Status::Ok();
}

void Registrar::Validate(Writer& w) {
  const auto start = std::chrono::steady_clock::now();
  PathResolver resolver(BackingOf(w), aliases_);
  const ParsedManifest& parsed = w.parser_.Peek();
  // What the writes checked is used once: a text written on after this validation (through a
  // dup'ed descriptor) has all its paths checked again.
  PathChecks checks = std::exchange(w.checks_, PathChecks{});
  w.resolvers_.clear();
  const size_t ahead = checks.size();
  auto resolved = ResolveManifest(parsed, resolver, std::move(checks));
  LogDebug("manifest validated: {} entries, {} paths, {} checked by the writes ({:.3f} s)",
           parsed.sequence.size(), parsed.paths.size(), ahead,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  w.dirty_ = false;
  w.report_ = ++reports_;
  if (!resolved.ok()) {
    stats_.errors.manifest_rejected.fetch_add(1, std::memory_order_relaxed);
    LogWarn("{}", resolved.status().message());  // escaped: see EscapeForReport
    w.valid_.reset();
    w.last_ = Status::Error(Code::kInvalidArgument, resolved.status().message());
    Report(w.report_, resolved.status().message());
    return;
  }
  // The stream's place is reserved until the installation: what close() accepts is installed.
  const Status room = Reserve(w, *resolved.value());
  if (!room.ok()) {
    stats_.errors.manifest_rejected.fetch_add(1, std::memory_order_relaxed);
    LogWarn("{}", room.message());
    w.valid_.reset();
    w.last_ = room;
    Report(w.report_, room.message());
    return;
  }
  w.valid_ = std::move(resolved.value());
  w.last_ = Status::Ok();
  Report(w.report_, "");
}

void Registrar::Report(uint64_t seq, std::string text) {
  std::lock_guard elock(errors_mu_);
  if (seq < errors_seq_) return;
  errors_seq_ = seq;
  errors_ = std::move(text);
}

Status Registrar::Flush(Writer& w) {
  std::lock_guard wlock(w.mu_);
  if (w.written_ == 0) return Status::Ok();  // e.g. a shell closing its copy before writing
  if (w.dirty_) {
    Validate(w);
  } else if (w.refused_) {
    // `errors` reports in the order of close() calls: this one is rejected.
    w.report_ = ++reports_;
    Report(w.report_, w.last_.message());
  }
  if (w.last_.ok()) SetPending(w, true);
  return w.last_;
}

void Registrar::Release(Writer& w) {
  {
    // Its release has come: readers of plan, stats and errors wait for the installation.
    std::lock_guard lock(pending_mu_);
    if (auto it = pending_.find(&w); it != pending_.end()) {
      it->second = {std::chrono::steady_clock::now(), true};
      pending_cv_.notify_all();
    }
  }
  std::lock_guard wlock(w.mu_);
  std::shared_ptr<const ResolvedManifest> text;
  if (w.written_ > 0) {
    if (w.dirty_) Validate(w);  // written after the last close(): a cut-off text, or dup'ed
    text = w.last_.ok() ? w.valid_ : nullptr;
  } else if (w.truncate_) {
    text = std::make_shared<const ResolvedManifest>();
    w.report_ = ++reports_;  // a commit without a validation
  }
  if (text) {
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard lock(commit_mu_);
    // The text's storage is reused for the plan's positions when nothing else holds it, and
    // the parser's index of the paths as the plan's index when they are its keys.
    KeyIndex paths_index;
    if (text->files_as_written) paths_index = std::move(w.parser_).TakePathIndex();
    w.parser_ = ManifestInput();
    w.valid_.reset();
    const StreamChange change = w.append_ ? StreamChange::kAppend : StreamChange::kReplace;
    const std::string stream = text->stream.empty() ? std::string(kDefaultStream) : text->stream;
    const uint64_t entries = text->sequence.size();
    Status status;
    uint64_t files = 0, streams = 0;
    {
      auto plan = prefetcher_.Update([&](const Plan* current) -> Result<std::shared_ptr<Plan>> {
        // Never refused when the validation reserved the stream's place (the reservations
        // and the plan's streams together never exceed the limit): a safeguard.
        if (Status room = StreamRoom(current, *text, change, prefetcher_.max_streams());
            !room.ok()) {
          return room;
        }
        return MergePlan(current, std::move(text), change, prefetcher_.chunk_size(),
                         prefetcher_.record_chunk_size(), &paths_index);
      });
      if (plan.ok()) {
        files = plan.value()->files();
        streams = plan.value()->streams.size();
      } else {
        status = plan.status();
      }
    }
    if (!status.ok()) {
      stats_.errors.manifest_rejected.fetch_add(1, std::memory_order_relaxed);
      LogWarn("{}", status.message());
      Report(w.report_, status.message());
    } else {
      malloc_trim(0);  // the parser's and the old plan's memory goes back to the system
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      LogInfo("stream '{}' {}: {} entries; {} streams, {} files in the plan ({:.3f} s)",
              EscapeForReport(stream),
              change == StreamChange::kAppend ? "appended"
              : entries                       ? "registered"
                                              : "removed",
              entries, streams, files, secs);
      Report(w.report_, "");
    }
  }
  Unreserve(w);  // installed (or refused): the plan holds the stream now, or never will
  SetPending(w, false);
}

std::string Registrar::ErrorsText() const {
  std::lock_guard lock(errors_mu_);
  return errors_;
}

}  // namespace clairfs
