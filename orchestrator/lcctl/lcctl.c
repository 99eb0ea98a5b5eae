/* lcctl — the operator's client of lcd: HTTP over lcd's unix socket (or
 * TCP with a token).  This file: main and the verbs of apps (deploy, app,
 * run, task, map, secret, deployment, image, status); sandbox.c and
 * devbox.c hold their nouns, common.c what every verb shares.
 *
 * Every failure is one line on stderr, "lcctl: ...", and an exit code
 * from error.h (lcd's own code for the error, passed through). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "devbox.h"
#include "json.h"
#include "sandbox.h"
#include "util.h"

/* ---- options ---- */

struct opts {
	const char *socket;
	bool json, detach, follow, if_absent;
	const char *app, *state, *limit, *ttl, *from_env, *prefix;
	char **config; /* --config KEY=VALUE, repeatable */
	char **pos; /* positional arguments after the verb words */
	size_t n;
	unsigned seen; /* bit per option: 1u << O_* */
};

/* The options of lcctl's own verbs; O_* is the bit in opts.seen and the
 * index in long_opts.  getopt_long returns 'd', 'f' or OPT_BASE + O_*. */
enum { O_JSON, O_DETACH, O_FOLLOW, O_IF_ABSENT, O_APP, O_STATE, O_LIMIT, O_TTL, O_FROM_ENV, O_PREFIX, O_SOCKET, O_CONFIG,
       O_COUNT };
#define OPT_BASE 256

static const struct option long_opts[] = {
	[O_JSON] = { "json", no_argument, NULL, OPT_BASE + O_JSON },
	[O_DETACH] = { "detach", no_argument, NULL, 'd' },
	[O_FOLLOW] = { "follow", no_argument, NULL, 'f' },
	[O_IF_ABSENT] = { "if-absent", no_argument, NULL, OPT_BASE + O_IF_ABSENT },
	[O_APP] = { "app", required_argument, NULL, OPT_BASE + O_APP },
	[O_STATE] = { "state", required_argument, NULL, OPT_BASE + O_STATE },
	[O_LIMIT] = { "limit", required_argument, NULL, OPT_BASE + O_LIMIT },
	[O_TTL] = { "ttl", required_argument, NULL, OPT_BASE + O_TTL },
	[O_FROM_ENV] = { "from-env", required_argument, NULL, OPT_BASE + O_FROM_ENV },
	[O_PREFIX] = { "prefix", required_argument, NULL, OPT_BASE + O_PREFIX },
	[O_SOCKET] = { "socket", required_argument, NULL, OPT_BASE + O_SOCKET },
	[O_CONFIG] = { "config", required_argument, NULL, OPT_BASE + O_CONFIG },
	[O_COUNT] = { NULL, 0, NULL, 0 },
};

/* What getopt_long returned (or put in optopt) as an O_*, -1 for none. */
static int opt_index(int c)
{
	if (c == 'd')
		return O_DETACH;
	if (c == 'f')
		return O_FOLLOW;
	return c >= OPT_BASE && c < OPT_BASE + O_COUNT ? c - OPT_BASE : -1;
}

/* A word that begins with a dash but not with a letter or a second dash
 * ("-5", "-", "-{…}"): an argument (a value, JSON), never an option. */
static bool dash_argument(const char *a)
{
	return a[0] == '-' && a[1] && a[1] != '-' && !isalpha((unsigned char)a[1]);
}

/* The options anywhere among the arguments, the arguments in their order
 * ("-" leads the spec: getopt_long returns each argument as 1 where it
 * stands); "--" ends the options.  argv[0] is the program. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	optind = 1; /* the first and only scan of this process */
	opterr = 0;
	for (;;) {
		if (optind < argc && dash_argument(argv[optind])) {
			/* at a word's start (a word getopt is walking is never one) */
			o->pos[o->n++] = argv[optind++];
			continue;
		}
		int at = optind;
		int c = getopt_long(argc, argv, "-:df", long_opts, NULL);
		if (c == -1)
			break;
		if (c == 1) {
			o->pos[o->n++] = optarg;
			continue;
		}
		int k = opt_index(c == '?' || c == ':' ? optopt : c);
		if (c == ':')
			return lcctl_usage_error("option --%s needs a value", long_opts[k].name);
		if (c == '?') {
			if (k >= 0 && !strncmp(argv[at], "--", 2) && strchr(argv[at], '='))
				return lcctl_usage_error("option --%s takes no value", long_opts[k].name);
			return lcctl_usage_error("unknown option '%s' (see lcctl --help)", argv[at]);
		}
		o->seen |= 1u << k;
		switch (k) {
		case O_JSON: o->json = true; break;
		case O_DETACH: o->detach = true; break;
		case O_FOLLOW: o->follow = true; break;
		case O_IF_ABSENT: o->if_absent = true; break;
		case O_APP: o->app = optarg; break;
		case O_STATE: o->state = optarg; break;
		case O_LIMIT: o->limit = optarg; break;
		case O_TTL: o->ttl = optarg; break;
		case O_FROM_ENV: o->from_env = optarg; break;
		case O_PREFIX: o->prefix = optarg; break;
		case O_SOCKET: o->socket = optarg; break;
		case O_CONFIG: lc_strv_push(&o->config, optarg); break;
		}
	}
	while (optind < argc) /* after "--" */
		o->pos[o->n++] = argv[optind++];
	return 0;
}

