/* lcclient.c — lcd's HTTP API from C: one libcurl handle per client
 * (connections are kept alive between requests), JSON through jansson.
 * See lcclient.h. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <curl/curl.h>

#include "json.h"
#include "lcclient.h"
#include "lcrun.h"
#include "util.h"

struct lcc {
	CURL *curl;
	char *socket; /* unix socket path, or NULL */
	char *base;   /* "http://lcd/v1" or "URL/v1" */
	char *token;
	char *endpoint;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *env(const char *k)
{
	const char *v = getenv(k);
	return v && *v ? v : NULL;
}

lcc_t *lcc_new(const char *endpoint, const char *token, lc_error_t **err)
{
	pthread_once(&curl_once, curl_init_once);
	lcc_t *c = lc_xmalloc0(sizeof(*c));
	c->curl = curl_easy_init();
	if (!c->curl) {
		free(c);
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot initialise libcurl");
		return NULL;
	}
	if (!endpoint)
		endpoint = env("LCD_URL");
	if (!endpoint)
		endpoint = env("LCD_SOCKET");
	if (endpoint && (!strncmp(endpoint, "http://", 7) || !strncmp(endpoint, "https://", 8))) {
		size_t n = strlen(endpoint);
		while (n > 0 && endpoint[n - 1] == '/')
			n--;
		c->base = lc_strdup_printf("%.*s/v1", (int)n, endpoint);
		c->endpoint = strndup(endpoint, n);
	} else {
		c->socket = endpoint ? strdup(endpoint) : lc_strdup_printf("%s/lcd.sock", lc_run_dir());
		c->base = strdup("http://lcd/v1");
		c->endpoint = strdup(c->socket);
	}
	if (!token)
		token = env("LCD_TOKEN");
	if (token)
		c->token = strdup(token);
	return c;
}

void lcc_free(lcc_t *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	free(c->socket);
	free(c->base);
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c->endpoint);
	free(c);
}

const char *lcc_endpoint(const lcc_t *c)
{
	return c->endpoint;
}

char *lcc_escape(const char *s)
{
	pthread_once(&curl_once, curl_init_once);
	char *e = curl_easy_escape(NULL, s, 0);
	char *r = strdup(e ? e : "");
	curl_free(e);
	return r;
}

/* ---- one request ---- */

struct xfer {
	CURL *curl;
	char *data; /* the whole answer (JSON), or an error's body */
	size_t len;
	lcc_sink_t sink;
	void *ud;
	bool stopped;
	int in_fd;
};

static void append(struct xfer *x, const char *p, size_t n)
{
	x->data = realloc(x->data, x->len + n + 1);
	memcpy(x->data + x->len, p, n);
	x->len += n;
	x->data[x->len] = '\0';
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t bytes = sz * n;
	long st = 0;
	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
	/* an error's body is JSON, kept for its message */
	if (!x->sink || st < 200 || st >= 300) {
		if (x->len < (1 << 26))
			append(x, p, bytes);
		return bytes;
	}
	if (!x->sink(p, bytes, x->ud)) {
		x->stopped = true;
		return 0;
	}
	return bytes;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	for (;;) {
		ssize_t r = read(x->in_fd, p, sz * n);
		if (r >= 0)
			return (size_t)r;
		if (errno != EINTR)
			return CURL_READFUNC_ABORT;
	}
}

static int error_of(long st, const char *data, size_t len, lc_error_t **err)
{
	_cleanup_json_ json_t *j = data ? json_loadb(data, len, JSON_DECODE_ANY, NULL) : NULL;
	const char *msg = lc_json_str(j, "error");
	json_t *code = json_object_get(j, "exit_code");
	int ec = json_is_integer(code) ? (int)json_integer_value(code)
	       : st == 404 ? LC_EXIT_UNKNOWN : st == 429 || st == 409 ? LC_EXIT_BUSY
	       : st == 401 || st == 403 ? LC_EXIT_PERM : st == 400 || st == 413 ? LC_EXIT_INVALID : LC_EXIT_RUNTIME;
	if (msg)
		return lc_error_set(err, ec, 0, "%s", msg);
	return lc_error_set(err, ec, 0, "lcd answered HTTP %ld", st);
}

