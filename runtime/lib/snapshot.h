/* snapshot.h — what lcrun gc asks of snapshot.c.  Not part of the stable API. */
#ifndef LC_SNAPSHOT_H
#define LC_SNAPSHOT_H

#include <jansson.h>

/* A running sandbox left frozen by a snapshot that was killed (its cgroup
 * frozen, its state not "paused", no snapshot holding its freeze.lock):
 * thaw it; 1 when it did.  The caller holds the state lock. */
int lc_sandbox_thaw_left(const char *id, json_t *st);

#endif
