/* cli_exec.c — lcrun exec [-i] [-t] [-d] [OPTIONS] ID -- CMD [ARGS…] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

static const char exec_help[] =
	"usage: lcrun exec [OPTIONS] ID -- CMD [ARGS...]\n"
	"\n"
	"Run CMD in a running sandbox (created with lcrun create) and exit with its status.\n"
	"\n"
	"  -i, --interactive     pass stdin to the command\n"
	"  -t, --tty             give it a terminal (a pty in the sandbox; implies -i)\n"
	"  -d, --detach          start it and return; its output goes to lcrun logs ID\n"
	"  -e, --env K=V         set a variable on top of the sandbox's environment\n"
	"  -w, --workdir DIR     run in DIR (absolute, in the sandbox)\n"
	"  -u, --user UID[:GID]  run as this user instead of the sandbox's\n"
	"  --timeout SECS        kill the command after SECS (exit 124)\n";

static const struct option opts[] = {
	{ "interactive", no_argument, NULL, 'i' },
	{ "tty", no_argument, NULL, 't' },
	{ "detach", no_argument, NULL, 'd' },
	{ "env", required_argument, NULL, 'e' },
	{ "workdir", required_argument, NULL, 'w' },
	{ "user", required_argument, NULL, 'u' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_user(const char *arg, lc_exec_opts_t *o)
{
	char *end;
	errno = 0;
	unsigned long uid = strtoul(arg, &end, 10), gid;
	if (errno || end == arg || (*end && *end != ':') || arg[0] == '-')
		return -1;
	gid = uid;
	if (*end == ':') {
		const char *g = end + 1;
		gid = strtoul(g, &end, 10);
		if (end == g || *end)
			return -1;
	}
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	o->user_set = true;
	return 0;
}

int lc_cmd_exec(int argc, char **argv)
{
	lc_exec_opts_t o;
	memset(&o, 0, sizeof(o));
	o.stdio[0] = o.stdio[1] = o.stdio[2] = -1;
	o.forward_signals = true;
	_cleanup_strv_ char **env = NULL;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+itde:w:u:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i': o.interactive = true; break;
		case 't': o.tty = true; o.interactive = true; break;
		case 'd': o.detach = true; break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return lc_cli_usage_error("--env '%s': expected KEY=VALUE", optarg);
			lc_strv_push(&env, optarg);
			break;
		case 'w': o.workdir = optarg; break;
		case 'u':
			if (parse_user(optarg, &o) < 0)
				return lc_cli_usage_error("--user '%s': expected UID[:GID] (numbers)", optarg);
			break;
		case 'T': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 1 || v > 86400 * 365)
				return lc_cli_usage_error("--timeout '%s': expected a whole number of seconds", optarg);
			o.timeout = (int)v;
			break;
		}
		case 'h':
			fputs(exec_help, stdout);
			return 0;
		default:
			if (optopt && optopt < 256)
				return lc_cli_usage_error("exec: unknown option '-%c' (see lcrun exec --help)", optopt);
			return lc_cli_usage_error("exec: unknown option '%s' (see lcrun exec --help)", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return lc_cli_usage_error("exec: no sandbox given (lcrun exec ID -- CMD)");
	const char *id = argv[optind++];
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (optind >= argc)
		return lc_cli_usage_error("exec: no command given (lcrun exec ID -- CMD)");
	if (o.detach && o.tty)
		return lc_cli_usage_error("exec: -d and -t do not go together");
	o.argv = argv + optind;
	o.env = env;
	lc_result_t res;
	lc_error_t *err = NULL;
	fflush(stdout);
	if (lc_sandbox_exec(id, &o, &res, &err) < 0)
		return lc_cli_fail(err);
	if (res.timed_out)
		fprintf(stderr, "lcrun: timed out after %d s; command killed\n", o.timeout);
	return res.exit_code;
}
