// clairfs-cluster-scale: the cluster's planning at N nodes, simulated on one machine with the
// real planning code (docs/benchmarks.md, "A thousand nodes").
//
// Every node's access string comes from the same seeded sampler (DistributedSampler: one
// global shuffle per epoch, padded to a multiple of N, rank r taking every N-th sample from r;
// or --sampler locality: the global batches of the same shuffles handed to the nodes that hold
// their samples, as clairfs.locality.LocalitySampler hands them),
// each is built into a real Plan, and the real code splits it (MakeParts) and encodes it. Node
// 0's view is simulated whole: the parts it sends, the parts it receives as a coordinator, its
// decision (DecideHolders), its assignments, and its placement (ApplyHolders). The other
// coordinators' decisions, which node 0's placement also needs, are simulated for a sample of
// them (--sample-coordinators, every one when N is at most that): node 0's read fractions are
// measured over the objects the sampled coordinators decide, and the assignments it receives
// from the others are sized from the sampled ones (bytes per entry).
//
// What it reports for node 0: plan_bytes_sent and plan_bytes_received, the encoded messages;
// plan_seconds, its own computation from registration to placement (building, encoding and
// decoding messages, deciding, placing; not the network's time or the waits); plan_memory_bytes,
// what it holds for the exchange (the entries of its parts and of the parts it coordinates,
// and the holders of what it reads, by their sizes).
//
// Prints progress on stderr and, as its last line on stdout, one JSON object.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cluster/coordinator_ring.h"
#include "cluster/holders.h"
#include "cluster/plan_parts.h"
#include "cluster/protocol.h"
#include "sample_holders.h"

namespace {

using namespace clairfs;
using namespace clairfs::cluster;
using Clock = std::chrono::steady_clock;
constexpr uint32_t kNone = 0xFFFFFFFFu;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Options {
  int nodes = 4;
  uint64_t files = 1281167;
  int epochs = 90;
  std::string sampler = "distributed";
  int ranks_per_node = 1;               // locality: ranks on each node
  uint64_t batch = 32;                  // locality: samples per rank in a global batch
  bool print_assignment = false;        // locality: epoch 0's order and nodes as JSON, then exit
  std::vector<std::string> node_names;  // locality: holders keyed by these (then nodes = size)
  uint64_t mean_bytes = 110 * 1024;
  std::vector<uint64_t> capacity;  // per node, per tier; none: twice the dataset over the nodes
  int sample_coordinators = 16;
  uint64_t staging = 1ull << 30;  // objects larger are read directly, not staged
  uint64_t seed = 1;
  // Instead of the sampler: one manifest per rank (paths relative to dataset, '#epoch' lines
  // between epochs), whole files only; sizes and versions from the files in dataset.
  std::vector<std::string> manifests;
  std::string dataset;
  bool churn = false;  // also the cost of a node leaving
};

// The dataset: synthetic (ImageNet-like keys in 1,000 classes, sizes around mean_bytes) or
// the files the manifests name.
struct Dataset {
  explicit Dataset(const Options& o) : files(o.files), sizes(o.files) {
    std::mt19937_64 rng(o.seed * 7919);
    std::uniform_int_distribution<uint64_t> spread(o.mean_bytes / 2, o.mean_bytes * 3 / 2);
    for (uint64_t& s : sizes) s = spread(rng);
    Sum();
  }
  Dataset(const std::string& root, std::vector<std::string> paths) : keys(std::move(paths)) {
    files = keys.size();
    for (const std::string& k : keys) {
      struct stat st {};
      if (::stat((root + "/" + k).c_str(), &st) != 0) {
        std::fprintf(stderr, "cluster_scale: cannot stat %s/%s\n", root.c_str(), k.c_str());
        std::exit(1);
      }
      sizes.push_back(static_cast<uint64_t>(st.st_size));
      versions.push_back({static_cast<uint64_t>(st.st_size),
                          st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec, st.st_ino});
    }
    Sum();
  }
  void Sum() { bytes = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}); }
  std::string Key(uint32_t i) const {
    if (!keys.empty()) return keys[i];
    char buf[64];
    const uint32_t cls = i % 1000;
    std::snprintf(buf, sizeof buf, "train/n%08u/n%08u_%u.JPEG", 1440764 + cls * 37,
                  1440764 + cls * 37, i);
    return buf;
  }
  FileVersion Version(uint32_t i) const {
    if (!versions.empty()) return versions[i];
    return {sizes[i], 1700000000'000000000 + static_cast<int64_t>(i) * 1'000'003,
            1700000000'000000000 + static_cast<int64_t>(i) * 1'000'033, 1000000 + i};
  }
  uint64_t files = 0;
  std::vector<uint64_t> sizes;
  std::vector<std::string> keys;  // empty: synthetic
  std::vector<FileVersion> versions;
  uint64_t bytes = 0;
};

