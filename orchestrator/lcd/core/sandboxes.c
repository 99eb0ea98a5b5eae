/* sandboxes.c — the sandbox API's records and lifecycle: the create
 * request (validated whole before anything is made), ownership and the
 * per-app quota, finding a sandbox as a caller may see it, its view,
 * delete, snapshot, fork, and recovery after a restart.
 *
 * A sandbox's row (table sandboxes) is written in state 'creating' before
 * lc_sandbox_create() runs and turns 'live' after; a task's sandboxes are
 * marked 'deleting' when the task ends.  So after a crash at any moment
 * the rows say what to remove.  The row holds the request as it was given
 * (for fork), the labels and the names of the secrets, never their values. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "access.h"
#include "apps.h"
#include "disk.h"
#include "forward.h"
#include "gateway.h"
#include "grant.h"
#include "image.h"
#include "images.h"
#include "json.h"
#include "layer.h"
#include "lcd.h"
#include "net.h"
#include "pool.h"
#include "procs.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

#define SB_COLUMNS "id, name, app, task_id, function, state, image, request, labels, secrets, created_at, node"
#define FORK_MAX 64
#define TTL_MAX (30 * 86400)
#define LABELS_MAX 64

static int bad(lc_error_t **err, int code, const char *path, const char *what)
{
	return lc_error_set(err, code, 0, "%s: %s", path, what);
}

/* ---- the create request ---- */

typedef struct sbreq {
	lc_spec_t *spec;
	char *image;    /* as asked: "host" or a stored image's name */
	char *digest;   /* its manifest digest as resolved now; NULL: host */
	json_t *labels; /* {K: V} */
	json_t *secrets;/* [NAME] */
	char *name;
	bool has_gw;    /* model_gateway */
	lcd_gw_spec_t gw;
} sbreq_t;

static void sbreq_clear(sbreq_t *r)
{
	lc_spec_free(r->spec);
	free(r->image);
	free(r->digest);
	json_decref(r->labels);
	json_decref(r->secrets);
	free(r->name);
	lcd_gw_spec_clear(&r->gw);
	memset(r, 0, sizeof(*r));
}

static bool env_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > 255 || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

/* env: {"K": "V"} or ["K=V", ...] appended to *out. */
int lcd_env_parse(json_t *v, const char *path, char ***out, lc_error_t **err)
{
	if (!v)
		return 0;
	if (json_is_object(v)) {
		const char *k;
		json_t *val;
		json_object_foreach(v, k, val) {
			_cleanup_free_ char *p = lc_strdup_printf("%s.%s", path, k);
			if (!env_name_ok(k, strlen(k)))
				return bad(err, LC_EXIT_INVALID, p, "not a valid environment variable name");
			if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
				return bad(err, LC_EXIT_INVALID, p, "expected a string without NUL bytes");
			_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", k, json_string_value(val));
			lc_strv_push(out, kv);
		}
		return 0;
	}
	if (!json_is_array(v))
		return bad(err, LC_EXIT_INVALID, path, "expected an object {\"NAME\": \"value\"} or an array of \"NAME=value\"");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *p = lc_strdup_printf("%s[%zu]", path, i);
		const char *s = json_string_value(e);
		const char *eq = s ? strchr(s, '=') : NULL;
		if (!eq || !env_name_ok(s, (size_t)(eq - s)) || strlen(s) != json_string_length(e))
			return bad(err, LC_EXIT_INVALID, p, "expected \"NAME=value\"");
		lc_strv_push(out, s);
	}
	return 0;
}

/* user: "UID[:GID]" or a number. */
int lcd_user_parse(json_t *v, const char *path, uid_t *uid, gid_t *gid, lc_error_t **err)
{
	unsigned long u, g;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		u = g = (unsigned long)json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end = NULL;
		errno = 0;
		u = strtoul(s, &end, 10);
		g = u;
		if (!errno && end != s && *end == ':') {
			const char *gs = end + 1;
			g = strtoul(gs, &end, 10);
			if (end == gs)
				end = (char *)"x";
		}
		if (errno || end == s || *end || !isdigit((unsigned char)s[0]))
			return bad(err, LC_EXIT_INVALID, path, "expected \"UID[:GID]\" (numbers)");
	} else {
		return bad(err, LC_EXIT_INVALID, path, "expected \"UID[:GID]\" (numbers)");
	}
	if (u >= lc_uid_count() || g >= lc_uid_count()) {
		_cleanup_free_ char *m = lc_strdup_printf("ids must be below %u (the sandbox's id range)", lc_uid_count());
		return bad(err, LC_EXIT_INVALID, path, m);
	}
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

/* An absolute path without "..": what the API takes for paths in a sandbox. */
bool lcd_sandbox_path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > 4096)
		return false;
	for (const char *s = p; (s = strstr(s, "..")); s += 2)
		if (s[-1] == '/' && (s[2] == '/' || s[2] == '\0'))
			return false;
	return true;
}

static int parse_net(json_t *v, lc_net_spec_t *net, lc_error_t **err)
{
	if (!v)
		return 0;
	if (json_is_string(v)) {
		const char *name = json_string_value(v);
		if (!strcmp(name, "none"))
			return 0;
		/* A name only: never a path on lcd's host. */
		if (!lcd_name_valid(name))
			return bad(err, LC_EXIT_INVALID, "net", "expected \"none\", a network policy name, or a policy object");
		if (lc_net_policy_load(name, net, err) < 0)
			return lc_error_wrap(err, "net");
	} else if (json_is_object(v)) {
		if (lc_net_policy_from_json(v, "(request)", net, err) < 0)
			return lc_error_wrap(err, "net");
	} else {
		return bad(err, LC_EXIT_INVALID, "net", "expected \"none\", a network policy name, or a policy object");
	}
	if (lc_net_validate(net, err) < 0)
		return lc_error_wrap(err, "net");
	return 0;
}

/* A task's limits within its grant (lcd_grant_limits).  A disk it did not
 * ask for, larger than half of what the store's filesystem has free, is
 * that half (at least LC_DISK_MIN): the default must not make every
 * create fail on a small host, where a size asked for is held to the
 * letter (lc_disk_check). */
static int grant_limits(lcd_t *lcd, const lcd_grant_t *g, const char *app, bool asked, lc_limits_t *lim,
			lc_error_t **err)
{
	bool default_disk = !asked || lim->disk <= 0;
	if (lcd_grant_limits(g, app, asked ? lim : NULL, lcd->task_disk, lim, err) < 0)
		return -1;
	struct statvfs sv;
	if (default_disk && lim->disk > 0 && statvfs(lc_lib_dir(), &sv) == 0) {
		long long half = (long long)((unsigned long long)sv.f_bavail * sv.f_frsize / 2) & ~((1LL << 20) - 1);
		if (lim->disk > half)
			lim->disk = half > LC_DISK_MIN ? half : LC_DISK_MIN;
	}
	return 0;
}

