/* cli_main.c — lcrun VERB …: dispatch to the verb's file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fault.h"
#include "seccomp.h"

int lc_cli_fail(lc_error_t *err)
{
	int code = err ? err->exit_code : LC_EXIT_RUNTIME;
	/* "Too many open files" alone does not say whose limit */
	if (err && err->msg && err->errnum == EMFILE && !strstr(err->msg, "RLIMIT_NOFILE")) {
		char *m = NULL;
		if (asprintf(&m, "%s (lcrun's open files limit, RLIMIT_NOFILE: ulimit -n)", err->msg) >= 0) {
			free(err->msg);
			err->msg = m;
		}
	}
	lc_error_print(err, "lcrun");
	lc_error_free(err);
	return code;
}

int lc_cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("lcrun: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return LC_EXIT_USAGE;
}

static const struct {
	const char *name;
	lc_verb_fn fn;
	const char *help;
} verbs[] = {
	{ "run", lc_cmd_run, "run a command in a new sandbox and wait for it" },
	{ "create", lc_cmd_create, "start a sandbox with no command; print its id" },
	{ "exec", lc_cmd_exec, "run a command in a running sandbox" },
	{ "cp", lc_cmd_cp, "copy files between the host and a sandbox" },
	{ "ps", lc_cmd_ps, "list sandboxes" },
	{ "inspect", lc_cmd_inspect, "show a sandbox's state as JSON" },
	{ "logs", lc_cmd_logs, "show the output of detached execs" },
	{ "pause", lc_cmd_pause, "freeze a sandbox's processes" },
	{ "resume", lc_cmd_resume, "thaw a paused sandbox" },
	{ "stop", lc_cmd_stop, "kill a sandbox's processes, keep its files" },
	{ "start", lc_cmd_start, "start a stopped sandbox again" },
	{ "rm", lc_cmd_rm, "remove a sandbox (-f: even a running one)" },
	{ "gc", lc_cmd_gc, "remove what crashed lcrun processes left behind" },
	{ "image", lc_cmd_image, "manage images: ls, inspect, rm, tag, import, export, prune" },
	{ "snapshot", lc_cmd_snapshot, "save a sandbox's changes as a new image" },
	{ "fork", lc_cmd_fork, "start N sandboxes from one image in parallel" },
	{ "seccomp", lc_cmd_seccomp, "check seccomp profiles (seccomp check FILE...)" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lcrun VERB [OPTIONS] …\n\nverbs:\n");
	for (size_t i = 0; verbs[i].name; i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return LC_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("lcrun %s%s\n", PACKAGE_VERSION, LC_FAULT_BUILD ? " (fault-injection: a test build)" : "");
		return 0;
	}
	for (size_t i = 0; verbs[i].name; i++) {
		if (strcmp(verbs[i].name, argv[1]))
			continue;
		/* Every verb but seccomp reads or writes the store or the
		 * state directory: both must be this user's alone. */
		lc_error_t *err = NULL;
		if (strcmp(argv[1], "seccomp") && (lc_run_dir_hold(&err) < 0 || lc_lib_dir_hold(&err) < 0))
			return lc_cli_fail(err);
		return verbs[i].fn(argc - 1, argv + 1);
	}
	return lc_cli_usage_error("unknown verb '%s' (see lcrun --help)", argv[1]);
}
