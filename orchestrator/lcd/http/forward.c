/* forward.c — one API over the cluster: a request about what another
 * node holds (a sandbox, a devbox, a running task's log or cancel) is
 * passed to that node's TCP listener as it comes (forward.h, core), and
 * its answer passed back as it comes: an upload is written on as its
 * pieces arrive, an exec's stream or a download is read and sent on piece
 * by piece, a devbox's SSH connection (an upgrade) is spliced through.
 * A sandbox's create goes where placement puts it (lcd_node_place).  The
 * caller is who it was here: a task's own token goes on (every node knows
 * it: the store holds it), the operator's becomes the cluster token.  A
 * request that came forwarded is answered by the node it reached. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <curl/curl.h>

#include "access.h"
#include "api.h"
#include "forward.h"
#include "json.h"
#include "nodes.h"
#include "reply.h"
#include "sandboxes.h"
#include "tasks.h"
#include "util.h"

struct lcd_fwd {
	lcd_t *lcd;
	char node[64];
	int fd;            /* to the node, the request head sent */
	bool chunked;      /* the body goes on in chunks */
	bool failed;       /* writing on failed: answer 502 at the end */
	lcd_http_t answer; /* read once the body is all sent */
	bool answering;
	lcd_req_t *rq;
};

/* The headers of the client's request that go on with it. */
static const char *const passed[] = { "Content-Type", "Accept", "Upgrade", "Last-Event-ID", NULL };

struct query {
	char *s;
	size_t len;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct query *q = cls;
	char *k = curl_easy_escape(NULL, key, 0);
	char *v = value ? curl_easy_escape(NULL, value, 0) : NULL;
	char *next = lc_strdup_printf("%s%s%s%s%s", q->s ? q->s : "", q->s ? "&" : "?", k ? k : "", v ? "=" : "",
				      v ? v : "");
	curl_free(k);
	curl_free(v);
	free(q->s);
	q->s = next;
	return MHD_YES;
}

/* url (libmicrohttpd's decoded path) as a request-target again: each
 * segment percent-encoded, so that a space, CR or LF in it (%20, %0D%0A
 * in the client's request) stays part of the path on the other node
 * instead of ending the request line there. */
static char *escape_path(const char *url)
{
	char *out = strdup("");
	for (const char *p = url; *p;) {
		size_t len = strcspn(p, "/");
		char *seg = len ? curl_easy_escape(NULL, p, (int)len) : NULL;
		char *next = lc_strdup_printf("%s%s%s", out, seg ? seg : "", p[len] == '/' ? "/" : "");
		curl_free(seg);
		free(out);
		out = next;
		p += len + (p[len] == '/');
	}
	return out;
}

/* Which node answers for this request, or NULL: this one. */
static char *owner(lcd_t *lcd, const lcd_caller_t *who, const char *method, const char *url)
{
	const char *me = lcd_db_node(lcd->db);
	if (!me)
		return NULL;
	char seg[4][128] = { "", "", "", "" };
	size_t n = 0;
	const char *p = url + 4; /* after "/v1/" */
	while (*p && n < 4) {
		size_t len = strcspn(p, "/");
		if (len >= sizeof(seg[0]))
			return NULL;
		memcpy(seg[n++], p, len);
		p += len;
		if (*p == '/')
			p++;
	}
	char *node = NULL;
	if (!strcmp(seg[0], "sandboxes") && n >= 2) {
		lc_error_t *err = NULL;
		_cleanup_json_ json_t *row = lcd_sandbox_find(lcd, who, seg[1], &err);
		lc_error_free(err);
		const char *at = row ? lc_json_str(row, "node") : NULL;
		node = at ? strdup(at) : NULL;
	} else if (!strcmp(seg[0], "devboxes") && n >= 2 && who->operator) {
		/* its show, rm, start, stop and SSH connection: on its node */
		_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT node FROM devboxes WHERE name = ?", "s", seg[1]);
		const char *at = lc_json_str(json_array_get(rows, 0), "node");
		node = at ? strdup(at) : NULL;
	} else if (!strcmp(seg[0], "tasks") && n == 3 && (!strcmp(seg[2], "logs") || !strcmp(seg[2], "cancel"))) {
		/* a task's log is on the node that ran it; a running task is
		 * cancelled by the node that runs it */
		_cleanup_json_ json_t *t = lcd_store_task_get(lcd->db, seg[1], NULL);
		const char *at = lc_json_str(t, "node");
		const char *state = lc_json_str(t, "state");
		char buf[4096];
		if (at && (!strcmp(seg[2], "logs") ? access(lcd_task_log_path(lcd, seg[1], buf, sizeof(buf)), F_OK) < 0
						   : state && !strcmp(state, "running")))
			node = strdup(at);
	}
	(void)method;
	if (node && !strcmp(node, me)) {
		free(node);
		node = NULL;
	}
	return node;
}

