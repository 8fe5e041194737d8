#include "cluster/peer_directory.h"

#include "cache/base/object_key.h"

namespace clairfs::cluster {

void PeerDirectory::Record(int r, Have have) {
  std::lock_guard lock(mu_);
  for (auto& [key, version] : have.objects) {
    auto [it, fresh] = holders_.try_emplace(std::move(key), Holding{r, version});
    if (!fresh) bytes_ -= ObjectBytes(it->first, it->second.version);
    it->second = Holding{r, version};
    bytes_ += ObjectBytes(it->first, version);
  }
}

std::optional<int> PeerDirectory::Holder(std::string_view key, const FileVersion& version) const {
  std::lock_guard lock(mu_);
  auto it = holders_.find(std::string(key));
  if (it == holders_.end() || it->second.version != version || !liveness_.Live(it->second.rank)) {
    return std::nullopt;
  }
  return it->second.rank;
}

bool PeerDirectory::AnnouncedBy(std::string_view key, int r) const {
  std::lock_guard lock(mu_);
  auto it = holders_.find(std::string(key));
  return it != holders_.end() && it->second.rank == r;
}

void PeerDirectory::Forget(std::string_view key, int r) {
  std::lock_guard lock(mu_);
  auto it = holders_.find(std::string(key));
  if (it != holders_.end() && it->second.rank == r) {
    bytes_ -= ObjectBytes(it->first, it->second.version);
    holders_.erase(it);
  }
}

uint64_t PeerDirectory::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

bool PeerDirectory::Announce(const std::string& key, const FileVersion& version) {
  std::lock_guard lock(announce_mu_);
  announce_.emplace_back(key, version);
  return announce_.size() >= 1024;
}

std::vector<std::pair<std::string, FileVersion>> PeerDirectory::TakeAnnouncements() {
  std::lock_guard lock(announce_mu_);
  return std::exchange(announce_, {});
}

}  // namespace clairfs::cluster
