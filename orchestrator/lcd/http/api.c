/* api.c — lcd's JSON HTTP API (libmicrohttpd, a thread per connection):
 * the operator's unix socket, the task socket (bound into every task's
 * sandbox; a token is required there) and, when configured, TCP behind a
 * bearer token.  Every request is authenticated once its headers are in;
 * a task's token reaches its own app only (see route()).  Every error is
 * {"error": "...", "exit_code": N} with N from error.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <microhttpd.h>

#include "access.h"
#include "api.h"
#include "apps.h"
#include "exec.h"
#include "gateway.h"
#include "images.h"
#include "json.h"
#include "nodes.h"
#include "reply.h"
#include "routes_devboxes.h"
#include "routes_sandboxes.h"
#include "scheduler.h"
#include "tasks.h"
#include "util.h"

#define SECRET_MAX (64 * 1024)
#define SPAWN_MAP_MAX 10000
#define WAIT_MAX_S 300
#define HTTP_TOO_LARGE 413 /* MHD renamed its constant across versions */

enum listener_kind { L_OPERATOR, L_TASK, L_TCP };

/* The API's threads run at this nice value, below lcd's own (when lcd
 * may raise a priority: CAP_SYS_NICE), so that the sandboxes lcd starts
 * on the same CPUs do not hold a spawn's reply back.  A connection thread
 * has it only for requests that touch lcd's records alone (is_light);
 * any other request puts its thread back to lcd's nice before anything
 * runs, so every process lcd starts for a sandbox starts at lcd's own
 * priority (a task's, task_nice below it: queue.c).  A connection kept
 * alive serves requests of both kinds: each sets its thread's nice. */
#define API_NICE_RAISE 5

/* A unix socket the acceptor serves: the operator's, or a task's own. */
typedef struct usock {
	int fd;
	enum listener_kind kind;
	char task[LC_ID_LEN + 1]; /* L_TASK: whose */
	char *path;               /* L_TASK: unlinked when it goes */
	bool dead;                /* closed by the acceptor at its next turn */
} usock_t;

/* What a caller holds: its key ("task:ID", "uid:N") and connections. */
typedef struct share {
	char key[48];
	int n;
	struct share *next;
} share_t;

/* A connection's socket context: who it counts against. */
typedef struct conn_ctx {
	enum listener_kind kind;
	char task[LC_ID_LEN + 1];
	share_t *share;
} conn_ctx_t;

struct lcd_api {
	lcd_t *lcd;
	struct MHD_Daemon *unix_d, *task_d, *tcp_d;
	char *token;
	char *cluster_token; /* the other nodes' (forward.c), on TCP */
	unsigned tcp_idle_timeout; /* s: a TCP connection idle or half-sent */
	unsigned unix_idle_timeout; /* s: a unix socket's connection before (and between) its requests */
	int task_share, operator_share; /* connections one task, one local uid may hold */
	struct listener {
		struct lcd_api *api;
		enum listener_kind kind;
	} l_unix, l_task, l_tcp;
	/* the acceptor (accept_loop): every unix socket, the shares */
	pthread_mutex_t lock;
	usock_t *socks;
	size_t n_socks;
	share_t *shares;
	conn_ctx_t *pending[64]; /* handed to libmicrohttpd, not yet started */
	int pending_fd[64];
	int wake[2];
	bool stopping;
	pthread_t acceptor;
	bool acceptor_running;
	char *sockets_dir;
};

const char *api_query(call_t *call, const char *key)
{
	return MHD_lookup_connection_value(call->c, MHD_GET_ARGUMENT_KIND, key);
}

bool api_query_int(call_t *call, const char *key, long long *out)
{
	const char *v = api_query(call, key);
	if (!v)
		return true;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < 0)
		return false;
	*out = n;
	return true;
}

/* ---- apps ---- */

static json_t *app_summary(const lcd_app_t *app)
{
	json_t *fns = json_array(), *sch = json_array(), *maps = json_array(), *hooks = json_array();
	for (size_t i = 0; i < app->n_functions; i++)
		json_array_append_new(fns, json_string(app->functions[i].name));
	for (size_t i = 0; i < app->n_schedules; i++)
		json_array_append_new(sch, json_string(app->schedules[i].name));
	for (size_t i = 0; app->maps && app->maps[i]; i++)
		json_array_append_new(maps, json_string(app->maps[i]));
	for (size_t i = 0; i < app->n_webhooks; i++)
		json_array_append_new(hooks, json_string(app->webhooks[i].name));
	return json_pack("{s:s, s:o, s:o, s:o, s:o}", "name", app->name, "functions", fns, "schedules", sch, "maps",
			 maps, "webhooks", hooks);
}

static enum MHD_Result h_deploy(call_t *call)
{
	if (!call->body)
		return FAIL(call, LC_EXIT_INVALID, "request body: expected the app manifest (JSON)");
	lc_error_t *err = NULL;
	bool replaced = false;
	lcd_app_t *app = NULL;
	if (lcd_deploy(call->lcd, call->body, &replaced, &app, &err) < 0)
		return api_fail_err(call->c, err);
	json_t *out = app_summary(app);
	json_object_set_new(out, "replaced", json_boolean(replaced));
	lcd_app_unref(app);
	return api_reply(call->c, replaced ? MHD_HTTP_OK : MHD_HTTP_CREATED, out);
}

static enum MHD_Result h_apps(call_t *call)
{
	size_t n;
	lcd_app_t **apps = lcd_apps_snapshot(call->lcd, &n);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, app_summary(apps[i]));
	lcd_apps_release(apps, n);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "apps", arr));
}

static lcd_app_t *need_app(call_t *call, const char *name, enum MHD_Result *r)
{
	lcd_app_t *app = lcd_app_get(call->lcd, name);
	if (!app)
		*r = FAIL(call, LC_EXIT_UNKNOWN, "no app named '%s'", name);
	return app;
}

