/* cli_run.c — lcrun run [OPTIONS] -- CMD [ARGS…] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "image.h"
#include "util.h"

enum {
	OPT_ROOTFS = 256, OPT_IMAGE, OPT_BIND, OPT_ROBIND, OPT_TMPFS, OPT_HOSTNAME, OPT_ENV_FILE,
	OPT_CAP_ADD, OPT_CAP_DROP, OPT_ULIMIT, OPT_SECCOMP, OPT_TIMEOUT, OPT_KEEP, OPT_RESULT,
	OPT_NAME, OPT_MEMORY, OPT_MEMORY_SWAP, OPT_PIDS, OPT_CPUS, OPT_CPU_WEIGHT, OPT_IO_WEIGHT,
	OPT_LIMITS, OPT_NET, OPT_ALLOW, OPT_ADD_HOST, OPT_DNS, OPT_NET_POLICY, OPT_ID, OPT_TTL,
	OPT_IDLE, OPT_UPPER_DIR, OPT_NEW_PRIVS, OPT_SYSCTL, OPT_DISK,
};

const struct option lc_run_options[] = {
	{ "rootfs", required_argument, NULL, OPT_ROOTFS },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "bind", required_argument, NULL, OPT_BIND },
	{ "ro-bind", required_argument, NULL, OPT_ROBIND },
	{ "tmpfs", required_argument, NULL, OPT_TMPFS },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "workdir", required_argument, NULL, 'w' },
	{ "env", required_argument, NULL, 'e' },
	{ "env-file", required_argument, NULL, OPT_ENV_FILE },
	{ "user", required_argument, NULL, 'u' },
	{ "cap-add", required_argument, NULL, OPT_CAP_ADD },
	{ "cap-drop", required_argument, NULL, OPT_CAP_DROP },
	{ "ulimit", required_argument, NULL, OPT_ULIMIT },
	{ "seccomp", required_argument, NULL, OPT_SECCOMP },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "keep", no_argument, NULL, OPT_KEEP },
	{ "result", required_argument, NULL, OPT_RESULT },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "id", required_argument, NULL, OPT_ID },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "memory-swap", required_argument, NULL, OPT_MEMORY_SWAP },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "cpu-weight", required_argument, NULL, OPT_CPU_WEIGHT },
	{ "io-weight", required_argument, NULL, OPT_IO_WEIGHT },
	{ "limits", required_argument, NULL, OPT_LIMITS },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "net", required_argument, NULL, OPT_NET },
	{ "allow", required_argument, NULL, OPT_ALLOW },
	{ "add-host", required_argument, NULL, OPT_ADD_HOST },
	{ "dns", required_argument, NULL, OPT_DNS },
	{ "net-policy", required_argument, NULL, OPT_NET_POLICY },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE },
	{ "upper-dir", required_argument, NULL, OPT_UPPER_DIR },
	{ "allow-new-privs", no_argument, NULL, OPT_NEW_PRIVS },
	{ "sysctl", required_argument, NULL, OPT_SYSCTL },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		lc_cli_usage_error("%s '%s': expected a whole number from %lld to %lld", opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int add_mount(lc_spec_t *s, const char *arg, bool ro_default, bool tmpfs)
{
	lc_mount_t m = { 0 };
	if (tmpfs) {
		if (arg[0] != '/')
			return lc_cli_usage_error("--tmpfs '%s': expected an absolute path", arg);
		m.dst = strdup(arg);
		m.tmpfs = true;
	} else {
		lc_error_t *err = NULL;
		if (lc_bind_parse(arg, ro_default, &m, &err) < 0)
			return lc_cli_fail(err);
		char *real = realpath(m.src, NULL);
		if (real) {
			free(m.src);
			m.src = real;
		}
	}
	s->mounts = realloc(s->mounts, (s->n_mounts + 1) * sizeof(*s->mounts));
	s->mounts[s->n_mounts++] = m;
	return 0;
}

static int read_env_file(lc_spec_t *s, const char *path)
{
	_cleanup_free_ char *content = NULL;
	lc_error_t *err = NULL;
	if (lc_read_file(path, &content, NULL, &err) < 0) {
		lc_error_wrap(&err, "--env-file");
		return -lc_cli_fail(err);
	}
	int lineno = 0;
	for (char *line = strtok(content, "\n"); line; line = strtok(NULL, "\n")) {
		lineno++;
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#')
			continue;
		char *eq = strchr(line, '=');
		if (!eq || eq == line) {
			fprintf(stderr, "lcrun: --env-file %s:%d: expected KEY=VALUE\n", path, lineno);
			return -LC_EXIT_INVALID;
		}
		lc_strv_push(&s->env, line);
	}
	return 0;
}

/* Fill spec from run options; returns the index of the command in argv, or
 * a negative exit code. */
