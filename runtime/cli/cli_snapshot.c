/* cli_snapshot.c — lcrun snapshot ID NAME. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "image.h"

int lc_cmd_snapshot(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: lcrun snapshot ID|NAME IMAGE\n\n"
		       "Freeze the sandbox, write its changes as a new layer on top of the\n"
		       "image it runs on, thaw it, and record the result as IMAGE.\n");
		return 0;
	}
	if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-')
		return lc_cli_usage_error("usage: lcrun snapshot ID|NAME IMAGE");
	lc_error_t *err = NULL;
	if (lc_sandbox_snapshot(argv[1], argv[2], &err) < 0)
		return lc_cli_fail(err);
	printf("%s\n", argv[2]);
	return 0;
}
