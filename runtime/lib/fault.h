/* fault.h — named step boundaries where a test build can kill the process.
 *
 * LC_FAULT("snapshot-layer-written") marks a point between two steps whose
 * order matters after a crash (a file written but not yet renamed, a row
 * committed but its sandbox not yet made).  In a build configured with
 * --enable-fault-injection, LCRUN_FAULT=STEP[:N] makes the process that
 * passes STEP for the Nth time (default 1) write "lcrun: fault injected at
 * STEP" on stderr and kill itself with SIGKILL, as a kill -9 or an OOM kill
 * would; LCRUN_FAULT_LOG=FILE appends "STEP" for every step passed (and
 * "STEP killed" before the kill), so a test can list the steps an
 * operation passes and learn that a helper whose stderr goes nowhere died
 * where it should.  tests/faults/ does both.
 *
 * In any other build LC_FAULT() is nothing at all: no call, no getenv. */
#ifndef LC_FAULT_H
#define LC_FAULT_H

#ifdef LC_FAULT_INJECTION
void lc_fault_at(const char *step);
#define LC_FAULT(step) lc_fault_at(step)
#define LC_FAULT_BUILD 1
#else
#define LC_FAULT(step) ((void)0)
#define LC_FAULT_BUILD 0
#endif

#endif
