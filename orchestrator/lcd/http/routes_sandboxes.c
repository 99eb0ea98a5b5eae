/* api_sandboxes.c — the routes under /v1/sandboxes: create, list, show,
 * delete, lifecycle verbs, snapshot, fork, and files in and out (exec and
 * sessions are in sbexec.c).  A task's token sees only the sandboxes its
 * task made: any other id is unknown (404) to it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "api.h"
#include "exec.h"
#include "json.h"
#include "reply.h"
#include "routes_sandboxes.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

/* Errors of the sandbox API: a conflict (name taken, busy) is 409, the
 * app's quota is 429 (marked EDQUOT by sandboxes.c). */
static enum MHD_Result sb_fail(struct MHD_Connection *c, lc_error_t *err)
{
	if (err && err->exit_code == LC_EXIT_BUSY) {
		unsigned st = err->errnum == EDQUOT ? MHD_HTTP_TOO_MANY_REQUESTS : MHD_HTTP_CONFLICT;
		enum MHD_Result r = api_fail_status(c, st, LC_EXIT_BUSY, "%s", err->msg);
		lc_error_free(err);
		return r;
	}
	return api_fail_err(c, err);
}

static enum MHD_Result view_reply(call_t *call, unsigned status, json_t *row)
{
	json_t *v = lcd_sandbox_view(call->lcd, row);
	if (!v)
		return FAIL(call, LC_EXIT_UNKNOWN, "sandbox %s is gone (its ttl expired)",
			    lc_json_str(row, "id"));
	return api_reply(call->c, status, v);
}

struct labels {
	char **v;
};

static enum MHD_Result collect_label(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct labels *l = cls;
	if (!strcmp(key, "label") && value)
		lc_strv_push(&l->v, value);
	return MHD_YES;
}

static enum MHD_Result h_list(call_t *call)
{
	struct labels l = { NULL };
	MHD_get_connection_values(call->c, MHD_GET_ARGUMENT_KIND, collect_label, &l);
	_cleanup_strv_ char **labels = l.v;
	lc_error_t *err = NULL;
	const char *hist = api_query(call, "history");
	if (hist && strcmp(hist, "0")) {
		const char *ls = api_query(call, "limit");
		char *end = NULL;
		long long limit = ls ? strtoll(ls, &end, 10) : 20;
		if (ls && (!*ls || *end || limit < 1 || limit > 1000))
			return FAIL(call, LC_EXIT_INVALID, "limit: expected 1 to 1000");
		if (labels || api_query(call, "state"))
			return FAIL(call, LC_EXIT_INVALID, "history: label and state filters are for the live listing");
		json_t *list = lcd_sandbox_history(call->lcd, call->who, api_query(call, "app"), limit, &err);
		if (!list)
			return api_fail_err(call->c, err);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "sandboxes", list));
	}
	json_t *list = lcd_sandbox_list(call->lcd, call->who, api_query(call, "app"), api_query(call, "state"), labels, &err);
	if (!list)
		return api_fail_err(call->c, err);
	return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "sandboxes", list));
}

static enum MHD_Result h_create(call_t *call)
{
	enum MHD_Result fr;
	if (lcd_forward_create(call, &fr))
		return fr; /* placed on another node */
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *ids = json_array();
	if (lcd_sandbox_make(call->lcd, call->who, call->body, 1, NULL, ids, &err) < 0)
		return sb_fail(call->c, err);
	_cleanup_json_ json_t *row = lcd_sandbox_find(call->lcd, call->who, json_string_value(json_array_get(ids, 0)), &err);
	if (!row)
		return api_fail_err(call->c, err);
	lc_trace("lcd create: row read back");
	enum MHD_Result r = view_reply(call, MHD_HTTP_CREATED, row);
	lc_trace("lcd create: answer queued");
	return r;
}

static enum MHD_Result h_verb(call_t *call, json_t *row, const char *verb)
{
	const char *id = lc_json_str(row, "id");
	lc_error_t *err = NULL;
	int r;
	if (!strcmp(verb, "pause"))
		r = lc_sandbox_pause(id, &err);
	else if (!strcmp(verb, "resume"))
		r = lc_sandbox_resume(id, &err);
	else if (!strcmp(verb, "stop")) {
		lcd_sessions_drop(call->lcd, id);
		r = lc_sandbox_stop(id, &err);
	} else
		r = lcd_runner_start_sandbox(call->lcd, id, &err);
	if (r < 0)
		return sb_fail(call->c, err);
	lcd_log("sandbox %s: %s", id, verb);
	return view_reply(call, MHD_HTTP_OK, row);
}

static enum MHD_Result h_snapshot(call_t *call, json_t *row)
{
	json_t *name = call->body ? json_object_get(call->body, "name") : NULL;
	if (!json_is_string(name))
		return FAIL(call, LC_EXIT_INVALID, "name: expected the new image's name");
	lc_error_t *err = NULL;
	json_t *out = NULL;
	if (lcd_sandbox_snapshot(call->lcd, call->who, row, json_string_value(name), &out, &err) < 0)
		return sb_fail(call->c, err);
	return api_reply(call->c, MHD_HTTP_CREATED, out);
}