// Every node's order: the epochs' global shuffles, shared by every node, split as
// DistributedSampler splits them (shuffle=True; one rank per node: rank r takes every N-th
// sample from r) or as clairfs.locality.LocalitySampler does (R ranks per node, b samples per
// rank and batch: a global batch's samples go to the nodes that hold them, SampleHolders:
// keyed by --node-names, else splitmix64(index) mod N; up to R * b each, the rest to the free
// places in node order; the same function as python/clairfs/locality.py's assign), or the
// manifests given.
struct Sampler {
  Sampler(const Options& o, uint64_t files)
      : nodes(o.nodes), epochs(o.epochs), files(files), holder(o.nodes, o.node_names) {
    per_rank = (files + nodes - 1) / nodes;
    perm.resize(static_cast<size_t>(epochs) * files);
    for (int e = 0; e < epochs; ++e) {
      uint32_t* p = perm.data() + static_cast<size_t>(e) * files;
      std::iota(p, p + files, 0u);
      std::mt19937_64 rng(o.seed + e);
      std::shuffle(p, p + files, rng);
    }
    if (o.sampler == "locality") Localize(o.ranks_per_node, o.batch);
  }
  // orders[r][e]: rank r's dataset indices in epoch e.
  explicit Sampler(std::vector<std::vector<std::vector<uint32_t>>> orders)
      : nodes(static_cast<int>(orders.size())), holder(nodes, {}), given(std::move(orders)) {
    for (const auto& r : given) epochs = std::max(epochs, static_cast<int>(r.size()));
  }
  // Node r's samples in epoch e.
  template <typename F>
  void ForEach(int r, int e, F f) const {
    if (!given.empty()) {
      if (e < static_cast<int>(given[r].size())) {
        for (uint32_t i : given[r][e]) f(i);
      }
      return;
    }
    if (!by_node.empty()) {
      const size_t* b = node_begin.data() + static_cast<size_t>(e) * (nodes + 1);
      for (size_t k = b[r]; k < b[r + 1]; ++k) f(by_node[k]);
      return;
    }
    const uint32_t* p = perm.data() + static_cast<size_t>(e) * files;
    for (uint64_t k = r; k < per_rank * nodes; k += nodes) f(p[k % files]);
  }
  // The node of each position of a global order (padded to a multiple of the ranks), as
  // LocalitySampler assigns them; *away: the positions given to a node that does not hold them.
  std::vector<uint32_t> Assign(const std::vector<uint32_t>& order, int ranks_per_node,
                               uint64_t batch, uint64_t* away) const {
    const uint64_t replicas = static_cast<uint64_t>(nodes) * ranks_per_node;
    const uint64_t global = replicas * batch, total = order.size();
    std::vector<uint32_t> node(total);
    std::vector<uint64_t> count(nodes);
    std::vector<uint64_t> over;
    for (uint64_t k0 = 0; k0 < total; k0 += global) {
      const uint64_t end = std::min(total, k0 + global);
      const uint64_t cap = (end - k0) / replicas * ranks_per_node;
      std::fill(count.begin(), count.end(), 0);
      over.clear();
      for (uint64_t k = k0; k < end; ++k) {
        const uint32_t h = holder(order[k]);
        if (count[h] < cap) {
          node[k] = h;
          ++count[h];
        } else {
          over.push_back(k);
        }
      }
      uint32_t c = 0;
      for (uint64_t k : over) {
        while (count[c] >= cap) ++c;
        node[k] = c;
        ++count[c];
      }
      *away += over.size();
    }
    return node;
  }
  void Localize(int ranks_per_node, uint64_t batch) {
    const uint64_t replicas = static_cast<uint64_t>(nodes) * ranks_per_node;
    const uint64_t total = (files + replicas - 1) / replicas * replicas;
    by_node.resize(static_cast<size_t>(epochs) * total);
    node_begin.resize(static_cast<size_t>(epochs) * (nodes + 1));
    std::vector<uint32_t> order(total);
    for (int e = 0; e < epochs; ++e) {
      const uint32_t* p = perm.data() + static_cast<size_t>(e) * files;
      for (uint64_t k = 0; k < total; ++k) order[k] = p[k % files];
      const std::vector<uint32_t> node = Assign(order, ranks_per_node, batch, &assigned_away);
      // Counting sort by node, positions ascending within a node.
      size_t* b = node_begin.data() + static_cast<size_t>(e) * (nodes + 1);
      uint32_t* out = by_node.data() + static_cast<size_t>(e) * total;
      std::vector<size_t> next(nodes + 1, 0);
      for (uint32_t n : node) ++next[n + 1];
      for (int n = 0; n < nodes; ++n) next[n + 1] += next[n];
      for (int n = 0; n <= nodes; ++n) b[n] = static_cast<size_t>(e) * total + next[n];
      for (uint64_t k = 0; k < total; ++k) out[next[node[k]]++] = order[k];
      for (uint64_t k = 0; e > 0 && k < total; ++k) {
        if (node[k] != 0) continue;
        ++node0_later;
        if (holder(order[k]) != 0) ++node0_later_away;
      }
    }
    assigned_total = static_cast<uint64_t>(epochs) * total;
  }
  int nodes = 0, epochs = 0;
  uint64_t files = 0, per_rank = 0;
  bench::SampleHolders holder;
  std::vector<uint32_t> perm;
  std::vector<std::vector<std::vector<uint32_t>>> given;
  // Locality: every epoch's samples grouped by node (node_begin[e * (nodes + 1) + n] where node
  // n's of epoch e begin), and how many samples went to a node not holding them.
  std::vector<uint32_t> by_node;
  std::vector<size_t> node_begin;
  uint64_t assigned_away = 0, assigned_total = 0;
  uint64_t node0_later = 0, node0_later_away = 0;  // node 0's samples in epochs 2+, not its own
};

