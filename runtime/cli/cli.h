/* cli.h — the lcrun command line: one file per verb. */
#ifndef LC_CLI_H
#define LC_CLI_H

#include "lcrun.h"

/* Each verb takes argv after the verb name (argv[0] is the verb). */
typedef int (*lc_verb_fn)(int argc, char **argv);

int lc_cli_fail(lc_error_t *err); /* print once, free, return its exit code */
int lc_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cli_run.c: the options run, create and fork share.  Returns the index of
 * the command in argv, -1000 for --help, or minus an exit code. */
int lc_cli_parse_run(int argc, char **argv, lc_spec_t *s, char **result_path, bool need_cmd);
/* cli_net.c: --net (which 0), --allow (1), --add-host (2), --dns (3), --net-policy (4). */
int lc_cli_net_option(lc_spec_t *s, int which, const char *arg, lc_error_t **err);
int lc_cli_net_finish(lc_spec_t *s, lc_error_t **err);

int lc_cmd_run(int argc, char **argv);
/* long-lived sandboxes: cli_create.c, cli_exec.c, cli_cp.c, cli_ps.c */
int lc_cmd_create(int argc, char **argv);
int lc_cmd_start(int argc, char **argv);
int lc_cmd_stop(int argc, char **argv);
int lc_cmd_rm(int argc, char **argv);
int lc_cmd_pause(int argc, char **argv);
int lc_cmd_resume(int argc, char **argv);
int lc_cmd_exec(int argc, char **argv);
int lc_cmd_cp(int argc, char **argv);
int lc_cmd_ps(int argc, char **argv);
int lc_cmd_inspect(int argc, char **argv);
int lc_cmd_logs(int argc, char **argv);
int lc_cmd_gc(int argc, char **argv);
int lc_cmd_image(int argc, char **argv);
int lc_cmd_snapshot(int argc, char **argv);
int lc_cmd_fork(int argc, char **argv);

#endif
