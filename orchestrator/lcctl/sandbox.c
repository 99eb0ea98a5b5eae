/* sandbox.c — lcctl sandbox VERB: sandboxes through lcd's API (the same
 * calls a function makes with its token).
 *
 *   create [OPTIONS]             prints the id
 *   ls [--label K=V] [--app A] [--state S] [--json]
 *   show ID
 *   exec [-e K=V] [-w DIR] [-u UID[:GID]] [--timeout S] [-i] ID -- CMD…
 *                                streams, exits with the command's status
 *   cp SRC DST                   one side ID:/path; "-" a tar stream
 *   snapshot ID IMAGE | fork ID N [--json]
 *   stop|start|pause|resume ID | rm ID… */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "common.h"
#include "sandbox.h"
#include "util.h"

#define STDIN_MAX (16 << 20)
/* A usage error inside a helper: the line is printed, -1 returned. */
#define USAGE(...) (lcctl_usage_error(__VA_ARGS__), -1)

static const char help[] =
	"usage: lcctl sandbox VERB …\n"
	"  create [--image NAME] [--limits SET] [--memory SIZE] [--cpus X] [--pids N] [--disk SIZE] [--net POLICY]\n"
	"         [-e K=V]… [--secret NAME]… [-u UID[:GID]] [-w DIR] [--ttl S] [--idle-timeout S]\n"
	"         [--label K=V]… [--name NAME] [--model-gateway PROVIDER:SECRET [--budget-usd N]] [--json]\n"
	"                                                      make a sandbox, print its id\n"
	"  ls [--label K=V]… [--app APP] [--state STATE] [--json]\n"
	"  show ID                                             the sandbox as JSON\n"
	"  exec [-e K=V]… [-w DIR] [-u UID[:GID]] [--timeout S] [-i] ID -- CMD [ARG…]\n"
	"                                                      run CMD, streaming; exits with its status\n"
	"  cp SRC DST                                          copy a file or directory; one side is ID:/path;\n"
	"                                                      - is a tar stream on stdin/stdout\n"
	"  snapshot ID IMAGE                                   save the sandbox as an image\n"
	"  fork ID N [--json]                                  N new sandboxes from a snapshot of ID\n"
	"  stop|start|pause|resume ID, rm ID…                  lifecycle (rm: terminate and remove)\n";

enum { O_IMAGE = 256, O_LIMITS, O_MEMORY, O_CPUS, O_PIDS, O_DISK, O_NET, O_SECRET, O_TTL, O_IDLE, O_LABEL, O_NAME, O_JSON,
       O_APP, O_STATE, O_TIMEOUT, O_GATEWAY, O_BUDGET };

static const struct option long_opts[] = {
	{ "image", required_argument, NULL, O_IMAGE },   { "limits", required_argument, NULL, O_LIMITS },
	{ "memory", required_argument, NULL, O_MEMORY }, { "cpus", required_argument, NULL, O_CPUS },
	{ "pids", required_argument, NULL, O_PIDS },     { "net", required_argument, NULL, O_NET },
	{ "disk", required_argument, NULL, O_DISK },
	{ "env", required_argument, NULL, 'e' },         { "secret", required_argument, NULL, O_SECRET },
	{ "user", required_argument, NULL, 'u' },        { "workdir", required_argument, NULL, 'w' },
	{ "ttl", required_argument, NULL, O_TTL },       { "idle-timeout", required_argument, NULL, O_IDLE },
	{ "label", required_argument, NULL, O_LABEL },   { "name", required_argument, NULL, O_NAME },
	{ "json", no_argument, NULL, O_JSON },           { "app", required_argument, NULL, O_APP },
	{ "state", required_argument, NULL, O_STATE },   { "timeout", required_argument, NULL, O_TIMEOUT },
	{ "interactive", no_argument, NULL, 'i' },       { "help", no_argument, NULL, 'h' },
	{ "model-gateway", required_argument, NULL, O_GATEWAY }, { "budget-usd", required_argument, NULL, O_BUDGET },
	{ NULL, 0, NULL, 0 },
};

typedef struct sbopts {
	json_t *req;     /* create / exec request being built */
	char **labels;   /* ls filters */
	const char *app, *state;
	bool json, in;
	int n;           /* positional arguments */
	char **pos;
} sbopts_t;