static int parse_limits(json_t *v, lc_limits_t *lim, lc_error_t **err)
{
	if (!v)
		return 0;
	long long default_pids = lim->pids;
	if (json_is_string(v)) {
		if (lc_limits_load(json_string_value(v), lim, err) < 0)
			return lc_error_wrap(err, "limits");
		return 0;
	}
	if (lcd_limits_parse(v, "limits", lim, err) < 0)
		return -1;
	if (lim->pids < 0)
		lim->pids = default_pids;
	return 0;
}

int lcd_secret_usable(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *path, lc_error_t **err)
{
	if (!name || !lcd_secret_name_valid(name))
		return bad(err, LC_EXIT_INVALID, path, "expected a secret name");
	if (!who->operator) {
		lcd_app_t *app = lcd_app_get(lcd, who->app);
		const lcd_function_t *fn = app ? lcd_app_function(app, who->function) : NULL;
		bool declared = false;
		for (size_t k = 0; fn && fn->secrets && fn->secrets[k]; k++)
			declared |= !strcmp(fn->secrets[k], name);
		lcd_app_unref(app);
		if (!declared)
			return lc_error_set(err, LC_EXIT_PERM, 0, "%s: secret %s is not declared by function %s:%s", path, name,
					    who->app, who->function);
	}
	long long n = lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM secrets WHERE name = ?", "s", name);
	if (n < 0)
		return -1;
	if (n == 0)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "%s: no secret named '%s'", path, name);
	return 0;
}

static int parse_secrets(lcd_t *lcd, const lcd_caller_t *who, json_t *v, json_t **out, lc_error_t **err)
{
	*out = json_array();
	if (!v)
		return 0;
	if (!json_is_array(v))
		return bad(err, LC_EXIT_INVALID, "secrets", "expected an array of secret names");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *p = lc_strdup_printf("secrets[%zu]", i);
		if (lcd_secret_usable(lcd, who, json_string_value(e), p, err) < 0)
			return -1;
		json_array_append(*out, e);
	}
	return 0;
}

static int parse_labels(json_t *v, json_t **out, lc_error_t **err)
{
	if (!v) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) > LABELS_MAX)
		return bad(err, LC_EXIT_INVALID, "labels", "expected an object of at most 64 {\"key\": \"value\"} strings");
	const char *k;
	json_t *val;
	json_object_foreach(v, k, val) {
		_cleanup_free_ char *p = lc_strdup_printf("labels.%s", k);
		bool ok = *k && strlen(k) <= 63;
		for (const char *c = k; ok && *c; c++)
			ok = isalnum((unsigned char)*c) || strchr("._/-", *c);
		if (!ok)
			return bad(err, LC_EXIT_INVALID, p, "a label key is 1-63 letters, digits, '.', '_', '/', '-'");
		if (!json_is_string(val) || json_string_length(val) > 256 || strchr(json_string_value(val), '\n'))
			return bad(err, LC_EXIT_INVALID, p, "expected a string of at most 256 bytes");
	}
	*out = json_incref(v);
	return 0;
}

/* mounts: [{"source", "target", "readonly", "idmap"}], the operator's
 * only; idmap as in a manifest: true, false or "auto" (the default). */
static int parse_mounts(const lcd_caller_t *who, json_t *v, lc_spec_t *spec, lc_error_t **err)
{
	static const char *const keys[] = { "source", "target", "readonly", "idmap", NULL };
	if (!v)
		return 0;
	if (!who->operator)
		return lc_error_set(err, LC_EXIT_PERM, 0, "mounts: a task cannot bind host paths into a sandbox");
	if (!json_is_array(v))
		return bad(err, LC_EXIT_INVALID, "mounts", "expected an array of {\"source\", \"target\", \"readonly\"}");
	size_t i;
	json_t *m;
	json_array_foreach(v, i, m) {
		_cleanup_free_ char *p = lc_strdup_printf("mounts[%zu]", i);
		if (!json_is_object(m))
			return bad(err, LC_EXIT_INVALID, p, "expected an object");
		if (lcd_check_keys(m, p, keys, err) < 0)
			return -1;
		const char *src = lc_json_str(m, "source");
		const char *dst = lc_json_str(m, "target");
		json_t *ro = json_object_get(m, "readonly");
		if (!src || src[0] != '/')
			return bad(err, LC_EXIT_INVALID, p, "source: expected an absolute host path");
		if (access(src, F_OK) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "%s.source: %s", p, src);
		if (!lcd_sandbox_path_ok(dst) || !strcmp(dst, "/"))
			return bad(err, LC_EXIT_INVALID, p, "target: expected an absolute path without '..' (not /)");
		if (ro && !json_is_boolean(ro))
			return bad(err, LC_EXIT_INVALID, p, "readonly: expected true or false");
		int idmap = lcd_idmap_value(json_object_get(m, "idmap"));
		if (idmap < 0)
			return bad(err, LC_EXIT_INVALID, p, "idmap: expected true, false or \"auto\"");
		spec->mounts = realloc(spec->mounts, (spec->n_mounts + 1) * sizeof(*spec->mounts));
		lc_mount_t *mt = &spec->mounts[spec->n_mounts++];
		memset(mt, 0, sizeof(*mt));
		mt->src = strdup(src);
		mt->dst = strdup(dst);
		mt->ro = json_is_true(ro);
		mt->idmap = idmap;
	}
	return 0;
}

static int positive(json_t *v, const char *path, long long max, int *out, lc_error_t **err)
{
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > max) {
		_cleanup_free_ char *m = lc_strdup_printf("expected seconds, 1 to %lld", max);
		return bad(err, LC_EXIT_INVALID, path, m);
	}
	*out = (int)json_integer_value(v);
	return 0;
}

static bool looks_like_id(const char *s)
{
	if (strlen(s) != LC_ID_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!isxdigit((unsigned char)*p))
			return false;
	return true;
}