static int perform(lcc_t *c, const char *method, const char *path, json_t *body, struct xfer *x, long *status,
		   lc_error_t **err)
{
	CURL *h = c->curl;
	curl_easy_reset(h);
	x->curl = h;
	_cleanup_free_ char *url = lc_strdup_printf("%s%s", c->base, path);
	_cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	_cleanup_free_ char *auth = c->token ? lc_strdup_printf("Authorization: Bearer %s", c->token) : NULL;
	struct curl_slist *hdr = curl_slist_append(NULL, x->in_fd >= 0 ? "Content-Type: application/octet-stream"
								       : "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	if (auth)
		hdr = curl_slist_append(hdr, auth);
	if (c->socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	if (x->in_fd >= 0) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
	} else if (text) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	}
	CURLcode rc = curl_easy_perform(h);
	long st = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(hdr);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	if (status)
		*status = st;
	if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && x->stopped)) {
		if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot reach lcd at %s (is it running?)", c->endpoint);
		if (st >= 300)
			return error_of(st, x->data, x->len, err);
		if (rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "lcd at %s closed the connection early", c->endpoint);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "talking to lcd at %s: %s", c->endpoint, curl_easy_strerror(rc));
	}
	if (st < 200 || st >= 300)
		return error_of(st, x->data, x->len, err);
	return 0;
}

int lcc_request(lcc_t *c, const char *method, const char *path, json_t *body, long *status, json_t **answer,
		lc_error_t **err)
{
	struct xfer x = { .in_fd = -1 };
	int r = perform(c, method, path, body, &x, status, err);
	if (r == 0 && answer) {
		json_error_t je;
		*answer = x.data ? json_loadb(x.data, x.len, JSON_DECODE_ANY, &je) : json_null();
		if (!*answer)
			r = lc_error_set(err, LC_EXIT_RUNTIME, 0, "lcd's answer is not JSON: %s", je.text);
	}
	free(x.data);
	return r;
}

int lcc_request_stream(lcc_t *c, const char *method, const char *path, json_t *body, int body_fd, lcc_sink_t sink,
		       void *ud, long *status, lc_error_t **err)
{
	struct xfer x = { .sink = sink, .ud = ud, .in_fd = body_fd };
	int r = perform(c, method, path, body, &x, status, err);
	free(x.data);
	return r;
}

/* ---- sandboxes ---- */

static char *sb_path(const char *id, const char *rest)
{
	_cleanup_free_ char *e = lcc_escape(id);
	return lc_strdup_printf("/sandboxes/%s%s", e, rest ? rest : "");
}

static char *take_string(json_t *o, const char *key)
{
	const char *s = lc_json_str(o, key);
	return s ? strdup(s) : NULL;
}

int lcc_sandbox_create(lcc_t *c, json_t *req, char **id, json_t **info, lc_error_t **err)
{
	_cleanup_json_ json_t *out = NULL;
	_cleanup_json_ json_t *empty = json_object();
	if (lcc_request(c, "POST", "/sandboxes", req ? req : empty, NULL, &out, err) < 0)
		return -1;
	if (id)
		*id = take_string(out, "id");
	if (info)
		*info = json_incref(out);
	return 0;
}

int lcc_sandbox_get(lcc_t *c, const char *id, json_t **info, lc_error_t **err)
{
	_cleanup_free_ char *p = sb_path(id, NULL);
	return lcc_request(c, "GET", p, NULL, NULL, info, err);
}

int lcc_sandbox_delete(lcc_t *c, const char *id, lc_error_t **err)
{
	_cleanup_free_ char *p = sb_path(id, NULL);
	lc_error_t *e = NULL;
	long st = 0;
	if (lcc_request(c, "DELETE", p, NULL, &st, NULL, &e) < 0) {
		if (st == 404) { /* gone already: what was asked */
			lc_error_free(e);
			return 0;
		}
		*err = e;
		return -1;
	}
	return 0;
}

int lcc_sandbox_verb(lcc_t *c, const char *id, const char *verb, lc_error_t **err)
{
	_cleanup_free_ char *rest = lc_strdup_printf("/%s", verb);
	_cleanup_free_ char *p = sb_path(id, rest);
	return lcc_request(c, "POST", p, NULL, NULL, NULL, err);
}