static int positive(const char *opt, const char *v, long long *out)
{
	if (!lcctl_parse_int(v, out) || *out <= 0)
		return USAGE("%s: expected a positive number, got '%s'", opt, v);
	return 0;
}

static json_t *member(json_t *o, const char *k, json_t *(*mk)(void))
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		v = mk();
		json_object_set_new(o, k, v);
	}
	return v;
}

/* Options of every verb into o; allowed: the option codes this verb takes
 * (a string of short letters and a list of long codes). */
static int parse(int argc, char **argv, const char *shorts, const int *longs, bool stop_at_arg, sbopts_t *o)
{
	_cleanup_free_ char *spec = lc_strdup_printf("%s%s", stop_at_arg ? "+" : "", shorts);
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, spec, long_opts, NULL)) != -1) {
		bool ok = c < 256 && c != '?' && c != ':';
		for (size_t i = 0; !ok && longs && longs[i]; i++)
			ok = longs[i] == c;
		if (c == 'h') {
			fputs(help, stdout);
			return 1;
		}
		if (!ok || c == '?') {
			const char *bad = argv[optind - 1];
			return USAGE("sandbox %s: unknown option '%s' (see lcctl sandbox --help)", argv[0], bad);
		}
		long long n;
		json_t *lim;
		switch (c) {
		case O_IMAGE: json_object_set_new(o->req, "image", json_string(optarg)); break;
		case O_LIMITS: json_object_set_new(o->req, "limits", json_string(optarg)); break;
		case O_MEMORY:
		case O_CPUS:
		case O_PIDS:
		case O_DISK:
			lim = json_object_get(o->req, "limits");
			if (json_is_string(lim))
				return USAGE("--limits SET and --memory/--cpus/--pids/--disk do not mix");
			lim = member(o->req, "limits", json_object);
			if (c == O_MEMORY || c == O_DISK)
				json_object_set_new(lim, c == O_DISK ? "disk" : "memory", json_string(optarg));
			else if (c == O_CPUS) {
				double x;
				if (!lcctl_parse_number(optarg, &x) || x <= 0)
					return USAGE("--cpus: expected a positive number, got '%s'", optarg);
				json_object_set_new(lim, "cpus", json_real(x));
			} else {
				if (positive("--pids", optarg, &n) < 0)
					return -1;
				json_object_set_new(lim, "pids", json_integer(n));
			}
			break;
		case O_NET: json_object_set_new(o->req, "net", json_string(optarg)); break;
		case 'e': {
			if (!strchr(optarg, '='))
				return USAGE("-e: expected NAME=VALUE, got '%s'", optarg);
			json_array_append_new(member(o->req, "env", json_array), json_string(optarg));
			break;
		}
		case O_SECRET: json_array_append_new(member(o->req, "secrets", json_array), json_string(optarg)); break;
		case 'u': json_object_set_new(o->req, "user", json_string(optarg)); break;
		case 'w': json_object_set_new(o->req, "workdir", json_string(optarg)); break;
		case O_TTL:
		case O_IDLE:
		case O_TIMEOUT:
			if (positive(c == O_TTL ? "--ttl" : c == O_IDLE ? "--idle-timeout" : "--timeout", optarg, &n) < 0)
				return -1;
			json_object_set_new(o->req, c == O_TTL ? "ttl" : c == O_IDLE ? "idle_timeout" : "timeout", json_integer(n));
			break;
		case O_LABEL: {
			const char *eq = strchr(optarg, '=');
			if (o->labels || !o->req) {
				lc_strv_push(&o->labels, optarg);
			} else {
				if (!eq)
					return USAGE("--label: expected KEY=VALUE, got '%s'", optarg);
				_cleanup_free_ char *k = strndup(optarg, (size_t)(eq - optarg));
				json_object_set_new(member(o->req, "labels", json_object), k, json_string(eq + 1));
			}
			break;
		}
		case O_NAME: json_object_set_new(o->req, "name", json_string(optarg)); break;
		case O_GATEWAY: {
			/* PROVIDER:SECRET, e.g. anthropic:ANTHROPIC_API_KEY */
			const char *colon = strchr(optarg, ':');
			if (!colon || colon == optarg || !colon[1])
				return USAGE("--model-gateway: expected PROVIDER:SECRET (e.g. anthropic:ANTHROPIC_API_KEY), got '%s'",
					     optarg);
			json_t *g = member(o->req, "model_gateway", json_object);
			json_object_set_new(g, "provider", json_stringn(optarg, (size_t)(colon - optarg)));
			json_object_set_new(g, "secret", json_string(colon + 1));
			break;
		}
		case O_BUDGET: {
			double x;
			if (!lcctl_parse_number(optarg, &x) || !(x > 0))
				return USAGE("--budget-usd: expected a positive amount of dollars, got '%s'", optarg);
			json_object_set_new(member(o->req, "model_gateway", json_object), "budget_usd", json_real(x));
			break;
		}
		case O_JSON: o->json = true; break;
		case O_APP: o->app = optarg; break;
		case O_STATE: o->state = optarg; break;
		case 'i': o->in = true; break;
		}
	}
	o->pos = argv + optind;
	o->n = argc - optind;
	return 0;
}