/* Validate a create request completely (nothing is made yet). */
static int parse_create(lcd_t *lcd, const lcd_caller_t *who, json_t *req, const char *image_override, sbreq_t *r,
			lc_error_t **err)
{
	static const char *const keys[] = { "image", "limits", "net", "env", "secrets", "user", "workdir", "ttl",
		"idle_timeout", "labels", "mounts", "name", "model_gateway", NULL };
	memset(r, 0, sizeof(*r));
	if (!req)
		req = json_object();
	else
		json_incref(req);
	_cleanup_json_ json_t *hold = req;
	if (!json_is_object(req))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "request body: expected a JSON object");
	if (lcd_check_keys(req, "", keys, err) < 0)
		return -1;
	json_t *v;
	lc_spec_t *s = r->spec = lc_spec_new();
	if (!s)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot make a sandbox spec");
	/* A task's request is held to its app's grant (the manifest's
	 * "sandboxes"); the operator's to nothing. */
	_cleanup_app_ lcd_app_t *app = NULL;
	if (!who->operator && !(app = lcd_app_get(lcd, who->app)))
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "app %s is no longer deployed", who->app);
	const lcd_grant_t *grant = app ? &app->grant : NULL;

	json_t *img = json_object_get(req, "image");
	if (img && (!json_is_string(img) || !*json_string_value(img)))
		return bad(err, LC_EXIT_INVALID, "image", "expected an image name or \"host\"");
	const char *image = image_override ? image_override : img ? json_string_value(img) : LC_IMAGE_HOST;
	if (grant && lcd_grant_image(grant, who->app, image, err) < 0)
		return -1;
	r->image = strdup(image);
	if (strcmp(image, LC_IMAGE_HOST) != 0) {
		if (strncmp(image, "sha256:", 7) && !lc_image_name_valid(image))
			return bad(err, LC_EXIT_INVALID, "image", "not a valid image name");
		/* An image another node made comes through the registry first;
		 * resolving unpacks its layers now, once, for every later create. */
		lc_image_resolved_t *ir = NULL;
		int rc = lcd_image_fetch(lcd, image, err);
		if (rc == 0)
			rc = lc_image_resolve(image, &ir, err);
		if (rc == 0)
			rc = lc_image_apply_config(s, ir, err);
		if (rc == 0)
			r->digest = strdup(ir->manifest_digest);
		lc_image_resolved_free(ir);
		if (rc < 0)
			return lc_error_wrap(err, "image");
		s->image = strdup(image);
		lc_strv_free(s->argv); /* the image's entrypoint/cmd: not for a sandbox with no command */
		s->argv = NULL;
	}
	json_t *net = json_object_get(req, "net");
	if (grant && lcd_grant_net(grant, who->app, net, err) < 0)
		return -1;
	if (parse_limits(json_object_get(req, "limits"), &s->limits, err) < 0 ||
	    (grant && grant_limits(lcd, grant, who->app, json_object_get(req, "limits") != NULL, &s->limits, err) < 0) ||
	    parse_net(net, &s->net, err) < 0 || (grant && json_is_object(net) && lcd_grant_rules(&s->net, err) < 0) ||
	    lcd_env_parse(json_object_get(req, "env"), "env", &s->env, err) < 0 ||
	    parse_secrets(lcd, who, json_object_get(req, "secrets"), &r->secrets, err) < 0 ||
	    parse_labels(json_object_get(req, "labels"), &r->labels, err) < 0 ||
	    parse_mounts(who, json_object_get(req, "mounts"), s, err) < 0 ||
	    positive(json_object_get(req, "ttl"), "ttl", TTL_MAX, &s->ttl, err) < 0 ||
	    positive(json_object_get(req, "idle_timeout"), "idle_timeout", TTL_MAX, &s->idle_timeout, err) < 0)
		return -1;
	if ((v = json_object_get(req, "model_gateway"))) {
		if (grant && !grant->model_gateway)
			return lc_error_set(err, LC_EXIT_PERM, 0,
					    "model_gateway: app %s's tasks may not make sandboxes with the model gateway "
					    "(sandboxes.model_gateway in its manifest)", who->app);
		if (lcd_gateway_parse(lcd, who, v, r->secrets, &r->gw, &s->net, err) < 0)
			return -1;
		r->has_gw = true;
	}
	if ((v = json_object_get(req, "user"))) {
		if (lcd_user_parse(v, "user", &s->uid, &s->gid, err) < 0)
			return -1;
		s->user_set = true;
	}
	if ((v = json_object_get(req, "workdir"))) {
		if (!lcd_sandbox_path_ok(json_string_value(v)))
			return bad(err, LC_EXIT_INVALID, "workdir", "expected an absolute path without '..'");
		free(s->workdir);
		s->workdir = strdup(json_string_value(v));
	}
	if ((v = json_object_get(req, "name"))) {
		const char *n = json_string_value(v);
		if (!n || !lcd_name_valid(n) || looks_like_id(n))
			return bad(err, LC_EXIT_INVALID, "name",
				   "expected a name (lowercase letters, digits, '-', '_'; at most 63; not an id)");
		r->name = strdup(n);
	}
	return 0;
}

/* ---- records ---- */


static int quota_error(lc_error_t **err, const char *app, long long have, int n, int max)
{
	lc_error_set(err, LC_EXIT_BUSY, 0, "app %s holds %lld sandbox(es); %d more would exceed sandboxes.max %d", app,
		     have, n, max);
	if (err && *err)
		(*err)->errnum = EDQUOT; /* the API answers 429 for this one */
	return -1;
}

#define HISTORY_KEEP_MS (30LL * 86400 * 1000)

/* Drop a sandbox's row, keeping what it was and how it ended in
 * sandbox_history (30 days). */
static int forget(lcd_t *lcd, const char *id, const char *only_state, const char *reason, lc_error_t **err)
{
	long long now = lc_wall_ms();
	lcd_db_exec(lcd->db, NULL,
		    "INSERT INTO sandbox_history (id, name, app, task_id, function, image, labels, created_at, "
		    "ended_at, end_reason, node) SELECT id, name, app, task_id, function, image, labels, created_at, ?, "
		    "CASE WHEN ? IS NOT NULL THEN ? WHEN state = 'deleting' THEN 'its task ended' ELSE 'deleted' END, node "
		    "FROM sandboxes WHERE id = ? AND (? IS NULL OR state = ?) ON CONFLICT (id) DO UPDATE SET "
		    "name = excluded.name, app = excluded.app, task_id = excluded.task_id, function = excluded.function, "
		    "image = excluded.image, labels = excluded.labels, created_at = excluded.created_at, "
		    "ended_at = excluded.ended_at, end_reason = excluded.end_reason, node = excluded.node",
		    "isssss", now, reason, reason, id, only_state, only_state);
	int r = lcd_db_exec(lcd->db, err, "DELETE FROM sandboxes WHERE id = ? AND (? IS NULL OR state = ?)", "sss", id,
			    only_state, only_state);
	lcd_db_exec(lcd->db, NULL, "DELETE FROM sandbox_history WHERE ended_at < ?", "i", now - HISTORY_KEEP_MS);
	return r < 0 ? -1 : 0;
}

