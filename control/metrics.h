// .clairfs/metrics: the stats (control/stats_view.h) in the Prometheus text exposition format,
// version 0.0.4, so that a Prometheus server or node_exporter's textfile collector reads a node
// without custom code. docs/control-interface.md ("metrics") lists the families.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clairfs {

// Builds an exposition text family by family. Every family gets its `# HELP` and `# TYPE`
// lines before its samples; a family without samples still has them (a valid, empty family).
// Names are the caller's constants and must match [a-zA-Z_:][a-zA-Z0-9_:]* (counters end in
// _total); label values are any bytes and are escaped. Not thread-safe.
class Exposition {
 public:
  enum class Type { kCounter, kGauge };
  using Labels = std::vector<std::pair<std::string_view, std::string>>;

  void Family(std::string_view name, Type type, std::string_view help);
  // A sample of the current family. Integers are written exactly; doubles in the shortest
  // form that reads back the same, NaN as `NaN`, infinities as `+Inf` and `-Inf`.
  void Sample(const Labels& labels, uint64_t value);
  void Sample(const Labels& labels, double value);
  void Sample(uint64_t value) { Sample(Labels{}, value); }
  void Sample(double value) { Sample(Labels{}, value); }
  // A JSON number (unsigned, signed or floating) or null (written as NaN).
  void Sample(const Labels& labels, const nlohmann::json& value);

  const std::string& text() const { return out_; }

 private:
  void Begin(const Labels& labels);
  std::string out_;
  std::string name_;  // the current family
};

// A label value as the format quotes it: backslash, double quote and line feed escaped.
std::string EscapeLabelValue(std::string_view value);
// A help text: backslash and line feed escaped.
std::string EscapeHelp(std::string_view help);
// A sample value: see Exposition::Sample.
std::string FormatValue(double value);

// The metrics text for a stats object (StatsObject). Keys it lacks are read as 0 (or, for the
// ratios, NaN), so any stats object renders to a valid text.
std::string RenderMetrics(const nlohmann::json& stats);

}  // namespace clairfs
