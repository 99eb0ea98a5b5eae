/* e2b.c — lcd's E2B-compatible listener: the daemon, who calls, and the
 * E2B control API (what the SDKs call at E2B_API_URL).  envd's half is in
 * e2b_envd.c.
 *
 * The API key (X-API-Key) is the operator's token (lcd.json token_file),
 * which reaches every sandbox, or a live task's token, which reaches the
 * sandboxes of its task, as on /v1.  Every sandbox has an access token of
 * its own (e2bproto.h: derived from a key in lcd's state directory) that
 * reaches envd for that sandbox only; the control API hands it out with
 * the sandbox, to whoever may see the sandbox.
 *
 * How E2B maps onto lcd: a template is an lcd image ("base": the listener's
 * base image, lcd's host image by default); metadata are labels, envVars
 * the sandbox's env, timeout its ttl (setTimeout and connect change it:
 * lc_sandbox_set_expiry); pause freezes it (with memory: false it is
 * stopped, its files kept), and a paused sandbox has no ttl until it is
 * connected again; fork and snapshots are lcd's.  Everything else (the
 * network rules, volumes, secrets, templates built through the API) is
 * refused by name, 400 at create and 501 as routes.  Errors are E2B's
 * {"code": STATUS, "message"}. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "api.h"
#include "e2b.h"
#include "exec.h"
#include "image.h"
#include "images.h"
#include "json.h"
#include "procs.h"
#include "reply.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

#define DEFAULT_TIMEOUT_S 300
#define TIMEOUT_MAX_S (30 * 86400) /* lcd's ttl limit */
#define LIST_LIMIT 100
#define HTTP_TOO_LARGE 413
#define SNAPSHOTS "snapshots/"

/* ---- replies ---- */

enum MHD_Result e2b_reply(struct MHD_Connection *c, unsigned status, json_t *body)
{
	if (body)
		return api_send(c, status, api_json_response(body, JSON_COMPACT | JSON_ENCODE_ANY, false));
	return api_send(c, status, MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result e2b_fail(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_t *msg = api_vtext("error", fmt, ap);
	va_end(ap);
	return e2b_reply(c, status, json_pack("{s:i, s:o}", "code", (int)status, "message", msg));
}

unsigned e2b_status_of(const lc_error_t *err)
{
	int code = err ? err->exit_code : LC_EXIT_RUNTIME;
	if (code == LC_EXIT_BUSY)
		return err->errnum == EDQUOT ? 429 : 409;
	return api_status_of(code);
}

static enum MHD_Result fail_err(struct MHD_Connection *c, lc_error_t *err)
{
	enum MHD_Result r = e2b_fail(c, e2b_status_of(err), "%s", err && err->msg ? err->msg : "internal error");
	lc_error_free(err);
	return r;
}

/* ---- sandboxes as E2B shows them ---- */


/* A view's state as E2B names it: running or paused (a stopped sandbox
 * is paused without its memory); NULL: not shown. */
static const char *e2b_state(json_t *view)
{
	const char *s = lc_json_str(view, "state");
	if (!s)
		return NULL;
	if (!strcmp(s, "running") || !strcmp(s, "creating"))
		return "running";
	if (!strcmp(s, "paused") || !strcmp(s, "stopped"))
		return "paused";
	return NULL;
}

static const char *template_of(struct lcd_e2b *srv, json_t *view)
{
	const char *image = lc_json_str(view, "image");
	return !image || !strcmp(image, srv->base_image) ? "base" : image;
}

/* The Sandbox object of create, connect and fork. */
static json_t *sandbox_json(struct lcd_e2b *srv, json_t *view)
{
	const char *id = lc_json_str(view, "id");
	char tok[LCD_E2B_TOKEN_LEN + 1];
	lcd_e2b_token(srv->key, id, tok);
	const char *tmpl = template_of(srv, view);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:n, s:n}", "sandboxID", id, "templateID", tmpl, "alias",
			      tmpl, "clientID", "lcd", "envdVersion", LCD_ENVD_VERSION, "envdAccessToken", tok,
			      "trafficAccessToken", "domain");
	explicit_bzero(tok, sizeof(tok));
	return j;
}

static long long host_mib(void)
{
	struct sysinfo si;
	if (sysinfo(&si) < 0)
		return 0;
	return (long long)((unsigned long long)si.totalram * si.mem_unit >> 20);
}