#define GONE "gone (its ttl expired, or it was removed outside lcd)"

/* Forget records of the app's sandboxes that vanished (a ttl expired). */
static void prune_vanished(lcd_t *lcd, const char *app)
{
	_cleanup_json_ json_t *rows =
		lcd_db_query(lcd->db, NULL, "SELECT id FROM sandboxes WHERE app = ? AND state = 'live' AND "
			     "(node IS NULL OR node = ?)", "ss", app, lcd_db_node(lcd->db));
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		lc_error_t *e = NULL;
		_cleanup_json_ json_t *st = lc_sandbox_inspect(lc_json_str(row, "id"), &e);
		if (!st && e && e->exit_code == LC_EXIT_UNKNOWN)
			forget(lcd, lc_json_str(row, "id"), "live", GONE, NULL);
		lc_error_free(e);
	}
}

/* Write n 'creating' rows, inside the app's quota, all or none; the
 * first has the id preset when one is given (a member of the pool). */
static int reserve(lcd_t *lcd, const lcd_caller_t *who, const sbreq_t *r, json_t *req, char (*ids)[LC_ID_LEN + 1],
		   int n, const char *preset, lc_error_t **err)
{
	int max = -1;
	if (!who->operator) {
		lcd_app_t *app = lcd_app_get(lcd, who->app);
		if (!app)
			return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "app %s is no longer deployed", who->app);
		max = app->sandboxes_max;
		lcd_app_unref(app);
		long long have = lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM sandboxes WHERE app = ?", "s", who->app);
		if (have >= 0 && have + n > max)
			prune_vanished(lcd, who->app);
	}
	_cleanup_free_ char *reqtext = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_free_ char *labels = json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_free_ char *secrets = json_dumps(r->secrets, JSON_COMPACT);
	if (lcd_db_begin(lcd->db, err) < 0)
		return -1;
	if (!who->operator) {
		/* The task may have ended since its request came in: its token is
		 * dropped before its sandboxes are collected, so a task without a
		 * token gets none (and one with a token has these rows collected). */
		long long live = lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM tokens WHERE task_id = ?", "s",
						  who->task);
		if (live <= 0) {
			if (live == 0)
				lc_error_set(err, LC_EXIT_PERM, 0, "task %s has ended", who->task);
			goto fail;
		}
	}
	if (max >= 0) {
		long long have = lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM sandboxes WHERE app = ?", "s", who->app);
		if (have < 0)
			goto fail;
		if (have + n > max) {
			quota_error(err, who->app, have, n, max);
			goto fail;
		}
	}
	/* names are an app's own (the operator's among the operator's) */
	if (r->name && lcd_db_query_int(lcd->db, err, 0,
					"SELECT count(*) FROM sandboxes WHERE name = ? AND app IS NOT DISTINCT FROM ?", "ss",
					r->name, who->operator ? NULL : who->app) != 0) {
		lc_error_set(err, LC_EXIT_BUSY, 0, "name: a sandbox named '%s' exists already", r->name);
		goto fail;
	}
	for (int i = 0; i < n; i++) {
		if (preset && i == 0)
			memcpy(ids[i], preset, LC_ID_LEN + 1);
		else
			lc_random_hex(ids[i], LC_ID_LEN);
		if (lcd_db_exec(lcd->db, err,
				"INSERT INTO sandboxes (id, name, app, task_id, function, state, image, request, labels, secrets, "
				"created_at, node) VALUES (?, ?, ?, ?, ?, 'creating', ?, ?, ?, ?, ?, ?)",
				"sssssssssis", ids[i], r->name, who->operator ? NULL : who->app,
				who->operator ? NULL : who->task, who->operator ? NULL : who->function, r->image, reqtext, labels,
				secrets, lc_wall_ms(), lcd_db_node(lcd->db)) < 0)
			goto fail;
	}
	return lcd_db_commit(lcd->db, err);
fail:
	lcd_db_rollback(lcd->db);
	return -1;
}

static void undo(lcd_t *lcd, char (*ids)[LC_ID_LEN + 1], int n)
{
	for (int i = 0; i < n; i++) {
		lc_error_t *e = NULL;
		if (lcd_sandbox_delete(lcd, ids[i], &e) < 0) {
			lcd_log("sandbox %s: cannot remove it again: %s", ids[i], e->msg);
			lc_error_free(e);
		}
	}
}

static const char *owner_text(const lcd_caller_t *who, char *buf, size_t len)
{
	if (who->operator)
		snprintf(buf, len, "the operator");
	else
		snprintf(buf, len, "task %s (%s:%s)", who->task, who->app, who->function);
	return buf;
}

lc_spec_t *lcd_sandbox_pool_spec(lcd_t *lcd, const char *image, char **digest, lc_error_t **err)
{
	static const lcd_caller_t op = { .operator = true };
	_cleanup_json_ json_t *req = json_pack("{s:s}", "image", image);
	sbreq_t r;
	if (parse_create(lcd, &op, req, NULL, &r, err) < 0) {
		sbreq_clear(&r);
		return NULL;
	}
	lc_spec_t *spec = r.spec;
	*digest = r.digest;
	r.spec = NULL;
	r.digest = NULL;
	sbreq_clear(&r);
	return spec;
}

/* What a member of the pool can still be given (lc_sandbox_claim): a
 * request with nothing fixed when a sandbox is made -- no limits, net
 * other than none, mounts, user, workdir or model gateway.  (A task's
 * request that names no limits gets its grant's: the claim writes them.) */
static bool pool_fits(json_t *req)
{
	static const char *const keys[] = { "image", "env", "secrets", "labels", "name", "ttl", "idle_timeout", "net", NULL };
	const char *k;
	json_t *v;
	json_object_foreach(req, k, v) {
		bool fit = false;
		for (size_t i = 0; keys[i]; i++)
			fit |= !strcmp(k, keys[i]);
		if (!fit || (!strcmp(k, "net") && strcmp(json_string_value(v) ?: "", "none")))
			return false;
	}
	return true;
}

/* Give the pool's member id to the request r; on failure the member is
 * back in the pool (its name is taken: the request's error) or removed. */
static int claim_pooled(lcd_t *lcd, const sbreq_t *r, const char *id, lc_error_t **err)
{
	lc_error_t *e = NULL;
	int rc = lc_sandbox_claim(id, r->spec, &e);
	if (rc == 0) {
		lcd_pool_claimed(lcd, id);
		return 0;
	}
	lcd_db_exec(lcd->db, NULL, "DELETE FROM sandboxes WHERE id = ?", "s", id);
	if (e && e->exit_code == LC_EXIT_BUSY) {
		lcd_pool_put_back(lcd, r->image, r->digest, id);
		*err = e;
		return -1;
	}
	lcd_log("sandbox pool: %s could not be claimed (%s); making one the usual way", id, e ? e->msg : "?");
	lc_error_free(e);
	lcd_pool_discard(lcd, id);
	return 1;
}

