/* netspare.h — spare network namespaces, made after a run for the next
 * (internal to liblcrun).
 *
 * A network namespace costs 0.76 ms to make on this kind of machine, on
 * the staging process's way to pid 1.  They are made ahead, at most
 * LC_NETSPARE_CAP, each with only its loopback, up, and no process ever
 * in it, by their holder: a process that holds their fds, listens on
 * lc_run_dir()/netspare.sock (root's only) and ends when it was not asked
 * for LC_NETSPARE_IDLE_S seconds, or when its socket is gone; a spare
 * LC_NETSPARE_MAX_AGE_S old goes.  The remover of a run (lcrun-rm, after
 * `run` returned) asks it to make up to the cap; finding none, it becomes
 * the holder.  A staging process claims one (connect, one fd back)
 * instead of unshare(CLONE_NEWNET); none there, it makes its own. */
#ifndef LC_NETSPARE_H
#define LC_NETSPARE_H

#include <stdbool.h>

#include "lcrun.h"

#define LC_NETSPARE_CAP 4
#define LC_NETSPARE_IDLE_S 10
#define LC_NETSPARE_MAX_AGE_S 60

typedef struct {
	bool hold; /* no holder answered: become it (lc_netspare_hold) */
} lc_netspare_t;

/* A spare network namespace's fd, or -1 (none kept, no holder, not root). */
int lc_netspare_claim(void);
/* Have the holder make spares up to the cap (it answers when they are
 * made); no holder: note it in ns. */
void lc_netspare_refill(lc_netspare_t *ns);
/* Where refill found no holder: become it (unless another just did),
 * make the spares and serve them until idle.  Returns when done. */
void lc_netspare_hold(const lc_netspare_t *ns);
/* Make the holder let its spares go and end: 1 it did, 0 there was none. */
int lc_netspare_release(void);

#endif