/* ListedSandbox (detail: SandboxDetail, with the access token). */
static json_t *listed_json(struct lcd_e2b *srv, json_t *view, bool detail)
{
	const char *id = lc_json_str(view, "id");
	long long created = json_integer_value(json_object_get(view, "created"));
	json_t *exp = json_object_get(view, "expires");
	char started[32], end[32];
	lcd_e2b_time_ms(created, started);
	if (json_is_integer(exp) && json_integer_value(exp) > 0)
		lcd_e2b_time_ms(json_integer_value(exp), end);
	else
		snprintf(end, sizeof(end), "9999-12-31T23:59:59.000Z"); /* no ttl */
	json_t *lim = json_object_get(view, "limits");
	double cpus = json_number_value(json_object_get(lim, "cpus"));
	long long mem = json_integer_value(json_object_get(lim, "memory"));
	long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
	int cpu_count = cpus > 0 ? (int)(cpus + 0.999) : (int)(n_cpu > 0 ? n_cpu : 1);
	long long mem_mib = mem > 0 ? mem >> 20 : host_mib();
	const char *tmpl = template_of(srv, view);
	json_t *labels = json_object_get(view, "labels");
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:i, s:o}", "sandboxID", id,
			      "templateID", tmpl, "alias", tmpl, "clientID", "lcd", "startedAt", started, "endAt", end,
			      "state", e2b_state(view) ? e2b_state(view) : "running", "envdVersion", LCD_ENVD_VERSION,
			      "cpuCount", cpu_count, "memoryMB", (json_int_t)mem_mib, "diskSizeMB", 0, "metadata",
			      json_is_object(labels) ? json_incref(labels) : json_object());
	if (detail) {
		char tok[LCD_E2B_TOKEN_LEN + 1];
		lcd_e2b_token(srv->key, id, tok);
		json_object_set_new(j, "envdAccessToken", json_string(tok));
		explicit_bzero(tok, sizeof(tok));
		json_object_set_new(j, "domain", json_null());
		json_object_set_new(j, "lifecycle", json_pack("{s:s, s:b}", "onTimeout", "kill", "autoResume", 0));
	}
	return j;
}

/* ---- calls ---- */

typedef struct ecall {
	struct lcd_e2b *srv;
	struct MHD_Connection *c;
	const char *method;
	char **seg;
	size_t n;
	json_t *body;
	const lcd_caller_t *who;
	const char *url;
} ecall_t;

static const char *query(ecall_t *call, const char *key)
{
	return MHD_lookup_connection_value(call->c, MHD_GET_ARGUMENT_KIND, key);
}

/* body's integer seconds k (absent: dflt), 1 to TIMEOUT_MAX_S. */
static bool timeout_of(ecall_t *call, const char *k, long long dflt, long long *out, enum MHD_Result *r)
{
	json_t *v = call->body ? json_object_get(call->body, k) : NULL;
	if (!v || json_is_null(v)) {
		*out = dflt;
		return true;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > TIMEOUT_MAX_S) {
		*r = e2b_fail(call->c, 400, "%s: expected seconds, 1 to %d", k, TIMEOUT_MAX_S);
		return false;
	}
	*out = json_integer_value(v);
	return true;
}

/* The row of a sandbox the caller may see, or an answered 404. */
static json_t *find(ecall_t *call, const char *id, enum MHD_Result *r)
{
	lc_error_t *err = NULL;
	json_t *row = lcd_sandbox_find(call->srv->lcd, call->who, id, &err);
	if (!row) {
		if (err && err->exit_code == LC_EXIT_UNKNOWN)
			*r = e2b_fail(call->c, 404, "sandbox %s not found", id);
		else
			*r = fail_err(call->c, err);
		return NULL;
	}
	lc_error_free(err);
	return row;
}

/* The row's view, or an answered 404 (its ttl ended it). */
static json_t *view_of(ecall_t *call, json_t *row, enum MHD_Result *r)
{
	json_t *v = lcd_sandbox_view(call->srv->lcd, row);
	if (!v)
		*r = e2b_fail(call->c, 404, "sandbox %s not found (its timeout ended it)", lc_json_str(row, "id"));
	return v;
}

/* Unsupported fields of a create: absent, null, false or empty only. */
static bool refuse_unsupported(ecall_t *call, enum MHD_Result *r)
{
	static const char *const keys[] = { "mcp", "network", "iam", "volumeMounts", "autoPause", "autoPauseMemory", NULL };
	for (size_t i = 0; keys[i]; i++) {
		json_t *v = json_object_get(call->body, keys[i]);
		bool empty = !v || json_is_null(v) || json_is_false(v) || (json_is_array(v) && !json_array_size(v)) ||
			     (json_is_object(v) && !json_object_size(v)) ||
			     (!strcmp(keys[i], "autoPauseMemory") && json_is_true(v));
		if (!empty) {
			*r = e2b_fail(call->c, 400, "%s: not supported by lcd's E2B listener (see contrib/e2b)", keys[i]);
			return true;
		}
	}
	json_t *ar = json_object_get(call->body, "autoResume");
	if (ar && json_is_true(json_object_get(ar, "enabled"))) {
		*r = e2b_fail(call->c, 400, "autoResume: not supported by lcd's E2B listener (see contrib/e2b)");
		return true;
	}
	json_t *sec = json_object_get(call->body, "secure");
	if (sec && json_is_false(sec)) {
		*r = e2b_fail(call->c, 400, "secure: lcd's sandboxes always have an access token");
		return true;
	}
	return false;
}

