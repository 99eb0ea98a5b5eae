/* cli_net.c — the network options of run/create. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "net.h"
#include "util.h"

int lc_cli_net_option(lc_spec_t *s, int which, const char *arg, lc_error_t **err)
{
	switch (which) {
	case 0:
		return lc_net_parse_mode(arg, &s->net.mode, err);
	case 1:
		return lc_net_spec_add_allow(&s->net, arg, err);
	case 2:
		return lc_net_spec_add_host(&s->net, arg, err);
	case 3:
		free(s->net.dns);
		s->net.dns = strdup(arg);
		return 0;
	default:
		return lc_net_policy_load(arg, &s->net, err);
	}
}
