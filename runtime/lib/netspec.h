/* netspec.h — a sandbox's network as it is described (netspec.c): the
 * --net, --allow and --add-host values, a net spec's rules and hosts, and
 * named policies.  Parsing only; net.h sets a network up. */
#ifndef LC_NETSPEC_H
#define LC_NETSPEC_H

#include <jansson.h>

#include "lcrun.h"

/* The ports one rule may name. */
#define LC_NET_MAX_PORTS (sizeof(((lc_net_rule_t *)0)->ports) / sizeof(unsigned short))

/* "CIDR[:PORT[,PORT...]]", IPv6 as "[2001:db8::/32]:443" or bare
 * "2001:db8::/32"; an address without a prefix is a single host.
 * Bad input: LC_EXIT_USAGE. */
int lc_net_parse_allow(const char *arg, lc_net_rule_t *out, lc_error_t **err);
/* "NAME:IP" (IP v4 or v6, optionally in brackets).  out->name/ip are
 * allocated; free them (or the spec) after use. */
int lc_net_parse_host(const char *arg, lc_host_entry_t *out, lc_error_t **err);
/* Parse one --allow / --add-host value and append it to spec. */
int lc_net_spec_add_allow(lc_net_spec_t *spec, const char *arg, lc_error_t **err);
int lc_net_spec_add_host(lc_net_spec_t *spec, const char *arg, lc_error_t **err);
/* Parse "none", "allow" or "open". */
int lc_net_parse_mode(const char *arg, lc_net_mode_t *out, lc_error_t **err);
const char *lc_net_mode_name(lc_net_mode_t mode);
/* Format a rule as --allow takes it (buf of at least 256 bytes). */
void lc_net_rule_format(const lc_net_rule_t *r, char *buf, size_t len);

/* Load a named policy (site file in $LCRUN_ETC_DIR/policies/net/ first, then
 * lc_policy_dir()/net/) or a path, and merge it into spec: the policy's mode
 * applies when spec->mode is LC_NET_NONE, its rules are added to spec's,
 * its hosts are added unless spec names them already, its dns applies when
 * spec has none.  Unknown name: LC_EXIT_UNKNOWN; bad content:
 * LC_EXIT_INVALID with the JSON path of the bad field. */
int lc_net_policy_load(const char *name_or_path, lc_net_spec_t *spec, lc_error_t **err);
/* Validate a policy document (exposed for tests and `lcrun` checks); fills
 * spec from it (spec must be zeroed). */
int lc_net_policy_from_json(json_t *doc, const char *source, lc_net_spec_t *spec, lc_error_t **err);

/* Frees the contents of spec and zeroes it. */
void lc_net_spec_clear(lc_net_spec_t *spec);
/* Rules, hosts and dns well-formed (what lc_net_validate checks before
 * anything of the host's). */
int lc_net_spec_check(const lc_net_spec_t *spec, lc_error_t **err);

#endif
