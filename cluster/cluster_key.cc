#include "cluster/cluster_key.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace clairfs::cluster {

// The fetched algorithm, shared (OpenSSL makes fetched objects safe to share between threads),
// and the secret. Each thread keys a context of its own once (ThreadContext) and starts every
// MAC from it, so concurrent Signs share nothing mutable, and a MAC costs no algorithm lookup
// or key schedule: one message's HMAC is about its bytes alone.
struct ClusterKey::Impl {
  EVP_MAC* mac = nullptr;
  std::string secret;
  uint64_t serial = 0;  // tells this key's thread contexts from an earlier key's
  ~Impl() {
    OPENSSL_cleanse(secret.data(), secret.size());
    EVP_MAC_free(mac);
  }
};

namespace {

std::atomic<uint64_t> next_serial{1};

// This thread's context keyed with the key of `serial`, or null.
struct ThreadContext {
  uint64_t serial = 0;
  EVP_MAC_CTX* ctx = nullptr;
  ~ThreadContext() { EVP_MAC_CTX_free(ctx); }
};
thread_local ThreadContext thread_context;

}  // namespace

ClusterKey::ClusterKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterKey::~ClusterKey() = default;

Result<std::shared_ptr<const ClusterKey>> ClusterKey::Create(std::string secret) {
  auto impl = std::make_unique<Impl>();
  impl->secret = std::move(secret);
  impl->serial = next_serial.fetch_add(1);
  impl->mac = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
  if (impl->mac == nullptr) {
    return Status::Error(Code::kUnavailable, "libcrypto provides no HMAC");
  }
  std::shared_ptr<ClusterKey> key(new ClusterKey(std::move(impl)));
  Mac id;
  if (!key->Sign({"clairfs cluster id"}, &id)) {
    return Status::Error(Code::kUnavailable, "libcrypto failed to compute an HMAC-SHA256");
  }
  std::memcpy(&key->id_, id.data(), sizeof(key->id_));
  return std::shared_ptr<const ClusterKey>(std::move(key));
}

bool ClusterKey::Sign(std::initializer_list<std::string_view> parts, Mac* out) const {
  ThreadContext& t = thread_context;
  bool ok = true;
  if (t.serial == impl_->serial && t.ctx != nullptr) {
    ok = EVP_MAC_init(t.ctx, nullptr, 0, nullptr) == 1;  // again, with the same key
  } else {
    EVP_MAC_CTX_free(t.ctx);
    t.serial = impl_->serial;
    t.ctx = EVP_MAC_CTX_new(impl_->mac);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_END};
    ok = t.ctx != nullptr &&
         EVP_MAC_init(t.ctx, reinterpret_cast<const unsigned char*>(impl_->secret.data()),
                      impl_->secret.size(), params) == 1;
  }
  for (std::string_view p : parts) {
    ok = ok &&
         EVP_MAC_update(t.ctx, reinterpret_cast<const unsigned char*>(p.data()), p.size()) == 1;
  }
  size_t n = 0;
  Mac mac;
  ok = ok && EVP_MAC_final(t.ctx, mac.data(), &n, mac.size()) == 1 && n == mac.size();
  if (!ok) t.serial = 0;  // key it afresh next time
  if (ok) *out = mac;
  return ok;
}

Result<std::shared_ptr<const ClusterKey>> LoadClusterKey(const std::string& path) {
  const std::string how =
      " (make one on one node with `head -c 32 /dev/urandom > FILE; chmod 600 FILE` as the "
      "daemon's user, and copy it to every node)";
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::Error(Code::kInvalidArgument,
                         "cluster key '" + path + "': " + std::strerror(errno) + how);
  }
  struct stat st;
  std::string problem;
  if (fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != geteuid()) {
    problem = "owned by uid " + std::to_string(st.st_uid) + ", not by this daemon's user (uid " +
              std::to_string(geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0) {
    problem = "group or others have permissions on it (mode 0" +
              std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
              std::to_string(st.st_mode & 7) + "): a secret must be readable by its owner alone";
  } else if (st.st_size < static_cast<off_t>(kMinKeyBytes) ||
             st.st_size > static_cast<off_t>(kMaxKeyBytes)) {
    problem = std::to_string(st.st_size) + " bytes; a key has " + std::to_string(kMinKeyBytes) +
              " to " + std::to_string(kMaxKeyBytes);
  }
  std::string secret;
  if (problem.empty()) {
    secret.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < secret.size()) {
      const ssize_t n = read(fd, secret.data() + got, secret.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "shorter than its size (changed while read)";
        break;
      }
      got += static_cast<size_t>(n);
    }
  }
  close(fd);
  if (!problem.empty()) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return Status::Error(Code::kInvalidArgument, "cluster key '" + path + "': " + problem + how);
  }
  return ClusterKey::Create(std::move(secret));
}

Result<std::string> RandomNonce() {
  std::string nonce(kNonceBytes, '\0');
  size_t got = 0;
  while (got < nonce.size()) {
    const ssize_t n = getrandom(nonce.data() + got, nonce.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "getrandom");
    got += static_cast<size_t>(n);
  }
  return nonce;
}

bool SameMac(const Mac& a, const unsigned char* b) {
  return CRYPTO_memcmp(a.data(), b, a.size()) == 0;
}

}  // namespace clairfs::cluster