static enum MHD_Result h_fork(call_t *call, json_t *row)
{
	json_t *n = call->body ? json_object_get(call->body, "n") : NULL;
	if (n && !json_is_integer(n))
		return FAIL(call, LC_EXIT_INVALID, "n: expected the number of sandboxes to make");
	lc_error_t *err = NULL;
	json_t *out = NULL;
	if (lcd_sandbox_fork(call->lcd, call->who, row, n ? (int)json_integer_value(n) : 1, &out, &err) < 0)
		return sb_fail(call->c, err);
	return api_reply(call->c, MHD_HTTP_CREATED, out);
}

/* ---- files ---- */

static bool flag(const char *v)
{
	return v && strcmp(v, "0") && strcmp(v, "false");
}

static int check_path(const char *path, lc_error_t **err)
{
	if (!path)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "path: the query must name ?path=/absolute/path");
	if (!lcd_sandbox_path_ok(path))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "path '%s': expected an absolute path without '..'", path);
	return 0;
}

struct tarout {
	int fd;
	lcd_tar_t *job;
	bool eof;
};

static ssize_t tar_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct tarout *t = cls;
	(void)pos;
	for (;;) {
		ssize_t n = read(t->fd, buf, max);
		if (n > 0) {
			LC_FAULT("lcd-download-streaming");
			return n;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		t->eof = true;
		/* The end of the stream: did the sandbox side finish it well? */
		close(t->fd);
		t->fd = -1;
		lc_error_t *err = NULL;
		int r = lcd_runner_tar_finish(t->job, false, &err);
		t->job = NULL;
		if (r < 0) {
			lcd_log("download: %s", err->msg);
			lc_error_free(err);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
}

static void tar_free(void *cls)
{
	struct tarout *t = cls;
	if (t->fd >= 0)
		close(t->fd);
	lcd_runner_tar_finish(t->job, true, NULL);
	free(t);
}

static enum MHD_Result h_download(call_t *call, json_t *row)
{
	const char *id = lc_json_str(row, "id");
	const char *path = api_query(call, "path");
	lc_error_t *err = NULL;
	if (check_path(path, &err) < 0)
		return api_fail_err(call->c, err);
	struct MHD_Response *r;
	if (flag(api_query(call, "tar"))) {
		struct tarout *t = lc_xmalloc0(sizeof(*t));
		if (lcd_runner_tar_start(call->lcd, id, path, false, &t->fd, &t->job, &err) < 0) {
			free(t);
			return api_fail_err(call->c, err);
		}
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, tar_read, t, tar_free);
		MHD_add_response_header(r, "Content-Type", "application/x-tar");
	} else {
		struct stat st;
		int fd = lcd_runner_open_file(call->lcd, id, path, O_RDONLY, 0, &st, &err);
		if (fd < 0) {
			if (err->exit_code == LC_EXIT_USAGE) {
				enum MHD_Result ret = FAIL(call, LC_EXIT_USAGE, "%s (add tar=1 to get it as a tar stream)", err->msg);
				lc_error_free(err);
				return ret;
			}
			return api_fail_err(call->c, err);
		}
		r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
		MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	}
	enum MHD_Result ret = MHD_queue_response(call->c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

struct lcd_upload {
	char id[LC_ID_LEN + 1];
	char *path;
	int fd;
	lcd_tar_t *job; /* a tar stream's, or the file's (put in place at the end) */
	bool tar;
	unsigned long long bytes, max; /* max: lcd.json max_upload */
	bool too_big;
	lc_error_t *err; /* the first failure; the rest of the body is dropped */
};

bool lcd_upload_wanted(const char *method, const char *url)
{
	if (strcmp(method, "PUT") || strncmp(url, "/v1/sandboxes/", 14))
		return false;
	const char *slash = strchr(url + 14, '/');
	return slash && slash > url + 14 && !strcmp(slash, "/files");
}

bool lcd_upload_begin(struct MHD_Connection *c, lcd_t *lcd, const lcd_caller_t *who, const char *url,
		      lcd_upload_t **out, enum MHD_Result *r)
{
	_cleanup_free_ char *ref = strndup(url + 14, strcspn(url + 14, "/"));
	const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
	const char *mode_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode");
	bool tar = flag(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tar"));
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *row = lcd_sandbox_find(lcd, who, ref, &err);
	if (!row || check_path(path, &err) < 0) {
		*r = api_fail_err(c, err);
		return false;
	}
	/* a body said to be too big is refused before anything is opened */
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > lcd->max_upload) {
		*r = api_fail_status(c, 413, LC_EXIT_INVALID, "upload of %s bytes: more than lcd takes in one (max_upload %llu)",
				     cl, lcd->max_upload);
		return false;
	}
	mode_t mode = 0644;
	if (mode_s) {
		char *end = NULL;
		unsigned long m = strtoul(mode_s, &end, 8);
		if (!*mode_s || *end || m > 07777) {
			*r = api_fail_status(c, MHD_HTTP_BAD_REQUEST, LC_EXIT_USAGE, "mode '%s': expected octal, like 0644", mode_s);
			return false;
		}
		mode = (mode_t)m;
	}
	lcd_upload_t *u = lc_xmalloc0(sizeof(*u));
	u->fd = -1;
	u->max = lcd->max_upload;
	snprintf(u->id, sizeof(u->id), "%s", lc_json_str(row, "id"));
	u->path = strdup(path);
	u->tar = tar;
	/* a file goes in place whole at the end, or not at all */
	int rc = tar ? lcd_runner_tar_start(lcd, u->id, path, true, &u->fd, &u->job, &err)
		     : lcd_runner_upload_start(lcd, u->id, path, mode, &u->fd, &u->job, &err);
	if (rc < 0) {
		lcd_upload_free(u);
		*r = api_fail_err(c, err);
		return false;
	}
	*out = u;
	return true;
}

void lcd_upload_data(lcd_upload_t *u, const char *data, size_t len)
{
	if (u->err)
		return;
	if (u->bytes + len > u->max) { /* a body of unsaid length, past max_upload */
		u->too_big = true;
		lc_error_set(&u->err, LC_EXIT_INVALID, 0, "upload to %s in sandbox %s: more than lcd takes in one (max_upload "
			     "%llu): stopped there", u->path, u->id, u->max);
		return;
	}
	if (lc_write_all(u->fd, data, len) < 0) {
		lc_error_set(&u->err, errno == EPIPE ? LC_EXIT_INVALID : LC_EXIT_RUNTIME, errno, "writing %s in sandbox %s",
			     u->path, u->id);
		return;
	}
	u->bytes += len;
	LC_FAULT("lcd-upload-writing");
}

enum MHD_Result lcd_upload_end(struct MHD_Connection *c, lcd_upload_t *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	if (u->job) {
		lc_error_t *e = NULL;
		/* the sandbox side's own account of a refused tar comes first;
		 * a file not written whole is removed, not put in place */
		if (lcd_runner_tar_finish(u->job, !u->tar && u->err, &e) < 0) {
			lc_error_free(u->err);
			u->err = e;
		}
		u->job = NULL;
	}
	if (u->err) {
		lc_error_t *e = lc_steal(u->err);
		if (u->too_big) {
			enum MHD_Result r = api_fail_status(c, 413, e->exit_code, "%s", e->msg);
			lc_error_free(e);
			return r;
		}
		return api_fail_err(c, e);
	}
	LC_FAULT("lcd-upload-written");
	lcd_log("sandbox %s: %llu bytes written to %s", u->id, u->bytes, u->path);
	return api_reply(c, MHD_HTTP_OK, json_pack("{s:s, s:o, s:I}", "id", u->id, "path", api_text(u->path), "bytes",
						   (json_int_t)u->bytes));
}

void lcd_upload_free(lcd_upload_t *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	lcd_runner_tar_finish(u->job, true, NULL);
	lc_error_free(u->err);
	free(u->path);
	free(u);
}

/* ---- routing ---- */

static bool is_post(call_t *call)
{
	return !strcmp(call->method, "POST");
}

enum MHD_Result lcd_api_sandboxes(call_t *call)
{
	char **s = call->seg;
	const char *m = call->method;
	if (call->n == 1) {
		if (!strcmp(m, "GET"))
			return h_list(call);
		if (is_post(call))
			return h_create(call);
		return FAIL(call, LC_EXIT_USAGE, "%s not allowed on /v1/sandboxes", m);
	}
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *row = lcd_sandbox_find(call->lcd, call->who, s[1], &err);
	if (!row)
		return api_fail_err(call->c, err);
	const char *id = lc_json_str(row, "id");
	if (call->n == 2) {
		if (!strcmp(m, "GET"))
			return view_reply(call, MHD_HTTP_OK, row);
		if (!strcmp(m, "DELETE")) {
			if (lcd_sandbox_delete(call->lcd, id, &err) < 0)
				return sb_fail(call->c, err);
			lcd_log("sandbox %s deleted", id);
			return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
		}
		return FAIL(call, LC_EXIT_USAGE, "%s not allowed on a sandbox", m);
	}
	const char *what = s[2];
	if (!strcmp(what, "sessions"))
		return lcd_api_sessions(call, row);
	if (call->n == 3 && !strcmp(what, "files") && !strcmp(m, "GET"))
		return h_download(call, row);
	if (call->n == 3 && is_post(call)) {
		if (!strcmp(what, "exec")) {
			const char *st = api_query(call, "stream");
			return lcd_api_exec(call, row, flag(st));
		}
		if (!strcmp(what, "snapshot"))
			return h_snapshot(call, row);
		if (!strcmp(what, "fork"))
			return h_fork(call, row);
		if (!strcmp(what, "pause") || !strcmp(what, "resume") || !strcmp(what, "stop") || !strcmp(what, "start"))
			return h_verb(call, row, what);
	}
	return api_fail_status(call->c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s /v1/sandboxes/ID/%s", m,
			       what);
}