static enum MHD_Result bad_gateway(struct MHD_Connection *c, const char *node, lc_error_t *err)
{
	unsigned st = err && err->exit_code == LC_EXIT_STATE ? MHD_HTTP_CONFLICT : MHD_HTTP_BAD_GATEWAY;
	enum MHD_Result r = api_fail_status(c, st, err ? err->exit_code : LC_EXIT_BUSY, "%s", err ? err->msg : "node");
	(void)node;
	lc_error_free(err);
	return r;
}

static lcd_fwd_t *open_to(struct MHD_Connection *c, lcd_t *lcd, const lcd_caller_t *who, const char *node,
			  const char *method, const char *url, long long length, lc_error_t **err)
{
	struct query q = { 0 };
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, &q);
	_cleanup_free_ char *path = escape_path(url);
	_cleanup_free_ char *target = lc_strdup_printf("%s%s", path, q.s ? q.s : "");
	free(q.s);
	_cleanup_strv_ char **hdrs = NULL;
	for (size_t i = 0; passed[i]; i++) {
		const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, passed[i]);
		if (v) {
			_cleanup_free_ char *h = lc_strdup_printf("%s: %s", passed[i], v);
			lc_strv_push(&hdrs, h);
		}
	}
	/* a task's token goes on; the operator is the cluster token there */
	const char *auth = who->operator ? NULL : MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	int fd = lcd_node_open(lcd, node, method, target, auth, hdrs, length, err);
	if (fd < 0)
		return NULL;
	lcd_fwd_t *f = lc_xmalloc0(sizeof(*f));
	f->lcd = lcd;
	snprintf(f->node, sizeof(f->node), "%s", node);
	f->fd = fd;
	f->chunked = length < 0;
	return f;
}

int lcd_forward_begin(struct MHD_Connection *c, lcd_t *lcd, const lcd_caller_t *who, const char *method,
		      const char *url, lcd_fwd_t **out, enum MHD_Result *r)
{
	*out = NULL;
	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, LCD_FORWARDED_HEADER))
		return 0; /* passed on once: answered here */
	if (strncmp(url, "/v1/", 4))
		return 0;
	_cleanup_free_ char *node = owner(lcd, who, method, url);
	if (!node)
		return 0;
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	long long length = cl ? strtoll(cl, NULL, 10) : te ? -1 : 0;
	lc_error_t *err = NULL;
	*out = open_to(c, lcd, who, node, method, url, length, &err);
	if (!*out) {
		*r = bad_gateway(c, node, err);
		return -1;
	}
	return 1;
}

void lcd_forward_data(lcd_fwd_t *f, const char *data, size_t len)
{
	if (f->failed || !len)
		return;
	int r = f->chunked ? lcd_http_chunk(f->fd, data, len) : lc_write_all(f->fd, data, len);
	if (r < 0)
		f->failed = true;
}

static ssize_t answer_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	lcd_fwd_t *f = cls;
	ssize_t n = lcd_http_read(&f->answer, buf, max);
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void answer_free(void *cls)
{
	lcd_fwd_t *f = cls;
	lcd_forward_free(f);
}

/* ---- a devbox's SSH connection, spliced through ---- */

void lcd_pump(int from, int to)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || lc_write_all(to, buf, (size_t)n) < 0)
			return;
	}
}

struct splice {
	lcd_fwd_t *f;
	MHD_socket sock;
};

static void *node_to_client(void *arg)
{
	struct splice *s = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	lcd_http_t *h = &s->f->answer;
	/* what the node sent after its 101, already read */
	if (h->pos < h->len && lc_write_all(s->sock, h->buf + h->pos, h->len - h->pos) < 0)
		return NULL;
	h->pos = h->len;
	lcd_pump(h->fd, s->sock);
	shutdown(s->sock, SHUT_RDWR);
	return NULL;
}