static enum MHD_Result h_create(ecall_t *call)
{
	enum MHD_Result r;
	json_t *b = call->body;
	if (!json_is_object(b))
		return e2b_fail(call->c, 400, "request body: expected a JSON object with templateID");
	const char *tmpl = lc_json_str(b, "templateID");
	if (!tmpl || !*tmpl)
		return e2b_fail(call->c, 400, "templateID: expected a template (an lcd image, or \"base\")");
	if (refuse_unsupported(call, &r))
		return r;
	long long timeout;
	if (!timeout_of(call, "timeout", DEFAULT_TIMEOUT_S, &timeout, &r))
		return r;
	json_t *meta = json_object_get(b, "metadata"), *envs = json_object_get(b, "envVars"),
	       *net = json_object_get(b, "allow_internet_access");
	if (meta && !json_is_null(meta) && !json_is_object(meta))
		return e2b_fail(call->c, 400, "metadata: expected an object of strings");
	if (envs && !json_is_null(envs) && !json_is_object(envs))
		return e2b_fail(call->c, 400, "envVars: expected an object of strings");
	if (net && !json_is_null(net) && !json_is_boolean(net))
		return e2b_fail(call->c, 400, "allow_internet_access: expected true or false");
	const char *image = !strcmp(tmpl, "base") ? call->srv->base_image : tmpl;
	_cleanup_json_ json_t *req = json_pack("{s:s, s:I}", "image", image, "ttl", (json_int_t)timeout);
	if (json_is_object(meta) && json_object_size(meta))
		json_object_set(req, "labels", meta);
	if (json_is_object(envs) && json_object_size(envs))
		json_object_set(req, "env", envs);
	if (json_is_true(net))
		json_object_set_new(req, "net", json_string("open"));
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *ids = json_array();
	if (lcd_sandbox_make(call->srv->lcd, call->who, req, 1, NULL, ids, &err) < 0) {
		if (err && err->msg && !strncmp(err->msg, "labels.", 7) && strstr(err->msg, ": ")) {
			/* "labels.KEY: what": say it of the metadata the caller sent */
			const char *colon = strstr(err->msg, ": ");
			enum MHD_Result rr = e2b_fail(call->c, 400, "metadata '%.*s' (lcd keeps metadata as labels): %s",
						      (int)(colon - err->msg - 7), err->msg + 7, colon + 2);
			lc_error_free(err);
			return rr;
		}
		if (err && err->msg && !strncmp(err->msg, "image", 5) && err->exit_code != LC_EXIT_INVALID) {
			enum MHD_Result rr = e2b_fail(call->c, 404, "template %s: %s", tmpl, err->msg);
			lc_error_free(err);
			return rr;
		}
		return fail_err(call->c, err);
	}
	const char *id = json_string_value(json_array_get(ids, 0));
	_cleanup_json_ json_t *row = find(call, id, &r);
	if (!row)
		return r;
	_cleanup_json_ json_t *v = view_of(call, row, &r);
	if (!v)
		return r;
	return e2b_reply(call->c, 201, sandbox_json(call->srv, v));
}

/* The views the caller may see, E2B's state filter and template applied. */
static json_t *visible(ecall_t *call, char **labels, const char *states, const char *tmpl, long long after,
		       lc_error_t **err)
{
	_cleanup_json_ json_t *all = lcd_sandbox_list(call->srv->lcd, call->who, NULL, NULL, labels, err);
	if (!all)
		return NULL;
	json_t *out = json_array();
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v) {
		const char *st = e2b_state(v);
		if (!st)
			continue;
		if (states && *states) {
			bool want = false;
			_cleanup_free_ char *copy = strdup(states);
			char *save = NULL;
			for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save))
				want |= !strcmp(s, st);
			if (!want)
				continue;
		}
		if (tmpl && *tmpl && strcmp(template_of(call->srv, v), tmpl) && strcmp(lc_json_str(v, "image"), tmpl))
			continue;
		if (json_integer_value(json_object_get(v, "created")) < after)
			continue;
		json_array_append(out, v);
	}
	return out;
}

static int by_created(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	long long p = json_integer_value(json_object_get(x, "created")), q = json_integer_value(json_object_get(y, "created"));
	return p < q ? -1 : p > q ? 1 : strcmp(lc_json_str(x, "id"), lc_json_str(y, "id"));
}

/* "2025-01-02T03:04:05[.678]Z" as ms since the epoch; -1 when not so. */
static long long parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	long long ms = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		for (; digits < 3; digits++)
			ms *= 10;
	}
	if (strcmp(p, "Z") && strcmp(p, "+00:00"))
		return -1;
	return (long long)timegm(&tm) * 1000 + ms;
}

