/* cli_create.c — lcrun create, start, stop, rm, pause, resume. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

static const char create_help[] =
	"usage: lcrun create [RUN OPTIONS] [--name NAME] [--ttl SECS] [--idle-timeout SECS]\n"
	"\n"
	"Start a sandbox with no command and print its id; run commands in it with\n"
	"lcrun exec.  Takes the options of lcrun run (see lcrun run --help), and:\n"
	"  --ttl SECS            remove the sandbox SECS after its creation\n"
	"  --idle-timeout SECS   stop it after SECS with no exec running in it\n";

int lc_cmd_create(int argc, char **argv)
{
	lc_spec_t *s = lc_spec_new();
	int idx = lc_cli_parse_run(argc, argv, s, NULL, false);
	if (idx == -1000) {
		fputs(create_help, stdout);
		lc_spec_free(s);
		return 0;
	}
	if (idx < 0) {
		lc_spec_free(s);
		return -idx;
	}
	if (idx < argc) {
		lc_spec_free(s);
		return lc_cli_usage_error("create takes no command (run one with lcrun exec ID -- CMD)");
	}
	if (s->timeout) {
		lc_spec_free(s);
		return lc_cli_usage_error("create: --timeout applies to commands; use --ttl or --idle-timeout");
	}
	char id[LC_ID_LEN + 1];
	lc_error_t *err = NULL;
	int r = lc_sandbox_create(s, id, &err);
	lc_spec_free(s);
	if (r < 0)
		return lc_cli_fail(err);
	printf("%s\n", id);
	return 0;
}

/* VERB [-f] ID... for the verbs that only take ids. */
static int each_id(int argc, char **argv, const char *usage, bool allow_force,
		   int (*fn)(const char *id, bool force, lc_error_t **err))
{
	bool force = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: %s\n", usage);
			return 0;
		}
		if (allow_force && (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force")))
			force = true;
		else
			return lc_cli_usage_error("%s: unknown option '%s' (usage: %s)", argv[0], argv[i], usage);
	}
	if (i >= argc)
		return lc_cli_usage_error("%s: no sandbox given (usage: %s)", argv[0], usage);
	int code = 0;
	for (; i < argc; i++) {
		lc_error_t *err = NULL;
		if (fn(argv[i], force, &err) < 0)
			code = lc_cli_fail(err);
	}
	return code;
}

static int do_start(const char *id, bool f, lc_error_t **err) { (void)f; return lc_sandbox_start(id, err); }
static int do_stop(const char *id, bool f, lc_error_t **err) { (void)f; return lc_sandbox_stop(id, err); }
static int do_rm(const char *id, bool f, lc_error_t **err) { return lc_sandbox_remove(id, f, err); }
static int do_pause(const char *id, bool f, lc_error_t **err) { (void)f; return lc_sandbox_pause(id, err); }
static int do_resume(const char *id, bool f, lc_error_t **err) { (void)f; return lc_sandbox_resume(id, err); }

int lc_cmd_start(int argc, char **argv)
{
	return each_id(argc, argv, "lcrun start ID...", false, do_start);
}

int lc_cmd_stop(int argc, char **argv)
{
	return each_id(argc, argv, "lcrun stop ID...", false, do_stop);
}

int lc_cmd_rm(int argc, char **argv)
{
	return each_id(argc, argv, "lcrun rm [-f] ID...", true, do_rm);
}

int lc_cmd_pause(int argc, char **argv)
{
	return each_id(argc, argv, "lcrun pause ID...", false, do_pause);
}

int lc_cmd_resume(int argc, char **argv)
{
	return each_id(argc, argv, "lcrun resume ID...", false, do_resume);
}
