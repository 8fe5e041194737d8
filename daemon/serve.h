// Serving: mounts what the composition root built (daemon/compose.h), daemonizes, starts the
// threads, runs the FUSE loop, and stops in the reverse order (docs/architecture.md,
// "Threads and fetching": start-up order). Under a stop that overruns its grace the mounts
// are detached and the process exits (daemon/lifecycle.h).
#pragma once

#include "daemon/command_line.h"
#include "daemon/compose.h"
#include "daemon/start.h"

namespace clairfs {

// Mounts the control files, then the dataset at start.mount; daemonizes unless
// cl.foreground; starts the threads and serves until an unmount or a stop signal; stops.
// Returns the exit status (0 once served and stopped cleanly; a start that fails prints the
// reason and returns its ExitCode). May _exit instead, when I/O threads are still stuck in
// the dataset's file system after the stop.
int Serve(DaemonParts& parts, Start& start, const CommandLine& cl, const char* argv0);

}  // namespace clairfs