static enum MHD_Result h_list(ecall_t *call, bool paged)
{
	const char *mq = query(call, "metadata");
	_cleanup_json_ json_t *meta = lcd_e2b_metadata_query(mq);
	if (!meta)
		return e2b_fail(call->c, 400, "metadata: expected key=value pairs joined by &, URL-encoded");
	_cleanup_strv_ char **labels = NULL;
	const char *k;
	json_t *val;
	json_object_foreach(meta, k, val) {
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", k, json_string_value(val));
		lc_strv_push(&labels, kv);
	}
	long long limit = LIST_LIMIT, after = 0;
	const char *ls = query(call, "limit"), *sa = query(call, "startedAfter"), *order = query(call, "order");
	if (ls) {
		char *end = NULL;
		limit = strtoll(ls, &end, 10);
		if (!*ls || *end || limit < 1 || limit > LIST_LIMIT)
			return e2b_fail(call->c, 400, "limit: expected 1 to %d", LIST_LIMIT);
	}
	if (sa && (after = parse_time(sa)) < 0)
		return e2b_fail(call->c, 400, "startedAfter: expected a time like 2025-01-02T03:04:05Z");
	if (order && strcmp(order, "asc") && strcmp(order, "desc"))
		return e2b_fail(call->c, 400, "order: expected asc or desc");
	bool asc = order && !strcmp(order, "asc");
	const char *states = query(call, "state");
	if (!states)
		states = "running,paused";
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *views = visible(call, labels, states, query(call, "template"), after, &err);
	if (!views)
		return fail_err(call->c, err);
	size_t n = json_array_size(views);
	json_t **v = lc_xmalloc0((n + 1) * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(views, i);
	qsort(v, n, sizeof(*v), by_created);
	if (!asc)
		for (size_t i = 0; i < n / 2; i++) {
			json_t *t = v[i];
			v[i] = v[n - 1 - i];
			v[n - 1 - i] = t;
		}
	size_t start = 0;
	const char *tok = paged ? query(call, "nextToken") : NULL;
	if (tok) {
		long long ms;
		char id[LC_ID_LEN + 1];
		if (!lcd_e2b_cursor_parse(tok, &ms, id, sizeof(id))) {
			free(v);
			return e2b_fail(call->c, 400, "nextToken: not a token this listing gave");
		}
		/* the first one after the cursor in this order */
		for (start = 0; start < n; start++) {
			long long c = json_integer_value(json_object_get(v[start], "created"));
			int cmp = c < ms ? -1 : c > ms ? 1 : strcmp(lc_json_str(v[start], "id"), id);
			if (asc ? cmp > 0 : cmp < 0)
				break;
		}
	}
	json_t *out = json_array();
	size_t i = start;
	for (; i < n && (!paged || (long long)(i - start) < limit); i++)
		json_array_append_new(out, listed_json(call->srv, v[i], false));
	char next[64] = "";
	if (paged && i < n && i > start)
		lcd_e2b_cursor(json_integer_value(json_object_get(v[i - 1], "created")), lc_json_str(v[i - 1], "id"), next,
			       sizeof(next));
	free(v);
	struct MHD_Response *resp = api_json_response(out, JSON_COMPACT, false);
	if (*next)
		MHD_add_response_header(resp, "X-Next-Token", next);
	return api_send(call->c, 200, resp);
}

static enum MHD_Result h_get(ecall_t *call, json_t *row)
{
	enum MHD_Result r;
	_cleanup_json_ json_t *v = view_of(call, row, &r);
	if (!v)
		return r;
	if (!e2b_state(v))
		return e2b_fail(call->c, 404, "sandbox %s not found (it is %s)", lc_json_str(v, "id"), lc_json_str(v, "state"));
	return e2b_reply(call->c, 200, listed_json(call->srv, v, true));
}

static enum MHD_Result h_kill(ecall_t *call, json_t *row)
{
	const char *id = lc_json_str(row, "id");
	lc_error_t *err = NULL;
	if (lcd_sandbox_delete(call->srv->lcd, id, &err) < 0)
		return fail_err(call->c, err);
	lcd_log("e2b: sandbox %s killed", id);
	return e2b_reply(call->c, 204, NULL);
}

static int set_expiry(const char *id, long long timeout_s, lc_error_t **err)
{
	return lc_sandbox_set_expiry(id, lc_wall_ms() + timeout_s * 1000, err);
}

static enum MHD_Result h_timeout(ecall_t *call, json_t *row, const char *key, bool only_extend)
{
	enum MHD_Result r;
	long long t;
	json_t *v = call->body ? json_object_get(call->body, key) : NULL;
	if (!v && !only_extend)
		return e2b_fail(call->c, 400, "%s: expected seconds", key);
	if (!timeout_of(call, key, DEFAULT_TIMEOUT_S, &t, &r))
		return r;
	const char *id = lc_json_str(row, "id");
	if (only_extend) {
		_cleanup_json_ json_t *view = view_of(call, row, &r);
		if (!view)
			return r;
		long long exp = json_integer_value(json_object_get(view, "expires"));
		if (!exp || exp >= lc_wall_ms() + t * 1000)
			return e2b_reply(call->c, 204, NULL);
	}
	lc_error_t *err = NULL;
	if (set_expiry(id, t, &err) < 0)
		return fail_err(call->c, err);
	return e2b_reply(call->c, 204, NULL);
}

static enum MHD_Result h_pause(ecall_t *call, json_t *row)
{
	enum MHD_Result r;
	_cleanup_json_ json_t *v = view_of(call, row, &r);
	if (!v)
		return r;
	const char *id = lc_json_str(row, "id"), *st = lc_json_str(v, "state");
	if (strcmp(st, "running"))
		return e2b_fail(call->c, 409, "sandbox %s is %s already", id, !strcmp(st, "stopped") ? "paused" : st);
	json_t *mem = call->body ? json_object_get(call->body, "memory") : NULL;
	bool keep_memory = !mem || json_is_null(mem) || json_is_true(mem);
	long long exp = json_integer_value(json_object_get(v, "expires"));
	lc_error_t *err = NULL;
	/* paused, it keeps no timeout: connect gives it one again */
	if (exp && lc_sandbox_set_expiry(id, 0, &err) < 0)
		return fail_err(call->c, err);
	int rc;
	if (keep_memory) {
		rc = lc_sandbox_pause(id, &err);
	} else {
		lcd_procs_drop(call->srv->lcd, id);
		lcd_sessions_drop(call->srv->lcd, id);
		rc = lc_sandbox_stop(id, &err);
	}
	if (rc < 0) {
		if (exp)
			lc_sandbox_set_expiry(id, exp, NULL);
		return fail_err(call->c, err);
	}
	lcd_log("e2b: sandbox %s paused%s", id, keep_memory ? "" : " (stopped: its memory dropped)");
	return e2b_reply(call->c, 204, NULL);
}

/* connect (v1 and v2) and resume: a paused sandbox runs again; 201 then,
 * 200 when it ran already (resume: 409). */
static enum MHD_Result h_connect(ecall_t *call, json_t *row, bool resume)
{
	enum MHD_Result r;
	long long t;
	if (!timeout_of(call, "timeout", DEFAULT_TIMEOUT_S, &t, &r))
		return r;
	_cleanup_json_ json_t *v = view_of(call, row, &r);
	if (!v)
		return r;
	const char *id = lc_json_str(row, "id"), *st = lc_json_str(v, "state");
	lc_error_t *err = NULL;
	unsigned status = 201;
	if (!strcmp(st, "paused")) {
		if (lc_sandbox_resume(id, &err) < 0)
			return fail_err(call->c, err);
	} else if (!strcmp(st, "stopped")) {
		if (lcd_runner_start_sandbox(call->srv->lcd, id, &err) < 0)
			return fail_err(call->c, err);
	} else if (!strcmp(st, "running") || !strcmp(st, "creating")) {
		if (resume)
			return e2b_fail(call->c, 409, "sandbox %s is running already", id);
		status = 200;
	} else {
		return e2b_fail(call->c, 409, "sandbox %s is %s: it cannot be connected to", id, st);
	}
	/* its timeout is extended, never shortened, by a connect */
	long long exp = json_integer_value(json_object_get(v, "expires"));
	if (status == 201 || (exp && exp < lc_wall_ms() + t * 1000)) {
		if (set_expiry(id, t, &err) < 0)
			return fail_err(call->c, err);
	}
	if (status == 201)
		lcd_log("e2b: sandbox %s resumed", id);
	json_decref(v);
	v = view_of(call, row, &r);
	if (!v)
		return r;
	return e2b_reply(call->c, status, sandbox_json(call->srv, v));
}

static enum MHD_Result h_fork(ecall_t *call, json_t *row)
{
	enum MHD_Result r;
	long long t;
	if (!timeout_of(call, "timeout", DEFAULT_TIMEOUT_S, &t, &r))
		return r;
	json_t *cv = call->body ? json_object_get(call->body, "count") : NULL;
	if (cv && !json_is_null(cv) && (!json_is_integer(cv) || json_integer_value(cv) < 1 || json_integer_value(cv) > 64))
		return e2b_fail(call->c, 400, "count: expected 1 to 64");
	int n = json_is_integer(cv) ? (int)json_integer_value(cv) : 1;
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcd_sandbox_fork(call->srv->lcd, call->who, row, n, &out, &err) < 0)
		return fail_err(call->c, err);
	json_t *res = json_array();
	size_t i;
	json_t *idv;
	json_array_foreach(json_object_get(out, "ids"), i, idv) {
		const char *id = json_string_value(idv);
		lc_error_t *e = NULL;
		_cleanup_json_ json_t *frow = lcd_sandbox_find(call->srv->lcd, call->who, id, &e);
		_cleanup_json_ json_t *fv = frow ? lcd_sandbox_view(call->srv->lcd, frow) : NULL;
		if (fv && set_expiry(id, t, &e) == 0) {
			json_array_append_new(res, json_pack("{s:o}", "sandbox", sandbox_json(call->srv, fv)));
		} else {
			json_array_append_new(res, json_pack("{s:{s:i, s:s}}", "error", "code", (int)e2b_status_of(e),
							     "message", e && e->msg ? e->msg : "the fork could not start"));
		}
		lc_error_free(e);
	}
	lcd_log("e2b: sandbox %s forked %d time(s)", lc_json_str(row, "id"), n);
	return e2b_reply(call->c, 201, res);
}

