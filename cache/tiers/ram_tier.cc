#include "cache/tiers/ram_tier.h"

namespace clairfs {

Result<BlobPtr> RamTier::Get(std::string_view key, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second->version() != version) {
    return Status::Error(Code::kNotFound, "not in " + name_);
  }
  return it->second;
}

Status RamTier::Put(std::string_view key, BlobPtr blob) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  const uint64_t old = it == objects_.end() ? 0 : it->second->size();
  if (used_ - old + blob->size() > capacity_) {
    return Status::Error(Code::kNoSpace, name_ + " tier is full");
  }
  used_ = used_ - old + blob->size();
  if (it == objects_.end()) {
    objects_.emplace(std::string(key), std::move(blob));
  } else {
    it->second = std::move(blob);
  }
  return Status::Ok();
}

bool RamTier::Contains(std::string_view key, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  return it != objects_.end() && it->second->version() == version;
}

void RamTier::Erase(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  used_ -= it->second->size();
  objects_.erase(it);
}

void RamTier::RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) {
  std::lock_guard lock(mu_);
  for (auto it = objects_.begin(); it != objects_.end();) {
    if (keep(it->first, it->second->version())) {
      ++it;
    } else {
      used_ -= it->second->size();
      it = objects_.erase(it);
    }
  }
}

uint64_t RamTier::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

}  // namespace clairfs