static int make(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
		lcd_sandbox_tune_t tune, void *ud, bool use_pool, lc_error_t **err);

int lcd_sandbox_make(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
		     lc_error_t **err)
{
	return make(lcd, who, req, n, image, ids, NULL, NULL, true, err);
}

int lcd_sandbox_make_tuned(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
			   lcd_sandbox_tune_t tune, void *ud, lc_error_t **err)
{
	return make(lcd, who, req, n, image, ids, tune, ud, true, err);
}

static int make(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
		lcd_sandbox_tune_t tune, void *ud, bool use_pool, lc_error_t **err)
{
	sbreq_t r;
	lc_trace("lcd create: start");
	if (parse_create(lcd, who, req, image, &r, err) < 0) {
		sbreq_clear(&r);
		return -1;
	}
	lc_trace("lcd create: request parsed");
	if (r.name && n > 1) {
		sbreq_clear(&r);
		return bad(err, LC_EXIT_INVALID, "name", "only one sandbox can have a name");
	}
	_cleanup_free_ char(*made)[LC_ID_LEN + 1] = lc_xmalloc0((size_t)n * sizeof(*made));
	_cleanup_json_ json_t *empty = json_object();
	/* A member of the pool, when one fits: its row is written as a new
	 * one's would be, then it gets the request's name, env and ttl. */
	char pooled[LC_ID_LEN + 1];
	bool from_pool = use_pool && n == 1 && !image && !tune && pool_fits(req ? req : empty) &&
			 lcd_pool_take(lcd, r.image, r.digest, r.spec->limits.disk, pooled);
	if (reserve(lcd, who, &r, req ? req : empty, made, n, from_pool ? pooled : NULL, err) < 0) {
		if (from_pool)
			lcd_pool_put_back(lcd, r.image, r.digest, pooled);
		sbreq_clear(&r);
		return -1;
	}
	lc_trace(from_pool ? "lcd create: row written (a pool member taken)" : "lcd create: row written");
	LC_FAULT("lcd-create-row");
	char owner[256];
	owner_text(who, owner, sizeof(owner));
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		free(r.spec->id);
		r.spec->id = strdup(made[i]);
		free(r.spec->name);
		/* lcrun's names are one namespace for the host: a task's sandbox
		 * has its name in lcd only, so apps never take each other's */
		r.spec->name = r.name && who->operator ? strdup(r.name) : NULL;
		char got[LC_ID_LEN + 1];
		if (tune && (rc = tune(r.spec, made[i], ud, err)) < 0)
			break;
		if (from_pool) {
			rc = claim_pooled(lcd, &r, made[i], err);
			if (rc != 0) {
				sbreq_clear(&r);
				return rc < 0 ? -1 : make(lcd, who, req, n, image, ids, tune, ud, false, err);
			}
		} else {
			rc = lcd_runner_create(lcd, r.spec, got, err);
		}
		if (rc < 0)
			break; /* its row goes, and the rows of those not made yet */
		lc_trace(from_pool ? "lcd create: member claimed" : "lcd create: sandbox made");
		LC_FAULT("lcd-create-made");
		/* Live only if the owner did not end meanwhile (then its row is
		 * 'deleting' or gone, and this sandbox is removed here). */
		int live = lcd_db_exec(lcd->db, err, "UPDATE sandboxes SET state = 'live' WHERE id = ? AND state = 'creating'",
				       "s", made[i]);
		if (live <= 0) {
			if (live == 0)
				lc_error_set(err, LC_EXIT_STATE, 0, "task %s ended while its sandbox was being made", who->task);
			rc = -1;
			break;
		}
		if (r.has_gw && (rc = lcd_gateway_attach(lcd, who, made[i], &r.gw, err)) < 0)
			break;
		lc_trace("lcd create: row live");
		LC_FAULT("lcd-create-live");
		lcd_log("sandbox %s created for %s (image %s%s)", made[i], owner, r.image, from_pool ? ", from the pool" : "");
	}
	if (rc < 0) {
		undo(lcd, made, n);
		sbreq_clear(&r);
		return -1;
	}
	for (int i = 0; i < n; i++)
		json_array_append_new(ids, json_string(made[i]));
	sbreq_clear(&r);
	return 0;
}

json_t *lcd_sandbox_find(lcd_t *lcd, const lcd_caller_t *who, const char *ref, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = NULL;
	if (who->operator)
		/* an id, or a name: the operator's own first, then an app's */
		rows = lcd_db_query(lcd->db, err,
				    "SELECT " SB_COLUMNS " FROM sandboxes WHERE (id = ? OR name = ?) AND state != 'deleting' "
				    "ORDER BY id = ? DESC, app IS NOT NULL",
				    "sss", ref, ref, ref);
	else
		rows = lcd_db_query(lcd->db, err,
				    "SELECT " SB_COLUMNS " FROM sandboxes WHERE (id = ? OR name = ?) AND task_id = ? "
				    "AND state != 'deleting'",
				    "sss", ref, ref, who->task);
	if (!rows)
		return NULL;
	json_t *row = json_array_get(rows, 0), *next = json_array_get(rows, 1);
	if (!row) {
		lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no sandbox '%s'", ref);
		return NULL;
	}
	if (next && strcmp(lc_json_str(row, "id"), ref) && lc_json_str(row, "app")) {
		lc_error_set(err, LC_EXIT_BUSY, 0, "sandboxes of apps %s and %s are named '%s': name one by its id",
			     lc_json_str(row, "app"), lc_json_str(next, "app"), ref);
		return NULL;
	}
	return json_incref(row);
}

/* The view of a sandbox another node holds: that node's, or (it cannot
 * be reached) what the record says, "unreachable"; NULL when the node
 * says it is gone. */
static json_t *record_view(json_t *row);

static json_t *view_elsewhere(lcd_t *lcd, json_t *row)
{
	lc_error_t *err = NULL;
	json_t *out = NULL;
	_cleanup_free_ char *path = lc_strdup_printf("/sandboxes/%s", lc_json_str(row, "id"));
	int st = lcd_node_call(lcd, lc_json_str(row, "node"), "GET", path, NULL, &out, &err);
	if (st == 200 && json_is_object(out))
		return out;
	json_decref(out);
	if (st == 404)
		return NULL;
	lc_error_free(err);
	return record_view(row);
}

