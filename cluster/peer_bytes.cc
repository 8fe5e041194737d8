#include "cluster/peer_bytes.h"

#include <cstring>

#include "cache/base/log.h"
#include "cache/base/object_key.h"

namespace clairfs::cluster {

BlobPtr CheckedBlob(std::string_view key, const FileVersion& version, const char* data, size_t n,
                    uint64_t hash) {
  if (n != ObjectBytes(key, version)) return nullptr;
  auto blob = Blob::Allocate(n, version);
  std::memcpy(blob->mutable_data(), data, n);
  blob->Seal();
  if (blob->hash() != hash) return nullptr;  // damaged on the way: never served
  return BlobPtr(std::move(blob));
}

void PeerDamage::Report(int r, std::string_view key) {
  stats_->peer_errors.fetch_add(1, std::memory_order_relaxed);
  if (uint64_t more = 0; log_.Allow(&more)) {
    LogWarn(
        "data of {} from peer rank {} failed its version, size or hash check: "
        "discarded, read elsewhere{}",
        DisplayKey(key), r, more ? fmt::format(" ({} more since the last line)", more) : "");
  }
}

}  // namespace clairfs::cluster