void lcc_exec_result_clear(lcc_exec_result_t *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

static void fill_status(json_t *o, lcc_exec_result_t *res)
{
	res->exit_code = (int)json_integer_value(json_object_get(o, "exit_code"));
	res->signal = (int)json_integer_value(json_object_get(o, "signal"));
	res->timed_out = json_is_true(json_object_get(o, "timed_out"));
	res->truncated = json_is_true(json_object_get(o, "truncated"));
}

static char *take_bytes(json_t *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o, key);
	*len = json_string_length(v);
	char *s = lc_xmalloc0(*len + 1);
	if (*len)
		memcpy(s, json_string_value(v), *len);
	return s;
}

int lcc_sandbox_exec(lcc_t *c, const char *id, json_t *req, lcc_exec_result_t *res, lc_error_t **err)
{
	memset(res, 0, sizeof(*res));
	_cleanup_free_ char *p = sb_path(id, "/exec");
	_cleanup_json_ json_t *out = NULL;
	if (lcc_request(c, "POST", p, req, NULL, &out, err) < 0)
		return -1;
	fill_status(out, res);
	res->out = take_bytes(out, "stdout", &res->out_len);
	res->err = take_bytes(out, "stderr", &res->err_len);
	return 0;
}

int lcc_sandbox_sh(lcc_t *c, const char *id, const char *cmd, lcc_exec_result_t *res, lc_error_t **err)
{
	_cleanup_json_ json_t *req = json_pack("{s:s}", "cmd", cmd);
	return lcc_sandbox_exec(c, id, req, res, err);
}

struct lines {
	char *buf;
	size_t len;
	lcc_output_cb cb;
	void *ud;
	lcc_exec_result_t *res;
	lc_error_t *err; /* an error line */
	bool ended;
};

static void one_line(struct lines *l, const char *s, size_t n)
{
	_cleanup_json_ json_t *o = json_loadb(s, n, 0, NULL);
	json_t *v;
	if (!o)
		return;
	if ((v = json_object_get(o, "stdout")) || (v = json_object_get(o, "stderr"))) {
		if (l->cb)
			l->cb(json_object_get(o, "stdout") ? 1 : 2, json_string_value(v), json_string_length(v), l->ud);
	} else if ((v = json_object_get(o, "error"))) {
		lc_error_set(&l->err, (int)json_integer_value(json_object_get(o, "exit_code")), 0, "%s", json_string_value(v));
	} else if (json_object_get(o, "exit_code")) {
		fill_status(o, l->res);
		l->ended = true;
	}
}

static bool on_lines(const char *data, size_t len, void *ud)
{
	struct lines *l = ud;
	l->buf = realloc(l->buf, l->len + len + 1);
	memcpy(l->buf + l->len, data, len);
	l->len += len;
	size_t start = 0;
	for (size_t i = 0; i < l->len; i++)
		if (l->buf[i] == '\n') {
			one_line(l, l->buf + start, i - start);
			start = i + 1;
		}
	memmove(l->buf, l->buf + start, l->len - start);
	l->len -= start;
	return true;
}

int lcc_sandbox_exec_stream(lcc_t *c, const char *id, json_t *req, lcc_output_cb on_output, void *ud,
			    lcc_exec_result_t *res, lc_error_t **err)
{
	memset(res, 0, sizeof(*res));
	_cleanup_free_ char *p = sb_path(id, "/exec?stream=1");
	struct lines l = { .cb = on_output, .ud = ud, .res = res };
	int r = lcc_request_stream(c, "POST", p, req, -1, on_lines, &l, NULL, err);
	free(l.buf);
	if (r == 0 && l.err) {
		*err = l.err;
		return -1;
	}
	lc_error_free(l.err);
	if (r == 0 && !l.ended)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "the stream of sandbox %s ended without a status", id);
	return r;
}

static char *file_path(const char *id, const char *path, bool tar, unsigned mode)
{
	_cleanup_free_ char *e = lcc_escape(path);
	char m[32] = "";
	if (mode)
		snprintf(m, sizeof(m), "&mode=%o", mode);
	_cleanup_free_ char *rest = lc_strdup_printf("/files?path=%s%s%s", e, tar ? "&tar=1" : "", m);
	return sb_path(id, rest);
}