static json_t *record_view(json_t *row)
{
	const char *task = lc_json_str(row, "task_id");
	json_t *v = json_pack("{s:s, s:s, s:O, s:O, s:O, s:s, s:o, s:o, s:o}", "id", lc_json_str(row, "id"), "state",
			      !strcmp(lc_json_str(row, "state"), "creating") ? "creating"
			      : !strcmp(lc_json_str(row, "state"), "lost")   ? "lost"
								      : "unreachable",
			      "name",
			      json_object_get(row, "name"), "image", json_object_get(row, "image"), "created",
			      json_object_get(row, "created_at"), "node", lc_json_str(row, "node"), "labels",
			      json_loads(lc_json_str(row, "labels"), 0, NULL), "secrets", json_loads(lc_json_str(row, "secrets"), 0, NULL),
			      "owner",
			      task ? json_pack("{s:s, s:s, s:s, s:s}", "kind", "task", "app", lc_json_str(row, "app"), "task", task,
					       "function", lc_json_str(row, "function"))
				   : json_pack("{s:s}", "kind", "operator"));
	json_object_set_new(v, "app", lc_json_str(row, "app") ? json_string(lc_json_str(row, "app")) : json_null());
	return v;
}

/* Does another node hold the sandbox of this row? */
static bool elsewhere(lcd_t *lcd, json_t *row)
{
	const char *node = lc_json_str(row, "node"), *me = lcd_db_node(lcd->db);
	return node && me && strcmp(node, me);
}

/* The state files views read, parsed once and kept while the file they
 * came from is the one there: a state is written as a new file renamed
 * over the old, so a new state is a new inode, modification time or
 * size.  A file written less than a second ago is read again each time
 * (two writes in one tick of the file system's clock, of one size, on an
 * inode number reused at once, would look alike); an entry a view has
 * not used for a minute is dropped.  What it hands out is shared: read
 * it, never change it. */
static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *states; /* id -> {"st", "ino", "mtime", "size", "used"} */
static long long states_swept;

static json_t *state_of(const char *id, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("%s/%s/state.json", lc_run_dir(), id);
	struct stat sb;
	bool have = stat(path, &sb) == 0;
	long long mtime = have ? (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec : 0;
	long long now = lc_wall_ms();
	json_t *st = NULL;
	pthread_mutex_lock(&states_lock);
	json_t *e = states ? json_object_get(states, id) : NULL;
	if (e && have && json_integer_value(json_object_get(e, "ino")) == (json_int_t)sb.st_ino &&
	    json_integer_value(json_object_get(e, "mtime")) == mtime &&
	    json_integer_value(json_object_get(e, "size")) == (json_int_t)sb.st_size) {
		st = json_incref(json_object_get(e, "st"));
		json_object_set_new(e, "used", json_integer(now));
	} else if (e) {
		json_object_del(states, id);
	}
	pthread_mutex_unlock(&states_lock);
	if (st)
		return st;
	st = lc_sandbox_state(id, err);
	if (!st || !have || mtime / 1000000 > now - 1000)
		return st;
	pthread_mutex_lock(&states_lock);
	if (!states)
		states = json_object();
	json_object_set_new(states, id, json_pack("{s:O, s:I, s:I, s:I, s:I}", "st", st, "ino", (json_int_t)sb.st_ino,
						    "mtime", (json_int_t)mtime, "size", (json_int_t)sb.st_size, "used",
						    (json_int_t)now));
	if (now - states_swept > 10000) {
		const char *k;
		json_t *x, *tmp;
		json_object_foreach_safe(states, tmp, k, x)
			if (json_integer_value(json_object_get(x, "used")) < now - 60000)
				json_object_del(states, k);
		states_swept = now;
	}
	pthread_mutex_unlock(&states_lock);
	return st;
}

/* gateways: the ids of the sandboxes with a gateway (a listing's), or
 * NULL: look this one up. */
static json_t *sandbox_view(lcd_t *lcd, json_t *row, json_t *gateways)
{
	const char *id = lc_json_str(row, "id");
	if (elsewhere(lcd, row))
		return view_elsewhere(lcd, row);
	lc_error_t *e = NULL;
	/* its state file as written: lc_sandbox_info below tells its state
	 * (lc_sandbox_inspect would look at its processes a second time) */
	_cleanup_json_ json_t *st = state_of(id, &e);
	bool creating = !strcmp(lc_json_str(row, "state"), "creating");
	if (!st && !creating) {
		if (e && e->exit_code == LC_EXIT_UNKNOWN) {
			/* its ttl expired (or someone ran lcrun rm): forget it */
			forget(lcd, id, "live", GONE, NULL);
			lcd_log("sandbox %s is gone (ttl, or removed outside lcd): record dropped", id);
		}
		lc_error_free(e);
		return NULL;
	}
	lc_error_free(e);
	json_t *v = st ? lc_sandbox_info(id, st) : json_pack("{s:s, s:s}", "id", id, "state", "creating");
	json_object_set_new(v, "name", json_is_string(json_object_get(row, "name")) ? json_string(lc_json_str(row, "name")) : json_null());
	json_object_set_new(v, "image", json_string(lc_json_str(row, "image")));
	json_object_set_new(v, "created", json_integer(json_integer_value(json_object_get(row, "created_at"))));
	if (lc_json_str(row, "task_id"))
		json_object_set_new(v, "owner", json_pack("{s:s, s:s, s:s, s:s}", "kind", "task", "app", lc_json_str(row, "app"), "task",
							  lc_json_str(row, "task_id"), "function", lc_json_str(row, "function")));
	else
		json_object_set_new(v, "owner", json_pack("{s:s}", "kind", "operator"));
	json_object_set_new(v, "app", lc_json_str(row, "app") ? json_string(lc_json_str(row, "app")) : json_null());
	json_object_set_new(v, "node", lc_json_str(row, "node") ? json_string(lc_json_str(row, "node")) : json_null());
	json_object_set_new(v, "labels", json_loads(lc_json_str(row, "labels"), 0, NULL));
	json_object_set_new(v, "secrets", json_loads(lc_json_str(row, "secrets"), 0, NULL));
	if (!gateways || json_object_get(gateways, id))
		lcd_gateway_view(lcd, id, v);
	else
		json_object_set_new(v, "model_gateway", json_null());
	if (st) {
		json_t *spec = json_object_get(st, "spec");
		json_object_set_new(v, "user", json_sprintf("%lld:%lld", (long long)json_integer_value(json_object_get(spec, "uid")),
							    (long long)json_integer_value(json_object_get(spec, "gid"))));
		/* copies: st is shared (state_of) */
		json_t *w = json_object_get(spec, "workdir"), *lim = json_object_get(spec, "limits");
		json_object_set_new(v, "workdir", w ? json_deep_copy(w) : json_null());
		if (lim)
			json_object_set_new(v, "limits", json_deep_copy(lim));
		static const char *const copy[] = { "ttl", "idle_timeout", "expires", "stop_reason" };
		for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
			json_t *x = json_object_get(st, copy[i]);
			json_object_set_new(v, copy[i], x ? json_deep_copy(x) : json_null());
		}
	}
	return v;
}