static enum MHD_Result h_app_show(call_t *call, const char *name)
{
	enum MHD_Result r;
	lcd_app_t *app = need_app(call, name, &r);
	if (!app)
		return r;
	json_t *out = app_summary(app);
	json_object_set(out, "manifest", app->manifest);
	lcd_app_unref(app);
	return api_reply(call->c, MHD_HTTP_OK, out);
}

static enum MHD_Result h_app_delete(call_t *call, const char *name)
{
	lc_error_t *err = NULL;
	if (lcd_app_remove(call->lcd, name, &err) < 0)
		return api_fail_err(call->c, err);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "app", name, "deleted", 1));
}

/* ---- tasks ---- */

static enum MHD_Result spawned(call_t *call, json_t *ids, bool many)
{
	if (many)
		return api_reply(call->c, MHD_HTTP_ACCEPTED, json_pack("{s:o}", "ids", ids));
	json_t *out = json_pack("{s:O}", "id", json_array_get(ids, 0));
	json_decref(ids);
	return api_reply(call->c, MHD_HTTP_ACCEPTED, out);
}

static enum MHD_Result h_spawn(call_t *call, const char *appname, const char *fn, bool map)
{
	enum MHD_Result r;
	json_t *args = call->body ? json_object_get(call->body, "args") : NULL;
	if (call->body && !json_is_object(call->body))
		return FAIL(call, LC_EXIT_INVALID, "request body: expected an object {\"args\": ...}");
	_cleanup_json_ json_t *list = NULL;
	if (map) {
		if (!json_is_array(args) || json_array_size(args) == 0)
			return FAIL(call, LC_EXIT_INVALID, "args: expected a non-empty array of argument sets");
		if (json_array_size(args) > SPAWN_MAP_MAX)
			return FAIL(call, LC_EXIT_INVALID, "args: at most %d argument sets", SPAWN_MAP_MAX);
		list = json_incref(args);
	} else {
		list = json_pack("[o]", args ? json_incref(args) : json_object());
	}
	lcd_app_t *app = need_app(call, appname, &r);
	if (!app)
		return r;
	lc_error_t *err = NULL;
	json_t *ids = json_array();
	int rc = lcd_spawn(call->lcd, app, fn, NULL, list, ids, &err);
	lcd_app_unref(app);
	if (rc < 0) {
		json_decref(ids);
		return api_fail_err(call->c, err);
	}
	return spawned(call, ids, map);
}

/* A task's token sees the tasks of its own app only; others are unknown. */
static bool task_visible(call_t *call, const char *id)
{
	if (call->who->operator)
		return true;
	_cleanup_json_ json_t *t = lcd_store_task_get(call->lcd->db, id, NULL);
	return t && !strcmp(lc_json_str(t, "app"), call->who->app);
}

#define TASK_VISIBLE(call, id) \
	do { \
		if (!task_visible(call, id)) \
			return FAIL(call, LC_EXIT_UNKNOWN, "no task '%s'", id); \
	} while (0)

static enum MHD_Result h_tasks(call_t *call)
{
	long long limit = 0;
	if (!api_query_int(call, "limit", &limit))
		return FAIL(call, LC_EXIT_USAGE, "limit: expected a non-negative integer");
	const char *state = api_query(call, "state");
	if (state && !lcd_state_final(state) && strcmp(state, "queued") && strcmp(state, "running"))
		return FAIL(call, LC_EXIT_USAGE, "state: expected queued, running, succeeded, failed, timed-out or cancelled");
	lc_error_t *err = NULL;
	const char *app = call->who->operator ? api_query(call, "app") : call->who->app;
	json_t *rows = lcd_store_task_list(call->lcd->db, app, state, limit, &err);
	if (!rows)
		return api_fail_err(call->c, err);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "tasks", rows));
}

static enum MHD_Result h_task(call_t *call, const char *id)
{
	TASK_VISIBLE(call, id);
	lc_error_t *err = NULL;
	json_t *t = lcd_store_task_get(call->lcd->db, id, &err);
	if (!t)
		return err ? api_fail_err(call->c, err) : FAIL(call, LC_EXIT_UNKNOWN, "no task '%s'", id);
	lcd_gateway_task_view(call->lcd, t);
	return api_reply(call->c, MHD_HTTP_OK, t);
}

static enum MHD_Result h_result(call_t *call, const char *id)
{
	TASK_VISIBLE(call, id);
	long long wait = 0;
	if (!api_query_int(call, "wait", &wait))
		return FAIL(call, LC_EXIT_USAGE, "wait: expected seconds (a non-negative integer)");
	if (wait > WAIT_MAX_S)
		wait = WAIT_MAX_S;
	lc_error_t *err = NULL;
	json_t *t = lcd_task_wait(call->lcd, id, wait * 1000, &err);
	if (!t)
		return api_fail_err(call->c, err);
	bool done = lcd_state_final(lc_json_str(t, "state"));
	lcd_gateway_task_view(call->lcd, t);
	return api_reply(call->c, done ? MHD_HTTP_OK : MHD_HTTP_ACCEPTED, t);
}

static enum MHD_Result h_cancel(call_t *call, const char *id)
{
	TASK_VISIBLE(call, id);
	lc_error_t *err = NULL;
	if (lcd_cancel(call->lcd, id, &err) < 0)
		return api_fail_err(call->c, err);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "id", id, "cancelled", 1));
}

struct logstream {
	lcd_t *lcd;
	int fd;
	bool follow;
	char id[LC_ID_LEN + 1];
};

static bool task_over(lcd_t *lcd, const char *id)
{
	_cleanup_json_ json_t *t = lcd_store_task_get(lcd->db, id, NULL);
	return !t || lcd_state_final(lc_json_str(t, "state"));
}