static int v_create(int argc, char **argv)
{
	static const int longs[] = { O_IMAGE, O_LIMITS, O_MEMORY, O_CPUS, O_PIDS, O_DISK, O_NET, O_SECRET, O_TTL, O_IDLE,
		O_LABEL, O_NAME, O_JSON, O_GATEWAY, O_BUDGET, 'h', 0 };
	_cleanup_json_ json_t *req = json_object();
	sbopts_t o = { .req = req };
	int r = parse(argc, argv, "e:u:w:h", longs, false, &o);
	if (r)
		return r < 0 ? LC_EXIT_USAGE : 0;
	if (o.n)
		return lcctl_usage_error("sandbox create takes no arguments (run commands with lcctl sandbox exec ID -- CMD)");
	json_t *gw = json_object_get(req, "model_gateway");
	if (gw && !json_object_get(gw, "provider"))
		return lcctl_usage_error("--budget-usd goes with --model-gateway PROVIDER:SECRET");
	lc_error_t *err = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *info = NULL;
	if (lcc_sandbox_create(lcctl_client(), req, &id, &info, &err) < 0)
		return lcctl_fail(err);
	if (o.json)
		lcctl_print_json(info);
	else
		puts(id);
	return 0;
}

static int v_ls(int argc, char **argv)
{
	static const int longs[] = { O_LABEL, O_APP, O_STATE, O_JSON, 'h', 0 };
	sbopts_t o = { 0 };
	int r = parse(argc, argv, "h", longs, false, &o);
	_cleanup_strv_ char **labels = o.labels;
	if (r)
		return r < 0 ? LC_EXIT_USAGE : 0;
	if (o.n)
		return lcctl_usage_error("usage: lcctl sandbox ls [--label K=V]… [--app APP] [--state STATE] [--json]");
	_cleanup_free_ char *q = strdup("/sandboxes?");
	const char *keys[] = { "app", "state" }, *vals[] = { o.app, o.state };
	for (size_t i = 0; i < 2; i++)
		if (vals[i]) {
			_cleanup_free_ char *e = lcc_escape(vals[i]), *old = q;
			q = lc_strdup_printf("%s%s=%s&", old, keys[i], e);
		}
	for (size_t i = 0; labels && labels[i]; i++) {
		_cleanup_free_ char *e = lcc_escape(labels[i]), *old = q;
		q = lc_strdup_printf("%slabel=%s&", old, e);
	}
	_cleanup_json_ json_t *out = NULL;
	json_t *list;
	int code = lcctl_get_list(q, "sandboxes", o.json, &out, &list);
	if (code >= 0)
		return code;
	printf("%-12s %-16s %-24s %-9s %-24s %-20s %s\n", "ID", "NAME", "IMAGE", "STATE", "OWNER", "CREATED", "MEMORY");
	size_t i;
	json_t *s;
	json_array_foreach(list, i, s) {
		char created[32], owner[64], mem[32] = "-";
		lcctl_fmt_time(json_object_get(s, "created"), created, sizeof(created));
		json_t *ow = json_object_get(s, "owner");
		if (!strcmp(lcctl_str(ow, "kind"), "task"))
			snprintf(owner, sizeof(owner), "%s:%s", lcctl_str(ow, "app"), lcctl_str(ow, "task"));
		else
			snprintf(owner, sizeof(owner), "operator");
		json_t *m = json_object_get(s, "memory_bytes");
		if (json_is_integer(m))
			snprintf(mem, sizeof(mem), "%.1f MiB", (double)json_integer_value(m) / (1 << 20));
		printf("%-12s %-16s %-24s %-9s %-24s %-20s %s\n", lcctl_str(s, "id"), lcctl_str(s, "name"), lcctl_str(s, "image"),
		       lcctl_str(s, "state"), owner, created, mem);
	}
	return 0;
}

