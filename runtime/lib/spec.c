/* spec.c — a sandbox's full description, and its defaults. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lcrun.h"
#include "net.h"
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
	for (size_t i = 0; s->secret_env && s->secret_env[i]; i++)
		explicit_bzero(s->secret_env[i], strlen(s->secret_env[i]));
	lc_strv_free(s->secret_env);
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
	free(s->upper_dir);
	lc_strv_free(s->sysctls);
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

int lc_bind_parse(const char *arg, bool ro_default, lc_mount_t *out, lc_error_t **err)
{
	memset(out, 0, sizeof(*out));
	out->ro = ro_default;
	_cleanup_free_ char *a = strdup(arg);
	char *dst = strchr(a, ':');
	if (!dst || dst == a || !dst[1])
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--bind '%s': expected SRC:DST[:OPTIONS]", arg);
	*dst++ = '\0';
	char *opts = strchr(dst, ':');
	if (opts)
		*opts++ = '\0';
	if (dst[0] != '/')
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--bind '%s': destination must be an absolute path", arg);
	bool seen_mode = false, seen_idmap = false;
	for (char *save = NULL, *o = opts ? strtok_r(opts, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save)) {
		bool mode = !strcmp(o, "ro") || !strcmp(o, "rw");
		bool idmap = !strcmp(o, "idmap") || !strcmp(o, "noidmap");
		if (!mode && !idmap)
			return lc_error_set(err, LC_EXIT_USAGE, 0,
					    "--bind '%s': unknown option '%s' (ro, rw, idmap, noidmap)", arg, o);
		if ((mode && seen_mode) || (idmap && seen_idmap))
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--bind '%s': '%s' conflicts with an earlier option",
					    arg, o);
		if (mode) {
			out->ro = !strcmp(o, "ro");
			seen_mode = true;
		} else {
			out->idmap = !strcmp(o, "idmap") ? LC_IDMAP_ON : LC_IDMAP_OFF;
			seen_idmap = true;
		}
	}
	if (opts && !seen_mode && !seen_idmap)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--bind '%s': expected SRC:DST[:OPTIONS]", arg);
	out->src = strdup(a);
	out->dst = strdup(dst);
	return 0;
}

static const char *const idmap_names[] = { "auto", "on", "off" };

#define JSTR(x) ((x) ? json_string(x) : json_null())

json_t *lc_spec_to_json(const lc_spec_t *s)
{
	json_t *j = json_object();
	json_object_set_new(j, "argv", lc_strv_to_json(s->argv));
	json_object_set_new(j, "env", lc_strv_to_json(s->env));
	json_object_set_new(j, "workdir", JSTR(s->workdir));
	json_object_set_new(j, "hostname", JSTR(s->hostname));
	json_object_set_new(j, "uid", json_integer(s->uid));
	json_object_set_new(j, "gid", json_integer(s->gid));
	json_object_set_new(j, "caps", json_integer((json_int_t)s->caps));
	json_object_set_new(j, "seccomp", JSTR(s->seccomp));
	json_object_set_new(j, "rootfs", JSTR(s->rootfs));
	json_object_set_new(j, "image", JSTR(s->image));
	json_object_set_new(j, "name", JSTR(s->name));
	json_object_set_new(j, "timeout", json_integer(s->timeout));
	json_object_set_new(j, "ttl", json_integer(s->ttl));
	json_object_set_new(j, "idle_timeout", json_integer(s->idle_timeout));
	json_object_set_new(j, "keep", json_boolean(s->keep));
	json_object_set_new(j, "upper_dir", JSTR(s->upper_dir));
	json_object_set_new(j, "new_privs", json_boolean(s->new_privs));
	json_object_set_new(j, "sysctls", lc_strv_to_json(s->sysctls));
	json_t *rl = json_array();
	for (size_t i = 0; i < s->n_rlimits; i++)
		json_array_append_new(rl, json_pack("{s:i,s:I,s:I}", "resource", s->rlimits[i].resource,
						    "soft", (json_int_t)s->rlimits[i].soft,
						    "hard", (json_int_t)s->rlimits[i].hard));
	json_object_set_new(j, "rlimits", rl);
	json_t *mounts = json_array();
	for (size_t i = 0; i < s->n_mounts; i++)
		json_array_append_new(mounts, json_pack("{s:o,s:s,s:b,s:b,s:s}", "src", JSTR(s->mounts[i].src),
							"dst", s->mounts[i].dst, "ro", s->mounts[i].ro,
							"tmpfs", s->mounts[i].tmpfs,
							"idmap", (unsigned)s->mounts[i].idmap < 3 ? idmap_names[s->mounts[i].idmap] : "auto"));
	json_object_set_new(j, "mounts", mounts);
	json_object_set_new(j, "limits", json_pack("{s:I,s:I,s:I,s:f,s:i,s:i,s:b,s:I}",
						   "memory", (json_int_t)s->limits.memory,
						   "memory_swap", (json_int_t)s->limits.memory_swap,
						   "pids", (json_int_t)s->limits.pids, "cpus", s->limits.cpus,
						   "cpu_weight", s->limits.cpu_weight, "io_weight", s->limits.io_weight,
						   "best_effort", s->limits.best_effort, "disk", (json_int_t)s->limits.disk));
	static const char *modes[] = { "none", "allow", "open" };
	json_object_set_new(j, "net", json_pack("{s:s,s:o,s:o}", "mode", modes[s->net.mode],
						"policy", JSTR(s->net.policy), "dns", JSTR(s->net.dns)));
	return j;
}

/* Everything of a spec, for another process of the same build to run it
 * (lcd's task runner): lc_spec_to_json's object plus what state.json
 * leaves out (the preset id, secret_env, the allow list and pinned
 * hosts, as --allow and --add-host take them).  Not the stdio fds: they
 * go alongside, as fds. */
