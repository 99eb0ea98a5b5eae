/* lifecycle.h — long-lived sandboxes' processes and state (lifecycle.c),
 * for exec.c, copy.c, gc.c and lcrun-oci.  Not part of the stable API. */
#ifndef LC_LIFECYCLE_H
#define LC_LIFECYCLE_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcrun.h"

/* Remove what a sandbox leaves on the host: cgroup, sandbox dir, state and
 * name (the caller holds the lock or the sandbox is known dead). */
void lc_sandbox_purge(const char *id, json_t *st);

#endif