int lcc_sandbox_upload_fd(lcc_t *c, const char *id, const char *path, int fd, bool tar, unsigned mode,
			  lc_error_t **err)
{
	_cleanup_free_ char *p = file_path(id, path, tar, mode);
	struct xfer x = { .in_fd = fd };
	int r = perform(c, "PUT", p, NULL, &x, NULL, err);
	free(x.data);
	return r;
}

struct feed {
	int fd;
	const void *data;
	size_t len;
};

static void *feed_pipe(void *arg)
{
	struct feed *f = arg;
	lc_write_all(f->fd, f->data, f->len);
	close(f->fd);
	return NULL;
}

int lcc_sandbox_upload(lcc_t *c, const char *id, const char *path, const void *data, size_t len, unsigned mode,
		       lc_error_t **err)
{
	/* through a pipe that a thread fills while curl reads it */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a pipe");
	struct feed f = { p[1], data, len };
	pthread_t th;
	if (pthread_create(&th, NULL, feed_pipe, &f) != 0) {
		close(p[0]);
		close(p[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot start a thread");
	}
	int r = lcc_sandbox_upload_fd(c, id, path, p[0], false, mode, err);
	close(p[0]); /* a writer still blocked gets EPIPE and ends */
	pthread_join(th, NULL);
	return r;
}

static bool to_fd(const char *data, size_t len, void *ud)
{
	return lc_write_all(*(int *)ud, data, len) == 0;
}

struct membuf {
	char *data;
	size_t len;
};

static bool to_mem(const char *data, size_t len, void *ud)
{
	struct membuf *m = ud;
	m->data = realloc(m->data, m->len + len + 1);
	memcpy(m->data + m->len, data, len);
	m->len += len;
	m->data[m->len] = '\0';
	return true;
}

int lcc_sandbox_download_fd(lcc_t *c, const char *id, const char *path, int fd, bool tar, lc_error_t **err)
{
	_cleanup_free_ char *p = file_path(id, path, tar, 0);
	return lcc_request_stream(c, "GET", p, NULL, -1, to_fd, &fd, NULL, err);
}

int lcc_sandbox_download(lcc_t *c, const char *id, const char *path, char **data, size_t *len, lc_error_t **err)
{
	_cleanup_free_ char *p = file_path(id, path, false, 0);
	struct membuf m = { lc_xmalloc0(1), 0 };
	if (lcc_request_stream(c, "GET", p, NULL, -1, to_mem, &m, NULL, err) < 0) {
		free(m.data);
		return -1;
	}
	*data = m.data;
	if (len)
		*len = m.len;
	return 0;
}

int lcc_sandbox_snapshot(lcc_t *c, const char *id, const char *image, char **digest, lc_error_t **err)
{
	_cleanup_free_ char *p = sb_path(id, "/snapshot");
	_cleanup_json_ json_t *body = json_pack("{s:s}", "name", image), *out = NULL;
	if (lcc_request(c, "POST", p, body, NULL, &out, err) < 0)
		return -1;
	if (digest)
		*digest = take_string(out, "digest");
	return 0;
}

int lcc_sandbox_fork(lcc_t *c, const char *id, int n, json_t **ids, lc_error_t **err)
{
	_cleanup_free_ char *p = sb_path(id, "/fork");
	_cleanup_json_ json_t *body = json_pack("{s:i}", "n", n), *out = NULL;
	if (lcc_request(c, "POST", p, body, NULL, &out, err) < 0)
		return -1;
	*ids = json_incref(json_object_get(out, "ids"));
	return 0;
}

/* ---- maps ---- */

static char *key_path(const char *app, const char *map, const char *key, lc_error_t **err)
{
	if (!app)
		app = env("LC_TASK_APP");
	if (!app) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "map %s: no app given and LC_TASK_APP is not set", map);
		return NULL;
	}
	_cleanup_free_ char *a = lcc_escape(app), *m = lcc_escape(map), *k = lcc_escape(key);
	return lc_strdup_printf("/apps/%s/maps/%s/keys/%s", a, m, k);
}

