// Internal to the peer protocol (protocol.cc, plan_parts.cc, node_report.cc): a message's bytes are
// the protocol's header (protocol.h) followed by fields in the low-level encoding (wire.h). The
// header is written and checked here, so that wire.h need not know the protocol.
#pragma once

#include <cstdint>
#include <string_view>

#include "cluster/protocol.h"
#include "cluster/wire.h"

namespace clairfs::cluster {

// A writer whose bytes begin with this protocol's header (magic, version, two zero bytes).
inline wire::Writer MessageWriter() {
  wire::Writer w;
  w.Put(kMagic);
  w.Put(kProtocolVersion);
  w.Put<uint16_t>(0);
  return w;
}

// A reader of a message's fields, after its header; without this protocol's header it reads
// as empty, so every Get fails.
inline wire::Reader MessageReader(std::string_view bytes) {
  uint16_t version;
  if (CheckHeader(bytes, &version) != HeaderCheck::kOk) return wire::Reader();
  return wire::Reader(bytes.substr(kHeaderBytes));
}

}  // namespace clairfs::cluster