// The manifests' paths (the dataset, in order of first appearance) and every rank's orders.
std::pair<std::vector<std::string>, std::vector<std::vector<std::vector<uint32_t>>>> ReadManifests(
    const std::vector<std::string>& files) {
  std::vector<std::string> paths;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<std::vector<std::vector<uint32_t>>> orders;
  for (const std::string& name : files) {
    std::ifstream in(name);
    if (!in) {
      std::fprintf(stderr, "cluster_scale: cannot read %s\n", name.c_str());
      std::exit(1);
    }
    auto& rank = orders.emplace_back();
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line[0] == '#') {
        if (line.rfind("#epoch", 0) == 0) rank.emplace_back();
        continue;
      }
      if (rank.empty()) rank.emplace_back();
      while (line.rfind("./", 0) == 0) line.erase(0, 2);
      while (!line.empty() && line[0] == '/') line.erase(0, 1);
      auto [it, fresh] = index.try_emplace(line, static_cast<uint32_t>(paths.size()));
      if (fresh) paths.push_back(line);
      rank.back().push_back(it->second);
    }
  }
  return {std::move(paths), std::move(orders)};
}

// Node r's plan, built as the daemon builds one from its manifest: objects in order of first
// read, one stream, an epoch boundary per epoch. obj_of: the dataset index of each object.
std::shared_ptr<Plan> NodePlan(const Dataset& d, const Sampler& s, int r,
                               std::vector<uint32_t>& id_of, std::vector<uint32_t>* obj_of) {
  auto plan = std::make_shared<Plan>();
  plan->chunk_size = 1ull << 30;
  PlanStream stream;
  stream.name = "rank";
  stream.serial = 1;
  obj_of->clear();
  for (int e = 0; e < s.epochs; ++e) {
    stream.epoch_begin.push_back(static_cast<uint32_t>(stream.sequence.size()));
    s.ForEach(r, e, [&](uint32_t i) {
      if (id_of[i] == kNone) {
        id_of[i] = plan->AddObject(d.Key(i), d.Version(i));
        obj_of->push_back(i);
      }
      stream.sequence.push_back(id_of[i]);
      ++stream.entries;
    });
  }
  for (uint32_t i : *obj_of) id_of[i] = kNone;
  plan->streams.push_back(std::move(stream));
  plan->Finalize();
  return plan;
}

size_t Encoded(const Part& p) { return EncodePart(p).size(); }

