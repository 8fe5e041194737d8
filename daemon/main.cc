// clairfs: mount a dataset read-only with a clairvoyant cache (docs/usage.md, clairfs(1)).
// Order of start-up: parse options and the config, find the paths (daemon/start.h), construct
// every part (daemon/compose.h, the composition root), mount, daemonize, then start threads
// (fork would not carry them), serve, and tear down in reverse (daemon/serve.h).
// Under an MPI launcher (more than one rank) the daemon stays in the foreground under a
// supervising parent (daemon/supervise.h), joins the job's peer tier (cluster/), and
// "{rank}" in the mountpoint and SSD directories becomes its rank.
#include <memory>
#include <utility>
#include <variant>

#include "daemon/command_line.h"
#include "daemon/compose.h"
#include "daemon/serve.h"
#include "daemon/start.h"

int main(int argc, char** argv) {
  clairfs::ExitCode parsed = clairfs::ExitCode::kOk;
  auto command_line = clairfs::ParseCommandLine(argc, argv, &parsed);
  if (!command_line) return static_cast<int>(parsed);
  clairfs::CommandLine& cl = *command_line;

  auto prepared = clairfs::PrepareStart(cl);
  if (const int* exit_code = std::get_if<int>(&prepared)) return *exit_code;
  clairfs::Start& start = std::get<clairfs::Start>(prepared);  // outlives the parts

  int exit_code = 0;
  std::unique_ptr<clairfs::DaemonParts> parts = clairfs::DaemonParts::Build(start, cl, &exit_code);
  if (!parts) return exit_code;
  return clairfs::Serve(*parts, start, cl, argv[0]);
}