static void on_output(int stream, const char *data, size_t len, void *ud)
{
	(void)ud;
	lc_write_all(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

static int read_stdin_b64(json_t *req)
{
	size_t cap = 65536, len = 0;
	_cleanup_free_ unsigned char *buf = lc_xmalloc0(cap);
	for (;;) {
		if (len == cap) {
			if (cap >= STDIN_MAX)
				return USAGE("-i: standard input is larger than %d bytes", STDIN_MAX);
			cap *= 2;
			buf = realloc(buf, cap);
		}
		ssize_t r = read(STDIN_FILENO, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	_cleanup_free_ char *b64 = lc_xmalloc0(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)b64, buf, (int)len);
	json_object_set_new(req, "stdin", json_string(b64));
	return 0;
}

static int v_exec(int argc, char **argv)
{
	static const int longs[] = { O_TIMEOUT, 'h', 0 };
	_cleanup_json_ json_t *req = json_object();
	sbopts_t o = { .req = req };
	int r = parse(argc, argv, "e:u:w:ih", longs, true, &o);
	if (r)
		return r < 0 ? LC_EXIT_USAGE : 0;
	char **pos = o.pos;
	int n = o.n;
	if (n >= 2 && !strcmp(pos[1], "--")) {
		pos[1] = pos[0];
		pos++;
		n--;
	}
	if (n < 2)
		return lcctl_usage_error("usage: lcctl sandbox exec [-e K=V]… [-w DIR] [-u UID[:GID]] [--timeout S] [-i] ID -- CMD…");
	json_t *a = json_array();
	for (int i = 1; i < n; i++)
		json_array_append_new(a, json_string(pos[i]));
	json_object_set_new(req, "argv", a);
	if (o.in && read_stdin_b64(req) < 0)
		return LC_EXIT_USAGE;
	lc_error_t *err = NULL;
	lcc_exec_result_t res;
	if (lcc_sandbox_exec_stream(lcctl_client(), pos[0], req, on_output, NULL, &res, &err) < 0)
		return lcctl_fail(err);
	if (res.timed_out)
		fprintf(stderr, "lcctl: the command timed out\n");
	return res.exit_code;
}

/* ---- cp ---- */

/* "ID:/path" -> id and path (into a copy the caller frees); NULL for a host path. */
static char *sandbox_side(const char *arg, char **path)
{
	const char *colon = strchr(arg, ':');
	const char *slash = strchr(arg, '/');
	if (!colon || colon == arg || (slash && slash < colon))
		return NULL;
	*path = strdup(colon + 1);
	return strndup(arg, (size_t)(colon - arg));
}

/* Run fn(fd) in a child (the tar helpers change the working directory)
 * on one end of a pipe; *other gets the other end. */
static pid_t tar_child(bool produce, const char *path, int *other)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		lc_error_t *e = NULL;
		int r = produce ? (close(p[0]), lc_tar_from_host(path, p[1], &e)) : (close(p[1]), lc_tar_to_host(p[0], path, &e));
		if (r < 0) {
			lc_error_print(e, "lcctl");
			_exit(e ? e->exit_code : 1);
		}
		_exit(0);
	}
	close(produce ? p[1] : p[0]);
	*other = produce ? p[0] : p[1];
	return pid;
}

static int child_status(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : LC_EXIT_RUNTIME;
}

static int cp_in(const char *src, const char *id, const char *dst)
{
	lcc_t *c = lcctl_client();
	lc_error_t *err = NULL;
	struct stat st;
	if (!strcmp(src, "-")) {
		if (lcc_sandbox_upload_fd(c, id, dst, STDIN_FILENO, true, 0, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	if (stat(src, &st) < 0) {
		lc_error_set(&err, LC_EXIT_NOENT, errno, "%s", src);
		return lcctl_fail(err);
	}
	if (S_ISDIR(st.st_mode)) {
		/* a directory lands inside dst, which must exist */
		int fd;
		pid_t pid = tar_child(true, src, &fd);
		if (pid < 0)
			return lcctl_fail_errno("cannot fork");
		int r = lcc_sandbox_upload_fd(c, id, dst, fd, true, 0, &err);
		close(fd);
		int cs = child_status(pid);
		if (r < 0)
			return lcctl_fail(err);
		return cs;
	}
	_cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		lc_error_set(&err, LC_EXIT_NOENT, errno, "%s", src);
		return lcctl_fail(err);
	}
	unsigned mode = st.st_mode & 0777;
	size_t n = strlen(dst);
	_cleanup_free_ char *b = strdup(src);
	_cleanup_free_ char *target = n && dst[n - 1] == '/' ? lc_strdup_printf("%s%s", dst, basename(b)) : strdup(dst);
	if (lcc_sandbox_upload_fd(c, id, target, fd, false, mode, &err) < 0) {
		if (err->exit_code != LC_EXIT_USAGE || !strstr(err->msg, "is a directory"))
			return lcctl_fail(err);
		/* dst is a directory: the file lands inside it */
		lc_error_free(err);
		err = NULL;
		free(target);
		target = lc_strdup_printf("%s/%s", dst, basename(b));
		if (lseek(fd, 0, SEEK_SET) < 0 || lcc_sandbox_upload_fd(c, id, target, fd, false, mode, &err) < 0)
			return lcctl_fail(err);
	}
	return 0;
}

static int cp_out(const char *id, const char *src, const char *dst)
{
	lcc_t *c = lcctl_client();
	lc_error_t *err = NULL;
	if (!strcmp(dst, "-")) {
		if (lcc_sandbox_download_fd(c, id, src, STDOUT_FILENO, true, &err) < 0)
			return lcctl_fail(err);
		return 0;
	}
	struct stat st;
	bool dst_dir = stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
	_cleanup_free_ char *b = strdup(src);
	_cleanup_free_ char *target = dst_dir ? lc_strdup_printf("%s/%s", dst, basename(b)) : strdup(dst);
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.lcctl-XXXXXX", target);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		lc_error_set(&err, LC_EXIT_NOENT, errno, "%s", target);
		return lcctl_fail(err);
	}
	int r = lcc_sandbox_download_fd(c, id, src, fd, false, &err);
	close(fd);
	if (r == 0) {
		if (rename(tmp, target) < 0) {
			unlink(tmp);
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "%s", target);
			return lcctl_fail(err);
		}
		chmod(target, 0644);
		return 0;
	}
	unlink(tmp);
	if (err->exit_code != LC_EXIT_USAGE || !strstr(err->msg, "is a directory"))
		return lcctl_fail(err);
	/* a directory: as a tar stream, extracted inside dst */
	lc_error_free(err);
	err = NULL;
	if (!dst_dir) {
		lc_error_set(&err, LC_EXIT_NOENT, 0, "%s: copying directory %s needs an existing directory here", dst, src);
		return lcctl_fail(err);
	}
	int wfd;
	pid_t pid = tar_child(false, dst, &wfd);
	if (pid < 0)
		return lcctl_fail_errno("cannot fork");
	r = lcc_sandbox_download_fd(c, id, src, wfd, true, &err);
	close(wfd);
	int cs = child_status(pid);
	if (r < 0)
		return lcctl_fail(err);
	return cs;
}

static int v_cp(int argc, char **argv)
{
	sbopts_t o = { 0 };
	static const int longs[] = { 'h', 0 };
	int r = parse(argc, argv, "h", longs, false, &o);
	if (r)
		return r < 0 ? LC_EXIT_USAGE : 0;
	if (o.n != 2)
		return lcctl_usage_error("usage: lcctl sandbox cp SRC DST (one side ID:/path)");
	_cleanup_free_ char *sp = NULL, *dp = NULL;
	_cleanup_free_ char *sid = sandbox_side(o.pos[0], &sp);
	_cleanup_free_ char *did = sandbox_side(o.pos[1], &dp);
	if (!!sid == !!did)
		return lcctl_usage_error("sandbox cp: exactly one side must be in a sandbox (ID:/path)");
	return did ? cp_in(o.pos[0], did, dp) : cp_out(sid, sp, o.pos[1]);
}

static int v_simple(int argc, char **argv)
{
	const char *verb = argv[0];
	sbopts_t o = { 0 };
	static const int longs[] = { O_JSON, 'h', 0 };
	int r = parse(argc, argv, "h", longs, false, &o);
	if (r)
		return r < 0 ? LC_EXIT_USAGE : 0;
	lcc_t *c = lcctl_client();
	lc_error_t *err = NULL;
	if (!strcmp(verb, "show")) {
		if (o.n != 1)
			return lcctl_usage_error("usage: lcctl sandbox show ID");
		_cleanup_json_ json_t *info = NULL;
		if (lcc_sandbox_get(c, o.pos[0], &info, &err) < 0)
			return lcctl_fail(err);
		lcctl_print_json(info);
		return 0;
	}
	if (!strcmp(verb, "snapshot")) {
		if (o.n != 2)
			return lcctl_usage_error("usage: lcctl sandbox snapshot ID IMAGE");
		_cleanup_free_ char *digest = NULL;
		if (lcc_sandbox_snapshot(c, o.pos[0], o.pos[1], &digest, &err) < 0)
			return lcctl_fail(err);
		printf("%s %s\n", o.pos[1], digest ? digest : "");
		return 0;
	}
	if (!strcmp(verb, "fork")) {
		long long n;
		if (o.n != 2)
			return lcctl_usage_error("usage: lcctl sandbox fork ID N [--json]");
		if (positive("N", o.pos[1], &n) < 0)
			return LC_EXIT_USAGE;
		_cleanup_json_ json_t *ids = NULL;
		if (lcc_sandbox_fork(c, o.pos[0], (int)n, &ids, &err) < 0)
			return lcctl_fail(err);
		if (o.json) {
			lcctl_print_json(ids);
		} else {
			size_t i;
			json_t *id;
			json_array_foreach(ids, i, id)
				puts(json_string_value(id));
		}
		return 0;
	}
	if (!strcmp(verb, "rm")) {
		if (o.n < 1)
			return lcctl_usage_error("usage: lcctl sandbox rm ID…");
		int code = 0;
		for (int i = 0; i < o.n; i++) {
			_cleanup_free_ char *p = NULL, *e = lcc_escape(o.pos[i]);
			p = lc_strdup_printf("/sandboxes/%s", e);
			if (lcctl_request("DELETE", p, NULL, NULL, &err) < 0) {
				code = lcctl_fail(err);
				err = NULL;
			}
		}
		return code;
	}
	if (o.n != 1)
		return lcctl_usage_error("usage: lcctl sandbox %s ID", verb);
	if (lcc_sandbox_verb(c, o.pos[0], verb, &err) < 0)
		return lcctl_fail(err);
	return 0;
}

int lcctl_sandbox(int argc, char **argv)
{
	int h = lcctl_help(argc < 1 ? NULL : argv[0], help);
	if (h >= 0)
		return h;
	const char *verb = argv[0];
	if (!strcmp(verb, "create"))
		return v_create(argc, argv);
	if (!strcmp(verb, "ls") || !strcmp(verb, "list"))
		return v_ls(argc, argv);
	if (!strcmp(verb, "exec"))
		return v_exec(argc, argv);
	if (!strcmp(verb, "cp"))
		return v_cp(argc, argv);
	static const char *const simple[] = { "show", "snapshot", "fork", "stop", "start", "pause", "resume", "rm", NULL };
	for (size_t i = 0; simple[i]; i++)
		if (!strcmp(verb, simple[i]))
			return v_simple(argc, argv);
	return lcctl_usage_error("unknown sandbox verb '%s' (create, ls, show, exec, cp, snapshot, fork, stop, start, pause, "
			   "resume, rm)", verb);
}
