// Options of the FUSE adapter. Plain struct; conf/ fills it from YAML.
#pragma once

namespace clairfs {

struct FsOptions {
  int threads = 8;              // most FUSE worker threads serving requests at once
  double entry_timeout = 3600;  // seconds the kernel may cache a name lookup
  double attr_timeout = 3600;   // seconds the kernel may cache attributes
  bool keep_cache = true;       // keep file pages in the page cache across opens
};

}  // namespace clairfs
