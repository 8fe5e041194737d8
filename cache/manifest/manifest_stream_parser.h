// ManifestStreamParser: what a parser of one manifest form offers, so that the control plane
// can take either form through one type (ManifestInput, compact_manifest.h, picks the parser
// by the first byte). ManifestParser (manifest.h: the text form) and CompactManifestParser
// (compact_manifest.h: the binary form) satisfy it, and so does ManifestInput itself.
//
// The contract, for a parser p of one manifest (not copyable: its results view its own arena;
// movable):
//   p.Feed(bytes)     consumes the next bytes; the input may be split anywhere between calls.
//                     Every error it records is final (no later byte takes it back), so an
//                     input with p.parsed().error_count > 0 after Feed() will be rejected.
//   p.Peek()          what the input says if it ended here, without ending it (an input cut
//                     off is rejected as such); the next Feed() continues as if Peek() had not
//                     been called. The reference is valid until the next call.
//   std::move(p).Finish()  ends the input and returns what it said (ParsedManifest, form set).
//   p.bytes_fed()     the bytes fed so far.
//   p.paths()         the distinct paths of the complete entries (items) fed so far, views into
//                     the parsed arena, valid while the parser or what it returned lives.
//   p.parsed()        what the complete input fed so far said (none of a Peek()'s additions).
//   std::move(p).TakePathIndex()  after Peek(), as the last call: an index of the paths Peek()
//                     returned, so a plan keyed by them need not index them again.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/manifest/manifest.h"

namespace clairfs {

template <class P>
concept ManifestStreamParser =
    std::movable<P> && !std::copyable<P> && requires(P & p, const P& cp, std::string_view bytes) {
  { p.Feed(bytes) } -> std::same_as<void>;
  { p.Peek() } -> std::same_as<const ParsedManifest&>;
  { std::move(p).Finish() } -> std::same_as<ParsedManifest>;
  { cp.bytes_fed() } -> std::same_as<uint64_t>;
  { cp.paths() } -> std::same_as<const std::vector<std::string_view>&>;
  { cp.parsed() } -> std::same_as<const ParsedManifest&>;
  { std::move(p).TakePathIndex() } -> std::same_as<KeyIndex>;
};

static_assert(ManifestStreamParser<ManifestParser>);

}  // namespace clairfs
