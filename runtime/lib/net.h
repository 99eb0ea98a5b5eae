/* net.h — a sandbox's network: (its description and named policies are
 * netspec.h's) the veth pair with its addresses and routes, the per-sandbox
 * firewall and the address pool.
 *
 * The sandbox's network namespace belongs to the host's user namespace, so
 * root inside the sandbox cannot change what lc_net_setup() made. */
#ifndef LC_NET_H
#define LC_NET_H

#include <stdbool.h>
#include <jansson.h>

#include "lcrun.h"
#include "netspec.h"

/* Check before anything starts: rules and hosts well-formed, and for a mode
 * other than none that the caller is root and the host has nftables. */
int lc_net_validate(const lc_net_spec_t *spec, lc_error_t **err);

/* Bring up lo in the calling process's network namespace. */
int lc_loopback_up(void);
/* Parent side, host root, host netns; netns_fd refers to the sandbox's
 * network namespace (owned by the host user namespace).  LC_NET_NONE: does
 * nothing.  Otherwise takes a lease from the pool, creates the veth pair
 * (host "lc<id>", sandbox "eth0"), addresses, routes, NAT and the firewall
 * chain.  On error everything it made is removed again.  (The test
 * harness's way; lcrun's is the two halves below.) */
int lc_net_setup(const char *id, const lc_net_spec_t *spec, int netns_fd, lc_error_t **err);
/* The same in two halves.  LC_NET_NONE: nothing to do.
 * Otherwise the network is made in two halves, for a caller with
 * something to do in between: lc_net_prepare takes a lease from the
 * pool and adds the firewall chains and NAT (nothing in the sandbox's
 * namespace: a run does it while the staging process makes it) and gives
 * the lease (*out, the caller frees it; NULL for LC_NET_NONE);
 * lc_net_attach creates the veth pair into netns_fd (the sandbox's
 * network namespace, owned by the host user namespace: host "lc<id>",
 * sandbox "eth0"), addresses and routes.  On error each removes what it
 * made itself (never an interface someone else named so);
 * lc_net_unprepare removes what a prepare made (the chains, the lease)
 * when the attach failed.  After both, lc_net_teardown (or _exited). */
struct lc_lease;
int lc_net_prepare(const char *id, const lc_net_spec_t *spec, struct lc_lease **out, lc_error_t **err);
int lc_net_attach(const char *id, const struct lc_lease *l, int netns_fd, lc_error_t **err);
void lc_net_unprepare(const char *id);
/* Remove the veth, the chains and the lease of a sandbox, in that order
 * (its rules apply as long as its interface exists; its addresses are
 * handed out again only when nothing of it is left).  Idempotent; works
 * from the id alone (after a crash). */
int lc_net_teardown(const char *id, lc_error_t **err);
/* The same once every process of the sandbox is gone (pid 1 reaped).
 * What is left then (the veth pair, which goes with the dying network
 * namespace, the chains, the lease) can no longer carry a packet of the
 * sandbox; from a single-threaded process a background helper
 * ("lcrun-net") takes it over and this returns at once.  The helper waits
 * up to 100 ms for the veth to vanish (then deletes it), removes the
 * chains and releases the lease last, so the slot is not handed out again
 * before it is clean.  At most LC_NET_PENDING_MAX helpers at a time; past
 * that, or from a threaded process, it is done here as lc_net_teardown()
 * does.  gc leaves a remainder alone while its helper lives and collects
 * it if the helper died. */
#define LC_NET_PENDING_MAX 16
/* How long lc_net_setup() waits for the remainder of the same sandbox's
 * last run (a stopped sandbox started again at once). */
#define LC_NET_PENDING_WAIT_MS 5000
int lc_net_teardown_exited(const char *id, lc_error_t **err);
/* Its two halves, for a helper of the caller's own (a run's remover,
 * forked while the command ran, sandbox.c): the pending file for id,
 * taken (flocked, naming id; from a single-threaded process; -1 if none
 * is free), passed to the helper; and the helper's work, the remainder
 * removed and the file emptied (its lock goes with the helper). */
int lc_net_pending_take(const char *id);
int lc_net_remainder(const char *id, int slot);
/* Wait until no helper of lc_net_teardown_exited() is at work (at most
 * timeout_ms: then LC_EXIT_BUSY naming a sandbox still pending). */
int lc_net_wait_pending(int timeout_ms, lc_error_t **err);
/* Load libnl and libnftables now (netlibs.c; otherwise done on first use):
 * before forking a process that will need them from a threaded one. */
int lc_netlibs_load(lc_error_t **err);
/* Remove leftovers (leases, veths, chains) of sandboxes for which is_live()
 * says false, except those whose lease belongs to another lcrun process
 * still running (a sandbox being set up).  Returns the number of sandboxes
 * cleaned, or -1; 0 when not root (only root makes sandbox networks). */
int lc_net_gc(bool (*is_live)(const char *id, void *ud), void *ud, lc_error_t **err);
/* {"mode", "address", "address6", "gateway", "gateway6", "veth",
 * "policy"} from the lease, or NULL when the sandbox has none. */
json_t *lc_net_describe(const char *id);


#endif
