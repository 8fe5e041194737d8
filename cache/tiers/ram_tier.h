// RamTier: objects held in the daemon's memory, bounded by a capacity in bytes of data.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/tiers/tier.h"

namespace clairfs {

class RamTier final : public Tier {
 public:
  RamTier(std::string name, uint64_t capacity) : name_(std::move(name)), capacity_(capacity) {}
  const std::string& name() const override { return name_; }
  Result<BlobPtr> Get(std::string_view key, const FileVersion& version) override;
  Status Put(std::string_view key, BlobPtr blob) override;
  bool Contains(std::string_view key, const FileVersion& version) override;
  void Erase(std::string_view key) override;
  void RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) override;
  uint64_t used_bytes() const override;
  uint64_t capacity() const override { return capacity_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  const std::string name_;
  const uint64_t capacity_;
  mutable std::mutex mu_;  // leaf lock: guards objects_ and used_
  std::unordered_map<std::string, BlobPtr, Hash, std::equal_to<>> objects_;
  uint64_t used_ = 0;
};

}  // namespace clairfs