static void upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
		     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c, (void)con_cls;
	lcd_fwd_t *f = cls;
	f->rq->on_done = NULL; /* ours now */
	int fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl & ~O_NONBLOCK);
	struct splice s = { f, sock };
	pthread_t th;
	bool back = pthread_create(&th, NULL, node_to_client, &s) == 0;
	if (back && (!extra_in_size || lc_write_all(f->answer.fd, extra_in, extra_in_size) == 0))
		lcd_pump(sock, f->answer.fd);
	shutdown(f->answer.fd, SHUT_WR);
	if (back)
		pthread_join(th, NULL);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	lcd_forward_free(f);
}

static void add_headers(struct MHD_Response *r, json_t *headers)
{
	const char *k;
	json_t *v;
	json_object_foreach(headers, k, v) {
		if (!strcmp(k, "date") || !strcmp(k, "upgrade"))
			continue;
		MHD_add_response_header(r, k, json_string_value(v));
	}
}

enum MHD_Result lcd_forward_end(struct MHD_Connection *c, lcd_fwd_t *f, lcd_req_t *rq)
{
	lc_error_t *err = NULL;
	if (f->chunked && !f->failed && lcd_http_chunk(f->fd, NULL, 0) < 0)
		f->failed = true;
	if (f->failed) {
		lc_error_set(&err, LC_EXIT_BUSY, errno, "node %s: the request could not be passed on", f->node);
		return bad_gateway(c, f->node, err);
	}
	int fd = f->fd;
	f->fd = -1;
	if (lcd_http_read_head(&f->answer, fd, &err) < 0) {
		lc_error_wrap(&err, "node %s", f->node);
		return bad_gateway(c, f->node, err);
	}
	f->answering = true;
	f->rq = rq;
	struct MHD_Response *r;
	unsigned status = (unsigned)f->answer.status;
	rq->fwd = NULL; /* the answer's now */
	if (status == MHD_HTTP_SWITCHING_PROTOCOLS) {
		rq->on_done = (void (*)(void *))lcd_forward_free;
		rq->on_done_arg = f;
		r = MHD_create_response_for_upgrade(upgraded, f);
		json_t *up = json_object_get(f->answer.headers, "upgrade");
		if (up)
			MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, json_string_value(up));
	} else {
		/* the length is kept when the node gave one; else a stream */
		uint64_t size = f->answer.chunked || f->answer.left < 0 ? MHD_SIZE_UNKNOWN : (uint64_t)f->answer.left;
		r = MHD_create_response_from_callback(size, 64 * 1024, answer_read, f, answer_free);
	}
	if (!r) {
		rq->on_done = NULL;
		lcd_forward_free(f);
		return api_fail_status(c, MHD_HTTP_INTERNAL_SERVER_ERROR, LC_EXIT_RUNTIME, "out of memory");
	}
	add_headers(r, f->answer.headers);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

void lcd_forward_free(lcd_fwd_t *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	if (f->answering)
		lcd_http_close(&f->answer);
	free(f);
}

bool lcd_forward_create(call_t *call, enum MHD_Result *r)
{
	lcd_t *lcd = call->lcd;
	if (MHD_lookup_connection_value(call->c, MHD_HEADER_KIND, LCD_FORWARDED_HEADER) || !lcd_db_node(lcd->db))
		return false;
	json_t *img = call->body ? json_object_get(call->body, "image") : NULL;
	_cleanup_free_ char *node = lcd_node_place(lcd, json_is_string(img) ? json_string_value(img) : NULL);
	if (!node || !strcmp(node, lcd_db_node(lcd->db)))
		return false;
	_cleanup_free_ char *text = call->body ? json_dumps(call->body, JSON_COMPACT) : NULL;
	lc_error_t *err = NULL;
	lcd_fwd_t *f = open_to(call->c, lcd, call->who, node, call->method, "/v1/sandboxes", text ? (long long)strlen(text) : 0,
			       &err);
	if (!f) {
		/* placement is a preference: the node it chose cannot be reached, so here */
		lcd_log("sandbox create: node %s cannot take it (%s); made here", node, err->msg);
		lc_error_free(err);
		return false;
	}
	call->rq->fwd = f; /* freed with the request unless the answer takes it */
	if (text)
		lcd_forward_data(f, text, strlen(text));
	*r = lcd_forward_end(call->c, f, call->rq);
	return true;
}
