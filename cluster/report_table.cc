#include "cluster/report_table.h"

#include <utility>

namespace clairfs::cluster {

ReportTable::ReportTable(int rank, int size) : rank_(rank), size_(size), latest_(size) {}

bool ReportTable::Record(int r, NodeReport report, Clock::time_point at) {
  if (r < 0 || r >= size_ || r == rank_ || report.rank != r) return false;
  std::lock_guard lock(mu_);
  latest_[r] = Entry{std::move(report), at};
  return true;
}

std::vector<ClusterRow> ReportTable::Rows(const NodeReport& own, const PeerLiveness& liveness,
                                          Clock::time_point now,
                                          std::chrono::milliseconds stale_after) const {
  std::vector<ClusterRow> rows(size_);
  {
    std::lock_guard lock(mu_);
    for (int r = 0; r < size_; ++r) {
      rows[r].rank = r;
      if (r == rank_ || !latest_[r]) continue;
      rows[r].report = latest_[r]->report;
      rows[r].age_seconds = std::chrono::duration<double>(now - latest_[r]->at).count();
    }
  }
  for (ClusterRow& row : rows) {
    const int r = row.rank;
    if (r == rank_) {
      row.state = NodeState::kSelf;
      row.report = own;
    } else if (liveness.Refused(r)) {
      row.state = NodeState::kRefused;
    } else if (!liveness.Reachable(r)) {
      row.state = NodeState::kGone;
    } else if (!liveness.Live(r)) {
      row.state = NodeState::kDown;
    } else if (!row.report) {
      row.state = NodeState::kSilent;
    } else if (row.age_seconds > std::chrono::duration<double>(stale_after).count()) {
      row.state = NodeState::kStale;
    } else {
      row.state = NodeState::kAlive;
    }
  }
  return rows;
}

}  // namespace clairfs::cluster