int lcc_map_get(lcc_t *c, const char *app, const char *map, const char *key, char **value, lc_error_t **err)
{
	_cleanup_free_ char *p = key_path(app, map, key, err);
	if (!p)
		return -1;
	_cleanup_json_ json_t *out = NULL;
	long st = 0;
	lc_error_t *e = NULL;
	if (lcc_request(c, "GET", p, NULL, &st, &out, &e) < 0) {
		if (st == 404 && e && strstr(e->msg, "no key")) {
			lc_error_free(e);
			return 0;
		}
		*err = e;
		return -1;
	}
	*value = take_string(out, "value");
	return 1;
}

/* A request whose one refusal is an answer: 1 when lcd did it, 0 when it
 * answered status (0: none) with an error that says text (NULL: any),
 * -1 else. */
static int request_or(lcc_t *c, const char *method, const char *path, json_t *body, long status, const char *text,
		      lc_error_t **err)
{
	long st = 0;
	lc_error_t *e = NULL;
	if (lcc_request(c, method, path, body, &st, NULL, &e) < 0) {
		if (status && st == status && e && (!text || strstr(e->msg, text))) {
			lc_error_free(e);
			return 0;
		}
		*err = e;
		return -1;
	}
	return 1;
}

int lcc_map_set(lcc_t *c, const char *app, const char *map, const char *key, const char *value, long long ttl_s,
		bool if_absent, lc_error_t **err)
{
	_cleanup_free_ char *p = key_path(app, map, key, err);
	if (!p)
		return -1;
	_cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "value", value, "if_absent", if_absent);
	if (ttl_s > 0)
		json_object_set_new(body, "ttl", json_integer(ttl_s));
	return request_or(c, "PUT", p, body, if_absent ? 409 : 0, NULL, err);
}

int lcc_map_del(lcc_t *c, const char *app, const char *map, const char *key, lc_error_t **err)
{
	_cleanup_free_ char *p = key_path(app, map, key, err);
	if (!p)
		return -1;
	return request_or(c, "DELETE", p, NULL, 404, "no key", err);
}

/* ---- tasks ---- */

static char *fn_path(const char *app, const char *function, const char *verb, lc_error_t **err)
{
	if (!app)
		app = env("LC_TASK_APP");
	if (!app) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "%s %s: no app given and LC_TASK_APP is not set", verb, function);
		return NULL;
	}
	_cleanup_free_ char *a = lcc_escape(app), *f = lcc_escape(function);
	return lc_strdup_printf("/apps/%s/functions/%s/%s", a, f, verb);
}

int lcc_spawn(lcc_t *c, const char *app, const char *function, json_t *args, char **task_id, lc_error_t **err)
{
	_cleanup_free_ char *p = fn_path(app, function, "spawn", err);
	if (!p)
		return -1;
	_cleanup_json_ json_t *body = json_pack("{s:o}", "args", args ? json_incref(args) : json_object()), *out = NULL;
	if (lcc_request(c, "POST", p, body, NULL, &out, err) < 0)
		return -1;
	*task_id = take_string(out, "id");
	return 0;
}

int lcc_spawn_map(lcc_t *c, const char *app, const char *function, json_t *args_list, json_t **ids,
		  lc_error_t **err)
{
	_cleanup_free_ char *p = fn_path(app, function, "spawn_map", err);
	if (!p)
		return -1;
	_cleanup_json_ json_t *body = json_pack("{s:O}", "args", args_list), *out = NULL;
	if (lcc_request(c, "POST", p, body, NULL, &out, err) < 0)
		return -1;
	*ids = json_incref(json_object_get(out, "ids"));
	return 0;
}

int lcc_task_wait(lcc_t *c, const char *task_id, int timeout_s, json_t **task, lc_error_t **err)
{
	_cleanup_free_ char *id = lcc_escape(task_id);
	long long deadline = timeout_s > 0 ? lc_now_ms() + (long long)timeout_s * 1000 : -1;
	for (;;) {
		long long left = deadline < 0 ? 60000 : deadline - lc_now_ms();
		long wait = left <= 0 ? 0 : left > 60000 ? 60 : (left + 999) / 1000;
		_cleanup_free_ char *p = lc_strdup_printf("/tasks/%s/result?wait=%ld", id, wait);
		json_t *t = NULL;
		long st = 0;
		if (lcc_request(c, "GET", p, NULL, &st, &t, err) < 0)
			return -1;
		if (st == 200 || (deadline >= 0 && lc_now_ms() >= deadline)) {
			*task = t;
			return st == 200;
		}
		json_decref(t);
	}
}