int Run(const Options& o) {
  const auto wall = Clock::now();
  nlohmann::json out;
  std::unique_ptr<Dataset> owned_data;
  std::unique_ptr<Sampler> owned_sampler;
  if (!o.manifests.empty()) {
    auto [paths, orders] = ReadManifests(o.manifests);
    owned_data = std::make_unique<Dataset>(o.dataset, std::move(paths));
    owned_sampler = std::make_unique<Sampler>(std::move(orders));
  } else {
    owned_data = std::make_unique<Dataset>(o);
    owned_sampler = std::make_unique<Sampler>(o, o.files);
  }
  const Dataset& data = *owned_data;
  const Sampler& sampler = *owned_sampler;
  if (o.print_assignment) {
    // For tests/python/test_locality.py: the same assignment computed by clairfs.locality.
    const uint64_t replicas = static_cast<uint64_t>(sampler.nodes) * o.ranks_per_node;
    std::vector<uint32_t> order((data.files + replicas - 1) / replicas * replicas);
    for (uint64_t k = 0; k < order.size(); ++k) order[k] = sampler.perm[k % data.files];
    uint64_t away = 0;
    nlohmann::json a;
    a["order"] = order;
    a["node"] = sampler.Assign(order, o.ranks_per_node, o.batch, &away);
    a["away"] = away;
    std::printf("%s\n", a.dump().c_str());
    return 0;
  }
  const int nodes = sampler.nodes;
  PlacementLimits limits{{}, o.capacity, o.staging};
  if (limits.tier_capacity.empty()) limits.tier_capacity = {2 * data.bytes / nodes + 1};
  for (size_t t = 0; t < limits.tier_capacity.size(); ++t)
    limits.tier_names.push_back("tier" + std::to_string(t));
  const uint64_t capacity =
      std::accumulate(limits.tier_capacity.begin(), limits.tier_capacity.end(), uint64_t{0});

  std::fprintf(stderr, "cluster_scale: %d nodes, %llu files (%.1f GB), %d epochs\n", nodes,
               static_cast<unsigned long long>(data.files), data.bytes / 1e9, sampler.epochs);
  std::vector<uint32_t> id_of(data.files, kNone), obj_of;
  // A node leaving (the last rank): the parts that change, with the ring of the others.
  std::vector<int> rest(nodes - 1);
  std::iota(rest.begin(), rest.end(), 0);
  const CoordinatorRing after_leave(rest);
  uint64_t leave_sent = 0, leave_received = 0, parts_sent = 0;
  double leave_seconds = 0;
  std::vector<int> all(nodes);
  std::iota(all.begin(), all.end(), 0);
  const CoordinatorRing ring(all);

  // The sampled coordinators: node 0 and the first others by rank.
  std::vector<int> sample;
  for (int c = 0; c < nodes && static_cast<int>(sample.size()) < o.sample_coordinators; ++c)
    sample.push_back(c);
  const bool exact = static_cast<int>(sample.size()) == nodes;
  std::vector<std::vector<Part>> at(nodes);  // at[c][p]: p's part to sampled coordinator c
  for (int c : sample) at[c].resize(nodes);

  uint64_t sent = 0, received = 0, memory = 0, entries0 = 0;
  double seconds = 0;
  std::vector<Part> mine;  // node 0's parts
  std::shared_ptr<Plan> plan0;
  std::vector<uint32_t> obj0;

  for (int p = 0; p < nodes; ++p) {
    std::vector<uint32_t> objs;
    auto plan = NodePlan(data, sampler, p, id_of, &objs);
    auto t = Clock::now();
    std::vector<Part> parts = MakeParts(*plan, ring, capacity, 1, nodes);
    if (p == 0) {
      for (int c = 1; c < nodes; ++c) sent += Encoded(parts[c]);
      parts_sent = sent;
      seconds += Since(t);
      mine = parts;
    } else {
      received += Encoded(parts[0]);
    }
    if (o.churn && nodes > 1 && p != nodes - 1) {
      t = Clock::now();
      std::vector<Part> moved = MakeParts(*plan, after_leave, capacity, 1, nodes);
      for (int c = 0; c < nodes - 1; ++c) {
        if (moved[c].entries == parts[c].entries) continue;
        // As the daemon sends it: the change, when smaller than the whole part.
        Part delta{2, 1, 1, moved[c].budget, {}};
        if (!MakeDelta(parts[c].entries, moved[c].entries, &delta.removed, &delta.entries)) {
          delta = moved[c];
        }
        if (p == 0 && c != 0) leave_sent += Encoded(delta);
        if (p != 0 && c == 0) leave_received += Encoded(delta);
      }
      if (p == 0) leave_seconds = Since(t);
    }
    for (int c : sample) at[c][p] = std::move(parts[c]);
    if (p == 0) {
      plan0 = plan;
      obj0 = objs;
      entries0 = objs.size();
    }
    if (p % std::max(1, nodes / 8) == 0)
      std::fprintf(stderr, "  node %d of %d planned (%.0f s)\n", p, nodes, Since(wall));
  }

  // Node 0's accesses after the first epoch, by object id.
  std::vector<uint64_t> later_reads(plan0->objects.size(), 0);
  sampler.ForEach(0, 0, [](uint32_t) {});
  {
    const PlanStream& s = plan0->streams[0];
    const uint32_t begin = s.epochs() > 1 ? s.epoch_begin[1] : s.sequence.size();
    for (size_t k = begin; k < s.sequence.size(); ++k) ++later_reads[s.sequence[k]];
  }
  double local = 0, peer = 0, backing = 0, reads_per_file = 0;
  // Node 0's reads in epochs 2+ of the objects counted (by their place): the fractions.
  auto count_reads = [&](const auto& counted) {
    uint64_t total = 0;
    for (uint32_t id = 0; id < plan0->objects.size(); ++id) {
      const PlanObject& f = plan0->objects[id];
      if (later_reads[id] == 0 || !counted(f)) continue;
      total += later_reads[id];
      double& share = f.place.InTier() ? local : f.place == kPeer ? peer : backing;
      share += static_cast<double>(later_reads[id]);
    }
    if (total == 0) return;
    local /= static_cast<double>(total);
    peer /= static_cast<double>(total);
    backing /= static_cast<double>(total);
  };
  // Coordinator 0's decision, timed as node 0's; the other sampled coordinators' too.
  std::unordered_map<uint64_t, HolderInfo> holders;
  CoordinatorTotals totals;
  double assign_bytes_to_0 = 0, entries_to_0 = 0;
  for (int c : sample) {
    std::vector<ReaderPart> given;
    for (int p = 0; p < nodes; ++p) {
      at[c][p].seq = 1;
      given.push_back({p, &at[c][p]});
    }
    auto t = Clock::now();
    if (c == 0) {  // node 0 decodes what it receives
      for (int p = 1; p < nodes; ++p) {
        std::vector<char> bytes = EncodePart(at[0][p]);
        auto t2 = Clock::now();
        std::string why;
        (void)DecodePart({bytes.data(), bytes.size()}, &why);
        seconds += Since(t2);
      }
      t = Clock::now();
    }
    Decision d = DecideHolders(given, c, nodes);
    if (c == 0) {
      for (int p = 1; p < nodes; ++p) sent += EncodeAssignment(d.assignments[p], p).size();
      for (int p = 0; p < nodes; ++p)
        memory += (at[0][p].entries.size()) * (sizeof(PartEntry) + 24);  // parts, transient
      seconds += Since(t);
    }
    totals += d.totals;
    const Assignment& a0 = d.assignments[0];
    if (c != 0) {
      const size_t bytes = EncodeAssignment(a0, 0).size();
      received += bytes;
      assign_bytes_to_0 += bytes;
      entries_to_0 += a0.holder.size();
    }
    size_t k = 0;
    for (size_t e = 0; e < a0.holder.size(); ++e) {
      holders[at[c][0].entries[e].key_hash] = {a0.holder[e], a0.holder[e] == 0 ? a0.first[k++] : 0};
    }
  }
  // Assignments from the coordinators not simulated: sized like the sampled ones.
  if (!exact && entries_to_0 > 0) {
    for (int c = 0; c < nodes; ++c) {
      if (std::find(sample.begin(), sample.end(), c) != sample.end()) continue;
      received +=
          static_cast<uint64_t>(assign_bytes_to_0 / entries_to_0 * mine[c].entries.size()) + 20;
    }
  }
  auto t = Clock::now();
  LocalPlacement placed = ApplyHolders(*plan0, limits, holders, 0, [](int) { return true; });
  seconds += Since(t);
  // Node 0's placement (every object's, when every coordinator was simulated).
  out["node_objects"] = {{"held", placed.owned_files},
                         {"from_peers", placed.from_peers_files},
                         {"unheld", placed.unowned_files}};
  out["predicted_backing_bytes"] = totals.predicted_backing_bytes;
  // Held per node: its parts as sent (to map answers), the holders of what it reads.
  for (const Part& p : mine) memory += p.entries.size() * sizeof(PartEntry);
  memory += entries0 * (sizeof(uint64_t) + sizeof(HolderInfo) + 2 * sizeof(void*));
  count_reads([&](const PlanObject& f) {
    const int c = ring.Coordinator(KeyHash(f.key));
    return std::find(sample.begin(), sample.end(), c) != sample.end();
  });
  reads_per_file = totals.bytes ? static_cast<double>(totals.predicted_backing_bytes) /
                                      static_cast<double>(totals.bytes)
                                : 0;
  out["coordinators_simulated"] = sample.size();
  out["sampler"] = o.manifests.empty() ? o.sampler : "manifests";
  if (sampler.assigned_total > 0) {
    // The share of every node's samples given to a node that does not hold them (so read
    // from a peer once the holders have them), over every epoch.
    out["ranks_per_node"] = o.ranks_per_node;
    out["batch"] = o.batch;
    out["assigned_away"] =
        static_cast<double>(sampler.assigned_away) / static_cast<double>(sampler.assigned_total);
    // Node 0's share of it in epochs 2+: what read_peer should be if the placement follows.
    out["node_assigned_away"] = static_cast<double>(sampler.node0_later_away) /
                                static_cast<double>(std::max<uint64_t>(1, sampler.node0_later));
  }
  out["nodes"] = nodes;
  out["files"] = data.files;
  out["epochs"] = sampler.epochs;
  out["dataset_bytes"] = data.bytes;
  out["capacity_per_node"] = capacity;
  out["objects_read_by_node"] = entries0;
  out["plan_bytes_sent"] = sent;
  out["plan_bytes_received"] = received;
  out["plan_memory_bytes"] = memory;
  out["plan_seconds"] = seconds;
  out["read_local"] = local;
  out["read_peer"] = peer;
  out["read_backing"] = backing;
  out["backing_reads_per_file"] = reads_per_file;
  out["exact"] = exact;
  // Epochs appended: every part again (the assignments as at the first registration).
  out["append_bytes_sent"] = sent;
  out["parts_bytes_sent"] = parts_sent;
  if (o.churn) {
    out["leave_bytes_sent"] = leave_sent;
    out["leave_bytes_received"] = leave_received;
    out["leave_seconds"] = leave_seconds;
  }
  out["simulation_seconds"] = Since(wall);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Simulates clairfs's cluster planning at N nodes with the real planning code."};
  app.add_option("--nodes", o.nodes, "nodes in the cluster")->check(CLI::Range(1, 1 << 20));
  app.add_option("--files", o.files, "objects in the dataset")->check(CLI::Range(1, 1 << 30));
  app.add_option("--epochs", o.epochs, "epochs in every node's plan")->check(CLI::Range(1, 1000));
  app.add_option("--sampler", o.sampler, "how ranks split each epoch")
      ->check(CLI::IsMember({"distributed", "locality"}));
  app.add_option("--ranks-per-node", o.ranks_per_node, "locality: ranks on each node")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--batch", o.batch, "locality: samples per rank in each global batch")
      ->check(CLI::Range(1, 1 << 30));
  app.add_flag("--print-assignment", o.print_assignment,
               "locality: print epoch 0's order and each position's node as JSON, and exit");
  app.add_option("--mean-bytes", o.mean_bytes, "mean object size");
  app.add_option("--capacity", o.capacity,
                 "tier bytes per node, fastest first (default: one tier of 2 x dataset / nodes)")
      ->delimiter(',');
  app.add_option("--sample-coordinators", o.sample_coordinators,
                 "coordinators whose decisions are simulated")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", o.seed, "the sampler's seed");
  app.add_option("--manifests", o.manifests, "one manifest per rank instead of the sampler")
      ->delimiter(',');
  app.add_option("--dataset", o.dataset, "with --manifests: the directory their paths are in");
  app.add_flag("--churn", o.churn, "also what a node leaving costs node 0 (parts re-sent)");
  app.add_option("--staging", o.staging, "the staging window: larger objects are read directly");
  app.add_option("--node-names", o.node_names,
                 "locality: the nodes' names (node p the p-th), holders keyed by them; sets "
                 "--nodes")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (!o.node_names.empty()) {
    o.nodes = static_cast<int>(o.node_names.size());
    std::vector<std::string> sorted = o.node_names;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() || sorted[0].empty()) {
      std::fprintf(stderr, "cluster_scale: --node-names: empty or repeated name\n");
      return 2;
    }
  }
  return Run(o);
}
