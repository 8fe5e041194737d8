// The partitioned plan exchange (kPart, kAssign): how the nodes agree on which node holds
// which object without any node sending its plan to every other (docs/architecture.md, "The
// peer tier", "Plans").
//
// A node that registers a plan splits the objects it reads by coordinator
// (coordinator_ring.h) and sends each live rank one kPart: per object coordinated there, the
// object's key hash, its size, how often the node reads it and its first read. The part also
// names, with freq 0, the objects a local tier of the node holds that it does not read
// (PlanObject::held with freq 0: what a restarted node kept from its previous plan), so that
// the coordinator can leave them with it when another node reads them (holders.h). Every rank gets
// a part, an empty one included, so a coordinator knows who has registered. The coordinator
// decides a holder for each object it coordinates from the parts of all readers (holders.h)
// and answers each reader with one kAssign: per entry of that reader's part, in the part's
// order, the holder's rank or none, and for the entries the reader itself holds the earliest
// first read across the cluster (the order it fills them in); plus the coordinator's totals,
// so every node can report the cluster's.
//
// Objects are named by the 64-bit hash of their key, not the key: 8 bytes instead of a path,
// and no table of keys to keep. Two keys with the same hash (about 1 in 10^7 for a million
// keys) share one decision: the holder may then hold only one of them, and the other's readers
// find no holder announcing it and read it from the backing store. Bytes are never matched by
// hash: the holders' announcements and the transfers name the full key and version.
//
// Encodings (after the protocol header, protocol.h):
//   kPart    varint seq, varint base, varint generation, varint budget, varint removed
//            count, u64 key hash per removed entry, varint count, then per entry: u64 key
//            hash, varint bytes, varint freq x 2 + held (0 or 1), u32 first; freq >= 1, or
//            0 with held 1 (held, not read)
//   kAssign  varint seq (the part's it answers), the totals as five varints (objects, bytes,
//            held objects, held bytes, predicted backing bytes), varint count, then per entry:
//            varint holder + 1 (0: none), and a u32 first when holder is the receiver
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace clairfs::cluster {

// One object a node reads or holds, as its coordinator sees it.
struct PartEntry {
  uint64_t key_hash = 0;  // KeyHash of its key
  uint64_t bytes = 0;     // its size in this node's plan
  // Reads in the node's access strings: >= 1, or 0 for an object the node holds (held) and
  // does not read.
  uint32_t freq = 0;
  // First read as a fraction of the node's span, in units of 2^-32 (QuantizeFirst32); with
  // freq 0, 0xFFFFFFFF (never).
  uint32_t first = 0;
  bool held = false;  // the node's tiers hold it already (PlanObject::held): keep it there
  bool operator==(const PartEntry&) const = default;
};

struct Part {
  uint64_t seq = 0;  // increases with every part the node sends, to any rank
  // 0: the whole part. Otherwise the seq of the part sent before to the same rank, which this
  // one changes (the live set changed, and objects moved between coordinators): the entries
  // are that part's without the ones removed names (key hashes), in their order, then this
  // one's (ApplyDelta).
  uint64_t base = 0;
  uint64_t generation = 0;  // the node's registration it comes from
  uint64_t budget = 0;      // bytes the receiver may give the node to hold (holders.h)
  std::vector<PartEntry> entries;
  std::vector<uint64_t> removed = {};  // with base only
};

// A coordinator's totals over the objects it coordinates.
struct CoordinatorTotals {
  uint64_t objects = 0, bytes = 0;            // distinct objects of all parts
  uint64_t held_objects = 0, held_bytes = 0;  // of those, with a holder
  // Bytes the cluster will read from the backing store for them: each held object once, each
  // other object at every read.
  uint64_t predicted_backing_bytes = 0;
  CoordinatorTotals& operator+=(const CoordinatorTotals& o);
};

inline constexpr int kNoHolder = -1;

struct Assignment {
  uint64_t seq = 0;  // the part it answers
  CoordinatorTotals totals;
  std::vector<int> holder;      // per entry of the part: a rank, or kNoHolder
  std::vector<uint32_t> first;  // per entry held by the receiver, in entry order
};

// position / span in units of 2^-32, rounded down: strictly increasing in position for
// span <= 2^32, as every plan's is.
uint32_t QuantizeFirst32(uint64_t position, uint64_t span);

// The entries of a part changed by a delta (Part::base): before's without removed, in order,
// then added.
std::vector<PartEntry> ApplyDelta(const std::vector<PartEntry>& before,
                                  const std::vector<uint64_t>& removed,
                                  const std::vector<PartEntry>& added);
// The delta from before to after (the same objects in any order; *removed and *added), or
// false when sending after whole is no larger.
bool MakeDelta(const std::vector<PartEntry>& before, const std::vector<PartEntry>& after,
               std::vector<uint64_t>* removed, std::vector<PartEntry>* added);

std::vector<char> EncodePart(const Part& p);
// nullopt and a reason for the log when bytes are malformed (truncated, trailing bytes, a
// count the bytes cannot hold, a zero freq without held). Allocations stay proportional to
// bytes.size().
std::optional<Part> DecodePart(std::string_view bytes, std::string* error);

// receiver: the rank the assignment goes to (whose entries carry first).
std::vector<char> EncodeAssignment(const Assignment& a, int receiver);
// As DecodePart; receiver: this node's rank, ranks: the cluster's size (a holder outside
// [0, ranks) is malformed).
std::optional<Assignment> DecodeAssignment(std::string_view bytes, int receiver, int ranks,
                                           std::string* error);

}  // namespace clairfs::cluster