static ssize_t log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct logstream *ls = cls;
	for (;;) {
		ssize_t n = pread(ls->fd, buf, max, (off_t)pos);
		if (n > 0)
			return n;
		if (n < 0 && errno != EINTR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (!ls->follow)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (task_over(ls->lcd, ls->id)) {
			/* One more read: lines written just before the end. */
			n = pread(ls->fd, buf, max, (off_t)pos);
			return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (lcd_sleep(ls->lcd, &ls->lcd->changed, 100))
			return MHD_CONTENT_READER_END_OF_STREAM;
	}
}

static void log_free(void *cls)
{
	struct logstream *ls = cls;
	close(ls->fd);
	free(ls);
}

static enum MHD_Result h_logs(call_t *call, const char *id)
{
	TASK_VISIBLE(call, id);
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *t = lcd_store_task_get(call->lcd->db, id, &err);
	if (!t)
		return err ? api_fail_err(call->c, err) : FAIL(call, LC_EXIT_UNKNOWN, "no task '%s'", id);
	char path[4096];
	int fd = open(lcd_task_log_path(call->lcd, id, path, sizeof(path)), O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		/* Still queued: nothing written yet.  An empty log. */
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return FAIL(call, LC_EXIT_RUNTIME, "cannot open the log of task %s: %s", id, strerror(errno));
	const char *f = api_query(call, "follow");
	struct logstream *ls = lc_xmalloc0(sizeof(*ls));
	ls->lcd = call->lcd;
	ls->fd = fd;
	ls->follow = f && strcmp(f, "0") && strcmp(f, "false");
	snprintf(ls->id, sizeof(ls->id), "%s", id);
	if (ls->follow && !strcmp(lc_json_str(t, "state"), "queued")) {
		/* Follow a queued task's log from when it starts. */
		close(fd);
		ls->fd = -1;
		while (!task_over(call->lcd, id)) {
			ls->fd = open(path, O_RDONLY | O_CLOEXEC);
			if (ls->fd >= 0 || lcd_sleep(call->lcd, &call->lcd->changed, 100))
				break;
		}
		if (ls->fd < 0)
			ls->fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, log_read, ls, log_free);
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(call->c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- schedules ---- */

static enum MHD_Result h_schedules(call_t *call)
{
	lc_error_t *err = NULL;
	json_t *s = lcd_schedules_json(call->lcd, &err);
	if (!s)
		return api_fail_err(call->c, err);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "schedules", s));
}

static enum MHD_Result h_schedule_verb(call_t *call, const char *appname, const char *name, const char *verb)
{
	enum MHD_Result r;
	lcd_app_t *app = need_app(call, appname, &r);
	if (!app)
		return r;
	const lcd_schedule_t *s = lcd_app_schedule(app, name);
	lc_error_t *err = NULL;
	if (!s) {
		lcd_app_unref(app);
		return FAIL(call, LC_EXIT_UNKNOWN, "app %s has no schedule '%s'", appname, name);
	}
	if (!strcmp(verb, "run")) {
		json_t *ids = json_array();
		int rc = lcd_schedule_fire(call->lcd, app, s, ids, &err);
		lcd_app_unref(app);
		if (rc < 0) {
			json_decref(ids);
			return api_fail_err(call->c, err);
		}
		return spawned(call, ids, false);
	}
	lcd_app_unref(app);
	bool pause = !strcmp(verb, "stop");
	if (lcd_store_schedule_pause(call->lcd->db, appname, name, pause, &err) < 0)
		return api_fail_err(call->c, err);
	lcd_log("schedule %s:%s %s", appname, name, pause ? "paused" : "resumed");
	return api_reply(call->c, MHD_HTTP_OK,
		     json_pack("{s:s, s:s, s:b}", "app", appname, "schedule", name, "paused", pause));
}

/* ---- maps ---- */

static enum MHD_Result h_map(call_t *call, const char *appname, const char *map, const char *key)
{
	enum MHD_Result r;
	lcd_app_t *app = need_app(call, appname, &r);
	if (!app)
		return r;
	bool has = lcd_app_has_map(app, map);
	lcd_app_unref(app);
	if (!has)
		return FAIL(call, LC_EXIT_UNKNOWN, "app %s has no map '%s'", appname, map);
	lcd_db_t *db = call->lcd->db;
	lc_error_t *err = NULL;
	long long now = lc_wall_ms();
	if (!key) {
		if (strcmp(call->method, "GET"))
			return FAIL(call, LC_EXIT_USAGE, "%s not allowed on a map", call->method);
		json_t *rows = lcd_store_map_list(db, appname, map, api_query(call, "prefix"), now, &err);
		if (!rows)
			return api_fail_err(call->c, err);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "keys", rows));
	}
	if (!*key || strlen(key) > 1024)
		return FAIL(call, LC_EXIT_USAGE, "map key: expected 1 to 1024 bytes");
	if (!strcmp(call->method, "GET")) {
		char *v = lcd_store_map_get(db, appname, map, key, now, &err);
		if (!v)
			return err ? api_fail_err(call->c, err) : FAIL(call, LC_EXIT_UNKNOWN, "%s/%s: no key '%s'", appname, map, key);
		json_t *out = json_pack("{s:s, s:s}", "key", key, "value", v);
		free(v);
		return api_reply(call->c, MHD_HTTP_OK, out);
	}
	if (!strcmp(call->method, "DELETE")) {
		int n = lcd_store_map_del(db, appname, map, key, now, &err);
		if (n < 0)
			return api_fail_err(call->c, err);
		if (n == 0)
			return FAIL(call, LC_EXIT_UNKNOWN, "%s/%s: no key '%s'", appname, map, key);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "key", key, "deleted", 1));
	}
	if (!strcmp(call->method, "PUT")) {
		json_t *b = call->body;
		json_t *v = b ? json_object_get(b, "value") : NULL;
		json_t *ttl = b ? json_object_get(b, "ttl") : NULL;
		json_t *ia = b ? json_object_get(b, "if_absent") : NULL;
		if (!json_is_string(v))
			return FAIL(call, LC_EXIT_INVALID, "value: expected a string");
		if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) <= 0))
			return FAIL(call, LC_EXIT_INVALID, "ttl: expected a positive integer (seconds)");
		if (ia && !json_is_boolean(ia))
			return FAIL(call, LC_EXIT_INVALID, "if_absent: expected true or false");
		int n = lcd_store_map_set(db, appname, map, key, json_string_value(v),
					  ttl ? json_integer_value(ttl) : 0, json_is_true(ia), now, &err);
		if (n < 0)
			return api_fail_err(call->c, err);
		if (n == 0)
			return api_fail_status(call->c, MHD_HTTP_CONFLICT, LC_EXIT_BUSY, "%s/%s: key '%s' is already set",
					   appname, map, key);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "key", key, "set", 1));
	}
	return FAIL(call, LC_EXIT_USAGE, "%s not allowed on a map key", call->method);
}