/* Where the caller's E2B snapshots live: snapshots/ (the operator's), or
 * APP/snapshots/ (a task's: its app's names, as its grant has them). */
static char *snapshot_prefix(ecall_t *call)
{
	return call->who->operator ? strdup(SNAPSHOTS) : lc_strdup_printf("%s/" SNAPSHOTS, call->who->app);
}

static enum MHD_Result h_snapshot(ecall_t *call, json_t *row)
{
	const char *id = lc_json_str(row, "id");
	const char *name = call->body ? lc_json_str(call->body, "name") : NULL;
	_cleanup_free_ char *prefix = snapshot_prefix(call);
	_cleanup_free_ char *image = name && *name ? lc_strdup_printf("%s%s/%s", prefix, id, name)
						   : lc_strdup_printf("%s%s/%lld", prefix, id, lc_wall_ms());
	if (!lc_image_name_valid(image))
		return e2b_fail(call->c, 400, "name: letters, digits and '._:-' (the snapshot is image %s)", image);
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcd_sandbox_snapshot(call->srv->lcd, call->who, row, image, &out, &err) < 0)
		return fail_err(call->c, err);
	return e2b_reply(call->c, 201, json_pack("{s:s, s:[s]}", "snapshotID", image, "names", image));
}

static enum MHD_Result h_snapshots(ecall_t *call)
{
	const char *sb = query(call, "sandboxID"), *name = query(call, "name"), *tok = query(call, "nextToken"),
		   *ls = query(call, "limit");
	long long limit = LIST_LIMIT;
	if (ls) {
		char *end = NULL;
		limit = strtoll(ls, &end, 10);
		if (!*ls || *end || limit < 1 || limit > LIST_LIMIT)
			return e2b_fail(call->c, 400, "limit: expected 1 to %d", LIST_LIMIT);
	}
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *all = lcd_images_list(call->srv->lcd, call->who, &err); /* what the caller may see */
	if (!all)
		return fail_err(call->c, err);
	_cleanup_free_ char *base = snapshot_prefix(call);
	_cleanup_free_ char *prefix = sb ? lc_strdup_printf("%s%s/", base, sb) : strdup(base);
	json_t *out = json_array();
	size_t i;
	json_t *img;
	const char *last = NULL;
	bool more = false;
	json_array_foreach(all, i, img) { /* sorted by name */
		const char *n = lc_json_str(img, "name");
		if (strncmp(n, prefix, strlen(prefix)) || (name && !strstr(n, name)) || (tok && strcmp(n, tok) <= 0))
			continue;
		if ((long long)json_array_size(out) == limit) {
			more = true;
			break;
		}
		json_array_append_new(out, json_pack("{s:s, s:[s]}", "snapshotID", n, "names", n));
		last = n;
	}
	struct MHD_Response *resp = api_json_response(out, JSON_COMPACT, false);
	if (more && last)
		MHD_add_response_header(resp, "X-Next-Token", last);
	return api_send(call->c, 200, resp);
}

