/* firewall.h — the host-side nftables rules of sandboxes (internal).
 *
 * One table, `inet lcrun`, holds three base chains (forward, input,
 * postrouting) whose only rules are lookups in verdict maps keyed by
 * interface name, and per sandbox three chains:
 *   out_ID   forward, packets from the sandbox: its allow list (or, under
 *            --net open, everything but the always-denied set); counted drop
 *   in_ID    forward, packets to the sandbox: replies only
 *   host_ID  input, packets from the sandbox to the host itself: replies,
 *            neighbour discovery and the allow list; counted drop
 * A sandbox is added and removed with its map elements and chains in one
 * transaction, so the base chains never change while sandboxes come and go.
 * Rules are built as libnftables JSON with jansson. */
#ifndef LC_FIREWALL_H
#define LC_FIREWALL_H

#include <jansson.h>

#include "lcrun.h"

#define LC_FW_TABLE "lcrun"

typedef struct lc_fw_target {
	const char *id;
	const char *veth;           /* host side interface */
	const char *addr4, *addr6;  /* the sandbox's own addresses (addr6 may be NULL) */
	const char *pool4, *pool6;  /* the address pools: other sandboxes (pool6 may be NULL) */
} lc_fw_target_t;

/* {"nftables": [...]} documents; the caller owns the result.  The
 * skeleton creates the table, its maps and the base chains named in
 * missing (each with its rules). */
enum { LC_FW_FORWARD = 1, LC_FW_INPUT = 2, LC_FW_POSTROUTING = 4, LC_FW_ALL = 7 };
json_t *lc_fw_skeleton_json(unsigned missing);
json_t *lc_fw_sandbox_json(const lc_fw_target_t *t, const lc_net_spec_t *spec);

/* nftables usable by this process (LC_EXIT_PERM without CAP_NET_ADMIN,
 * LC_EXIT_RUNTIME when the host lacks nf_tables). */
int lc_fw_check(lc_error_t **err);
/* Create the table if needed and add the sandbox's chains.  The caller
 * holds the pool lock (it serialises creation of the table). */
int lc_fw_add(const lc_fw_target_t *t, const lc_net_spec_t *spec, lc_error_t **err);
/* Remove whatever exists of a sandbox's chains and map elements. */
int lc_fw_remove(const char *id, lc_error_t **err);
/* Ids that have chains or map elements in the table. */
int lc_fw_list_ids(char ***ids, lc_error_t **err);
/* Packets dropped by the sandbox's counted drop rules; -1 if unknown. */
long long lc_fw_dropped(const char *id);

/* Whether rule r opens public addresses only: none of the ranges --net
 * open always drops (private, loopback, link-local and metadata, carrier
 * NAT, multicast, reserved; unique-local, IPv4-mapped), none of the
 * sandboxes' address pools, no address of the host's own interfaces.
 * Else false and *why names what it reaches.  For allow lists a caller
 * less trusted than the operator gives (lcd's tasks). */
bool lc_net_rule_public(const lc_net_rule_t *r, const char **why);

#endif