/* ---- secrets ---- */

static enum MHD_Result h_secret(call_t *call, const char *name)
{
	lcd_db_t *db = call->lcd->db;
	lc_error_t *err = NULL;
	if (!name) {
		if (strcmp(call->method, "GET"))
			return FAIL(call, LC_EXIT_USAGE, "%s not allowed on secrets", call->method);
		json_t *rows = lcd_store_secret_names(db, &err);
		if (!rows)
			return api_fail_err(call->c, err);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "secrets", rows));
	}
	if (!lcd_secret_name_valid(name))
		return FAIL(call, LC_EXIT_USAGE, "bad secret name '%s' (letters, digits, '_'; not starting with a digit)", name);
	if (!strcmp(call->method, "PUT")) {
		json_t *v = call->body ? json_object_get(call->body, "value") : NULL;
		if (!json_is_string(v))
			return FAIL(call, LC_EXIT_INVALID, "value: expected a string");
		if (json_string_length(v) > SECRET_MAX)
			return FAIL(call, LC_EXIT_INVALID, "value: at most %d bytes", SECRET_MAX);
		if (strlen(json_string_value(v)) != json_string_length(v))
			return FAIL(call, LC_EXIT_INVALID, "value: must not contain NUL bytes");
		if (lcd_store_secret_set(db, name, json_string_value(v), lc_wall_ms(), &err) < 0)
			return api_fail_err(call->c, err);
		lcd_log("secret %s set", name);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "name", name, "set", 1));
	}
	if (!strcmp(call->method, "DELETE")) {
		int n = lcd_store_secret_delete(db, name, &err);
		if (n < 0)
			return api_fail_err(call->c, err);
		if (n == 0)
			return FAIL(call, LC_EXIT_UNKNOWN, "no secret named '%s'", name);
		lcd_log("secret %s deleted", name);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "name", name, "deleted", 1));
	}
	return FAIL(call, LC_EXIT_USAGE, "%s not allowed on a secret (its value is never read back)", call->method);
}

/* ---- routing ---- */

static bool is(call_t *call, const char *method, size_t n, ...)
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

static enum MHD_Result h_whoami(call_t *call)
{
	const lcd_caller_t *w = call->who;
	if (w->operator)
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s}", "kind", "operator"));
	return api_reply(call->c, MHD_HTTP_OK,
			 json_pack("{s:s, s:s, s:s, s:s}", "kind", "task", "task", w->task, "app", w->app, "function", w->function));
}

/* What a task's token may reach besides its sandboxes and its tasks
 * (checked where they are read): its own app, its functions (spawn) and
 * its maps.  Deploying, deleting, schedules, secrets, other apps: 403. */
static bool task_may(call_t *call)
{
	char **s = call->seg;
	if (call->n == 0)
		return false;
	if (!strcmp(s[0], "health") || !strcmp(s[0], "whoami") || !strcmp(s[0], "sandboxes") || !strcmp(s[0], "tasks") ||
	    (!strcmp(s[0], "images") && call->n == 1 && !strcmp(call->method, "GET")))
		return true;
	if (strcmp(s[0], "apps") || call->n < 2 || strcmp(s[1], call->who->app))
		return false;
	if (call->n == 2)
		return !strcmp(call->method, "GET");
	return !strcmp(s[2], "functions") || !strcmp(s[2], "maps");
}

static enum MHD_Result route(call_t *call)
{
	char **s = call->seg;
	if (!call->who->operator && !task_may(call))
		return api_fail_status(call->c, MHD_HTTP_FORBIDDEN, LC_EXIT_PERM,
				       "a task's token reaches its own app (%s) only: not %s /v1/%s%s%s", call->who->app,
				       call->method, call->n ? s[0] : "", call->n > 1 ? "/" : "", call->n > 1 ? s[1] : "");
	if (is(call, "GET", 1, "health"))
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:b, s:s}", "ok", 1, "version", PACKAGE_VERSION));
	if (is(call, "GET", 1, "whoami"))
		return h_whoami(call);
	if (call->n >= 1 && !strcmp(s[0], "sandboxes"))
		return lcd_api_sandboxes(call);
	if (call->n >= 1 && (!strcmp(s[0], "devboxes") || !strcmp(s[0], "disks")))
		return lcd_api_devboxes(call);
	if (is(call, "GET", 1, "images")) {
		lc_error_t *err = NULL;
		json_t *list = lcd_images_list(call->lcd, call->who, &err);
		return list ? api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "images", list)) : api_fail_err(call->c, err);
	}
	if (is(call, "GET", 1, "nodes")) {
		lc_error_t *err = NULL;
		json_t *list = lcd_nodes_list(call->lcd, &err);
		return list ? api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "nodes", list)) : api_fail_err(call->c, err);
	}
	if (is(call, "GET", 1, "apps"))
		return h_apps(call);
	if (is(call, "POST", 1, "apps"))
		return h_deploy(call);
	if (is(call, "GET", 2, "apps", NULL))
		return h_app_show(call, s[1]);
	if (is(call, "DELETE", 2, "apps", NULL))
		return h_app_delete(call, s[1]);
	if (is(call, "POST", 5, "apps", NULL, "functions", NULL, "spawn"))
		return h_spawn(call, s[1], s[3], false);
	if (is(call, "POST", 5, "apps", NULL, "functions", NULL, "spawn_map"))
		return h_spawn(call, s[1], s[3], true);
	if (call->n == 5 && !strcmp(call->method, "POST") && !strcmp(s[0], "apps") && !strcmp(s[2], "schedules") &&
	    (!strcmp(s[4], "run") || !strcmp(s[4], "stop") || !strcmp(s[4], "start")))
		return h_schedule_verb(call, s[1], s[3], s[4]);
	if (is(call, "GET", 1, "schedules"))
		return h_schedules(call);
	if (is(call, "GET", 1, "tasks"))
		return h_tasks(call);
	if (is(call, "GET", 2, "tasks", NULL))
		return h_task(call, s[1]);
	if (is(call, "GET", 3, "tasks", NULL, "result"))
		return h_result(call, s[1]);
	if (is(call, "GET", 3, "tasks", NULL, "logs"))
		return h_logs(call, s[1]);
	if (is(call, "POST", 3, "tasks", NULL, "cancel"))
		return h_cancel(call, s[1]);
	if (call->n == 4 && !strcmp(s[0], "apps") && !strcmp(s[2], "maps"))
		return h_map(call, s[1], s[3], NULL);
	if (call->n >= 6 && !strcmp(s[0], "apps") && !strcmp(s[2], "maps") && !strcmp(s[4], "keys"))
		return h_map(call, s[1], s[3], call->rest_key);
	if (call->n == 1 && !strcmp(s[0], "secrets"))
		return h_secret(call, NULL);
	if (call->n == 2 && !strcmp(s[0], "secrets"))
		return h_secret(call, s[1]);
	return api_fail_status(call->c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s /v1/%s", call->method,
			   call->n ? s[0] : "");
}

