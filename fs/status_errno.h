// The one place a Status becomes an errno for the kernel.
#pragma once

#include "cache/base/status.h"

namespace clairfs {

// A positive errno for a failed Status (0 for ok). An errno carried from a system call wins;
// otherwise the code decides.
int ToErrno(const Status& s);

}  // namespace clairfs