static enum MHD_Result h_delete_snapshot(ecall_t *call, const char *name)
{
	_cleanup_free_ char *prefix = snapshot_prefix(call);
	lc_error_t *err = NULL;
	if (strncmp(name, prefix, strlen(prefix)))
		return e2b_fail(call->c, 404, "snapshot %s not found (lcd's E2B listener deletes its snapshots only)", name);
	if (lcd_image_delete(call->srv->lcd, call->who, name, &err) < 0) {
		if (err && err->exit_code == LC_EXIT_UNKNOWN) {
			lc_error_free(err);
			return e2b_fail(call->c, 404, "snapshot %s not found", name);
		}
		return fail_err(call->c, err);
	}
	return e2b_reply(call->c, 204, NULL);
}

static enum MHD_Result h_metrics(ecall_t *call, json_t *row)
{
	enum MHD_Result r;
	_cleanup_json_ json_t *v = view_of(call, row, &r);
	if (!v)
		return r;
	_cleanup_json_ json_t *one = listed_json(call->srv, v, false);
	long long now = lc_wall_ms(), created = json_integer_value(json_object_get(v, "created"));
	long long cpu_us = json_integer_value(json_object_get(v, "cpu_usec"));
	long long cpus = json_integer_value(json_object_get(one, "cpuCount"));
	double pct = now > created && cpus > 0 ? 100.0 * (double)cpu_us / 1000.0 / (double)(now - created) / (double)cpus : 0;
	char ts[32];
	lcd_e2b_time_ms(now, ts);
	long long mem_total = json_integer_value(json_object_get(one, "memoryMB")) << 20;
	return e2b_reply(call->c, 200,
			 json_pack("[{s:s, s:I, s:I, s:f, s:I, s:I, s:i, s:i, s:i}]", "timestamp", ts, "timestampUnix",
				   (json_int_t)(now / 1000), "cpuCount", (json_int_t)cpus, "cpuUsedPct", pct, "memUsed",
				   (json_int_t)json_integer_value(json_object_get(v, "memory_bytes")), "memTotal",
				   (json_int_t)mem_total, "memCache", 0, "diskUsed", 0, "diskTotal", 0));
}

