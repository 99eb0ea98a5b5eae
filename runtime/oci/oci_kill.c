/* oci_kill.c — lcrun-oci kill [--all] ID [SIGNAL] (names or numbers; TERM by default). */
#include <signal.h>
#include <string.h>

#include "oci.h"

int oci_cmd_kill(int argc, char **argv)
{
	bool all = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "--all") || !strcmp(argv[i], "-a"))
			all = true;
		else
			return oci_failf("kill: unknown option '%s'", argv[i]);
	}
	if (i >= argc || argc - i > 2)
		return oci_failf("usage: lcrun-oci kill [--all] ID [SIGNAL]");
	const char *id = argv[i];
	int sig = SIGTERM;
	if (i + 1 < argc && (sig = oci_signal_parse(argv[i + 1])) < 0)
		return oci_failf("kill: unknown signal '%s'", argv[i + 1]);
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(id, &c, &err) < 0)
		return oci_fail(err);
	int r = oci_signal(&c, sig, all, &err);
	oci_container_clear(&c);
	return r < 0 ? oci_fail(err) : 0;
}
