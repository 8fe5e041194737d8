// ClusterKey: the secret the daemons of one cluster share, and the message authentication code
// built on it (HMAC-SHA256, OpenSSL's libcrypto). The secret comes from a file that only the
// daemon's user may read (LoadClusterKey); the key's id, a public fingerprint of it, tells the
// messages of another cluster apart from forged ones (sealed_transport.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "cache/base/status.h"

namespace clairfs::cluster {

inline constexpr size_t kMacBytes = 32;       // HMAC-SHA256
inline constexpr size_t kMinKeyBytes = 32;    // 256 bits of secret at least
inline constexpr size_t kMaxKeyBytes = 4096;  // a key file, not a data file
inline constexpr size_t kNonceBytes = 16;     // a session nonce (RandomNonce)

using Mac = std::array<unsigned char, kMacBytes>;

// Immutable after construction, so thread-safe.
class ClusterKey {
 public:
  // secret: at least kMinKeyBytes bytes (LoadClusterKey checks it). Fails only when libcrypto
  // cannot provide HMAC-SHA256.
  static Result<std::shared_ptr<const ClusterKey>> Create(std::string secret);
  ~ClusterKey();
  ClusterKey(const ClusterKey&) = delete;
  ClusterKey& operator=(const ClusterKey&) = delete;

  // HMAC(secret, "clairfs cluster id"), its first 8 bytes: the same on every node given the
  // same secret, and telling nothing of the secret.
  uint64_t id() const { return id_; }
  // The MAC of the concatenation of parts; false (and *out untouched) if libcrypto failed.
  bool Sign(std::initializer_list<std::string_view> parts, Mac* out) const;

 private:
  struct Impl;
  explicit ClusterKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  uint64_t id_ = 0;
};

// Reads a cluster key from path: a regular file (a symbolic link is refused) owned by this
// process's effective user, with no permission bits for group or others, of kMinKeyBytes to
// kMaxKeyBytes bytes; its bytes are the secret. The message names the file and what is wrong.
Result<std::shared_ptr<const ClusterKey>> LoadClusterKey(const std::string& path);

// kNonceBytes random bytes from the kernel (getrandom), never reused: a session's nonce.
Result<std::string> RandomNonce();

// True if a and b hold the same bytes, in time independent of where they differ.
bool SameMac(const Mac& a, const unsigned char* b);

}  // namespace clairfs::cluster
