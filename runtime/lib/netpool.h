/* netpool.h — the address pool and its leases (internal to liblcrun).
 *
 * The pool (config key "net_pool", default 10.200.0.0/16) is carved into
 * /30s: slot i is base + 4i, the host side takes .1 and the sandbox .2.
 * IPv6 ("net_pool6", default fd6c:6372::/48) is carved into /64s with the
 * same slot number (host ::1, sandbox ::2).  A lease is a file
 * lc_run_dir()/net/ID.json, created under an flock on
 * lc_run_dir()/net/pool.lock, so concurrent lcrun processes never share a
 * slot. */
#ifndef LC_NETPOOL_H
#define LC_NETPOOL_H

#include <arpa/inet.h>
#include <net/if.h>
#include <stdbool.h>
#include <sys/types.h>

#include "lcrun.h"

#define LC_NET_POOL4_DEFAULT "10.200.0.0/16"
#define LC_NET_POOL6_DEFAULT "fd6c:6372::/48"
#define LC_CIDR_STRLEN (INET6_ADDRSTRLEN + 5)

typedef struct lc_net_pool {
	char pool4[LC_CIDR_STRLEN]; /* "10.200.0.0/16" */
	char pool6[LC_CIDR_STRLEN]; /* "" when IPv6 is off */
} lc_net_pool_t;

typedef struct lc_lease {
	char id[LC_ID_LEN + 1];
	unsigned slot;
	char veth[IF_NAMESIZE];
	char mode[8];
	char policy[128];
	char addr4[INET_ADDRSTRLEN], gw4[INET_ADDRSTRLEN];
	int prefix4;
	char addr6[INET6_ADDRSTRLEN], gw6[INET6_ADDRSTRLEN]; /* "" without IPv6 */
	int prefix6;
	lc_net_pool_t pool;
	pid_t pid;                    /* the process that took the lease */
	unsigned long long starttime; /* its start time (/proc/PID/stat) */
} lc_lease_t;

/* Read "net_pool"/"net_pool6" from $LCRUN_CONFIG, else
 * $LCRUN_ETC_DIR/lcrun.json (default /etc/lcrun/lcrun.json); a missing file
 * means the defaults. */
int lc_netpool_config(lc_net_pool_t *pool, lc_error_t **err);
/* Check a pool: v4 prefix <= 30, v6 prefix <= 64 (or "" for none). */
int lc_netpool_check(const lc_net_pool_t *pool, lc_error_t **err);
/* Directory of leases (created on demand). */
char *lc_netpool_dir(void);
/* Hold the pool lock (returns an fd to close, or -1). */
int lc_netpool_lock(lc_error_t **err);
/* In a child forked from a threaded process (lcd): close every fd on the
 * pool's lock file.  Another thread may hold the lock through it, and the
 * child would keep it held (a sandbox's staging process, while its parent
 * waits for the lock to set up its network: a deadlock). */
void lc_netpool_drop_inherited(void);
/* Take the next free slot (round robin) for id; LC_EXIT_BUSY when
 * exhausted or when id already has a lease. */
int lc_netpool_alloc(const char *id, const lc_net_pool_t *pool, const char *mode,
		     const char *policy, lc_lease_t *out, lc_error_t **err);
/* A lease this process took in advance for id (lcd, which must know a
 * task's address before lc_run() sets up its network), handed to the
 * network set-up instead of a new one: 0 and *out when id's lease was
 * taken by this very process and no veth of id exists yet; else
 * LC_EXIT_BUSY, as lc_netpool_alloc says for a lease that exists. */
int lc_netpool_adopt(const char *id, lc_lease_t *out, lc_error_t **err);
/* The lease process from took for id, with nothing made with it yet, made
 * this process's (lcd's runner: lcd's worker leased the address, the
 * runner's child makes the sandbox); LC_EXIT_BUSY otherwise. */
int lc_netpool_take_over(const char *id, pid_t from, lc_error_t **err);
/* Read a lease; 0 when found, 1 when there is none, -1 on error. */
int lc_netpool_read(const char *id, lc_lease_t *out, lc_error_t **err);
int lc_netpool_release(const char *id, lc_error_t **err);
/* Ids that hold a lease (NULL-terminated vector). */
int lc_netpool_list(char ***ids, lc_error_t **err);
/* True when the process that took the lease is still running. */
bool lc_lease_owner_alive(const lc_lease_t *lease);
/* Parse "ADDR/PREFIX" (or a bare address: /32, /128); -1 on bad input with
 * a reason in why. */
int lc_cidr_parse(const char *s, int *family, unsigned char addr[16], int *prefix,
		  char *why, size_t whylen);
bool lc_is_sandbox_id(const char *s);

/* Directory of site configuration: $LCRUN_ETC_DIR or /etc/lcrun. */
const char *lc_net_etc_dir(void);

#endif