int lc_cli_parse_run(int argc, char **argv, lc_spec_t *s, char **result_path, bool need_cmd)
{
	int c;
	long long v;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+w:e:u:h", lc_run_options, NULL)) != -1) {
		switch (c) {
		case OPT_ROOTFS:
			free(s->rootfs);
			s->rootfs = realpath(optarg, NULL);
			if (!s->rootfs) {
				fprintf(stderr, "lcrun: rootfs %s: %s\n", optarg, strerror(errno));
				return -LC_EXIT_NOENT;
			}
			break;
		case OPT_IMAGE:
			free(s->image);
			s->image = strdup(optarg);
			break;
		case OPT_BIND:
		case OPT_ROBIND:
		case OPT_TMPFS:
			if (add_mount(s, optarg, c == OPT_ROBIND, c == OPT_TMPFS) != 0)
				return -LC_EXIT_USAGE;
			break;
		case OPT_HOSTNAME:
			if (!*optarg || strlen(optarg) > 63)
				return -lc_cli_usage_error("--hostname '%s': 1 to 63 characters", optarg);
			free(s->hostname);
			s->hostname = strdup(optarg);
			break;
		case 'w':
			free(s->workdir);
			s->workdir = strdup(optarg);
			break;
		case 'e':
			if (!strchr(optarg, '=')) {
				const char *val = getenv(optarg);
				if (!val)
					return -lc_cli_usage_error("--env '%s': expected KEY=VALUE (or KEY set in lcrun's environment)", optarg);
				_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", optarg, val);
				lc_strv_push(&s->env, kv);
			} else {
				lc_strv_push(&s->env, optarg);
			}
			break;
		case OPT_ENV_FILE: {
			int r = read_env_file(s, optarg);
			if (r < 0)
				return r;
			break;
		}
		case 'u': {
			char *end;
			errno = 0;
			unsigned long uid = strtoul(optarg, &end, 10), gid;
			if (errno || end == optarg || (*end && *end != ':'))
				return -lc_cli_usage_error("--user '%s': expected UID[:GID] (numbers)", optarg);
			gid = uid;
			if (*end == ':') {
				char *g = end + 1;
				gid = strtoul(g, &end, 10);
				if (end == g || *end)
					return -lc_cli_usage_error("--user '%s': expected UID[:GID] (numbers)", optarg);
			}
			s->uid = (uid_t)uid;
			s->gid = (gid_t)gid;
			s->user_set = true;
			break;
		}
		case OPT_CAP_ADD:
		case OPT_CAP_DROP: {
			int cap = lc_cap_from_name(optarg);
			if (cap < 0)
				return -lc_cli_usage_error("%s '%s': unknown capability", c == OPT_CAP_ADD ? "--cap-add" : "--cap-drop", optarg);
			uint64_t bits = cap == 64 ? ~0ULL : 1ULL << cap;
			if (c == OPT_CAP_ADD)
				s->caps |= bits;
			else
				s->caps &= ~bits;
			break;
		}
		case OPT_ULIMIT: {
			lc_rlimit_t rl;
			lc_error_t *err = NULL;
			if (lc_rlimit_parse(optarg, &rl, &err) < 0)
				return -lc_cli_fail(err);
			s->rlimits = realloc(s->rlimits, (s->n_rlimits + 1) * sizeof(*s->rlimits));
			s->rlimits[s->n_rlimits++] = rl;
			break;
		}
		case OPT_SECCOMP:
			free(s->seccomp);
			s->seccomp = strdup(optarg);
			break;
		case OPT_TIMEOUT:
			if (parse_int("--timeout", optarg, 1, 86400 * 365, &v) < 0)
				return -LC_EXIT_USAGE;
			s->timeout = (int)v;
			break;
		case OPT_TTL:
			if (parse_int("--ttl", optarg, 1, 86400 * 365, &v) < 0)
				return -LC_EXIT_USAGE;
			s->ttl = (int)v;
			break;
		case OPT_IDLE:
			if (parse_int("--idle-timeout", optarg, 1, 86400 * 365, &v) < 0)
				return -LC_EXIT_USAGE;
			s->idle_timeout = (int)v;
			break;
		case OPT_KEEP:
			s->keep = true;
			break;
		case OPT_UPPER_DIR:
			free(s->upper_dir);
			s->upper_dir = realpath(optarg, NULL);
			if (!s->upper_dir) {
				fprintf(stderr, "lcrun: --upper-dir %s: %s\n", optarg, strerror(errno));
				return -LC_EXIT_NOENT;
			}
			break;
		case OPT_NEW_PRIVS:
			s->new_privs = true;
			break;
		case OPT_SYSCTL:
			lc_strv_push(&s->sysctls, optarg);
			break;
		case OPT_RESULT:
			if (result_path) {
				free(*result_path);
				*result_path = strdup(optarg);
			}
			break;
		case OPT_NAME:
			free(s->name);
			s->name = strdup(optarg);
			break;
		case OPT_ID:
			free(s->id);
			s->id = strdup(optarg);
			break;
		case OPT_MEMORY:
		case OPT_MEMORY_SWAP: {
			long long bytes;
			const char *o = c == OPT_MEMORY ? "--memory" : "--memory-swap";
			if (lc_parse_size(optarg, &bytes) < 0 || bytes < (c == OPT_MEMORY ? 1 << 20 : 0))
				return -lc_cli_usage_error("%s '%s': expected a size like 512M, 2G or bytes%s", o, optarg,
							   c == OPT_MEMORY ? " (at least 1M)" : "");
			if (c == OPT_MEMORY)
				s->limits.memory = bytes;
			else
				s->limits.memory_swap = bytes;
			break;
		}
		case OPT_PIDS:
			if (parse_int("--pids", optarg, 1, 4194304, &v) < 0)
				return -LC_EXIT_USAGE;
			s->limits.pids = v;
			break;
		case OPT_CPUS: {
			char *end;
			double d = strtod(optarg, &end);
			if (end == optarg || *end || d < 0.01 || d > 1024)
				return -lc_cli_usage_error("--cpus '%s': expected a number of CPUs like 0.5 or 2", optarg);
			s->limits.cpus = d;
			break;
		}
		case OPT_CPU_WEIGHT:
		case OPT_IO_WEIGHT:
			if (parse_int(c == OPT_CPU_WEIGHT ? "--cpu-weight" : "--io-weight", optarg, 1, 10000, &v) < 0)
				return -LC_EXIT_USAGE;
			if (c == OPT_CPU_WEIGHT)
				s->limits.cpu_weight = (int)v;
			else
				s->limits.io_weight = (int)v;
			break;
		case OPT_DISK: {
			long long bytes;
			if (lc_parse_size(optarg, &bytes) < 0 || bytes <= 0)
				return -lc_cli_usage_error("--disk '%s': expected a size like 512M, 10G or bytes", optarg);
			s->limits.disk = bytes;
			break;
		}
		case OPT_LIMITS: {
			lc_error_t *err = NULL;
			if (lc_limits_load(optarg, &s->limits, &err) < 0)
				return -lc_cli_fail(err);
			break;
		}
		case OPT_NET:
		case OPT_ALLOW:
		case OPT_ADD_HOST:
		case OPT_DNS:
		case OPT_NET_POLICY: {
			lc_error_t *err = NULL;
			if (lc_cli_net_option(s, c - OPT_NET, optarg, &err) < 0)
				return -lc_cli_fail(err);
			break;
		}
		case 'h':
			return -1000;
		case '?':
		default:
			if (optopt && optopt < 256)
				return -lc_cli_usage_error("unknown option '-%c' (see lcrun %s --help)", optopt, argv[0]);
			return -lc_cli_usage_error("unknown option '%s' (see lcrun %s --help)", argv[optind - 1], argv[0]);
		}
	}
	{
		lc_error_t *err = NULL;
		if (lc_cli_net_finish(s, &err) < 0)
			return -lc_cli_fail(err);
	}
	if (need_cmd && optind >= argc)
		return -lc_cli_usage_error("%s: no command given (lcrun %s [OPTIONS] -- CMD [ARGS…])", argv[0], argv[0]);
	return optind;
}