json_t *lcd_sandbox_view(lcd_t *lcd, json_t *row)
{
	return sandbox_view(lcd, row, NULL);
}

static bool labels_match(json_t *row, char **labels)
{
	if (!labels)
		return true;
	_cleanup_json_ json_t *have = json_loads(lc_json_str(row, "labels"), 0, NULL);
	for (size_t i = 0; labels[i]; i++) {
		const char *eq = strchr(labels[i], '=');
		_cleanup_free_ char *k = eq ? strndup(labels[i], (size_t)(eq - labels[i])) : strdup(labels[i]);
		const char *val = lc_json_str(have, k);
		if (!val || (eq && strcmp(val, eq + 1)))
			return false;
	}
	return true;
}

json_t *lcd_sandbox_list(lcd_t *lcd, const lcd_caller_t *who, const char *app, const char *state, char **labels,
			 lc_error_t **err)
{
	_cleanup_json_ json_t *rows = NULL;
	if (who->operator)
		rows = lcd_db_query(lcd->db, err,
				    "SELECT " SB_COLUMNS " FROM sandboxes WHERE state != 'deleting' AND (? IS NULL OR app = ?) "
				    "ORDER BY created_at",
				    "ss", app, app);
	else
		rows = lcd_db_query(lcd->db, err,
				    "SELECT " SB_COLUMNS " FROM sandboxes WHERE state != 'deleting' AND task_id = ? "
				    "ORDER BY created_at",
				    "s", who->task);
	if (!rows)
		return NULL;
	/* which have a gateway: one query, not two for each sandbox */
	_cleanup_json_ json_t *gateways = lcd_gateway_sandbox_ids(lcd);
	json_t *out = json_array();
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		if (!labels_match(row, labels))
			continue;
		json_t *v = sandbox_view(lcd, row, gateways);
		if (!v)
			continue;
		if (state && strcmp(state, lc_json_str(v, "state"))) {
			json_decref(v);
			continue;
		}
		json_array_append_new(out, v);
	}
	return out;
}

int lcd_sandbox_delete(lcd_t *lcd, const char *id, lc_error_t **err)
{
	/* another node's: marked, and that node removes it (lcd_sandboxes_sweep),
	 * now if it hears, else at its next beat or start */
	if (lcd_db_node(lcd->db) &&
	    lcd_db_exec(lcd->db, NULL, "UPDATE sandboxes SET state = 'deleting' WHERE id = ? AND node IS NOT NULL AND node != ?",
			"ss", id, lcd_db_node(lcd->db)) > 0) {
		lcd_db_notify(lcd->db, LCD_SANDBOXES_CHANNEL, id, NULL);
		return 0;
	}
	if (lcd->sessions_drop)
		lcd->sessions_drop(lcd, id);
	lcd_procs_drop(lcd, id);
	lc_error_t *e = NULL;
	if (lc_sandbox_remove(id, true, &e) < 0) {
		if (!e || e->exit_code != LC_EXIT_UNKNOWN) {
			*err = e;
			return -1;
		}
		lc_error_free(e);
	}
	lcd_gateway_forget(lcd, id);
	return forget(lcd, id, NULL, NULL, err);
}

void lcd_sandboxes_drop_task(lcd_t *lcd, const char *task)
{
	lc_error_t *err = NULL;
	/* Marked first: a create still under way for this task sees the mark
	 * and removes what it made itself. */
	lcd_db_exec(lcd->db, NULL, "UPDATE sandboxes SET state = 'deleting' WHERE task_id = ?", "s", task);
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT id FROM sandboxes WHERE task_id = ?", "s", task);
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *id = lc_json_str(row, "id");
		if (lcd_sandbox_delete(lcd, id, &err) < 0) {
			lcd_log("task %s: cannot remove its sandbox %s: %s", task, id, err->msg);
			lc_error_free(err);
			err = NULL;
		} else {
			lcd_log("task %s ended: its sandbox %s removed", task, id);
		}
	}
}

int lcd_sandboxes_lost(lcd_t *lcd, const char *node)
{
	return lcd_db_exec(lcd->db, NULL,
			   "UPDATE sandboxes SET state = 'lost' WHERE node = ? AND state IN ('creating', 'live')", "s", node);
}

/* The state a caller sees for a row of the history query. */
static json_t *history_entry(lcd_t *lcd, json_t *row)
{
	const char *state = lc_json_str(row, "state");
	json_t *v = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:o, s:O, s:O, s:O}", "id", lc_json_str(row, "id"), "name",
			      json_object_get(row, "name"), "app", json_object_get(row, "app"), "task",
			      json_object_get(row, "task_id"), "function", json_object_get(row, "function"), "image",
			      json_object_get(row, "image"), "labels", json_loads(lc_json_str(row, "labels"), 0, NULL), "created",
			      json_object_get(row, "created_at"), "terminated", json_object_get(row, "ended_at"),
			      "end_reason", json_object_get(row, "end_reason"));
	if (!strcmp(state, "live")) {
		_cleanup_json_ json_t *view = lcd_sandbox_view(lcd, row);
		state = view ? lc_json_str(view, "state") : "terminated";
		json_object_set_new(v, "state", json_string(state));
		return v;
	}
	json_object_set_new(v, "state", json_string(!strcmp(state, "deleting") ? "terminating" : state));
	return v;
}

json_t *lcd_sandbox_history(lcd_t *lcd, const lcd_caller_t *who, const char *app, long long limit, lc_error_t **err)
{
	if (!who->operator) {
		if (app && strcmp(app, who->app)) {
			lc_error_set(err, LC_EXIT_PERM, 0, "a task's token sees the sandboxes of its own app (%s) only", who->app);
			return NULL;
		}
		app = who->app;
	}
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, err,
		"SELECT id, name, app, task_id, function, image, labels, created_at, NULL AS ended_at, NULL AS end_reason, "
		"state, request, secrets FROM sandboxes WHERE (? IS NULL OR app = ?) "
		"UNION ALL SELECT id, name, app, task_id, function, image, labels, created_at, ended_at, end_reason, "
		"'terminated', NULL, NULL FROM sandbox_history WHERE (? IS NULL OR app = ?) "
		"AND id NOT IN (SELECT id FROM sandboxes) ORDER BY created_at DESC, id LIMIT ?",
		"ssssi", app, app, app, app, limit);
	if (!rows)
		return NULL;
	json_t *out = json_array();
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row)
		json_array_append_new(out, history_entry(lcd, row));
	return out;
}