json_t *lc_spec_to_wire(const lc_spec_t *s)
{
	json_t *j = lc_spec_to_json(s);
	json_object_set_new(j, "id", JSTR(s->id));
	json_object_set_new(j, "secret_env", lc_strv_to_json(s->secret_env));
	json_object_set_new(j, "user_set", json_boolean(s->user_set));
	json_object_set_new(j, "forward_signals", json_boolean(s->forward_signals));
	json_t *net = json_object_get(j, "net"), *allow = json_array(), *hosts = json_array();
	for (size_t i = 0; i < s->net.n_allow; i++) {
		char rule[256];
		lc_net_rule_format(&s->net.allow[i], rule, sizeof(rule));
		json_array_append_new(allow, json_string(rule));
	}
	for (size_t i = 0; i < s->net.n_hosts; i++)
		json_array_append_new(hosts, json_sprintf("%s:%s", s->net.hosts[i].name, s->net.hosts[i].ip));
	json_object_set_new(net, "allow", allow);
	json_object_set_new(net, "hosts", hosts);
	return j;
}

static char *jdup(json_t *j, const char *k)
{
	const char *v = lc_json_str(j, k);
	return v ? strdup(v) : NULL;
}

lc_spec_t *lc_spec_from_json(json_t *j)
{
	lc_spec_t *s = lc_spec_new();
	s->argv = lc_json_to_strv(json_object_get(j, "argv"));
	s->env = lc_json_to_strv(json_object_get(j, "env"));
	s->workdir = jdup(j, "workdir");
	s->hostname = jdup(j, "hostname");
	s->seccomp = jdup(j, "seccomp");
	s->rootfs = jdup(j, "rootfs");
	s->image = jdup(j, "image");
	s->name = jdup(j, "name");
	s->uid = (uid_t)json_integer_value(json_object_get(j, "uid"));
	s->gid = (gid_t)json_integer_value(json_object_get(j, "gid"));
	if (json_is_integer(json_object_get(j, "caps")))
		s->caps = (uint64_t)json_integer_value(json_object_get(j, "caps"));
	s->timeout = (int)json_integer_value(json_object_get(j, "timeout"));
	s->ttl = (int)json_integer_value(json_object_get(j, "ttl"));
	s->idle_timeout = (int)json_integer_value(json_object_get(j, "idle_timeout"));
	s->keep = json_is_true(json_object_get(j, "keep"));
	s->upper_dir = jdup(j, "upper_dir");
	s->new_privs = json_is_true(json_object_get(j, "new_privs"));
	s->sysctls = lc_json_to_strv(json_object_get(j, "sysctls"));
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(j, "rlimits"), i, x) {
		s->rlimits = realloc(s->rlimits, (s->n_rlimits + 1) * sizeof(*s->rlimits));
		s->rlimits[s->n_rlimits++] = (lc_rlimit_t){ (int)json_integer_value(json_object_get(x, "resource")),
							    (rlim_t)json_integer_value(json_object_get(x, "soft")),
							    (rlim_t)json_integer_value(json_object_get(x, "hard")) };
	}
	json_array_foreach(json_object_get(j, "mounts"), i, x) {
		s->mounts = realloc(s->mounts, (s->n_mounts + 1) * sizeof(*s->mounts));
		const char *im = lc_json_str(x, "idmap");
		int idmap = LC_IDMAP_AUTO;
		for (int k = 0; im && k < 3; k++)
			if (!strcmp(im, idmap_names[k]))
				idmap = k;
		s->mounts[s->n_mounts++] = (lc_mount_t){ jdup(x, "src"), jdup(x, "dst"),
							 json_is_true(json_object_get(x, "ro")),
							 json_is_true(json_object_get(x, "tmpfs")), idmap };
	}
	json_t *l = json_object_get(j, "limits");
	if (l) {
		s->limits.memory = json_integer_value(json_object_get(l, "memory"));
		s->limits.memory_swap = json_integer_value(json_object_get(l, "memory_swap"));
		s->limits.pids = json_integer_value(json_object_get(l, "pids"));
		s->limits.cpus = json_number_value(json_object_get(l, "cpus"));
		s->limits.cpu_weight = (int)json_integer_value(json_object_get(l, "cpu_weight"));
		s->limits.io_weight = (int)json_integer_value(json_object_get(l, "io_weight"));
		s->limits.best_effort = json_is_true(json_object_get(l, "best_effort"));
		s->limits.disk = json_integer_value(json_object_get(l, "disk"));
	}
	json_t *n = json_object_get(j, "net");
	const char *mode = lc_json_str(n, "mode");
	s->net.mode = mode && !strcmp(mode, "allow") ? LC_NET_ALLOW : mode && !strcmp(mode, "open") ? LC_NET_OPEN : LC_NET_NONE;
	s->net.policy = jdup(n, "policy");
	s->net.dns = jdup(n, "dns");
	/* lc_spec_to_wire's further members, when there */
	s->id = jdup(j, "id");
	s->secret_env = lc_json_to_strv(json_object_get(j, "secret_env"));
	s->user_set = json_is_true(json_object_get(j, "user_set"));
	s->forward_signals = json_is_true(json_object_get(j, "forward_signals"));
	json_array_foreach(json_object_get(n, "allow"), i, x)
		lc_net_spec_add_allow(&s->net, json_string_value(x), NULL);
	json_array_foreach(json_object_get(n, "hosts"), i, x)
		lc_net_spec_add_host(&s->net, json_string_value(x), NULL);
	return s;
}
