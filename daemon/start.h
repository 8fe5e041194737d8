// The start of the daemon before any part is built: the validated config, cluster mode (and
// the supervising parent under an MPI launcher), and the paths it will serve.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <variant>

#include "cluster/cluster_key.h"
#include "cluster/mpi_transport.h"
#include "cluster/sealed_transport.h"
#include "conf/config.h"
#include "daemon/command_line.h"

namespace clairfs {

// Prints "clairfs: message" to stderr and returns code, for main's return.
inline int Fail(ExitCode code, const std::string& message) {
  std::fprintf(stderr, "clairfs: %s\n", message.c_str());
  return static_cast<int>(code);
}

// What the daemon serves and with what, once the command line and the config are checked.
struct Start {
  Config config;            // loaded and validated (LoadConfig); "{rank}" substituted
  std::string config_path;  // the file read; empty: the built-in defaults
  // Set in cluster mode (--cluster or cluster.enabled under a launcher of more than one rank).
  std::unique_ptr<cluster::MpiTransport> transport;
  std::shared_ptr<const cluster::ClusterKey> key;  // cluster.key_file's, in cluster mode
  // transport with every message sealed (cluster/sealed_transport.h): what the peer tier uses.
  std::unique_ptr<cluster::SealedTransport> sealed;
  std::string dataset;  // absolute, real path of the dataset directory
  std::string mount;    // absolute, real path of the mountpoint
  std::string control;  // where the control files are mounted (ControlMountPath)
};

// Reads the config (the file and cl's -o keys), decides cluster mode (a supervising parent
// returns here with its child's exit status: see Supervise), joins the launcher's ranks,
// detaches a killed daemon's stale mount at the mountpoint, and resolves the paths. cl's
// mountpoint gets its "{rank}", and foreground is forced under a launcher. An int: the exit
// status to return from main (the reason printed).
std::variant<Start, int> PrepareStart(CommandLine& cl);

}  // namespace clairfs