int lcc_task_cancel(lcc_t *c, const char *task_id, lc_error_t **err)
{
	_cleanup_free_ char *id = lcc_escape(task_id);
	_cleanup_free_ char *p = lc_strdup_printf("/tasks/%s/cancel", id);
	return request_or(c, "POST", p, NULL, 409, "has already ended", err);
}

/* ---- a connection upgraded to another protocol (a devbox's ssh) ---- */

static int dial(lcc_t *c, lc_error_t **err)
{
	if (c->socket) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(c->socket) >= sizeof(sa.sun_path))
			return lc_error_set(err, LC_EXIT_USAGE, 0, "socket path %s is too long", c->socket);
		strcpy(sa.sun_path, c->socket);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		if (fd >= 0)
			close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot reach lcd at %s (is it running?)", c->endpoint);
	}
	if (strncmp(c->endpoint, "http://", 7))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "%s: only http:// (or the unix socket) can carry a devbox connection",
				    c->endpoint);
	_cleanup_free_ char *host = strndup(c->endpoint + 7, strcspn(c->endpoint + 7, "/"));
	char *port = strrchr(host, ':');
	if (port && strchr(port, ']'))
		port = NULL;
	if (port)
		*port++ = '\0';
	char *h = host;
	if (*h == '[' && h[strlen(h) - 1] == ']') {
		h++;
		h[strlen(h) - 1] = '\0';
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (getaddrinfo(h, port ? port : "80", &hints, &ai) != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot resolve %s", c->endpoint);
	int fd = -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot reach lcd at %s (is it running?)", c->endpoint);
	return fd;
}

/* The value of header `name` in a response's header block, or NULL. */
static char *header_value(const char *head, const char *name)
{
	size_t n = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		const char *k = l + 2;
		if (!strncasecmp(k, name, n) && k[n] == ':') {
			const char *v = k + n + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			return strndup(v, strcspn(v, "\r\n"));
		}
	}
	return NULL;
}

int lcc_upgrade(lcc_t *c, const char *path, const char *protocol, int *fd, char **head, lc_error_t **err)
{
	_cleanup_close_ int s = dial(c, err);
	if (s < 0)
		return -1;
	_cleanup_free_ char *auth = c->token ? lc_strdup_printf("Authorization: Bearer %s\r\n", c->token) : strdup("");
	_cleanup_free_ char *req = lc_strdup_printf("POST /v1%s HTTP/1.1\r\nHost: lcd\r\nConnection: Upgrade\r\n"
						    "Upgrade: %s\r\nContent-Length: 0\r\n%s\r\n",
						    path, protocol, auth);
	int w = lc_write_all(s, req, strlen(req));
	explicit_bzero(req, strlen(req));
	explicit_bzero(auth, strlen(auth));
	if (w < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "writing to lcd at %s", c->endpoint);
	/* The answer's head a byte at a time: what follows it is the other
	 * protocol's, and stays in the socket. */
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *h = lc_xmalloc0(cap);
	while (n < 4 || memcmp(h + n - 4, "\r\n\r\n", 4)) {
		if (n + 1 >= cap) {
			if (cap >= 65536)
				return lc_error_set(err, LC_EXIT_RUNTIME, 0, "lcd's answer has too long a head");
			h = realloc(h, cap *= 2);
		}
		ssize_t r = read(s, h + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "lcd at %s closed the connection early", c->endpoint);
		h[++n] = '\0';
	}
	long st = strncmp(h, "HTTP/1.", 7) ? 0 : strtol(h + 9, NULL, 10);
	if (st == 101) {
		*fd = lc_steal_fd(s);
		if (head)
			*head = lc_steal(h);
		return 0;
	}
	/* An error: its JSON body, as long as Content-Length says (or to EOF). */
	_cleanup_free_ char *cl = header_value(h, "Content-Length");
	size_t want = cl ? strtoul(cl, NULL, 10) : 1 << 20, got = 0;
	_cleanup_free_ char *body = lc_xmalloc0(want + 1);
	while (got < want) {
		ssize_t r = read(s, body + got, want - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return error_of(st, body, got, err);
}

char *lcc_header(const char *head, const char *name)
{
	return head ? header_value(head, name) : NULL;
}