static bool is(ecall_t *call, const char *method, size_t n, ...)
{
	if (strcmp(call->method, method) || call->n != n)
		return false;
	va_list ap;
	va_start(ap, n);
	bool ok = true;
	for (size_t i = 0; i < n; i++) {
		const char *want = va_arg(ap, const char *);
		if (want && strcmp(want, call->seg[i]))
			ok = false;
	}
	va_end(ap);
	return ok;
}

static enum MHD_Result on_sandbox(ecall_t *call, const char *verb)
{
	enum MHD_Result r;
	const char *id = call->seg[call->n - (verb ? 2 : 1)];
	_cleanup_json_ json_t *row = find(call, id, &r);
	if (!row)
		return r;
	const char *m = call->method;
	if (!verb)
		return !strcmp(m, "GET") ? h_get(call, row) : h_kill(call, row);
	if (!strcmp(verb, "timeout"))
		return h_timeout(call, row, "timeout", false);
	if (!strcmp(verb, "refreshes"))
		return h_timeout(call, row, "duration", true);
	if (!strcmp(verb, "pause"))
		return h_pause(call, row);
	if (!strcmp(verb, "connect"))
		return h_connect(call, row, false);
	if (!strcmp(verb, "resume"))
		return h_connect(call, row, true);
	if (!strcmp(verb, "fork"))
		return h_fork(call, row);
	if (!strcmp(verb, "snapshots"))
		return h_snapshot(call, row);
	return h_metrics(call, row);
}

static enum MHD_Result route(ecall_t *call)
{
	char **s = call->seg;
	if (is(call, "POST", 2, "v2", "sandboxes") || is(call, "POST", 1, "sandboxes"))
		return h_create(call);
	if (is(call, "GET", 2, "v2", "sandboxes"))
		return h_list(call, true);
	if (is(call, "GET", 1, "sandboxes"))
		return h_list(call, false);
	if (is(call, "GET", 2, "sandboxes", NULL) || is(call, "DELETE", 2, "sandboxes", NULL))
		return on_sandbox(call, NULL);
	if (call->n == 3 && !strcmp(s[0], "sandboxes") && !strcmp(call->method, "POST")) {
		static const char *const verbs[] = { "timeout", "refreshes", "pause", "resume", "connect", "fork",
						     "snapshots", NULL };
		for (size_t i = 0; verbs[i]; i++)
			if (!strcmp(s[2], verbs[i]))
				return on_sandbox(call, verbs[i]);
	}
	if (is(call, "POST", 4, "v2", "sandboxes", NULL, "connect"))
		return on_sandbox(call, "connect");
	if (is(call, "GET", 3, "sandboxes", NULL, "metrics") && strcmp(s[1], "metrics"))
		return on_sandbox(call, "metrics");
	if (is(call, "GET", 1, "snapshots"))
		return h_snapshots(call);
	if (call->n >= 2 && !strcmp(s[0], "templates") && !strcmp(call->method, "DELETE"))
		return h_delete_snapshot(call, call->url + strlen("/templates/")); /* a name has slashes */
	if (call->n >= 1 && (!strcmp(s[0], "templates") || !strcmp(s[0], "v2") || !strcmp(s[0], "v3")) &&
	    (call->n < 2 || strcmp(s[1], "sandboxes")))
		return e2b_fail(call->c, 501,
				"%s /%s: templates are lcd images (lcrun image build, lcrun image import); lcd's E2B "
				"listener does not build them", call->method, s[0]);
	return e2b_fail(call->c, call->n >= 1 && !strcmp(s[0], "sandboxes") ? 501 : 404,
			"%s %s: not served by lcd's E2B listener (see contrib/e2b)", call->method,
			call->n ? s[0] : "/");
}

/* ---- the daemon ---- */

static bool same_secret(const char *got, const char *want)
{
	return lcd_e2b_same(got, want);
}

