// Supervise: run the rest of main in a child process watched by this one.
#pragma once

namespace clairfs {

// Forks. In the child returns false and main goes on; the child gets SIGTERM if the parent
// dies. The parent forwards SIGINT, SIGTERM and SIGHUP to the child, waits for it and returns
// true with *exit_code set to the child's exit status, or 128 + the signal that killed it.
// The wait has a deadline once a SIGINT or SIGTERM was forwarded: a child that has not exited
// 30 s later is killed (SIGKILL), and the parent returns 1 if even that does not end it.
//
// Why: under MPICH's mpiexec (hydra, even with -disable-auto-cleanup) a rank that dies from a
// signal can make the launcher kill every other rank. A parent that turns the death into an
// ordinary exit status keeps the other daemons serving. The parent ignores SIGUSR1, which
// hydra sends to the survivors when a rank ends.
bool Supervise(int* exit_code);

}  // namespace clairfs
