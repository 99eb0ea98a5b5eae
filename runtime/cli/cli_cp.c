/* cli_cp.c — lcrun cp SRC DST (ID:/path on one side; - for a tar stream) */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lc_cmd_cp(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: lcrun cp SRC DST\n"
		     "\n"
		     "Copy files between the host and a running sandbox; one side is ID:/PATH\n"
		     "(id or name).  A directory is copied with its contents; DST that is an\n"
		     "existing directory receives SRC inside it.  - as SRC reads a tar stream\n"
		     "from stdin (extracted into the directory DST); - as DST writes one to stdout.");
		return 0;
	}
	int i = 1;
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (argc - i != 2)
		return lc_cli_usage_error("cp: expected SRC DST (lcrun cp ID:/path host-path, or the other way)");
	lc_error_t *err = NULL;
	if (lc_sandbox_copy(argv[i], argv[i + 1], &err) < 0)
		return lc_cli_fail(err);
	return 0;
}