/* Refuse options the verb does not take; `allowed` is a mask of O_*. */
static int only(const struct opts *o, unsigned allowed, const char *verb)
{
	unsigned extra = o->seen & ~(allowed | (1u << O_SOCKET));
	for (int t = 0; extra && t < O_COUNT; t++)
		if (extra & (1u << t))
			return lcctl_usage_error("%s does not take --%s", verb, long_opts[t].name);
	return 0;
}

static int npos(const struct opts *o, size_t min, size_t max, const char *use)
{
	if (o->n < min || o->n > max)
		return lcctl_usage_error("usage: lcctl %s", use);
	return 0;
}

/* ---- HTTP (common.c's client) ---- */

static bool to_stdout(const char *p, size_t n, void *ud)
{
	(void)ud;
	size_t w = fwrite(p, 1, n, stdout);
	fflush(stdout);
	return w == n;
}

/* ---- verbs ---- */

static int v_deploy(struct opts *o)
{
	if (only(o, 1u << O_CONFIG, "deploy") || npos(o, 1, 1, "deploy APP.json [--config KEY=VALUE]…"))
		return LC_EXIT_USAGE;
	json_error_t je;
	_cleanup_json_ json_t *m = json_load_file(o->pos[0], 0, &je);
	if (!m) {
		lc_error_t *e = NULL;
		if (access(o->pos[0], F_OK) < 0)
			lc_error_set(&e, LC_EXIT_NOENT, errno, "%s", o->pos[0]);
		else
			lc_error_set(&e, LC_EXIT_INVALID, 0, "%s: line %d: %s", o->pos[0], je.line, je.text);
		return lcctl_fail(e);
	}
	/* --config sets or overrides one key of the manifest's config; lcd
	 * validates the result as it does the file's own keys. */
	for (size_t i = 0; o->config && o->config[i]; i++) {
		_cleanup_free_ char *kv = strdup(o->config[i]);
		char *eq = strchr(kv, '=');
		if (!eq || eq == kv)
			return lcctl_usage_error("--config: expected KEY=VALUE, got '%s'", o->config[i]);
		*eq = '\0';
		json_t *cfg = json_object_get(m, "config");
		if (!cfg) {
			cfg = json_object();
			json_object_set_new(m, "config", cfg);
		}
		if (!json_is_object(cfg))
			break; /* lcd refuses the manifest with its own message */
		json_t *v = json_string(eq + 1);
		if (!v)
			return lcctl_usage_error("--config %s: the value is not valid UTF-8", kv);
		json_object_set_new(cfg, kv, v);
	}
	/* A devbox without authorized_keys gets the caller's public keys. */
	json_t *boxes = json_object_get(m, "devboxes");
	if (json_is_object(boxes)) {
		_cleanup_json_ json_t *keys = lcctl_caller_keys();
		const char *k;
		json_t *b;
		json_object_foreach(boxes, k, b)
			if (json_is_object(b) && !json_object_get(b, "authorized_keys") && json_array_size(keys))
				json_object_set(b, "authorized_keys", keys);
	}
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcctl_request("POST", "/apps", m, &out, &err) < 0)
		return lcctl_fail(err);
	printf("%s app %s (%zu functions, %zu schedules%s)\n", json_is_true(json_object_get(out, "replaced")) ? "replaced" : "deployed",
	       lcctl_str(out, "name"), json_array_size(json_object_get(out, "functions")),
	       json_array_size(json_object_get(out, "schedules")), json_is_object(boxes) ? ", devboxes" : "");
	return 0;
}

