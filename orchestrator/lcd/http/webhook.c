/* webhook.c — lcd's webhook listener: a libmicrohttpd daemon of its own on
 * webhook_listen (TLS when a certificate and key are configured), never
 * the API's.  It serves one route, POST /hooks/APP/NAME:
 *
 *   unknown app or hook 404 · body over the limit 413 · signature
 *   (X-Hub-Signature-256, HMAC-SHA256 of the raw body with the hook's
 *   secret) missing or wrong 401, checked before anything else is read ·
 *   ping 200 · an event the hook does not take 200 (ignored) · a payload
 *   without its event's shape 400 · a delivery id or a body seen before
 *   200 (not handed on again) · otherwise the hook's
 *   function is spawned with args {event, delivery, payload}: 202, or 503
 *   when its queue is full.
 *
 * The answer comes within ANSWER_WITHIN_MS whatever the database does:
 * everything after the routing runs in a thread of its own.  If that
 * thread is still verifying when the time is up, the delivery is answered
 * 503 and dropped; if it is already recording and spawning, it is answered
 * 202 and the outcome is logged when known.  Every delivery is one log
 * line; the secret and the signature never are. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <microhttpd.h>

#include "api.h"
#include "apps.h"
#include "delivery.h"
#include "json.h"
#include "lcd.h"
#include "reply.h"
#include "tasks.h"
#include "util.h"
#include "webhook.h"

#define ANSWER_WITHIN_MS 8000 /* GitHub gives up on a delivery after 10 s */
#define CONN_LIMIT 64
#define PER_IP_LIMIT 16 /* one sender cannot take every connection */
#define CONN_TIMEOUT_S 30
#define GC_EVERY_MS (3600 * 1000LL)
#define HTTP_TOO_LARGE 413
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct lcd_webhook_srv {
	lcd_t *lcd;
	struct MHD_Daemon *d;
	size_t max_body;
	char *cert, *key; /* PEM text, kept while the daemon runs */
	size_t key_len;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	int handing;      /* hand-on threads still running */
	long long last_gc;
};

struct req {
	char *body;
	size_t len;
	bool too_big;
	long long t0;
};

/* What the log line says about a request; every field is cleaned of
 * anything but [A-Za-z0-9._:/-] (they come from the network). */
struct ctx {
	struct lcd_webhook_srv *srv;
	struct MHD_Connection *c;
	struct req *rq;
	char where[136];
	char event[136];
	char delivery[136];
	char peer[64];
};

/* A delivery past routing: verified, recorded and spawned in a thread of
 * its own, while the connection waits for it at most ANSWER_WITHIN_MS.
 * Shared by both; the fields below `lock:` are guarded by srv->lock. */
enum { STAGE_VERIFY, STAGE_QUEUE };
struct handoff {
	struct lcd_webhook_srv *srv;
	lcd_app_t *app;
	const lcd_webhook_t *hook;
	char *body;     /* the raw body, taken from the request */
	size_t len;
	char *sig, *event, *delivery; /* the headers, copied */
	struct ctx x;   /* the log line's fields (the thread fills event, delivery) */
	pthread_cond_t cond;
	/* lock: */
	int refs;
	int stage;
	bool done;
	bool abandoned; /* the connection answered without waiting for the outcome */
	unsigned status;
	json_t *answer;
	char *outcome;
};

static void clean(char *dst, size_t len, const char *src)
{
	size_t n = 0;
	for (const char *p = src ? src : "-"; *p && n + 1 < len; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:/-", c);
		dst[n++] = ok ? c : '?';
	}
	if (n == 0)
		dst[n++] = '-';
	dst[n] = '\0';
}

static void peer_of(struct MHD_Connection *c, char *buf, size_t len)
{
	snprintf(buf, len, "?");
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (getnameinfo(sa, sl, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST) != 0)
		snprintf(buf, len, "?");
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
	struct MHD_Response *r = api_json_response(body ? json_incref(body) : json_object(), JSON_COMPACT, true);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "POST");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(r, "Retry-After", "60");
	return api_send(c, status, r);
}

/* Answer and log the request: one line, "what" says what became of it. */
static enum MHD_Result answer(struct ctx *x, unsigned status, json_t *body, const char *what)
{
	long long ms = x->rq ? lc_now_ms() - x->rq->t0 : 0;
	lcd_log("webhook %s delivery %s event %s from %s: %u %s (%lld ms)", x->where, x->delivery, x->event, x->peer,
		status, what, ms);
	enum MHD_Result r = send_json(x->c, status, body);
	json_decref(body);
	return r;
}

