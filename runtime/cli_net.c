/* cli_net.c — the network options of run/create. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "net.h"
#include "util.h"

int lc_cli_net_option(lc_spec_t *s, int which, const char *arg, lc_error_t **err)
{
	lc_net_spec_t *n = &s->net;
	switch (which) {
	case 0:
		return lc_net_parse_mode(arg, &n->mode, err);
	case 1: {
		lc_net_rule_t r;
		if (lc_net_parse_allow(arg, &r, err) < 0)
			return -1;
		lc_net_rule_t *a = realloc(n->allow, (n->n_allow + 1) * sizeof(*a));
		if (!a)
			abort();
		a[n->n_allow++] = r;
		n->allow = a;
		return 0;
	}
	case 2: {
		lc_host_entry_t h;
		if (lc_net_parse_host(arg, &h, err) < 0)
			return -1;
		lc_host_entry_t *a = realloc(n->hosts, (n->n_hosts + 1) * sizeof(*a));
		if (!a)
			abort();
		a[n->n_hosts++] = h;
		n->hosts = a;
		return 0;
	}
	case 3:
		free(n->dns);
		n->dns = strdup(arg);
		return 0;
	default:
		return lc_net_policy_load(arg, n, err);
	}
}