static void join_names(json_t *arr, char *buf, size_t len)
{
	size_t i, off = 0;
	json_t *v;
	buf[0] = '\0';
	json_array_foreach(arr, i, v) {
		int n = snprintf(buf + off, len - off, "%s%s", i ? "," : "", json_string_value(v));
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
	if (!off)
		snprintf(buf, len, "-");
}

static int v_app(struct opts *o)
{
	if (o->n < 1)
		return lcctl_usage_error("usage: lcctl app list|show|delete …");
	const char *sub = o->pos[0];
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (!strcmp(sub, "list") || !strcmp(sub, "ls")) {
		if (only(o, 1u << O_JSON, "app list") || npos(o, 1, 1, "app list [--json]"))
			return LC_EXIT_USAGE;
		json_t *apps;
		int code = lcctl_get_list("/apps", "apps", o->json, &out, &apps);
		if (code >= 0)
			return code;
		printf("%-20s %-30s %-20s %s\n", "APP", "FUNCTIONS", "SCHEDULES", "MAPS");
		size_t i;
		json_t *a;
		json_array_foreach(apps, i, a) {
			char f[256], s[256], m[256];
			join_names(json_object_get(a, "functions"), f, sizeof(f));
			join_names(json_object_get(a, "schedules"), s, sizeof(s));
			join_names(json_object_get(a, "maps"), m, sizeof(m));
			printf("%-20s %-30s %-20s %s\n", lcctl_str(a, "name"), f, s, m);
		}
		return 0;
	}
	if (!strcmp(sub, "show") || !strcmp(sub, "delete") || !strcmp(sub, "rm")) {
		bool show = !strcmp(sub, "show");
		if (only(o, show ? 1u << O_JSON : 0, show ? "app show" : "app delete") ||
		    npos(o, 2, 2, show ? "app show APP" : "app delete APP"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *app = lcc_escape(o->pos[1]);
		_cleanup_free_ char *path = lc_strdup_printf("/apps/%s", app);
		if (lcctl_request(show ? "GET" : "DELETE", path, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		if (show)
			lcctl_print_json(json_object_get(out, "manifest"));
		else
			printf("deleted app %s\n", o->pos[1]);
		return 0;
	}
	return lcctl_usage_error("unknown app verb '%s' (list, show, delete)", sub);
}

/* "APP:NAME" -> app, name (pointers into a copy the caller frees). */
static int split_target(const char *s, char **copy, char **app, char **name)
{
	*copy = strdup(s);
	char *c = strchr(*copy, ':');
	if (!c || c == *copy || !c[1])
		return lcctl_usage_error("'%s': expected APP:FUNCTION or APP:SCHEDULE", s);
	*c = '\0';
	*app = *copy;
	*name = c + 1;
	return 0;
}

static bool in_list(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (!strcmp(json_string_value(v), s))
			return true;
	return false;
}

static int task_exit(json_t *t)
{
	const char *state = lcctl_str(t, "state");
	json_t *ec = json_object_get(t, "exit_code");
	int code = json_is_integer(ec) ? (int)json_integer_value(ec) : 0;
	if (!strcmp(state, "succeeded"))
		return 0;
	const char *error = lc_json_str(t, "error");
	fprintf(stderr, "lcctl: task %s %s%s%s\n", lcctl_str(t, "id"), state, error ? ": " : "", error ? error : "");
	if (!strcmp(state, "timed-out"))
		return LC_EXIT_TIMEOUT;
	if (!strcmp(state, "cancelled"))
		return LC_EXIT_STATE;
	return code > 0 && code < 256 ? code : 1;
}

static int v_run(struct opts *o)
{
	if (only(o, 1u << O_DETACH | 1u << O_JSON, "run") || npos(o, 1, 2, "run APP:FUNCTION|APP:SCHEDULE [JSON-ARGS] [--detach]"))
		return LC_EXIT_USAGE;
	_cleanup_free_ char *copy = NULL;
	char *app = NULL, *name = NULL;
	if (split_target(o->pos[0], &copy, &app, &name) != 0)
		return LC_EXIT_USAGE;
	_cleanup_json_ json_t *args = NULL;
	if (o->n == 2) {
		json_error_t je;
		args = json_loads(o->pos[1], JSON_DECODE_ANY, &je);
		if (!args)
			return lcctl_usage_error("arguments are not valid JSON: %s", je.text);
	}
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *info = NULL, *out = NULL;
	_cleanup_free_ char *eapp = lcc_escape(app), *ename = lcc_escape(name);
	_cleanup_free_ char *apath = lc_strdup_printf("/apps/%s", eapp);
	if (lcctl_request("GET", apath, NULL, &info, &err) < 0)
		return lcctl_fail(err);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body = NULL;
	if (in_list(json_object_get(info, "functions"), name)) {
		path = lc_strdup_printf("/apps/%s/functions/%s/spawn", eapp, ename);
		body = json_pack("{s:o}", "args", args ? json_incref(args) : json_object());
	} else if (in_list(json_object_get(info, "schedules"), name)) {
		if (args)
			return lcctl_usage_error("%s is a schedule: it runs with its own arguments", o->pos[0]);
		path = lc_strdup_printf("/apps/%s/schedules/%s/run", eapp, ename);
	} else {
		lc_error_set(&err, LC_EXIT_UNKNOWN, 0, "app %s has no function or schedule '%s'", app, name);
		return lcctl_fail(err);
	}
	if (lcctl_request("POST", path, body, &out, &err) < 0)
		return lcctl_fail(err);
	const char *id = lcctl_str(out, "id");
	if (o->detach) {
		puts(id);
		return 0;
	}
	_cleanup_free_ char *rpath = lc_strdup_printf("/tasks/%s/result?wait=60", id);
	for (;;) {
		json_t *t = NULL;
		long st = 0;
		if (lcc_request(lcctl_client(), "GET", rpath, NULL, &st, &t, &err) < 0)
			return lcctl_fail(err);
		if (st == 200) {
			if (o->json)
				lcctl_print_json(t);
			else if (!json_is_null(json_object_get(t, "result")) && json_object_get(t, "result"))
				lcctl_print_json(json_object_get(t, "result"));
			int code = task_exit(t);
			json_decref(t);
			return code;
		}
		json_decref(t);
	}
}

/* lcctl image ls: the store's images, with the owner and the end lcd keeps
 * for those its sandboxes were snapshotted or forked into. */
static int v_image(struct opts *o)
{
	if (o->n < 1 || (strcmp(o->pos[0], "ls") && strcmp(o->pos[0], "list")))
		return lcctl_usage_error("usage: lcctl image ls [--json]");
	if (only(o, 1u << O_JSON, "image ls") || npos(o, 1, 1, "image ls [--json]"))
		return LC_EXIT_USAGE;
	_cleanup_json_ json_t *out = NULL;
	json_t *list;
	int code = lcctl_get_list("/images", "images", o->json, &out, &list);
	if (code >= 0)
		return code;
	printf("%-48s %-20s %-9s %-10s %-20s %s\n", "NAME", "OWNER", "KIND", "SIZE", "CREATED", "EXPIRES");
	size_t i;
	json_t *im;
	json_array_foreach(list, i, im) {
		char size[32] = "-", exp[32] = "-";
		json_t *sz = json_object_get(im, "size"), *ex = json_object_get(im, "expires");
		if (json_is_integer(sz))
			snprintf(size, sizeof(size), "%.1fM", (double)json_integer_value(sz) / (1 << 20));
		if (json_is_integer(ex)) {
			_cleanup_json_ json_t *ms = json_integer(json_integer_value(ex) * 1000);
			lcctl_fmt_time(ms, exp, sizeof(exp));
		}
		printf("%-48s %-20s %-9s %-10s %-20s %s\n", lcctl_str(im, "name"), lcctl_str(im, "owner"),
		       lcctl_str(im, "kind"), size, lcctl_str(im, "created"), exp);
	}
	return 0;
}

static int v_node(struct opts *o)
{
	if (o->n < 1 || (strcmp(o->pos[0], "ls") && strcmp(o->pos[0], "list")))
		return lcctl_usage_error("usage: lcctl node ls [--json]");
	if (only(o, 1u << O_JSON, "node ls") || npos(o, 1, 1, "node ls [--json]"))
		return LC_EXIT_USAGE;
	_cleanup_json_ json_t *out = NULL;
	json_t *list;
	int code = lcctl_get_list("/nodes", "nodes", o->json, &out, &list);
	if (code >= 0)
		return code;
	printf("%-20s %-8s %-22s %5s %8s %11s %6s %-20s\n", "NAME", "STATE", "ADDRESS", "CORES", "MEMORY", "SLOTS FREE",
	       "IMAGES", "HEARTBEAT");
	size_t i;
	json_t *n;
	json_array_foreach(list, i, n) {
		char beat[32], mem[32], slots[32];
		lcctl_fmt_time(json_object_get(n, "heartbeat"), beat, sizeof(beat));
		snprintf(mem, sizeof(mem), "%.1fG", (double)json_integer_value(json_object_get(n, "memory")) / (1 << 30));
		snprintf(slots, sizeof(slots), "%lld/%lld", (long long)json_integer_value(json_object_get(n, "free")),
			 (long long)json_integer_value(json_object_get(n, "slots")));
		printf("%-20s %-8s %-22s %5lld %8s %11s %6zu %-20s\n", lcctl_str(n, "name"), lcctl_str(n, "state"),
		       lcctl_str(n, "address"), (long long)json_integer_value(json_object_get(n, "cores")), mem, slots,
		       json_array_size(json_object_get(n, "images")), beat);
	}
	return 0;
}

static int v_task(struct opts *o)
{
	if (o->n < 1)
		return lcctl_usage_error("usage: lcctl task list|show|logs|cancel …");
	const char *sub = o->pos[0];
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (!strcmp(sub, "list") || !strcmp(sub, "ls")) {
		if (only(o, 1u << O_JSON | 1u << O_APP | 1u << O_STATE | 1u << O_LIMIT, "task list") ||
		    npos(o, 1, 1, "task list [--app APP] [--state STATE] [--limit N] [--json]"))
			return LC_EXIT_USAGE;
		char q[512] = "";
		_cleanup_free_ char *a = o->app ? lcc_escape(o->app) : NULL, *s = o->state ? lcc_escape(o->state) : NULL,
				    *l = o->limit ? lcc_escape(o->limit) : NULL;
		snprintf(q, sizeof(q), "/tasks?%s%s%s%s%s%s", a ? "app=" : "", a ? a : "", s ? "&state=" : "", s ? s : "",
			 l ? "&limit=" : "", l ? l : "");
		json_t *tasks;
		int code = lcctl_get_list(q, "tasks", o->json, &out, &tasks);
		if (code >= 0)
			return code;
		printf("%-12s %-30s %-10s %-4s %-20s %s\n", "ID", "APP:FUNCTION", "STATE", "EXIT", "CREATED", "SECONDS");
		size_t i;
		json_t *t;
		json_array_foreach(tasks, i, t) {
			char created[32], fn[128], secs[32] = "-", ec[16] = "-";
			lcctl_fmt_time(json_object_get(t, "created_at"), created, sizeof(created));
			snprintf(fn, sizeof(fn), "%s:%s", lcctl_str(t, "app"), lcctl_str(t, "function"));
			json_t *s0 = json_object_get(t, "started_at"), *s1 = json_object_get(t, "finished_at");
			if (json_is_integer(s0) && json_is_integer(s1))
				snprintf(secs, sizeof(secs), "%.1f", (double)(json_integer_value(s1) - json_integer_value(s0)) / 1000);
			if (json_is_integer(json_object_get(t, "exit_code")))
				snprintf(ec, sizeof(ec), "%lld", (long long)json_integer_value(json_object_get(t, "exit_code")));
			printf("%-12s %-30s %-10s %-4s %-20s %s\n", lcctl_str(t, "id"), fn, lcctl_str(t, "state"), ec, created, secs);
		}
		return 0;
	}
	if (!strcmp(sub, "show") || !strcmp(sub, "cancel")) {
		bool show = !strcmp(sub, "show");
		if (only(o, show ? 1u << O_JSON : 0, show ? "task show" : "task cancel") ||
		    npos(o, 2, 2, show ? "task show ID" : "task cancel ID"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *id = lcc_escape(o->pos[1]);
		_cleanup_free_ char *path = lc_strdup_printf(show ? "/tasks/%s" : "/tasks/%s/cancel", id);
		if (lcctl_request(show ? "GET" : "POST", path, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		if (show)
			lcctl_print_json(out);
		else
			printf("cancelled task %s\n", o->pos[1]);
		return 0;
	}
	if (!strcmp(sub, "logs")) {
		if (only(o, 1u << O_FOLLOW, "task logs") || npos(o, 2, 2, "task logs ID [-f]"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *id = lcc_escape(o->pos[1]);
		_cleanup_free_ char *path = lc_strdup_printf("/tasks/%s/logs%s", id, o->follow ? "?follow=1" : "");
		if (lcc_request_stream(lcctl_client(), "GET", path, NULL, -1, to_stdout, NULL, NULL, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	return lcctl_usage_error("unknown task verb '%s' (list, show, logs, cancel)", sub);
}

static int map_target(const char *s, char **copy, char **path)
{
	*copy = strdup(s);
	char *slash = strchr(*copy, '/');
	if (!slash || slash == *copy || !slash[1] || strchr(slash + 1, '/'))
		return lcctl_usage_error("'%s': expected APP/MAP", s);
	*slash = '\0';
	_cleanup_free_ char *a = lcc_escape(*copy), *m = lcc_escape(slash + 1);
	*path = lc_strdup_printf("/apps/%s/maps/%s", a, m);
	return 0;
}

static int v_map(struct opts *o)
{
	if (o->n < 2)
		return lcctl_usage_error("usage: lcctl map get|set|del|ls APP/MAP …");
	const char *sub = o->pos[0];
	_cleanup_free_ char *copy = NULL, *base = NULL;
	if (map_target(o->pos[1], &copy, &base) != 0)
		return LC_EXIT_USAGE;
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (!strcmp(sub, "ls") || !strcmp(sub, "list")) {
		if (only(o, 1u << O_JSON | 1u << O_PREFIX, "map ls") || npos(o, 2, 2, "map ls APP/MAP [--prefix P] [--json]"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *p = o->prefix ? lcc_escape(o->prefix) : NULL;
		_cleanup_free_ char *path = lc_strdup_printf("%s%s%s", base, p ? "?prefix=" : "", p ? p : "");
		json_t *keys;
		int code = lcctl_get_list(path, "keys", o->json, &out, &keys);
		if (code >= 0)
			return code;
		size_t i;
		json_t *k;
		json_array_foreach(keys, i, k)
			printf("%-30s %s\n", lcctl_str(k, "key"), lcctl_str(k, "value"));
		return 0;
	}
	if (o->n < 3)
		return lcctl_usage_error("usage: lcctl map %s APP/MAP KEY%s", sub, !strcmp(sub, "set") ? " VALUE" : "");
	_cleanup_free_ char *key = lcc_escape(o->pos[2]);
	_cleanup_free_ char *path = lc_strdup_printf("%s/keys/%s", base, key);
	if (!strcmp(sub, "get")) {
		if (only(o, 0, "map get") || npos(o, 3, 3, "map get APP/MAP KEY"))
			return LC_EXIT_USAGE;
		if (lcctl_request("GET", path, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		puts(lcctl_str(out, "value"));
		return 0;
	}
	if (!strcmp(sub, "del") || !strcmp(sub, "delete") || !strcmp(sub, "rm")) {
		if (only(o, 0, "map del") || npos(o, 3, 3, "map del APP/MAP KEY"))
			return LC_EXIT_USAGE;
		if (lcctl_request("DELETE", path, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	if (!strcmp(sub, "set")) {
		if (only(o, 1u << O_TTL | 1u << O_IF_ABSENT, "map set") ||
		    npos(o, 4, 4, "map set APP/MAP KEY VALUE [--ttl SECS] [--if-absent]"))
			return LC_EXIT_USAGE;
		_cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "value", o->pos[3], "if_absent", o->if_absent);
		if (o->ttl) {
			long long ttl;
			if (!lcctl_parse_int(o->ttl, &ttl) || ttl <= 0)
				return lcctl_usage_error("--ttl: expected a positive number of seconds");
			json_object_set_new(body, "ttl", json_integer(ttl));
		}
		if (lcctl_request("PUT", path, body, &out, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	return lcctl_usage_error("unknown map verb '%s' (get, set, del, ls)", sub);
}

static int v_secret(struct opts *o)
{
	if (o->n < 1)
		return lcctl_usage_error("usage: lcctl secret set|ls|delete …");
	const char *sub = o->pos[0];
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (!strcmp(sub, "ls") || !strcmp(sub, "list")) {
		if (only(o, 1u << O_JSON, "secret ls") || npos(o, 1, 1, "secret ls [--json]"))
			return LC_EXIT_USAGE;
		json_t *s;
		int code = lcctl_get_list("/secrets", "secrets", o->json, &out, &s);
		if (code >= 0)
			return code;
		size_t i;
		json_t *e;
		json_array_foreach(s, i, e)
			puts(lcctl_str(e, "name"));
		return 0;
	}
	if (!strcmp(sub, "set")) {
		if (only(o, 1u << O_FROM_ENV, "secret set") || npos(o, 2, 2, "secret set NAME [--from-env VAR] (value on stdin)"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *value = NULL;
		if (o->from_env) {
			const char *v = getenv(o->from_env);
			if (!v)
				return lcctl_usage_error("--from-env: %s is not set", o->from_env);
			value = strdup(v);
		} else {
			if (isatty(STDIN_FILENO))
				fprintf(stderr, "value of %s (end with Ctrl-D): ", o->pos[1]);
			size_t cap = 4096, len = 0;
			value = lc_xmalloc0(cap);
			size_t r;
			while ((r = fread(value + len, 1, cap - len - 1, stdin)) > 0) {
				len += r;
				if (len + 1 >= cap) {
					if (cap > 128 * 1024)
						return lcctl_usage_error("secret value too large");
					cap *= 2;
					value = realloc(value, cap);
				}
			}
			value[len] = '\0';
			if (len && value[len - 1] == '\n')
				value[--len] = '\0'; /* `echo x | lcctl secret set` */
			if (len && value[len - 1] == '\r')
				value[--len] = '\0';
		}
		_cleanup_json_ json_t *body = json_pack("{s:s}", "value", value);
		explicit_bzero(value, strlen(value));
		_cleanup_free_ char *name = lcc_escape(o->pos[1]);
		_cleanup_free_ char *path = lc_strdup_printf("/secrets/%s", name);
		int r = lcctl_request("PUT", path, body, &out, &err);
		if (r < 0)
			return lcctl_fail(err);
		return 0;
	}
	if (!strcmp(sub, "delete") || !strcmp(sub, "rm") || !strcmp(sub, "del")) {
		if (only(o, 0, "secret delete") || npos(o, 2, 2, "secret delete NAME"))
			return LC_EXIT_USAGE;
		_cleanup_free_ char *name = lcc_escape(o->pos[1]);
		_cleanup_free_ char *path = lc_strdup_printf("/secrets/%s", name);
		if (lcctl_request("DELETE", path, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	return lcctl_usage_error("unknown secret verb '%s' (set, ls, delete)", sub);
}

static int v_deployment(struct opts *o)
{
	if (o->n < 1)
		return lcctl_usage_error("usage: lcctl deployment ls|stop|start …");
	const char *sub = o->pos[0];
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcctl_request("GET", "/schedules", NULL, &out, &err) < 0)
		return lcctl_fail(err);
	json_t *list = json_object_get(out, "schedules");
	if (!strcmp(sub, "ls") || !strcmp(sub, "list")) {
		if (only(o, 1u << O_JSON, "deployment ls") || npos(o, 1, 1, "deployment ls [--json]"))
			return LC_EXIT_USAGE;
		if (o->json) {
			lcctl_print_json(list);
			return 0;
		}
		printf("%-30s %-20s %-20s %-8s %s\n", "SCHEDULE", "CRON", "FUNCTION", "STATE", "NEXT");
		size_t i;
		json_t *s;
		json_array_foreach(list, i, s) {
			char name[128], next[32] = "-";
			snprintf(name, sizeof(name), "%s:%s", lcctl_str(s, "app"), lcctl_str(s, "name"));
			json_t *nx = json_object_get(s, "next");
			if (json_is_integer(nx))
				lcctl_fmt_time(json_integer(json_integer_value(nx) * 1000), next, sizeof(next));
			printf("%-30s %-20s %-20s %-8s %s\n", name, lcctl_str(s, "cron"), lcctl_str(s, "function"),
			       json_is_true(json_object_get(s, "paused")) ? "stopped" : "active", next);
		}
		return 0;
	}
	if (strcmp(sub, "stop") && strcmp(sub, "start"))
		return lcctl_usage_error("unknown deployment verb '%s' (ls, stop, start)", sub);
	if (only(o, 0, "deployment") || npos(o, 2, 2, "deployment stop|start [APP:]SCHEDULE"))
		return LC_EXIT_USAGE;
	/* NAME is APP:SCHEDULE, or a schedule name unique across apps. */
	const char *want = o->pos[1], *colon = strchr(want, ':');
	json_t *hit = NULL;
	size_t i, hits = 0;
	json_t *s;
	json_array_foreach(list, i, s) {
		char full[256];
		snprintf(full, sizeof(full), "%s:%s", lcctl_str(s, "app"), lcctl_str(s, "name"));
		if (colon ? !strcmp(full, want) : !strcmp(lcctl_str(s, "name"), want)) {
			hit = s;
			hits++;
		}
	}
	if (hits == 0) {
		lc_error_set(&err, LC_EXIT_UNKNOWN, 0, "no schedule named '%s'", want);
		return lcctl_fail(err);
	}
	if (hits > 1)
		return lcctl_usage_error("schedule name '%s' is in several apps: say APP:%s", want, want);
	_cleanup_free_ char *a = lcc_escape(lcctl_str(hit, "app")), *n = lcc_escape(lcctl_str(hit, "name"));
	_cleanup_free_ char *path = lc_strdup_printf("/apps/%s/schedules/%s/%s", a, n, sub);
	_cleanup_json_ json_t *r = NULL;
	if (lcctl_request("POST", path, NULL, &r, &err) < 0)
		return lcctl_fail(err);
	printf("%s %s:%s\n", !strcmp(sub, "stop") ? "stopped" : "started", lcctl_str(hit, "app"), lcctl_str(hit, "name"));
	return 0;
}

static int v_status(struct opts *o)
{
	if (only(o, 1u << O_JSON, "status") || npos(o, 0, 0, "status"))
		return LC_EXIT_USAGE;
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcctl_request("GET", "/health", NULL, &out, &err) < 0)
		return lcctl_fail(err);
	if (o->json)
		lcctl_print_json(out);
	else
		printf("lcd %s is up on %s\n", lcctl_str(out, "version"), lcc_endpoint(lcctl_client()));
	return 0;
}

static const char help[] =
	"usage: lcctl [--socket PATH] VERB …\n\n"
	"  deploy APP.json [--config KEY=VALUE]…  validate and store an app (again: replace it);\n"
	"                                       --config sets one key of its config\n"
	"  app list|show APP|delete APP         deployed apps\n"
	"  run APP:FUNCTION [JSON-ARGS] [--detach]  spawn a task and wait for its result\n"
	"  run APP:SCHEDULE                     fire a schedule now\n"
	"  task list [--app A] [--state S] [--limit N] [--json]\n"
	"  task show ID | task logs ID [-f] | task cancel ID\n"
	"  map get|del APP/MAP KEY | map set APP/MAP KEY VALUE [--ttl SECS] [--if-absent]\n"
	"  map ls APP/MAP [--prefix P] [--json]\n"
	"  secret set NAME [--from-env VAR]     value from stdin unless --from-env\n"
	"  secret ls [--json] | secret delete NAME\n"
	"  deployment ls [--json] | deployment stop|start [APP:]SCHEDULE\n"
	"  image ls [--json]                    images, with their owner and end (snapshots, forks)\n"
	"  node ls [--json]                     the lcd nodes sharing this one's store, their room\n"
	"  status                               is lcd up?\n"
	"  sandbox create|ls|show|exec|cp|snapshot|fork|stop|start|pause|resume|rm …\n"
	"                                       sandboxes through lcd (lcctl sandbox --help)\n"
	"  devbox create|ls|show|start|stop|rm …, devbox NAME ssh [-- CMD] | NAME proxy\n"
	"                                       boxes you SSH into (lcctl devbox --help)\n"
	"  ssh-config [--prune]                 Host lcrun-NAME blocks in ~/.ssh/config\n"
	"  disk ls [--json] | disk delete NAME  devboxes' disks\n\n"
	"The socket is --socket, else $LCD_URL (http://HOST:PORT, with $LCD_TOKEN), else $LCD_SOCKET,\n"
	"else $LCRUN_STATE_DIR/lcd.sock (/run/lcrun/lcd.sock).\n"
	"Exit codes: 0 ok; run: the task's exit status (124 timed out, 117 cancelled);\n"
	"117 wrong state, 118 not permitted, 119 busy or full (queue full, claim lost), 120 unknown\n"
	"app/task/key, 121 invalid content, 122 missing file, 123 usage, 125 lcd unreachable or failed.\n";

int main(int argc, char **argv)
{
	int h = lcctl_help(argc < 2 ? NULL : argv[1], help);
	if (h >= 0)
		return h;
	/* lcctl [--socket PATH] sandbox …: that noun parses its own options */
	const char *socket = NULL;
	int first = 1;
	if (first + 1 < argc && !strcmp(argv[first], "--socket"))
		socket = argv[first + 1], first += 2;
	else if (!strncmp(argv[first], "--socket=", 9))
		socket = argv[first] + 9, first++;
	bool sandbox = first < argc && !strcmp(argv[first], "sandbox");
	bool devbox = first < argc && (!strcmp(argv[first], "devbox") || !strcmp(argv[first], "disk") ||
				       !strcmp(argv[first], "ssh-config"));
	sandbox |= devbox;
	struct opts o = { 0 };
	o.pos = lc_xmalloc0(sizeof(char *) * (size_t)argc);
	if (!sandbox) {
		if (parse_opts(argc, argv, &o) != 0)
			return LC_EXIT_USAGE;
		if (o.n == 0) {
			fputs(help, stderr);
			return LC_EXIT_USAGE;
		}
		socket = o.socket;
	}
	lc_error_t *err = NULL;
	if (lcctl_connect(socket, &err) < 0)
		return lcctl_fail(err);
	int r;
	if (devbox) {
		r = lcctl_devbox(argc - first, argv + first);
		lcctl_disconnect();
		return r;
	}
	if (sandbox) {
		r = lcctl_sandbox(argc - first - 1, argv + first + 1);
		lcctl_disconnect();
		return r;
	}
	const char *verb = o.pos[0];
	o.pos++;
	o.n--;
	if (!strcmp(verb, "deploy"))
		r = v_deploy(&o);
	else if (!strcmp(verb, "app"))
		r = v_app(&o);
	else if (!strcmp(verb, "run"))
		r = v_run(&o);
	else if (!strcmp(verb, "task"))
		r = v_task(&o);
	else if (!strcmp(verb, "map"))
		r = v_map(&o);
	else if (!strcmp(verb, "secret"))
		r = v_secret(&o);
	else if (!strcmp(verb, "image"))
		r = v_image(&o);
	else if (!strcmp(verb, "node"))
		r = v_node(&o);
	else if (!strcmp(verb, "deployment"))
		r = v_deployment(&o);
	else if (!strcmp(verb, "status"))
		r = v_status(&o);
	else
		r = lcctl_usage_error("unknown verb '%s' (see lcctl --help)", verb);
	lcctl_disconnect();
	lc_strv_free(o.config);
	return r;
}
