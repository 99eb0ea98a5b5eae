/* cli_net.c — the network options of run/create. */
#include <arpa/inet.h>
#include <stdio.h>
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

/* After all options: check --dns, and under --net open let the host's own
 * resolvers through on port 53 (open mode denies private addresses, where
 * resolvers usually live); loopback resolvers cannot be reached from a
 * sandbox and are left out. */
int lc_cli_net_finish(lc_spec_t *s, lc_error_t **err)
{
	unsigned char buf[16];
	if (s->net.dns && inet_pton(AF_INET, s->net.dns, buf) != 1 && inet_pton(AF_INET6, s->net.dns, buf) != 1)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--dns '%s': expected an IPv4 or IPv6 address", s->net.dns);
	if (s->net.mode == LC_NET_NONE && (s->net.dns || s->net.n_allow))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "%s needs --net allow or --net open",
				    s->net.dns ? "--dns" : "--allow");
	if (s->net.mode != LC_NET_OPEN || s->net.dns)
		return 0;
	_cleanup_free_ char *conf = NULL;
	if (lc_read_file("/etc/resolv.conf", &conf, NULL, NULL) < 0)
		return 0;
	for (char *line = strtok(conf, "\n"); line; line = strtok(NULL, "\n")) {
		char ip[64];
		if (sscanf(line, " nameserver %63s", ip) != 1)
			continue;
		bool v6 = strchr(ip, ':') != NULL;
		if ((!v6 && inet_pton(AF_INET, ip, buf) != 1) || (v6 && inet_pton(AF_INET6, ip, buf) != 1))
			continue;
		if ((!v6 && buf[0] == 127) || (v6 && !memcmp(buf, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16)))
			continue;
		_cleanup_free_ char *rule = v6 ? lc_strdup_printf("[%s/128]:53", ip) : lc_strdup_printf("%s/32:53", ip);
		if (lc_net_spec_add_allow(&s->net, rule, err) < 0)
			return -1;
	}
	return 0;
}