static bool same_secret(const char *got, const char *want)
{
	size_t a = strlen(got), b = strlen(want);
	unsigned char diff = a != b;
	for (size_t i = 0; i < b; i++)
		diff |= (unsigned char)(got[i < a ? i : 0] ^ want[i]);
	return diff == 0;
}

/* Who is calling: a bearer token must be the operator's (TCP) or a live
 * task's; without one only the operator's unix socket is trusted. */
static bool authenticate(struct listener *l, struct MHD_Connection *c, lcd_caller_t *who)
{
	memset(who, 0, sizeof(*who));
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (!h) {
		who->operator = l->kind == L_OPERATOR;
		return who->operator;
	}
	if (strncmp(h, "Bearer ", 7) != 0)
		return false;
	const char *got = h + 7;
	if ((l->api->token && same_secret(got, l->api->token)) ||
	    (l->kind == L_TCP && l->api->cluster_token && same_secret(got, l->api->cluster_token))) {
		who->operator = true;
		return true;
	}
	return lcd_token_check(l->api->lcd, got, who);
}

/* This thread's nice value (Linux: setpriority on PRIO_PROCESS 0 is per
 * thread); a refusal (no CAP_SYS_NICE) leaves it as it was. */
static void thread_nice(int nice)
{
	errno = 0;
	int now = getpriority(PRIO_PROCESS, 0);
	if ((now != -1 || errno == 0) && now != nice)
		(void)setpriority(PRIO_PROCESS, 0, nice);
}

/* Requests that only read or write lcd's database and start nothing:
 * spawns and reads of tasks.  A task's logs are a file read, also fine. */
static bool is_light(const char *method, const char *url)
{
	if (!strcmp(method, "GET"))
		return !strcmp(url, "/v1/health") || !strcmp(url, "/v1/tasks") || !strncmp(url, "/v1/tasks/", 10);
	if (strcmp(method, "POST") != 0 || strncmp(url, "/v1/apps/", 9) != 0)
		return false;
	/* /v1/apps/APP/functions/FN/spawn[_map]: no other POST of six
	 * segments ends so (route) */
	size_t slashes = 0;
	for (const char *p = url; *p; p++)
		slashes += *p == '/';
	const char *verb = strrchr(url, '/');
	return slashes == 6 && (!strcmp(verb, "/spawn") || !strcmp(verb, "/spawn_map"));
}

/* A TCP connection may sit idle (between requests) or half-sent (its
 * request's headers coming slowly) for tcp_idle_timeout at most: a peer
 * that opens connections and sends nothing, which needs no token to do
 * so, holds no thread for long.  Once a request's headers carry the
 * bearer token, its body, lcd's work on it and its answer take what they
 * take (an upload lcd writes into a sandbox as it comes, a task run, an
 * exec that prints nothing for a while): no timeout until the request is
 * done (completed() sets it again). */