static enum MHD_Result refuse(struct ctx *x, unsigned status, const char *msg)
{
	return answer(x, status, json_pack("{s:s}", "error", msg), msg);
}

/* ---- handing a delivery on ---- */

static void handoff_unref(struct handoff *h)
{
	struct lcd_webhook_srv *srv = h->srv;
	pthread_mutex_lock(&srv->lock);
	bool last = --h->refs == 0;
	pthread_mutex_unlock(&srv->lock);
	if (!last)
		return;
	lcd_app_unref(h->app);
	free(h->body);
	free(h->sig);
	free(h->event);
	free(h->delivery);
	json_decref(h->answer);
	free(h->outcome);
	pthread_cond_destroy(&h->cond);
	free(h);
}

static void result(struct handoff *h, unsigned status, json_t *answer, char *outcome)
{
	h->status = status;
	h->answer = answer;
	h->outcome = outcome;
}

static void refused(struct handoff *h, unsigned status, const char *msg)
{
	result(h, status, json_pack("{s:s}", "error", msg), strdup(msg));
}

static unsigned status_of_failure(const lc_error_t *err)
{
	return err && err->exit_code == LC_EXIT_BUSY ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

static void maybe_gc(struct lcd_webhook_srv *srv)
{
	long long now = lc_wall_ms();
	pthread_mutex_lock(&srv->lock);
	bool due = now - srv->last_gc >= GC_EVERY_MS;
	if (due)
		srv->last_gc = now;
	pthread_mutex_unlock(&srv->lock);
	if (!due)
		return;
	lc_error_t *err = NULL;
	int n = lcd_delivery_gc(srv->lcd->db, now - LCD_DELIVERY_KEEP_DAYS * 86400 * 1000LL, &err);
	if (n < 0) {
		lcd_log("webhook: cannot forget old delivery ids: %s", err->msg);
		lc_error_free(err);
	} else if (n > 0) {
		lcd_log("webhook: forgot %d delivery ids older than %d days", n, LCD_DELIVERY_KEEP_DAYS);
	}
}

/* The signature, before anything else about the request is believed. */
static bool verified(struct handoff *h)
{
	lcd_t *lcd = h->srv->lcd;
	lc_error_t *err = NULL;
	char *secret = lcd_store_secret_get(lcd->db, h->hook->secret, &err);
	if (!secret) {
		if (err) {
			lcd_log("webhook %s: cannot read secret %s: %s", h->x.where, h->hook->secret, err->msg);
			lc_error_free(err);
			refused(h, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot verify the signature now; try again");
		} else {
			lcd_log("webhook %s: secret %s is not set (lcctl secret set %s): every delivery is refused",
				h->x.where, h->hook->secret, h->hook->secret);
			refused(h, MHD_HTTP_UNAUTHORIZED, "the signature cannot be verified: the webhook's secret is not set");
		}
		return false;
	}
	bool ok = lcd_delivery_signature_ok(secret, strlen(secret), h->body, h->len, h->sig);
	explicit_bzero(secret, strlen(secret));
	free(secret);
	if (!ok)
		refused(h, MHD_HTTP_UNAUTHORIZED, "missing or wrong signature (X-Hub-Signature-256)");
	return ok;
}

/* Record the delivery id, then spawn: a redelivery (any number, at once or
 * later) finds the record and starts nothing.  A spawn that fails drops the
 * record again, so that a redelivery from GitHub can still be handed on. */
static void hand_on(struct handoff *h, json_t *payload)
{
	lcd_t *lcd = h->srv->lcd;
	const char *app = h->app->name, *hook = h->hook->name;
	lc_error_t *err = NULL;
	maybe_gc(h->srv);
	_cleanup_free_ char *earlier = NULL;
	unsigned char md[32];
	char sha[65];
	lc_sha256_t *hs = lc_sha256_new();
	lc_sha256_update(hs, h->body ? h->body : "", h->len);
	lc_sha256_final(hs, md);
	lc_sha256_hex(md, sha);
	int r = lcd_delivery_claim(lcd->db, app, hook, h->delivery, sha, h->event, lc_wall_ms(), &earlier, &err);
	if (r < 0) {
		result(h, status_of_failure(err), json_pack("{s:s}", "error", "cannot record the delivery; redeliver it"),
		       lc_strdup_printf("not handed on: cannot record the delivery: %s", err->msg));
		lc_error_free(err);
		return;
	}
	if (r == 0) {
		result(h, MHD_HTTP_OK, json_pack("{s:s, s:s?}", "status", "duplicate", "task", earlier),
		       lc_strdup_printf("duplicate, not handed on again (task %s)", earlier ? earlier : "-"));
		return;
	}
	_cleanup_json_ json_t *list = json_pack("[{s:s, s:s, s:O}]", "event", h->event, "delivery", h->delivery,
						"payload", payload);
	_cleanup_json_ json_t *ids = json_array();
	if (lcd_spawn(lcd, h->app, h->hook->function, NULL, list, ids, &err) < 0) {
		result(h, status_of_failure(err), json_pack("{s:s}", "error", err->msg),
		       lc_strdup_printf("not handed on: %s", err->msg));
		lc_error_free(err);
		err = NULL;
		if (lcd_delivery_forget(lcd->db, app, hook, h->delivery, &err) < 0) {
			lcd_log("webhook %s delivery %s: cannot drop its record (a redelivery will be taken as a duplicate): %s",
				h->x.where, h->x.delivery, err->msg);
			lc_error_free(err);
		}
		return;
	}
	const char *id = json_string_value(json_array_get(ids, 0));
	if (lcd_delivery_set_task(lcd->db, app, hook, h->delivery, id, &err) < 0) {
		lcd_log("webhook %s delivery %s: task %s started, not recorded with the delivery: %s", h->x.where,
			h->x.delivery, id, err->msg);
		lc_error_free(err);
	}
	result(h, MHD_HTTP_ACCEPTED, json_pack("{s:s, s:s}", "status", "accepted", "task", id),
	       lc_strdup_printf("task %s (%s:%s)", id, app, h->hook->function));
}

/* Everything but the routing: the signature first, then the headers and
 * the body, then (if it is to be handed on) the record and the spawn. */
static void process(struct handoff *h)
{
	struct lcd_webhook_srv *srv = h->srv;
	if (!verified(h))
		return;
	const char *event = h->event;
	clean(h->x.event, sizeof(h->x.event), event);
	clean(h->x.delivery, sizeof(h->x.delivery), h->delivery);
	_cleanup_json_ json_t *payload = NULL;
	if (!lcd_delivery_event_valid(event)) {
		refused(h, MHD_HTTP_BAD_REQUEST, "missing or bad X-GitHub-Event");
		return;
	}
	if (!lcd_delivery_id_valid(h->delivery)) {
		refused(h, MHD_HTTP_BAD_REQUEST, "missing or bad X-GitHub-Delivery (1-128 of A-Z a-z 0-9 . _ : -)");
		return;
	}
	if (!strcmp(event, "ping")) {
		result(h, MHD_HTTP_OK, json_pack("{s:s}", "status", "pong"), strdup("pong"));
		return;
	}
	payload = json_loadb(h->body ? h->body : "", h->len, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(payload)) {
		refused(h, MHD_HTTP_BAD_REQUEST,
			"body: expected a JSON object (set the webhook's content type to application/json)");
		return;
	}
	const char *action = lc_json_str(payload, "action");
	if (action) {
		_cleanup_free_ char *ea = lc_strdup_printf("%s.%s", event, action);
		clean(h->x.event, sizeof(h->x.event), ea);
	}
	if (!lcd_webhook_wants(h->hook, event)) {
		result(h, MHD_HTTP_OK, json_pack("{s:s, s:s}", "status", "ignored", "event", event),
		       strdup("ignored (not one of the hook's events)"));
		return;
	}
	/* what is handed on is what its event says it is */
	const char *missing = NULL;
	if (!lcd_delivery_shape_ok(event, payload, &missing)) {
		_cleanup_free_ char *m = lc_strdup_printf("body: X-GitHub-Event %s, but the payload has no %s", event, missing);
		refused(h, MHD_HTTP_BAD_REQUEST, m);
		return;
	}
	/* Past this point the delivery is taken; before it, a connection that
	 * gave up waiting has answered 503 and nothing may happen. */
	pthread_mutex_lock(&srv->lock);
	bool abandoned = h->abandoned;
	if (!abandoned)
		h->stage = STAGE_QUEUE;
	pthread_mutex_unlock(&srv->lock);
	if (abandoned)
		refused(h, MHD_HTTP_SERVICE_UNAVAILABLE, "not handed on: lcd was too slow to verify it");
	else
		hand_on(h, payload);
}

static void *process_thread(void *arg)
{
	struct handoff *h = arg;
	struct lcd_webhook_srv *srv = h->srv;
	process(h);
	pthread_mutex_lock(&srv->lock);
	h->done = true;
	bool late = h->abandoned;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&srv->lock);
	if (late)
		lcd_log("webhook %s delivery %s event %s from %s: then %u %s", h->x.where, h->x.delivery, h->x.event,
			h->x.peer, h->status, h->outcome);
	handoff_unref(h);
	pthread_mutex_lock(&srv->lock);
	srv->handing--;
	pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

static char *header_dup(struct MHD_Connection *c, const char *name)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
	return v ? strdup(v) : NULL;
}

static enum MHD_Result process_and_answer(struct ctx *x, lcd_app_t *app, const lcd_webhook_t *hook)
{
	struct lcd_webhook_srv *srv = x->srv;
	struct handoff *h = lc_xmalloc0(sizeof(*h));
	h->srv = srv;
	h->app = lcd_app_ref(app);
	h->hook = hook;
	h->body = x->rq->body; /* taken: the request may end before the thread */
	h->len = x->rq->len;
	x->rq->body = NULL;
	x->rq->len = 0;
	h->sig = header_dup(x->c, "X-Hub-Signature-256");
	h->event = header_dup(x->c, "X-GitHub-Event");
	h->delivery = header_dup(x->c, "X-GitHub-Delivery");
	h->x = *x;
	h->refs = 2;
	h->stage = STAGE_VERIFY;
	pthread_cond_init(&h->cond, NULL);

	pthread_mutex_lock(&srv->lock);
	srv->handing++;
	pthread_mutex_unlock(&srv->lock);
	if (lcd_thread_detached(process_thread, h) != 0)
		process_thread(h); /* no thread to spare: do it here */

	struct timespec ts;
	lcd_deadline(&ts, ANSWER_WITHIN_MS);
	pthread_mutex_lock(&srv->lock);
	while (!h->done && pthread_cond_timedwait(&h->cond, &srv->lock, &ts) != ETIMEDOUT)
		;
	bool done = h->done;
	int stage = h->stage;
	h->abandoned = !done;
	pthread_mutex_unlock(&srv->lock);
	enum MHD_Result r;
	if (done)
		r = answer(&h->x, h->status, json_incref(h->answer), h->outcome);
	else if (stage == STAGE_QUEUE)
		r = answer(&h->x, MHD_HTTP_ACCEPTED, json_pack("{s:s, s:s}", "status", "accepted", "note", "still being queued"),
			   "accepted, still being queued (its outcome follows in another line)");
	else
		r = refuse(&h->x, MHD_HTTP_SERVICE_UNAVAILABLE, "lcd is busy; redeliver it later");
	handoff_unref(h);
	return r;
}

/* ---- the route ---- */

static enum MHD_Result route(struct ctx *x, const char *url, const char *method)
{
	if (strncmp(url, "/hooks/", 7) != 0)
		return refuse(x, MHD_HTTP_NOT_FOUND, "not found (webhooks are POST /hooks/APP/NAME)");
	_cleanup_free_ char *path = strdup(url + 7);
	char *slash = strchr(path, '/');
	if (!slash || slash == path || !slash[1] || strchr(slash + 1, '/'))
		return refuse(x, MHD_HTTP_NOT_FOUND, "no such webhook");
	*slash = '\0';
	if (strcmp(method, "POST") != 0)
		return refuse(x, MHD_HTTP_METHOD_NOT_ALLOWED, "webhooks take POST only");
	lcd_app_t *app = lcd_app_get(x->srv->lcd, path);
	const lcd_webhook_t *hook = app ? lcd_app_webhook(app, slash + 1) : NULL;
	enum MHD_Result r = hook ? process_and_answer(x, app, hook) : refuse(x, MHD_HTTP_NOT_FOUND, "no such webhook");
	lcd_app_unref(app);
	return r;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct lcd_webhook_srv *srv = cls;
	struct req *rq = *con_cls;
	struct ctx x = { .srv = srv, .c = c, .rq = rq };
	if (!strncmp(url, "/hooks/", 7))
		clean(x.where, sizeof(x.where), url + 7);
	else
		clean(x.where, sizeof(x.where), url);
	clean(x.event, sizeof(x.event), NULL);
	clean(x.delivery, sizeof(x.delivery), NULL);
	peer_of(c, x.peer, sizeof(x.peer));
	if (!rq) {
		rq = lc_xmalloc0(sizeof(*rq));
		rq->t0 = lc_now_ms();
		*con_cls = rq;
		x.rq = rq;
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > srv->max_body)
			return refuse(&x, HTTP_TOO_LARGE, "body too large");
		return MHD_YES;
	}
	if (*upload_size) {
		lcd_body_append(&rq->body, &rq->len, &rq->too_big, upload, upload_size, srv->max_body);
		return MHD_YES;
	}
	if (rq->too_big)
		return refuse(&x, HTTP_TOO_LARGE, "body too large");
	return route(&x, url, method);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *con_cls;
	if (rq) {
		free(rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

/* ---- start and stop ---- */

static int bind_listener(const char *addr, lc_error_t **err)
{
	struct addrinfo *ai = lcd_listen_addr(addr, "webhook_listen", err);
	if (!ai)
		return -1;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "webhook_listen %s: cannot listen", addr);
	}
	freeaddrinfo(ai);
	return fd;
}

static int read_pem(const char *path, const char *what, char **out, size_t *len, lc_error_t **err)
{
	if (lc_read_file(path, out, len, err) < 0)
		return lc_error_wrap(err, "%s", what);
	if (!strstr(*out, "-----BEGIN "))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s %s: not a PEM file", what, path);
	return 0;
}

int lcd_webhook_start(lcd_t *lcd, const lcd_webhook_cfg_t *cfg, lcd_webhook_srv_t **out, lc_error_t **err)
{
	bool tls = cfg->tls_cert || cfg->tls_key;
	if (tls && !(cfg->tls_cert && cfg->tls_key))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "webhook TLS needs both webhook_tls_cert and webhook_tls_key");
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "webhook TLS: this libmicrohttpd is built without TLS");
	struct lcd_webhook_srv *srv = lc_xmalloc0(sizeof(*srv));
	srv->lcd = lcd;
	srv->max_body = cfg->max_body;
	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->idle, NULL);
	srv->last_gc = lc_wall_ms() - GC_EVERY_MS; /* collect at the first delivery */
	if (tls) {
		struct stat st;
		if (stat(cfg->tls_key, &st) == 0 && (st.st_mode & 077))
			lcd_log("webhook_tls_key %s is readable by others (mode %03o): chmod 600 it", cfg->tls_key,
				st.st_mode & 0777);
		if (read_pem(cfg->tls_cert, "webhook_tls_cert", &srv->cert, NULL, err) < 0 ||
		    read_pem(cfg->tls_key, "webhook_tls_key", &srv->key, &srv->key_len, err) < 0) {
			lcd_webhook_stop(srv);
			return -1;
		}
	}
	int fd = bind_listener(cfg->listen, err);
	if (fd < 0) {
		lcd_webhook_stop(srv);
		return -1;
	}
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_LISTEN_SOCKET, fd, NULL },
		{ MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT, NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_S, NULL },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_IP_LIMIT, NULL },
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, NULL },
		{ tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, srv->cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key },
		{ MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES },
		{ MHD_OPTION_END, 0, NULL },
	};
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	if (tls)
		flags |= MHD_USE_TLS;
	srv->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, srv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!srv->d) {
		close(fd);
		lcd_webhook_stop(srv);
		if (tls)
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "webhook TLS: cannot use %s and %s (a PEM certificate and its unencrypted private key?)",
					    cfg->tls_cert, cfg->tls_key);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot start the webhook listener on %s", cfg->listen);
	}
	lcd_log("webhooks served on %s%s (POST /hooks/APP/NAME, bodies up to %zu bytes)", tls ? "https://" : "http://",
		cfg->listen, srv->max_body);
	*out = srv;
	return 0;
}

void lcd_webhook_stop(lcd_webhook_srv_t *srv)
{
	if (!srv)
		return;
	if (srv->d)
		MHD_stop_daemon(srv->d);
	/* A delivery still being handed on uses the database: wait for it. */
	pthread_mutex_lock(&srv->lock);
	while (srv->handing > 0)
		pthread_cond_wait(&srv->idle, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
	if (srv->key) {
		explicit_bzero(srv->key, srv->key_len);
		free(srv->key);
	}
	free(srv->cert);
	pthread_mutex_destroy(&srv->lock);
	pthread_cond_destroy(&srv->idle);
	free(srv);
}