static void working(struct lcd_e2b *srv, struct MHD_Connection *c)
{
	(void)srv;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct lcd_e2b *srv = cls;
	lcd_t *lcd = srv->lcd;
	e2b_req_t *rq = *con_cls;
	if (!rq) {
		rq = lc_xmalloc0(sizeof(*rq));
		*con_cls = rq;
		rq->envd = lcd_envd_path(url);
		if (rq->envd) {
			enum MHD_Result r;
			if (!lcd_envd_begin(srv, c, method, url, rq, &r))
				return r;
			working(srv, c);
			return MHD_YES;
		}
		const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
		if (key && srv->token && same_secret(key, srv->token))
			rq->who.operator = true;
		else if (!key || !lcd_token_check(lcd, key, &rq->who))
			return e2b_fail(c, 401, "%s: the API key must be lcd's token (token_file) or a task's",
					key ? "wrong API key" : "no API key (X-API-Key)");
		working(srv, c);
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > lcd->max_body)
			return e2b_fail(c, HTTP_TOO_LARGE, "request body too large (limit %zu bytes)", lcd->max_body);
		return MHD_YES;
	}
	if (rq->envd && rq->upload) {
		if (*upload_size) {
			lcd_envd_upload_data(rq, upload, *upload_size);
			*upload_size = 0;
			return MHD_YES;
		}
		return lcd_envd_handle(srv, c, method, url, rq);
	}
	if (*upload_size) {
		lcd_body_append(&rq->body, &rq->len, &rq->too_big, upload, upload_size,
				rq->envd ? (lcd->max_body > (16u << 20) ? lcd->max_body : (16u << 20)) : lcd->max_body);
		return MHD_YES;
	}
	if (rq->too_big)
		return e2b_fail(c, HTTP_TOO_LARGE, "request body too large");
	if (rq->envd)
		return lcd_envd_handle(srv, c, method, url, rq);

	ecall_t call = { .srv = srv, .c = c, .method = method, .who = &rq->who, .url = url };
	_cleanup_json_ json_t *body = NULL;
	if (rq->len) {
		json_error_t je;
		body = json_loadb(rq->body, rq->len, 0, &je);
		if (!body)
			return e2b_fail(c, 400, "request body: malformed JSON at line %d: %s", je.line, je.text);
		call.body = body;
	}
	_cleanup_free_ char *path = strdup(url);
	char *segs[8];
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(path, "/", &save); t && n < 8; t = strtok_r(NULL, "/", &save))
		segs[n++] = t;
	call.seg = segs;
	call.n = n;
	return route(&call);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)toe;
	struct lcd_e2b *srv = cls;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, srv->idle_timeout);
	e2b_req_t *rq = *con_cls;
	if (rq) {
		lcd_envd_req_free(rq);
		free(rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

/* The key access tokens derive from: lcd's state directory's e2b.key (32
 * random bytes, 0600), made the first time.  Losing it changes every
 * sandbox's token. */
static int load_key(lcd_t *lcd, unsigned char key[LCD_E2B_KEY_LEN], lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("%s/e2b.key", lcd->state_dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		unsigned char fresh[LCD_E2B_KEY_LEN];
		if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh))
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot draw a key for %s", path);
		int w = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (w >= 0) {
			int rc = lc_write_all(w, fresh, sizeof(fresh));
			if (fsync(w) < 0 || rc < 0) {
				close(w);
				unlink(path);
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s", path);
			}
			close(w);
		} else if (errno != EEXIST) {
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s", path);
		}
		explicit_bzero(fresh, sizeof(fresh));
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", path);
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 077)
			    ? read(fd, key, LCD_E2B_KEY_LEN) : -2;
	close(fd);
	if (n == -2)
		return lc_error_set(err, LC_EXIT_PERM, 0, "%s must be a regular file of root's, mode 0600", path);
	if (n != LCD_E2B_KEY_LEN)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: expected %d bytes (remove it to make a new key; every "
				    "sandbox's access token changes then)", path, LCD_E2B_KEY_LEN);
	return 0;
}

int lcd_e2b_start(lcd_t *lcd, const lcd_e2b_cfg_t *cfg, lcd_e2b_t **out, lc_error_t **err)
{
	if (!cfg->token || !*cfg->token)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "e2b_listen %s needs token_file (the API key)", cfg->listen);
	struct lcd_e2b *srv = lc_xmalloc0(sizeof(*srv));
	srv->lcd = lcd;
	srv->token = strdup(cfg->token);
	srv->base_image = strdup(cfg->base_image ? cfg->base_image : LC_IMAGE_HOST);
	srv->idle_timeout = cfg->idle_timeout ? cfg->idle_timeout : LCD_TCP_IDLE_TIMEOUT_S;
	srv->host_bash = access("/bin/bash", X_OK) == 0;
	pthread_mutex_init(&srv->bash_lock, NULL);
	if (load_key(lcd, srv->key, err) < 0) {
		lcd_e2b_stop(srv);
		return -1;
	}
	struct addrinfo *ai = lcd_listen_addr(cfg->listen, "e2b_listen", err);
	if (!ai) {
		lcd_e2b_stop(srv);
		return -1;
	}
	if (!lcd->procs)
		lcd_procs_init(lcd);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr },
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, srv },
		{ MHD_OPTION_CONNECTION_TIMEOUT, srv->idle_timeout, NULL },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_ip ? cfg->per_ip : LCD_E2B_PER_IP, NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	srv->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, srv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!srv->d) {
		lcd_e2b_stop(srv);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "e2b_listen %s: cannot listen", cfg->listen);
	}
	lcd_log("E2B API and envd served on http://%s (template \"base\" is image %s)", cfg->listen, srv->base_image);
	*out = srv;
	return 0;
}

void lcd_e2b_stop(lcd_e2b_t *srv)
{
	if (!srv)
		return;
	if (srv->d)
		MHD_stop_daemon(srv->d);
	lcd_procs_stop(srv->lcd);
	if (srv->token) {
		explicit_bzero(srv->token, strlen(srv->token));
		free(srv->token);
	}
	explicit_bzero(srv->key, sizeof(srv->key));
	free(srv->base_image);
	free(srv);
}