static void working(struct listener *l, struct MHD_Connection *c)
{
	(void)l;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct listener *l = cls;
	struct lcd_api *api = l->api;
	lcd_t *lcd = api->lcd;
	lcd_req_t *rq = *con_cls;
	if (!rq) {
		/* per request: a kept-alive connection's thread may have served
		 * a request of the other kind before */
		thread_nice(is_light(method, url) ? lcd->nice - API_NICE_RAISE : lcd->nice);
		rq = lc_xmalloc0(sizeof(*rq));
		*con_cls = rq;
		if (!authenticate(l, c, &rq->who))
			return api_fail_status(c, MHD_HTTP_UNAUTHORIZED, LC_EXIT_PERM, "missing or wrong bearer token");
		if (l->kind == L_TASK) {
			/* a task's token, on that task's own socket */
			const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
			const conn_ctx_t *ctx = ci ? ci->socket_context : NULL;
			if (!ctx || rq->who.operator || strcmp(ctx->task, rq->who.task))
				return api_fail_status(c, MHD_HTTP_UNAUTHORIZED, LC_EXIT_PERM,
						       "a task's token is taken on its own socket only");
		}
		working(l, c);
		enum MHD_Result fr = MHD_NO;
		int fw = lcd_forward_begin(c, lcd, &rq->who, method, url, &rq->fwd, &fr);
		if (fw != 0)
			return fw > 0 ? MHD_YES : fr;
		if (lcd_upload_wanted(method, url)) {
			enum MHD_Result r;
			if (!lcd_upload_begin(c, lcd, &rq->who, url, &rq->upload, &r))
				return r;
			return MHD_YES;
		}
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > lcd->max_body)
			return api_fail_status(c, HTTP_TOO_LARGE, LC_EXIT_INVALID,
					   "request body too large (limit %zu bytes)", lcd->max_body);
		return MHD_YES;
	}
	if (rq->fwd) {
		if (*upload_size) {
			lcd_forward_data(rq->fwd, upload, *upload_size);
			*upload_size = 0;
			return MHD_YES;
		}
		lcd_fwd_t *f = rq->fwd;
		return lcd_forward_end(c, f, rq);
	}
	if (rq->upload) {
		if (*upload_size) {
			lcd_upload_data(rq->upload, upload, *upload_size);
			*upload_size = 0;
			return MHD_YES;
		}
		return lcd_upload_end(c, rq->upload);
	}
	if (*upload_size) {
		lcd_body_append(&rq->body, &rq->len, &rq->too_big, upload, upload_size, lcd->max_body);
		return MHD_YES;
	}
	if (rq->too_big)
		return api_fail_status(c, HTTP_TOO_LARGE, LC_EXIT_INVALID, "request body too large (limit %zu bytes)",
				   lcd->max_body);

	if (strncmp(url, "/v1/", 4) != 0 && strcmp(url, "/v1") != 0)
		return api_fail_status(c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s (the API is under /v1/)", url);
	call_t call = { .c = c, .lcd = lcd, .method = method, .who = &rq->who, .rq = rq };
	_cleanup_json_ json_t *body = NULL;
	if (rq->len) {
		json_error_t je;
		body = json_loadb(rq->body, rq->len, 0, &je);
		if (!body)
			return api_fail_status(c, MHD_HTTP_BAD_REQUEST, LC_EXIT_INVALID, "request body: malformed JSON at line %d: %s",
					   je.line, je.text);
		call.body = body;
	}
	_cleanup_free_ char *path = lc_xmalloc0(strlen(url) + 4);
	strcpy(path, url + 3);
	_cleanup_free_ char *keyrest = NULL;
	char *segs[16];
	size_t n = 0;
	/* A map key is everything after ".../keys/", slashes included. */
	char *k = strstr(path, "/keys/");
	if (k && !strncmp(path, "/apps/", 6)) {
		keyrest = strdup(k + 6);
		k[6] = '\0';
		strcat(path, "x");
	}
	char *save = NULL;
	for (char *t = strtok_r(path, "/", &save); t && n < 16; t = strtok_r(NULL, "/", &save))
		segs[n++] = t;
	call.seg = segs;
	call.n = n;
	call.rest_key = keyrest;
	return route(&call);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct listener *l = cls;
	/* the wait for the next request: idle again */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
				  l->kind == L_TCP ? l->api->tcp_idle_timeout : l->api->unix_idle_timeout);
	lcd_req_t *rq = *con_cls;
	if (rq) {
		if (rq->on_done)
			rq->on_done(rq->on_done_arg);
		lcd_forward_free(rq->fwd);
		lcd_upload_free(rq->upload);
		free(rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

/* ---- the unix sockets: one acceptor, and a share per caller ----
 *
 * libmicrohttpd serves the operator's socket and every task's own socket
 * without listening on them itself: the acceptor below takes each
 * connection, counts it against its caller's share (a task: its socket;
 * the operator's socket: the peer's uid) and hands it on, or closes it at
 * once when the share is full.  So a task holding thousands of
 * connections holds its share only; everyone else is still served.  A
 * connection that has not sent a request with a good token within
 * unix_idle_timeout is closed (working() and completed()). */

static void api_wake(struct lcd_api *api)
{
	(void)!write(api->wake[1], "x", 1);
}

/* (api->lock held) */
static share_t *share_get(struct lcd_api *api, const char *key)
{
	for (share_t *s = api->shares; s; s = s->next)
		if (!strcmp(s->key, key))
			return s;
	share_t *s = lc_xmalloc0(sizeof(*s));
	snprintf(s->key, sizeof(s->key), "%s", key);
	s->next = api->shares;
	api->shares = s;
	return s;
}

/* One connection of s fewer; s goes with its last (api->lock held). */
static void share_put(struct lcd_api *api, share_t *s)
{
	if (--s->n > 0)
		return;
	for (share_t **pp = &api->shares; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			free(s);
			return;
		}
}

static void accept_one(struct lcd_api *api, const usock_t *u)
{
	struct sockaddr_un sa;
	socklen_t sl = sizeof(sa);
	int c = accept4(u->fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
	if (c < 0)
		return;
	char key[48];
	int cap = api->task_share;
	if (u->kind == L_TASK) {
		snprintf(key, sizeof(key), "task:%s", u->task);
	} else {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			close(c);
			return;
		}
		snprintf(key, sizeof(key), "uid:%u", (unsigned)cr.uid);
		cap = api->operator_share;
	}
	pthread_mutex_lock(&api->lock);
	share_t *sh = share_get(api, key);
	int slot = -1;
	for (int i = 0; i < 64 && slot < 0; i++)
		if (!api->pending[i])
			slot = i;
	bool full = sh->n >= cap || slot < 0;
	sh->n++;
	conn_ctx_t *ctx = NULL;
	if (full) {
		share_put(api, sh);
	} else {
		ctx = lc_xmalloc0(sizeof(*ctx));
		ctx->kind = u->kind;
		snprintf(ctx->task, sizeof(ctx->task), "%s", u->task);
		ctx->share = sh;
		api->pending[slot] = ctx;
		api->pending_fd[slot] = c;
	}
	pthread_mutex_unlock(&api->lock);
	if (full) {
		close(c);
		return;
	}
	/* libmicrohttpd owns (and closes) it from here */
	if (MHD_add_connection(u->kind == L_TASK ? api->task_d : api->unix_d, c, (struct sockaddr *)&sa, sl) != MHD_YES) {
		pthread_mutex_lock(&api->lock);
		if (api->pending[slot] == ctx) { /* never started: nothing else will free it */
			api->pending[slot] = NULL;
			share_put(api, sh);
			free(ctx);
		}
		pthread_mutex_unlock(&api->lock);
	}
}

/* The only thread that closes the sockets it polls. */
static void *accept_loop(void *arg)
{
	struct lcd_api *api = arg;
	struct pollfd *pfd = NULL;
	usock_t *snap = NULL;
	for (;;) {
		pthread_mutex_lock(&api->lock);
		if (api->stopping) {
			pthread_mutex_unlock(&api->lock);
			break;
		}
		for (size_t i = 0; i < api->n_socks;) {
			if (api->socks[i].dead) {
				close(api->socks[i].fd);
				free(api->socks[i].path);
				api->socks[i] = api->socks[--api->n_socks];
				continue;
			}
			i++;
		}
		size_t n = api->n_socks;
		pfd = realloc(pfd, (n + 1) * sizeof(*pfd));
		snap = realloc(snap, (n + 1) * sizeof(*snap));
		pfd[0] = (struct pollfd){ .fd = api->wake[0], .events = POLLIN };
		for (size_t i = 0; i < n; i++) {
			snap[i] = api->socks[i];
			pfd[i + 1] = (struct pollfd){ .fd = api->socks[i].fd, .events = POLLIN };
		}
		pthread_mutex_unlock(&api->lock);
		if (poll(pfd, n + 1, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			char b[64];
			while (read(api->wake[0], b, sizeof(b)) > 0)
				;
		}
		for (size_t i = 0; i < n; i++)
			if (pfd[i + 1].revents & POLLIN)
				for (int k = 0; k < 64; k++) /* a burst, then the others' turn */
					accept_one(api, &snap[i]);
	}
	free(pfd);
	free(snap);
	return NULL;
}

static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct listener *l = cls;
	struct lcd_api *api = l->api;
	if (l->kind == L_TCP)
		return;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		pthread_mutex_lock(&api->lock);
		for (int i = 0; fi && i < 64; i++)
			if (api->pending[i] && api->pending_fd[i] == fi->connect_fd) {
				*socket_context = api->pending[i];
				api->pending[i] = NULL;
				break;
			}
		pthread_mutex_unlock(&api->lock);
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
		conn_ctx_t *ctx = *socket_context;
		pthread_mutex_lock(&api->lock);
		share_put(api, ctx->share);
		pthread_mutex_unlock(&api->lock);
		free(ctx);
		*socket_context = NULL;
	}
}

static int add_usock(struct lcd_api *api, int fd, enum listener_kind kind, const char *task, const char *path)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	pthread_mutex_lock(&api->lock);
	api->socks = realloc(api->socks, (api->n_socks + 1) * sizeof(*api->socks));
	usock_t *u = &api->socks[api->n_socks++];
	memset(u, 0, sizeof(*u));
	u->fd = fd;
	u->kind = kind;
	snprintf(u->task, sizeof(u->task), "%s", task ? task : "");
	u->path = path ? strdup(path) : NULL;
	pthread_mutex_unlock(&api->lock);
	api_wake(api);
	return 0;
}