static const char run_help[] =
	"usage: lcrun run [OPTIONS] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD in a new sandbox and wait for it; exit with its status.\n"
	"\n"
	"  --rootfs DIR            lower layer of the root (default: the host image)\n"
	"  --image NAME            run on an image from the store\n"
	"  --bind SRC:DST[:OPTS]   bind a host path; OPTS: ro|rw, idmap|noidmap (as root a\n"
	"                          rw bind is idmapped where it can be: SRC's owner is the\n"
	"                          sandbox's user inside); --ro-bind SRC:DST; --tmpfs DST\n"
	"  --hostname NAME, -w/--workdir DIR, -u/--user UID[:GID]\n"
	"  -e/--env K=V, --env-file FILE\n"
	"  --cap-add CAP, --cap-drop CAP, --ulimit NAME=SOFT[:HARD]\n"
	"  --seccomp FILE|unconfined\n"
	"  --memory SIZE, --memory-swap SIZE, --pids N, --cpus X, --cpu-weight N,\n"
	"  --io-weight N, --limits NAME (small, agent, devbox, best-effort)\n"
	"  --disk SIZE             the upper layer on a filesystem of SIZE of its own:\n"
	"                          writes past it fail with ENOSPC (root only)\n"
	"  --net none|allow|open, --allow CIDR[:PORT[,PORT]], --add-host NAME:IP,\n"
	"  --dns IP, --net-policy NAME\n"
	"  --timeout SECS          kill the whole sandbox after SECS (exit 124)\n"
	"  --keep                  keep the upper layer and state after the run\n"
	"  --upper-dir DIR         the overlay's upper and work directories on DIR (kept)\n"
	"  --allow-new-privs       no no_new_privs: setuid binaries (sudo) work inside\n"
	"  --sysctl net.KEY=VALUE  a sysctl of the sandbox's network namespace\n"
	"  --name NAME             a unique name for the sandbox\n"
	"  --result FILE           write the result (exit code, usage) as JSON\n";

