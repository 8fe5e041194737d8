#include "cluster/cluster_node.h"

#include <unistd.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "cluster/protocol.h"

namespace clairfs::cluster {

namespace {

using Clock = std::chrono::steady_clock;

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace

ClusterNode::ClusterNode(Transport& transport, PeerOptions options, ClusterStats* stats)
    : transport_(transport),
      options_(options),
      stats_(stats),
      size_(transport.size()),
      host_(HostName()),
      started_at_(Clock::now()),
      liveness_(transport.rank(), transport.size(), options_),
      directory_(liveness_),
      damage_(stats),
      reader_(transport, directory_, liveness_, options_.peer_timeout, stats, damage_),
      server_(transport, stats, damage_),
      coordinator_(transport, liveness_, options_, stats, [this] { Wake(); }),
      reports_(transport.rank(), transport.size()) {
  liveness_.OnChange([this] { coordinator_.Invalidate(); });
  reader_.SetHolderOf([this](const std::string& key) { return coordinator_.PeerOwner(key); });
  transport_.CountErrorsIn(&stats_->mpi_errors);
}

ClusterNode::~ClusterNode() { Stop(); }

void ClusterNode::Start(LocalLookup lookup, std::function<void()> replan, Adopt adopt,
                        Fetch fetch) {
  std::lock_guard lock(wake_mu_);
  if (started_ || stop_) return;
  started_ = true;
  replan_ = std::move(replan);
  server_.Start(std::move(lookup), std::move(adopt), options_.serve_threads, std::move(fetch));
  threads_.emplace_back([this] { ReceiveLoop(); });
  threads_.emplace_back([this] { PlanLoop(); });
}

void ClusterNode::Stop() {
  if (stop_.exchange(true)) return;
  reader_.Stop();
  Broadcast(kBye, EncodeBye());
  server_.Stop();
  Wake();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

ClusterHooks ClusterNode::Hooks(double backing_advantage) {
  ClusterHooks hooks;
  hooks.place = [this](Plan& plan, const PlacementLimits& limits, bool replan) {
    return Place(plan, limits, replan);
  };
  hooks.held = [this](const std::string& key, const FileVersion& version) { Held(key, version); };
  hooks.fetched = [this](const std::string& key, const BlobPtr& blob) { Fetched(key, blob); };
  hooks.peer = &reader_;
  hooks.backing_advantage = backing_advantage;
  return hooks;
}

bool ClusterNode::Place(Plan& plan, const PlacementLimits& limits, bool replan) {
  return coordinator_.Place(plan, limits, replan);
}

void ClusterNode::Held(const std::string& key, const FileVersion& version) {
  if (directory_.Announce(key, version)) Wake();
}

void ClusterNode::Fetched(const std::string& key, const BlobPtr& blob) {
  const std::optional<int> owner = coordinator_.PeerOwner(key);
  if (!owner || stop_ || !liveness_.Live(*owner)) return;
  if (directory_.AnnouncedBy(key, *owner)) return;  // it has it already
  transport_.Send(*owner, kPush, EncodePush(key, *blob));
  stats_->peer_bytes_out.fetch_add(blob->size(), std::memory_order_relaxed);
}

void ClusterNode::Wake() {
  {
    std::lock_guard lock(wake_mu_);
    woken_ = true;
  }
  wake_cv_.notify_all();
}

int ClusterNode::Broadcast(int tag, const std::vector<char>& bytes) {
  int sent = 0;
  for (int r = 0; r < transport_.size(); ++r) {
    if (liveness_.Reachable(r)) {
      transport_.Send(r, tag, bytes);
      ++sent;
    }
  }
  return sent;
}

NodeReport ClusterNode::OwnReport() const {
  NodeReport n;
  n.rank = transport_.rank();
  n.host = host_;
  n.sequence = reports_made_.load(std::memory_order_relaxed);
  n.uptime_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count());
  // The placement's state, this node's plan generation and the cluster's planned bytes, as the
  // coordinator shows them in .clairfs/plan.
  const nlohmann::json info = nlohmann::json::parse(coordinator_.InfoJson(), nullptr, false);
  if (info.is_object()) {
    const std::string state = info.value("state", "");
    n.plan = state == "placed"              ? PlanState::kPlaced
             : state == "waiting for plans" ? PlanState::kWaiting
                                            : PlanState::kNone;
    const auto& gens = info.value("generations", nlohmann::json::array());
    if (gens.is_array() && n.rank < static_cast<int>(gens.size()) && gens[n.rank].is_number()) {
      n.plan_generation = gens[n.rank].get<uint64_t>();
    }
    n.dataset_bytes = info.value("cluster_bytes", uint64_t{0});
  }
  n.peer_bytes_in = stats_->peer_bytes_in.load(std::memory_order_relaxed);
  n.peer_bytes_out = stats_->peer_bytes_out.load(std::memory_order_relaxed);
  if (report_source_) report_source_(&n);
  return n;
}

std::vector<ClusterRow> ClusterNode::ClusterReports() const {
  return reports_.Rows(OwnReport(), liveness_, Clock::now(), ReportStaleAfter(options_, size_));
}

void ClusterNode::SendReport() {
  const NodeReport own = OwnReport();
  const int sent = Broadcast(kReport, EncodeReport(own));
  reports_made_.fetch_add(1, std::memory_order_relaxed);
  stats_->reports.sent.fetch_add(sent, std::memory_order_relaxed);
}

void ClusterNode::PlanLoop() {
  for (;;) {
    {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait_for(lock, options_.announce_every, [&] { return stop_ || woken_; });
      woken_ = false;
    }
    if (stop_) return;
    std::vector<std::pair<std::string, FileVersion>> batch = directory_.TakeAnnouncements();
    coordinator_.Coordinate();
    const bool replan = coordinator_.ReplanDue();
    if (!batch.empty()) Broadcast(kHave, EncodeHave(Have{std::move(batch)}));
    if (const auto now = Clock::now(); now >= next_report_) {
      SendReport();
      next_report_ = now + report_period();
    }
    if (replan && replan_) replan_();
  }
}

void ClusterNode::ReceiveLoop() {
  while (!stop_) {
    std::optional<Message> m = transport_.Receive(std::chrono::milliseconds(50));
    if (m) Dispatch(std::move(*m));
  }
}

void ClusterNode::Dispatch(Message m) {
  const std::string_view bytes(m.bytes.data(), m.bytes.size());
  const int src = m.source;
  if (src < 0 || src >= transport_.size() || src == transport_.rank()) return;
  if (uint16_t version = 0; CheckHeader(bytes, &version) != HeaderCheck::kOk) {
    // Every such message counted; its sender refused for good, logged once.
    stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
    liveness_.Refuse(src, CheckHeader(bytes, &version), version);
    return;
  }
  if (liveness_.Refused(src)) return;  // one good-looking message does not make it fit
  switch (m.tag) {
    case kRequest:
    case kFetch:
    case kPush:
      server_.Enqueue(std::move(m));
      break;
    case kReply:
      reader_.OnReply(std::move(m));
      break;
    case kHave:
      if (auto have = DecodeHave(bytes)) directory_.Record(src, std::move(*have));
      break;
    case kPart:
      coordinator_.OnPart(src, bytes);
      break;
    case kAssign:
      coordinator_.OnAssign(src, bytes);
      break;
    case kBye:
      liveness_.MarkGone(src);
      break;
    case kReport:
      if (auto report = DecodeReport(bytes);
          report && reports_.Record(src, std::move(*report), Clock::now())) {
        stats_->reports.received.fetch_add(1, std::memory_order_relaxed);
      } else {
        stats_->reports.refused.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    default:
      break;
  }
}

}  // namespace clairfs::cluster