/* A task's own socket: lcd_task_access binds it into the task's sandbox
 * at /run/lcd.sock.  Nobody else's inode: what the task does to it
 * (chmod, unlink) is done to itself only. */
static int task_socket_open(lcd_t *lcd, const char *task, char **path, lc_error_t **err)
{
	struct lcd_api *api = lcd->api;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_free_ char *p = lc_strdup_printf("%s/%s.sock", api->sockets_dir, task);
	if (strlen(p) >= sizeof(sa.sun_path))
		return lc_error_set(err, LC_EXIT_RUNTIME, ENAMETOOLONG, "task %s: socket path %s is too long", task, p);
	strcpy(sa.sun_path, p);
	unlink(p);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(p, 0666) < 0 || listen(fd, 64) < 0 ||
	    add_usock(api, fd, L_TASK, task, p) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		unlink(p);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "task %s: cannot make its API socket %s", task, p);
	}
	*path = lc_steal(p);
	return 0;
}

static void task_socket_close(lcd_t *lcd, const char *task)
{
	struct lcd_api *api = lcd->api;
	pthread_mutex_lock(&api->lock);
	for (size_t i = 0; i < api->n_socks; i++)
		if (api->socks[i].kind == L_TASK && !strcmp(api->socks[i].task, task) && !api->socks[i].dead) {
			api->socks[i].dead = true;
			unlink(api->socks[i].path);
		}
	pthread_mutex_unlock(&api->lock);
	api_wake(api);
}

static struct MHD_Daemon *start_daemon(struct listener *l, int fd, const struct sockaddr *sa, bool v6, unsigned per_ip)
{
	/* upgrade: a devbox's ssh connection (api_devbox.c) */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_ALLOW_UPGRADE;
	if (v6)
		flags |= MHD_USE_IPv6;
	if (!sa) /* a unix socket: the acceptor takes its connections */
		flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	/* Its listening thread, and so every connection thread it makes,
	 * inherits this thread's nice value: raised while it is created. */
	thread_nice(l->api->lcd->nice - API_NICE_RAISE);
	(void)fd;
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, l },
		{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_conn, l },
		{ MHD_OPTION_CONNECTION_TIMEOUT, sa ? l->api->tcp_idle_timeout : l->api->unix_idle_timeout, NULL },
		{ MHD_OPTION_CONNECTION_LIMIT, 1u << 16, NULL },
		{ sa ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, (void *)sa },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, l, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	thread_nice(l->api->lcd->nice);
	return d;
}

