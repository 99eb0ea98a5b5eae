/* cli_seccomp.c — lcrun seccomp check FILE…: parse and compile profiles
 * without starting a sandbox or touching the cache. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "seccomp.h"

int lc_cmd_seccomp(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: lcrun seccomp check FILE…\n"
		       "Parse and compile seccomp profiles (OCI/moby JSON); print the BPF size of each.\n");
		return 0;
	}
	if (argc < 3 || strcmp(argv[1], "check"))
		return lc_cli_usage_error("usage: lcrun seccomp check FILE… (see lcrun seccomp --help)");
	for (int i = 2; i < argc; i++) {
		lc_seccomp_prog_t prog;
		lc_error_t *err = NULL;
		if (lc_seccomp_compile_file(argv[i], &prog, &err) < 0)
			return lc_cli_fail(err);
		printf("%s: ok, %u BPF instructions\n", argv[i], prog.len);
		lc_seccomp_prog_free(&prog);
	}
	return 0;
}