int lcd_sandbox_secret_env(lcd_t *lcd, json_t *row, char ***env, lc_error_t **err)
{
	_cleanup_json_ json_t *names = json_loads(lc_json_str(row, "secrets"), 0, NULL);
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n) {
		const char *name = json_string_value(n);
		_cleanup_free_ char *v = lcd_store_secret_get(lcd->db, name, err);
		if (!v) {
			if (*err)
				return -1;
			return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "secret %s (given to sandbox %s) is no longer set", name,
					    lc_json_str(row, "id"));
		}
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", name, v);
		lc_strv_push(env, kv);
		explicit_bzero(kv, strlen(kv));
		explicit_bzero(v, strlen(v));
	}
	return lcd_gateway_env(lcd, lc_json_str(row, "id"), env, err);
}

static int image_digest(const char *name, json_t **out, lc_error_t **err)
{
	_cleanup_json_ json_t *info = NULL;
	if (lc_image_inspect(name, &info, err) < 0)
		return -1;
	*out = json_pack("{s:s, s:O}", "image", name, "digest", json_object_get(info, "digest"));
	return 0;
}

int lcd_sandbox_snapshot(lcd_t *lcd, const lcd_caller_t *who, json_t *row, const char *name, json_t **out,
			 lc_error_t **err)
{
	if (!name || !lc_image_name_valid(name))
		return bad(err, LC_EXIT_INVALID, "name",
			   "expected an image name (letters, digits, '._:/-', at most 128, not \"host\")");
	if (!who->operator && lcd_grant_snapshot_name(who->app, name, err) < 0)
		return -1;
	const char *id = lc_json_str(row, "id");
	/* Recorded first: killed while the image is made, lcd still knows
	 * whose it is at its next start (lcd_images_recover). */
	if (lcd_image_reserve(lcd, who, name, "snapshot", id, err) < 0)
		return -1;
	if (lc_sandbox_snapshot(id, name, err) < 0) {
		lcd_image_unreserve(lcd, name);
		return -1;
	}
	LC_FAULT("lcd-snapshot-made");
	lcd_log("sandbox %s: snapshot %s", id, name);
	if (lcd_image_record(lcd, who, name, "snapshot", id, err) < 0)
		return -1;
	LC_FAULT("lcd-snapshot-recorded");
	return image_digest(name, out, err);
}

int lcd_sandbox_fork(lcd_t *lcd, const lcd_caller_t *who, json_t *row, int n, json_t **out, lc_error_t **err)
{
	if (n < 1 || n > FORK_MAX)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "n: expected 1 to %d", FORK_MAX);
	const char *id = lc_json_str(row, "id");
	/* a task's fork images are its app's (grant.h), the operator's fork/ */
	_cleanup_free_ char *image = who->operator ? lc_strdup_printf("fork/%s-%lld", id, lc_wall_ms())
						   : lc_strdup_printf("%s/fork-%s-%lld", who->app, id, lc_wall_ms());
	/* Recorded first, with its end: a fork image a crash left is still
	 * removed in time. */
	if (lcd_image_reserve(lcd, who, image, "fork", id, err) < 0)
		return -1;
	if (lc_sandbox_snapshot(id, image, err) < 0) {
		lcd_image_unreserve(lcd, image);
		return -1;
	}
	LC_FAULT("lcd-fork-snapshot");
	if (lcd_image_record(lcd, who, image, "fork", id, err) < 0)
		return -1;
	_cleanup_json_ json_t *req = json_loads(lc_json_str(row, "request"), 0, NULL);
	json_object_del(req, "name");
	json_t *ids = json_array();
	if (lcd_sandbox_make(lcd, who, req, n, image, ids, err) < 0) {
		json_decref(ids);
		lc_image_remove(image, NULL);
		lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ?", "s", image);
		return -1;
	}
	lcd_log("sandbox %s: forked %d time(s) from image %s", id, n, image);
	json_t *d = NULL;
	if (image_digest(image, &d, err) < 0) {
		json_decref(ids);
		return -1;
	}
	json_object_set_new(d, "ids", ids);
	*out = d;
	return 0;
}

void lcd_sandboxes_sweep(lcd_t *lcd)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT id FROM sandboxes WHERE node = ? AND state = 'deleting'",
						   "s", lcd_db_node(lcd->db));
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		lc_error_t *e = NULL;
		if (lcd_sandbox_delete(lcd, lc_json_str(row, "id"), &e) < 0) {
			lcd_log("sandbox %s: cannot remove it: %s", lc_json_str(row, "id"), e->msg);
			lc_error_free(e);
		}
	}
}

int lcd_sandboxes_recover(lcd_t *lcd, lc_error_t **err)
{
	/* the tokens of tasks that no node runs (lcd_recover ended this
	 * node's); the sandboxes this node held */
	if (lcd_db_exec(lcd->db, err, "DELETE FROM tokens WHERE task_id NOT IN (SELECT id FROM tasks WHERE state = 'running')",
			"") < 0)
		return -1;
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, err,
						   "SELECT " SB_COLUMNS " FROM sandboxes WHERE node IS NULL OR node = ?", "s",
						   lcd_db_node(lcd->db));
	if (!rows)
		return -1;
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *id = lc_json_str(row, "id");
		const char *task = lc_json_str(row, "task_id");
		lc_error_t *e = NULL;
		if (!task && !strcmp(lc_json_str(row, "state"), "lost")) {
			/* judged lost while this node was away: still here, it is live again */
			_cleanup_json_ json_t *st = lc_sandbox_inspect(id, &e);
			lc_error_free(e);
			e = NULL;
			if (st) {
				lcd_db_exec(lcd->db, NULL, "UPDATE sandboxes SET state = 'live' WHERE id = ? AND state = 'lost'", "s", id);
				lcd_log("sandbox %s is back (this node was judged dead meanwhile)", id);
				continue;
			}
		}
		if (task || strcmp(lc_json_str(row, "state"), "live")) {
			/* No task runs now, and a half-made sandbox was never handed out. */
			if (lcd_sandbox_delete(lcd, id, &e) < 0) {
				lcd_log("sandbox %s: cannot remove it: %s", id, e->msg);
				lc_error_free(e);
				continue;
			}
			lcd_log("sandbox %s removed at start (%s)", id,
				task ? "its task is not running" : "it was still being made or removed");
			continue;
		}
		_cleanup_json_ json_t *v = lcd_sandbox_view(lcd, row);
	}
	return 0;
}
