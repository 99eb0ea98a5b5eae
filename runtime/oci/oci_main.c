/* oci_main.c — lcrun-oci [GLOBAL OPTIONS] VERB …: runc's command line. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oci.h"
#include "util.h"

oci_globals_t oci_g = { .root = "/run/lcrun-oci" };

static void log_line(const char *level, const char *msg)
{
	if (!oci_g.log)
		return;
	FILE *f = fopen(oci_g.log, "ae");
	if (!f)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char t[64];
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	if (oci_g.log_json) {
		json_t *j = json_pack("{s:s, s:s, s:s+}", "level", level, "msg", msg, "time", t, "Z");
		char *s = json_dumps(j, JSON_COMPACT);
		fprintf(f, "%s\n", s);
		free(s);
		json_decref(j);
	} else {
		fprintf(f, "time=\"%sZ\" level=%s msg=\"%s\"\n", t, level, msg);
	}
	fclose(f);
}

int oci_fail(lc_error_t *err)
{
	const char *msg = err && err->msg ? err->msg : "unknown error";
	fprintf(stderr, "lcrun-oci: %s\n", msg);
	log_line("error", msg);
	lc_error_free(err);
	return OCI_EXIT_FAIL;
}

static char * __attribute__((format(printf, 1, 0))) vformat(const char *fmt, va_list ap)
{
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	return msg;
}

int oci_failf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = vformat(fmt, ap);
	va_end(ap);
	fprintf(stderr, "lcrun-oci: %s\n", msg ? msg : fmt);
	log_line("error", msg ? msg : fmt);
	free(msg);
	return OCI_EXIT_FAIL;
}

void oci_debug(const char *fmt, ...)
{
	if (!oci_g.debug)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *msg = vformat(fmt, ap);
	va_end(ap);
	if (msg) {
		if (oci_g.log)
			log_line("debug", msg);
		else
			fprintf(stderr, "lcrun-oci: debug: %s\n", msg);
	}
	free(msg);
}

void oci_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = vformat(fmt, ap);
	va_end(ap);
	if (oci_g.log)
		log_line("warning", msg ? msg : fmt);
	else
		fprintf(stderr, "lcrun-oci: warning: %s\n", msg ? msg : fmt);
	free(msg);
}

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} verbs[] = {
	{ "create", oci_cmd_create, "create a container from a bundle (it waits for start)" },
	{ "start", oci_cmd_start, "start a created container's program" },
	{ "run", oci_cmd_run, "create and start a container, wait for it, delete it" },
	{ "state", oci_cmd_state, "print a container's state as JSON" },
	{ "kill", oci_cmd_kill, "send a signal to a container's process (--all: every process)" },
	{ "delete", oci_cmd_delete, "delete a stopped container (--force: any)" },
	{ "exec", oci_cmd_exec, "run a process in a running container" },
	{ "ps", oci_cmd_ps, "list a container's processes" },
	{ "pause", oci_cmd_pause, "freeze every process of a container" },
	{ "resume", oci_cmd_resume, "thaw a paused container" },
	{ "features", oci_cmd_features, "print what this runtime supports, as JSON" },
	{ "spec", oci_cmd_spec, "write a default config.json" },
	{ "list", oci_cmd_list, "list containers" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lcrun-oci [--root DIR] [--log FILE] [--log-format text|json] [--debug] VERB [OPTIONS] …\n\n"
		   "An OCI runtime with runc's command line, on liblcrun.\n\nverbs:\n");
	for (size_t i = 0; verbs[i].name; i++)
		fprintf(f, "  %-9s %s\n", verbs[i].name, verbs[i].help);
}

static const struct option gopts[] = {
	{ "root", required_argument, NULL, 'r' },
	{ "log", required_argument, NULL, 'l' },
	{ "log-format", required_argument, NULL, 'f' },
	{ "debug", no_argument, NULL, 'd' },
	{ "systemd-cgroup", no_argument, NULL, 's' },
	{ "rootless", required_argument, NULL, 'R' },
	{ "criu", required_argument, NULL, 'c' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'v' },
	{ NULL, 0, NULL, 0 },
};

int main(int argc, char **argv)
{
	const char *env_root = getenv("LCRUN_OCI_ROOT");
	if (env_root && *env_root)
		oci_g.root = env_root;
	int c;
	opterr = 0;
	bool systemd = false;
	while ((c = getopt_long(argc, argv, "+hv", gopts, NULL)) != -1) {
		switch (c) {
		case 'r': oci_g.root = optarg; break;
		case 'l': oci_g.log = optarg; break;
		case 'f':
			if (strcmp(optarg, "json") && strcmp(optarg, "text"))
				return oci_failf("--log-format '%s': expected text or json", optarg);
			oci_g.log_json = !strcmp(optarg, "json");
			break;
		case 'd': oci_g.debug = true; break;
		case 's': systemd = true; break;
		case 'R':
			if (strcmp(optarg, "false") && strcmp(optarg, "auto"))
				return oci_failf("--rootless %s: lcrun-oci runs as root only", optarg);
			break;
		case 'c': break; /* no checkpoints: refused by the verbs */
		case 'h': usage(stdout); return 0;
		case 'v':
			printf("lcrun-oci version %s\nspec: 1.1.0\n", PACKAGE_VERSION);
			return 0;
		default:
			return oci_failf("unknown global option '%s' (see lcrun-oci --help)", argv[optind - 1]);
		}
	}
	if (systemd)
		return oci_failf("--systemd-cgroup is not supported: lcrun-oci manages cgroupfs paths under the cgroup v2 "
				 "root (use the cgroupfs driver: podman --cgroup-manager cgroupfs, containerd SystemdCgroup = false)");
	if (optind >= argc) {
		usage(stderr);
		return OCI_EXIT_FAIL;
	}
	const char *verb = argv[optind];
	if (!strcmp(verb, "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; verbs[i].name; i++)
		if (!strcmp(verbs[i].name, verb)) {
			oci_debug("%s", verb);
			return verbs[i].fn(argc - optind, argv + optind);
		}
	if (!strcmp(verb, "checkpoint") || !strcmp(verb, "restore") || !strcmp(verb, "update") || !strcmp(verb, "events"))
		return oci_failf("%s is not supported by lcrun-oci", verb);
	return oci_failf("unknown command '%s' (see lcrun-oci --help)", verb);
}
