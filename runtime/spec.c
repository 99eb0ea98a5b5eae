/* spec.c — a sandbox's full description, and its defaults. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lcrun.h"
#include "util.h"

lc_spec_t *lc_spec_new(void)
{
	lc_spec_t *s = lc_xmalloc0(sizeof(*s));
	s->caps = lc_caps_default();
	s->limits.memory = -1;
	s->limits.memory_swap = -1;
	s->limits.pids = -1;
	s->stdio[0] = s->stdio[1] = s->stdio[2] = -1;
	s->net.mode = LC_NET_NONE;
	return s;
}

void lc_spec_free(lc_spec_t *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	lc_strv_free(s->argv);
	lc_strv_free(s->env);
	free(s->workdir);
	free(s->hostname);
	free(s->rootfs);
	free(s->image);
	for (size_t i = 0; i < s->n_mounts; i++) {
		free(s->mounts[i].src);
		free(s->mounts[i].dst);
	}
	free(s->mounts);
	free(s->rlimits);
	free(s->seccomp);
	free(s->net.allow);
	for (size_t i = 0; i < s->net.n_hosts; i++) {
		free(s->net.hosts[i].name);
		free(s->net.hosts[i].ip);
	}
	free(s->net.hosts);
	free(s->net.dns);
	free(s->net.policy);
	free(s);
}

static const struct {
	const char *name;
	int res;
} rlimit_names[] = {
	{ "core", RLIMIT_CORE }, { "cpu", RLIMIT_CPU }, { "data", RLIMIT_DATA },
	{ "fsize", RLIMIT_FSIZE }, { "locks", RLIMIT_LOCKS }, { "memlock", RLIMIT_MEMLOCK },
	{ "msgqueue", RLIMIT_MSGQUEUE }, { "nice", RLIMIT_NICE }, { "nofile", RLIMIT_NOFILE },
	{ "nproc", RLIMIT_NPROC }, { "rss", RLIMIT_RSS }, { "rtprio", RLIMIT_RTPRIO },
	{ "rttime", RLIMIT_RTTIME }, { "sigpending", RLIMIT_SIGPENDING }, { "stack", RLIMIT_STACK },
	{ "as", RLIMIT_AS },
};

static int parse_rlim(const char *s, rlim_t *out)
{
	if (!strcmp(s, "unlimited") || !strcmp(s, "-1")) {
		*out = RLIM_INFINITY;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = (rlim_t)v;
	return 0;
}

int lc_rlimit_parse(const char *arg, lc_rlimit_t *out, lc_error_t **err)
{
	const char *eq = strchr(arg, '=');
	if (!eq)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--ulimit '%s': expected NAME=SOFT[:HARD]", arg);
	size_t n = (size_t)(eq - arg);
	int res = -1;
	for (size_t i = 0; i < sizeof(rlimit_names) / sizeof(rlimit_names[0]); i++)
		if (strlen(rlimit_names[i].name) == n && !strncasecmp(arg, rlimit_names[i].name, n))
			res = rlimit_names[i].res;
	if (res < 0)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--ulimit '%s': unknown limit '%.*s'", arg, (int)n, arg);
	_cleanup_free_ char *val = strdup(eq + 1);
	char *colon = strchr(val, ':');
	if (colon)
		*colon++ = '\0';
	if (parse_rlim(val, &out->soft) < 0 || parse_rlim(colon ? colon : val, &out->hard) < 0)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--ulimit '%s': expected numbers or 'unlimited'", arg);
	if (out->soft > out->hard)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--ulimit '%s': soft limit above hard limit", arg);
	out->resource = res;
	return 0;
}
