/* cli.h — the lcrun command line: one file per verb. */
#ifndef LC_CLI_H
#define LC_CLI_H

#include "lcrun.h"

/* Each verb takes argv after the verb name (argv[0] is the verb). */
typedef int (*lc_verb_fn)(int argc, char **argv);

int lc_cli_fail(lc_error_t *err); /* print once, free, return its exit code */
int lc_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int lc_cmd_image(int argc, char **argv);

#endif
