// The daemon's command line as people and mount(8) type it: `clairfs [options] DATASET
// [MOUNTPOINT]`, options before or after the positional arguments, `-o` options as any FUSE
// file system takes them (fstab, `mount -t fuse.clairfs`), config keys among them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "conf/config.h"

namespace clairfs {

// Why the daemon exited, for scripts, systemd and mount(8). The start-up failures follow
// sysexits.h where one fits; 32 is mount(8)'s own code for a failed mount.
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,       // after the mount: a stop that could not finish, a fault while serving
  kMountFailed = 32,  // the mountpoint is busy (a running clairfs) or the kernel refused
  kUsage = 64,        // EX_USAGE: bad arguments or FUSE options
  kNoInput = 66,      // EX_NOINPUT: the dataset or the mountpoint is missing or unusable
  kCacheLocked = 75,  // EX_TEMPFAIL: an SSD cache directory is in use by another clairfs
  kConfig = 78,       // EX_CONFIG: config file unreadable, a bad key or value, a capacity
                      // the machine cannot give, an unopenable log file
};

inline constexpr const char* kDefaultConfigPath = "/etc/clairfs/clairfs.yaml";

struct CommandLine {
  std::string dataset;
  std::string mountpoint;   // empty: over the dataset itself
  std::string config_path;  // -c FILE or -o config=FILE; empty: none named
  bool foreground = false;  // -f (or -d)
  bool debug = false;       // -d
  bool cluster = false;     // --cluster: join the ranks of an MPI launcher
  // -o SECTION.KEY=VALUE (a dot in the name: a config key), and -o log_level=LEVEL, in the
  // order given; applied over the config file.
  std::vector<ConfigOverride> overrides;
  // Every other -o option, for libfuse: comma separated, each escaped as fuse_opt expects.
  std::string fuse_options;
  // Options accepted but not passed on, each with the reason, for the log once it is set up.
  std::vector<std::string> notes;
};

// Parses argv. --help and --version print and yield nullopt with *exit = kOk; an error prints
// the reason and the usage to stderr and yields nullopt with *exit = kUsage.
std::optional<CommandLine> ParseCommandLine(int argc, char** argv, ExitCode* exit);

// The config file to read: the one named, else kDefaultConfigPath when it exists, else none
// (the built-in defaults).
std::string ConfigPathToRead(const CommandLine& cl);

}  // namespace clairfs