int lc_cmd_run(int argc, char **argv)
{
	lc_spec_t *s = lc_spec_new();
	_cleanup_free_ char *result_path = NULL;
	int idx = lc_cli_parse_run(argc, argv, s, &result_path, true);
	if (idx == -1000) {
		fputs(run_help, stdout);
		lc_spec_free(s);
		return 0;
	}
	if (idx < 0) {
		lc_spec_free(s);
		return -idx;
	}
	for (int i = idx; i < argc; i++)
		lc_strv_push(&s->argv, argv[i]);
	s->forward_signals = true;
	/* This process ends after its run: its remover may take its memory over. */
	lc_heir_allow();
	lc_result_t res;
	lc_error_t *err = NULL;
	if (s->image) {
		lc_image_resolved_t *img = NULL;
		if (lc_image_resolve(s->image, &img, &err) < 0 || lc_image_apply_config(s, img, &err) < 0) {
			lc_image_resolved_free(img);
			lc_spec_free(s);
			return lc_cli_fail(err);
		}
		lc_image_resolved_free(img);
	}
	int r = lc_run(s, &res, &err);
	if (r < 0) {
		lc_spec_free(s);
		return lc_cli_fail(err);
	}
	if (res.limits_not_applied[0])
		fprintf(stderr, "lcrun: --limits best-effort: not applied on this host: %s\n", res.limits_not_applied);
	if (res.start_error[0])
		fprintf(stderr, "lcrun: %s\n", res.start_error);
	if (res.oom_killed) {
		if (s->limits.memory > 0)
			fprintf(stderr, "lcrun: killed by the out-of-memory killer (memory limit %lld MiB)\n",
				s->limits.memory >> 20);
		else
			fprintf(stderr, "lcrun: killed by the out-of-memory killer\n");
	} else if (res.timed_out) {
		fprintf(stderr, "lcrun: timed out after %d s; sandbox killed\n", s->timeout);
	}
	if (s->keep)
		fprintf(stderr, "lcrun: kept sandbox %s\n", res.id);
	if (result_path) {
		json_t *j = lc_result_to_json(&res);
		if (json_dump_file(j, result_path, JSON_INDENT(2)) < 0)
			fprintf(stderr, "lcrun: cannot write --result %s\n", result_path);
		json_decref(j);
	}
	/* The run is over, and its memory goes to the remover (or with the
	 * process): freeing it, and libc's exit handlers, would only write
	 * to pages (a fault each, 13 us where page-table work is dear, a
	 * copy where a forked remover shares them), on the way to the
	 * caller. */
	if (fflush(stdout) == 0 && fflush(stderr) == 0)
		_exit(res.exit_code);
	lc_spec_free(s);
	return res.exit_code;
}
