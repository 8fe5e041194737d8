#include "daemon/command_line.h"

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <string_view>

namespace clairfs {
namespace {

struct OptContext {
  CommandLine* cl;
  std::string error;  // the first bad option, for the usage message
};

// fuse_opt_parse calls this for each -o option, split at unescaped commas and unescaped.
// Returns 0 to take the option out (ours), 1 to keep it for libfuse, -1 on a bad one.
int TakeOption(void* data, const char* arg, int key, fuse_args* /*outargs*/) {
  auto* ctx = static_cast<OptContext*>(data);
  if (key != FUSE_OPT_KEY_OPT) return 1;
  const std::string_view opt(arg);
  const size_t eq = opt.find('=');
  const std::string_view name = opt.substr(0, eq);
  const std::string value = eq == std::string_view::npos ? "" : std::string(opt.substr(eq + 1));
  const auto need_value = [&] {
    ctx->error = "-o " + std::string(name) + " needs a value: -o " + std::string(name) + "=...";
    return -1;
  };
  // x-*: fstab and systemd annotations (x-systemd.automount), not options of any file system.
  if (name.substr(0, 2) == "x-") return 0;
  if (name == "config") {
    if (value.empty()) return need_value();
    if (!ctx->cl->config_path.empty() && ctx->cl->config_path != value) {
      ctx->error = "two config files named: '" + ctx->cl->config_path + "' and '" + value + "'";
      return -1;
    }
    ctx->cl->config_path = value;
    return 0;
  }
  if (name == "log_level" || name == "log_file") {
    if (eq == std::string_view::npos) return need_value();
    ctx->cl->overrides.push_back({name == "log_level" ? "log.level" : "log.file", value});
    return 0;
  }
  if (name.find('.') != std::string_view::npos) {  // a config key: cache.staging.capacity=1GiB
    if (eq == std::string_view::npos) return need_value();
    ctx->cl->overrides.push_back({std::string(name), value});
    return 0;
  }
  if (name == "ro") {
    // The dataset's mount is read-only whatever the options say (daemon/serve.cc), and
    // .clairfs/manifest lives on the control files' own mount, which stays writable.
    ctx->cl->notes.push_back(
        "-o ro: the dataset is always mounted read-only; .clairfs/manifest stays writable on "
        "the control files' own mount");
    return 0;
  }
  return 1;  // a FUSE or generic mount option: libfuse decides
}

// Splits the -o values into ours and libfuse's (cl->fuse_options). Empty on success, else why.
std::string SortOptions(const std::vector<std::string>& raw, CommandLine* cl) {
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  std::string error;
  if (fuse_opt_add_arg(&args, "clairfs") != 0) return "out of memory";
  for (const auto& o : raw) {
    if (fuse_opt_add_arg(&args, "-o") != 0 || fuse_opt_add_arg(&args, o.c_str()) != 0) {
      fuse_opt_free_args(&args);
      return "out of memory";
    }
  }
  static const fuse_opt kNone[] = {FUSE_OPT_END};
  OptContext ctx{cl, ""};
  if (fuse_opt_parse(&args, &ctx, kNone, TakeOption) != 0) {
    error = ctx.error.empty() ? "invalid -o options" : ctx.error;
  } else {
    // What is left: argv[0], then "-o" and the options kept, escaped again by fuse_opt.
    for (int i = 1; i + 1 < args.argc; ++i) {
      if (std::string_view(args.argv[i]) == "-o") {
        if (!cl->fuse_options.empty()) cl->fuse_options += ',';
        cl->fuse_options += args.argv[++i];
      }
    }
  }
  fuse_opt_free_args(&args);
  return error;
}

}  // namespace

std::optional<CommandLine> ParseCommandLine(int argc, char** argv, ExitCode* exit) {
  CommandLine cl;
  std::vector<std::string> raw_opts;
  CLI::App app{
      "clairfs: a read-only FUSE mount of a dataset that prefetches in the order the "
      "training job will read it (.clairfs/manifest)."};
  app.add_option("DATASET", cl.dataset, "the dataset directory")->required();
  app.add_option("MOUNTPOINT", cl.mountpoint, "where to mount (default: over DATASET itself)");
  app.add_option("-c,--config", cl.config_path,
                 std::string("YAML configuration file (default: ") + kDefaultConfigPath +
                     " when it exists; clairfs.yaml(5))");
  app.add_flag("-f,--foreground", cl.foreground, "stay in the foreground and log to stderr");
  // One value per -o, so that "-o allow_other DATASET" leaves DATASET positional.
  app.add_option("-o", raw_opts,
                 "mount options, comma separated, repeatable, before or after the paths: FUSE "
                 "options (allow_other, auto_unmount, ...), config=FILE, log_level=LEVEL, and "
                 "any config key as section.key=value (cache.staging.capacity=1GiB)")
      ->allow_extra_args(false);
  app.add_flag("-d,--debug", cl.debug, "print every FUSE request (implies -f)");
  app.add_flag("--cluster", cl.cluster,
               "under an MPI launcher (mpiexec -n N clairfs --cluster ...): one daemon per rank, "
               "sharing their caches; also cluster.enabled. Without it an inherited MPI "
               "environment is ignored");
  app.set_version_flag("-V,--version", std::string("clairfs ") + CLAIRFS_VERSION);
  app.footer(
      "Exit status: 0 stopped cleanly, 1 a failure while serving, 32 mount failed, 64 bad "
      "usage, 66 dataset or mountpoint unusable, 75 SSD cache in use by another clairfs, 78 bad "
      "configuration. See clairfs(1).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit = app.exit(e) == 0 ? ExitCode::kOk : ExitCode::kUsage;
    return std::nullopt;
  }
  if (cl.debug) cl.foreground = true;
  if (std::string error = SortOptions(raw_opts, &cl); !error.empty()) {
    std::fprintf(stderr, "clairfs: %s\nRun with --help for more information.\n", error.c_str());
    *exit = ExitCode::kUsage;
    return std::nullopt;
  }
  *exit = ExitCode::kOk;
  return cl;
}

std::string ConfigPathToRead(const CommandLine& cl) {
  if (!cl.config_path.empty()) return cl.config_path;
  struct stat st;
  if (stat(kDefaultConfigPath, &st) != 0 && errno == ENOENT) return "";
  return kDefaultConfigPath;  // present (or unreadable: LoadConfig says why)
}

}  // namespace clairfs
