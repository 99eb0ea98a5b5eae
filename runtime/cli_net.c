/* cli_net.c — the network options of run/create. */
#include <string.h>

#include "cli.h"
#include "util.h"

int lc_cli_net_option(lc_spec_t *s, int which, const char *arg, lc_error_t **err)
{
	if (which == 0) {
		if (!strcmp(arg, "none")) {
			s->net.mode = LC_NET_NONE;
			return 0;
		}
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--net '%s': expected none, allow or open", arg);
	}
	return lc_error_set(err, LC_EXIT_USAGE, 0, "network policies are not built into this lcrun");
}