void lcd_body_append(char **body, size_t *len, bool *too_big, const char *piece, size_t *n, size_t max)
{
	if (!*too_big && *len + *n <= max) {
		*body = realloc(*body, *len + *n + 1);
		memcpy(*body + *len, piece, *n);
		*len += *n;
		(*body)[*len] = '\0';
	} else {
		*too_big = true;
	}
	*n = 0;
}

struct addrinfo *lcd_listen_addr(const char *addr, const char *what, lc_error_t **err)
{
	_cleanup_free_ char *host = strdup(addr);
	char *colon = strrchr(host, ':');
	if (!colon) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "%s '%s': expected HOST:PORT", what, addr);
		return NULL;
	}
	*colon = '\0';
	char *h = host;
	if (*h == '[' && colon > h && colon[-1] == ']') {
		h++;
		colon[-1] = '\0';
	}
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int rc = getaddrinfo(h, colon + 1, &hints, &ai);
	if (rc != 0) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "%s '%s': %s", what, addr, gai_strerror(rc));
		return NULL;
	}
	return ai;
}

int lcd_api_start(lcd_t *lcd, int unix_fd, const lcd_api_cfg_t *cfg, lcd_api_t **out, lc_error_t **err)
{
	const char *tcp_addr = cfg->addr, *token = cfg->token;
	struct lcd_api *api = lc_xmalloc0(sizeof(*api));
	api->lcd = lcd;
	api->wake[0] = api->wake[1] = -1;
	api->l_unix = (struct listener){ api, L_OPERATOR };
	api->l_task = (struct listener){ api, L_TASK };
	api->l_tcp = (struct listener){ api, L_TCP };
	api->tcp_idle_timeout = cfg->idle_timeout;
	api->unix_idle_timeout = cfg->unix_idle_timeout;
	api->task_share = cfg->task_connections;
	api->operator_share = cfg->operator_connections;
	pthread_mutex_init(&api->lock, NULL);
	api->sockets_dir = lc_strdup_printf("%s/sockets", lcd->state_dir);
	if (lc_mkdir_p(api->sockets_dir, 0711, err) < 0 || chmod(api->sockets_dir, 0711) < 0 ||
	    pipe2(api->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s", api->sockets_dir);
		lcd_api_stop(api);
		return -1;
	}
	/* no task outlives lcd: the sockets a crash left go */
	DIR *dir = opendir(api->sockets_dir);
	for (struct dirent *de; dir && (de = readdir(dir));)
		if (strlen(de->d_name) > 5 && !strcmp(de->d_name + strlen(de->d_name) - 5, ".sock"))
			unlinkat(dirfd(dir), de->d_name, 0);
	if (dir)
		closedir(dir);
	api->unix_d = start_daemon(&api->l_unix, -1, NULL, false, 0);
	api->task_d = start_daemon(&api->l_task, -1, NULL, false, 0);
	if (!api->unix_d || !api->task_d) {
		lcd_api_stop(api);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot start the HTTP server on the unix sockets");
	}
	if (add_usock(api, unix_fd, L_OPERATOR, NULL, NULL) < 0 ||
	    pthread_create(&api->acceptor, NULL, accept_loop, api) != 0) {
		lcd_api_stop(api);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot start the API's acceptor");
	}
	api->acceptor_running = true;
	lcd->api = api;
	lcd->task_socket_open = task_socket_open;
	lcd->task_socket_close = task_socket_close;
	lcd->sessions_drop = lcd_sessions_drop; /* kept after lcd_api_stop: the sessions outlive it */
	if (tcp_addr) {
		if (!token || !*token) {
			lcd_api_stop(api);
			return lc_error_set(err, LC_EXIT_USAGE, 0, "tcp listener %s needs a bearer token (token_file)", tcp_addr);
		}
		api->token = strdup(token);
		if (cfg->cluster_token)
			api->cluster_token = strdup(cfg->cluster_token);
		struct addrinfo *ai = lcd_listen_addr(tcp_addr, "tcp listener", err);
		if (!ai) {
			lcd_api_stop(api);
			return -1;
		}
		api->tcp_d = start_daemon(&api->l_tcp, -1, ai->ai_addr, ai->ai_family == AF_INET6, cfg->per_ip);
		freeaddrinfo(ai);
		if (!api->tcp_d) {
			lcd_api_stop(api);
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot listen on %s", tcp_addr);
		}
	}
	*out = api;
	return 0;
}

void lcd_api_stop(lcd_api_t *api)
{
	if (!api)
		return;
	pthread_mutex_lock(&api->lock);
	api->stopping = true;
	pthread_mutex_unlock(&api->lock);
	if (api->acceptor_running) {
		api_wake(api);
		pthread_join(api->acceptor, NULL);
	}
	if (api->lcd->api == api) {
		api->lcd->task_socket_open = NULL;
		api->lcd->task_socket_close = NULL;
		api->lcd->api = NULL;
	}
	if (api->tcp_d)
		MHD_stop_daemon(api->tcp_d);
	if (api->task_d)
		MHD_stop_daemon(api->task_d);
	if (api->unix_d)
		MHD_stop_daemon(api->unix_d);
	for (size_t i = 0; i < api->n_socks; i++) {
		close(api->socks[i].fd);
		if (api->socks[i].path)
			unlink(api->socks[i].path);
		free(api->socks[i].path);
	}
	free(api->socks);
	for (share_t *s = api->shares, *next; s; s = next) {
		next = s->next;
		free(s);
	}
	for (int i = 0; i < 64; i++)
		free(api->pending[i]);
	if (api->wake[0] >= 0)
		close(api->wake[0]);
	if (api->wake[1] >= 0)
		close(api->wake[1]);
	free(api->sockets_dir);
	pthread_mutex_destroy(&api->lock);
	if (api->cluster_token) {
		explicit_bzero(api->cluster_token, strlen(api->cluster_token));
		free(api->cluster_token);
	}
	if (api->token) {
		explicit_bzero(api->token, strlen(api->token));
		free(api->token);
	}
	free(api);
}
