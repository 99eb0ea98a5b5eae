/* gateway.c — the model gateway: the provider's key never enters a
 * sandbox, and the spend cap is enforced by lcd, not requested of the
 * agent.
 *
 * Where it listens.  A sandbox made with "model_gateway" gets an allow
 * rule for the gateway's port on the host side of the address pool's /30s
 * (its chain accepts nothing else to the host), and lcd listens on the
 * host address of that sandbox's own veth (the lease's gateway).  One
 * thread accepts on every such listener and hands the connections to a
 * libmicrohttpd daemon (a thread per connection).  A request is served
 * only with a live token of a gateway sandbox (x-api-key or Authorization:
 * Bearer), arriving on that sandbox's own listener from that sandbox's own
 * address: a token carried elsewhere is refused.
 *
 * What it does with a request.  The path must be one of the provider's
 * (Anthropic: /v1/messages, /v1/messages/count_tokens, /v1/models; OpenAI:
 * /v1/chat/completions, /v1/responses, /v1/models).  The body names a
 * model that has a price (policies/model-prices.json), else 400.  If the
 * sandbox, its task (the function's budget_usd) or its app (budget.
 * daily_usd) has spent its budget, 402 in the provider's error shape.
 * Otherwise the request goes to the provider with libcurl (HTTPS only,
 * verified), the sandbox's token replaced by the key from lcd's secret
 * store, hop-by-hop and encoding headers dropped; a streamed chat
 * completion is asked for its usage chunk (stream_options.include_usage).
 * The answer passes through as it comes (an SSE stream up to its last
 * complete event), while its usage is read (ledger.c); each usage report
 * counts at once against the budgets, and a request whose reports make a
 * budget run out is ended (unless the report was its last), as is every
 * other request under way in that scope.  An ended stream gets an error
 * event in the provider's shape.  One ledger row per request records
 * tokens, cost and outcome, before the answer's last bytes reach the
 * sandbox. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <curl/curl.h>
#include <microhttpd.h>

#include "access.h"
#include "apps.h"
#include "gateway.h"
#include "gwreq.h"
#include "json.h"
#include "netpool.h"
#include "sandboxes.h"
#include "util.h"

#define TOKEN_PREFIX "lcgw-"
#define TOKEN_HEX 64
#define TOKEN_LEN (sizeof(TOKEN_PREFIX) - 1 + TOKEN_HEX)
#define SSE_HOLD_MAX (1 << 20) /* bytes of an unfinished SSE event held back at most */
#define MULTI_POOL 16          /* idle curl multi handles kept (their connections too) */
#define CONN_LIMIT 1024
#define PER_IP_LIMIT 16        /* connections of one sandbox (its own address) */
#define DAY_MS 86400000LL
#define LOG_BURST 10           /* refusal log lines at once, then one a second */

typedef struct listener {
	char addr[INET6_ADDRSTRLEN];
	char owner[LC_ID_LEN + 1];
	int fd;
	bool dead; /* closed by the acceptor at its next turn */
} listener_t;

typedef struct token_mem {
	char id[LC_ID_LEN + 1];
	char token[TOKEN_LEN + 1];
} token_mem_t;

typedef struct gw gw_t;

typedef struct gw_req {
	gw_t *gw;
	int refs;
	char *uri;         /* the request-target as the sandbox sent it (logged escaped) */
	char *path, *query; /* ... validated (lcd_gw_target_parse) */
	/* who */
	char sandbox[LC_ID_LEN + 1], task[LC_ID_LEN + 1], app[64], function[64];
	int prov; /* lcd_provider_t, -1 before the token is known */
	char *secret;
	long long b_sandbox, b_task, b_app; /* budgets, pico-dollars; 0: none */
	/* what */
	lcd_gw_api_t api;
	bool begun, billable, answered;
	char *body;
	size_t len;
	bool too_big;
	char *model;
	bool stream_req;
	lcd_price_t price;
	lcd_reservation_t resv; /* what it may cost at most (billable requests) */
	long long body_reserved; /* bytes of memory taken for the body at admission */
	long long held;          /* bytes of memory it is charged (gw->mem) */
	bool mem_over;           /* the body did not fit lcd's gateway memory */
	/* the provider */
	CURLU *url;
	bool sent_upstream; /* the request went out (the host checked, the key sent) */
	CURL *easy;
	CURLM *multi;
	struct curl_slist *hdrs;
	int status;
	bool headers_done, done;
	CURLcode result;
	char **resp_hdrs; /* "Name", "value" pairs */
	bool sse;
	lcd_meter_t *meter;
	/* to the sandbox */
	char *buf;
	size_t buf_len, buf_off; /* buf[buf_off..buf_len) not yet sent */
	unsigned long long fed, sent; /* bytes of the answer received, handed on */
	bool flush_all;               /* send everything (the end, or a cut) */
	bool ended, end_error;
	int client_fd;
	bool watch_client, client_gone;
	/* bookkeeping */
	long long started, last_rx;
	long long partial; /* pico-dollars of the usage reported so far */
	int cut;           /* set under gw->lock: 1 budget, 2 lcd stopping */
	const char *cut_scope;
	bool listed, finalized;
	struct gw_req *next;
	bool open; /* on gw->open: under way, from its headers to its end */
	struct gw_req *next_open;
} gw_req_t;

struct gw {
	lcd_t *lcd;
	lcd_gateway_cfg_t cfg;
	lcd_prices_t *prices;
	char pool4[LC_CIDR_STRLEN], pool6[LC_CIDR_STRLEN]; /* pool6: "" without IPv6 */
	struct MHD_Daemon *d;
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock; /* everything below */
	listener_t *ls;
	size_t n_ls;
	token_mem_t *toks;
	size_t n_toks;
	gw_req_t *inflight;
	gw_req_t *open; /* identified requests from their headers to their end (max_inflight) */
	CURLM *pool[MULTI_POOL];
	size_t n_pool;
	bool stopping;
	long long mem;     /* bytes held by requests (atomic) */
	long long log_tokens, log_at, log_dropped; /* the refusal log's bucket (under lock) */
	int wake[2];
	pthread_t acceptor;
	bool acceptor_running;
};

static void refusal_log(gw_t *gw, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- configuration ---- */

void lcd_gateway_cfg_clear(lcd_gateway_cfg_t *cfg)
{
	for (int i = 0; i < LCD_PROV_N; i++) {
		free(cfg->upstream[i]);
		free(cfg->up_host[i]);
		free(cfg->up_path[i]);
		free(cfg->organization[i]);
		free(cfg->project[i]);
		lc_strv_free(cfg->betas[i]);
	}
	free(cfg->ca_file);
	memset(cfg, 0, sizeof(*cfg));
}

static int cfg_int(json_t *v, const char *source, const char *key, long long min, long long max, long long *out,
		   lc_error_t **err)
{
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.%s: expected an integer %lld to %lld", source,
				    key, min, max);
	*out = json_integer_value(v);
	return 0;
}

/* anthropic-beta values passed on unless lcd.json's upstream says "betas":
 * ones that change neither the price nor where the provider connects
 * (a long context, MCP, code execution and file betas are not here). */
static const char *const default_betas[] = { "interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14",
	"token-efficient-tools-2025-02-19", "claude-code-20250219", NULL };

/* An upstream's base URL, split with libcurl's own parser (the one that
 * later reads it): https, a host, no user, query or fragment. */
static int cfg_upstream_url(lcd_gateway_cfg_t *cfg, int p, const char *url, const char *source, const char *pk,
			    lc_error_t **err)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *user = NULL, *query = NULL, *frag = NULL;
	int r = 0;
	if (!u || strlen(url) > 1024 || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK || strcmp(scheme, "https") ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0] ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK || curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
		r = lc_error_set(err, LC_EXIT_INVALID, 0,
				 "config %s: gateway.upstreams.%s: expected an https:// base URL with a host and no user, "
				 "query or fragment (the gateway never sends a key without TLS)", source, pk);
	} else {
		size_t n = strlen(path);
		while (n && path[n - 1] == '/')
			path[--n] = '\0';
		cfg->upstream[p] = strdup(url);
		n = strlen(cfg->upstream[p]);
		while (n > 8 && cfg->upstream[p][n - 1] == '/')
			cfg->upstream[p][--n] = '\0';
		cfg->up_host[p] = strdup(host);
		cfg->up_port[p] = strtol(port, NULL, 10);
		cfg->up_path[p] = strdup(path);
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(user);
	curl_free(query);
	curl_free(frag);
	curl_url_cleanup(u);
	return r;
}

/* "upstreams": {PROVIDER: URL or {"url", "organization", "project", "betas"}} */
static int cfg_upstream(lcd_gateway_cfg_t *cfg, const char *pk, json_t *u, const char *source, lc_error_t **err)
{
	int p = lcd_provider_parse(pk);
	if (p < 0)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.upstreams.%s: unknown provider (anthropic, openai)",
				    source, pk);
	json_t *url = json_is_object(u) ? json_object_get(u, "url") : u;
	if (!json_is_string(url))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "config %s: gateway.upstreams.%s: expected an https:// base URL, or {\"url\": URL, "
				    "\"organization\", \"project\", \"betas\"}", source, pk);
	if (cfg_upstream_url(cfg, p, json_string_value(url), source, pk, err) < 0)
		return -1;
	for (size_t i = 0; default_betas[i] && p == LCD_PROV_ANTHROPIC; i++)
		lc_strv_push(&cfg->betas[p], default_betas[i]);
	if (!json_is_object(u))
		return 0;
	const char *k;
	json_t *v;
	json_object_foreach(u, k, v) {
		bool openai_only = !strcmp(k, "organization") || !strcmp(k, "project");
		if (!strcmp(k, "url"))
			continue;
		if (openai_only && p == LCD_PROV_OPENAI) {
			const char *s = json_string_value(v);
			bool ok = s && s[0] && strlen(s) <= 128;
			for (const char *c = s; ok && *c; c++)
				ok = isalnum((unsigned char)*c) || *c == '-' || *c == '_';
			if (!ok)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "config %s: gateway.upstreams.%s.%s: expected an id (letters, digits, - and _)",
						    source, pk, k);
			*(k[0] == 'o' ? &cfg->organization[p] : &cfg->project[p]) = strdup(s);
		} else if (!strcmp(k, "betas") && p == LCD_PROV_ANTHROPIC) {
			lc_strv_free(cfg->betas[p]);
			cfg->betas[p] = NULL;
			size_t i;
			json_t *b;
			if (!json_is_array(v))
				goto bad_betas;
			json_array_foreach(v, i, b) {
				const char *s = json_string_value(b);
				if (!s || !s[0] || strlen(s) > 100 || strpbrk(s, ", \t\r\n"))
					goto bad_betas;
				lc_strv_push(&cfg->betas[p], s);
			}
		} else {
			return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.upstreams.%s.%s: unknown key (%s)",
					    source, pk, k, p == LCD_PROV_OPENAI ? "url, organization, project" : "url, betas");
		}
	}
	return 0;
bad_betas:
	return lc_error_set(err, LC_EXIT_INVALID, 0,
			    "config %s: gateway.upstreams.%s.betas: expected a list of anthropic-beta names", source, pk);
}

int lcd_gateway_config(json_t *v, const char *source, lcd_gateway_cfg_t *cfg, lc_error_t **err)
{
	lcd_gateway_cfg_clear(cfg);
	cfg->set = true;
	cfg->port = LCD_GATEWAY_PORT;
	cfg->connect_timeout = 10;
	cfg->idle_timeout = 600;
	cfg->timeout = 3600;
	cfg->max_body = 32LL << 20;
	cfg->max_inflight = 4;
	cfg->header_timeout = 30;
	cfg->memory_max = 512LL << 20;
	if (!json_is_object(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway: expected an object {\"upstreams\": {...}}",
				    source);
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) {
		long long n;
		if (!strcmp(k, "upstreams")) {
			if (!json_is_object(x) || json_object_size(x) == 0)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "config %s: gateway.upstreams: expected {\"anthropic\": URL, \"openai\": URL}", source);
			const char *pk;
			json_t *u;
			json_object_foreach(x, pk, u)
				if (cfg_upstream(cfg, pk, u, source, err) < 0)
					return -1;
		} else if (!strcmp(k, "ca_file")) {
			if (!json_is_string(x) || json_string_value(x)[0] != '/')
				return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.ca_file: expected an absolute path",
						    source);
			if (access(json_string_value(x), R_OK) < 0)
				return lc_error_set(err, LC_EXIT_NOENT, errno, "config %s: gateway.ca_file %s", source,
						    json_string_value(x));
			cfg->ca_file = strdup(json_string_value(x));
		} else if (!strcmp(k, "port")) {
			if (cfg_int(x, source, k, 1, 65535, &n, err) < 0)
				return -1;
			cfg->port = (int)n;
		} else if (!strcmp(k, "connect_timeout") || !strcmp(k, "idle_timeout") || !strcmp(k, "timeout") ||
			   !strcmp(k, "header_timeout")) {
			if (cfg_int(x, source, k, 1, 86400, &n, err) < 0)
				return -1;
			*(k[0] == 'c' ? &cfg->connect_timeout : k[0] == 'i' ? &cfg->idle_timeout
				: k[0] == 'h' ? &cfg->header_timeout : &cfg->timeout) = (int)n;
		} else if (!strcmp(k, "max_body")) {
			if (cfg_int(x, source, k, 1024, 1LL << 30, &n, err) < 0)
				return -1;
			cfg->max_body = n;
		} else if (!strcmp(k, "max_inflight")) {
			if (cfg_int(x, source, k, 1, 256, &n, err) < 0)
				return -1;
			cfg->max_inflight = (int)n;
		} else if (!strcmp(k, "memory_max")) {
			if (cfg_int(x, source, k, 1LL << 20, 1LL << 40, &n, err) < 0)
				return -1;
			cfg->memory_max = n;
		} else {
			return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.%s: unknown key", source, k);
		}
	}
	bool any = false;
	for (int i = 0; i < LCD_PROV_N; i++)
		any |= cfg->upstream[i] != NULL;
	if (!any)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: gateway.upstreams: required", source);
	if (cfg->max_body > cfg->memory_max)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "config %s: gateway.max_body (%lld) is more than gateway.memory_max (%lld)", source,
				    cfg->max_body, cfg->memory_max);
	return 0;
}

/* ---- tokens ---- */

/* A fresh token for id: its hash in lcd.db, the token itself in memory
 * only (it goes into each exec's environment). */
static int token_issue(gw_t *gw, const char *id, lc_error_t **err)
{
	char tok[TOKEN_LEN + 1], hex[65];
	memcpy(tok, TOKEN_PREFIX, sizeof(TOKEN_PREFIX) - 1);
	lc_random_hex(tok + sizeof(TOKEN_PREFIX) - 1, TOKEN_HEX);
	tok[TOKEN_LEN] = '\0';
	lcd_token_hash(tok, hex);
	if (lcd_db_exec(gw->lcd->db, err, "UPDATE gateway_sandboxes SET token_hash = ? WHERE sandbox_id = ?", "ss", hex,
			id) < 0) {
		explicit_bzero(tok, sizeof(tok));
		return -1;
	}
	pthread_mutex_lock(&gw->lock);
	token_mem_t *t = NULL;
	for (size_t i = 0; i < gw->n_toks && !t; i++)
		if (!strcmp(gw->toks[i].id, id))
			t = &gw->toks[i];
	if (!t) {
		gw->toks = realloc(gw->toks, (gw->n_toks + 1) * sizeof(*gw->toks));
		t = &gw->toks[gw->n_toks++];
		snprintf(t->id, sizeof(t->id), "%s", id);
	}
	memcpy(t->token, tok, sizeof(tok));
	pthread_mutex_unlock(&gw->lock);
	explicit_bzero(tok, sizeof(tok));
	return 0;
}

static void token_drop(gw_t *gw, const char *id)
{
	pthread_mutex_lock(&gw->lock);
	for (size_t i = 0; i < gw->n_toks; i++) {
		if (strcmp(gw->toks[i].id, id))
			continue;
		explicit_bzero(&gw->toks[i], sizeof(gw->toks[i]));
		gw->toks[i] = gw->toks[--gw->n_toks];
		break;
	}
	pthread_mutex_unlock(&gw->lock);
}

/* ---- listeners ---- */

static void wake(gw_t *gw)
{
	(void)!write(gw->wake[1], "x", 1);
}

/* A listening socket on addr (IPv4 or IPv6) and port, or -1 with errno.
 * IP_FREEBIND: a task's sandbox gets its listener before lc_run() puts
 * the address on its veth (lcd_gateway_task_begin). */
static int listen_on(const char *addr, int port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		len = sizeof(*s6);
	} else {
		errno = EINVAL;
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    (ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Listen on the host side of the sandbox's veth, its IPv4 address and its
 * IPv6 one when the lease has one (the lease may have changed since: a
 * stopped sandbox gets a new one when started).  addr: the IPv4 one. */
static int listener_sync(gw_t *gw, const char *id, char addr[INET_ADDRSTRLEN], lc_error_t **err)
{
	lc_lease_t lease;
	lc_error_t *e = NULL;
	int r = lc_netpool_read(id, &lease, &e);
	lc_error_free(e);
	if (r != 0)
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s has no network address (is it running?)", id);
	snprintf(addr, INET_ADDRSTRLEN, "%s", lease.gw4);
	const char *want[2] = { lease.gw4, lease.gw6[0] ? lease.gw6 : NULL };
	bool have[2] = { false, false };
	pthread_mutex_lock(&gw->lock);
	for (size_t i = 0; i < gw->n_ls; i++) {
		listener_t *l = &gw->ls[i];
		int k = !strcmp(l->addr, want[0]) ? 0 : want[1] && !strcmp(l->addr, want[1]) ? 1 : -1;
		if (k >= 0) {
			have[k] = true;
			snprintf(l->owner, sizeof(l->owner), "%s", id);
			l->dead = false;
		} else if (!strcmp(l->owner, id)) {
			l->dead = true; /* its old address */
			l->owner[0] = '\0';
		}
	}
	r = 0;
	for (int k = 0; k < 2 && r == 0; k++) {
		if (!want[k] || have[k])
			continue;
		int fd = listen_on(want[k], gw->cfg.port);
		if (fd < 0) {
			r = lc_error_set(err, LC_EXIT_RUNTIME, errno, "model gateway: cannot listen on %s%s%s:%d for sandbox %s",
					 k ? "[" : "", want[k], k ? "]" : "", gw->cfg.port, id);
			break;
		}
		gw->ls = realloc(gw->ls, (gw->n_ls + 1) * sizeof(*gw->ls));
		listener_t *l = &gw->ls[gw->n_ls++];
		memset(l, 0, sizeof(*l));
		snprintf(l->addr, sizeof(l->addr), "%s", want[k]);
		snprintf(l->owner, sizeof(l->owner), "%s", id);
		l->fd = fd;
	}
	pthread_mutex_unlock(&gw->lock);
	wake(gw);
	return r;
}

static void listener_drop(gw_t *gw, const char *id)
{
	pthread_mutex_lock(&gw->lock);
	for (size_t i = 0; i < gw->n_ls; i++)
		if (!strcmp(gw->ls[i].owner, id)) {
			gw->ls[i].dead = true;
			gw->ls[i].owner[0] = '\0';
		}
	pthread_mutex_unlock(&gw->lock);
	wake(gw);
}

/* The only thread that closes listeners: whatever it polls stays open. */
static void *acceptor(void *arg)
{
	gw_t *gw = arg;
	struct pollfd *pfd = NULL;
	for (;;) {
		pthread_mutex_lock(&gw->lock);
		if (gw->stopping) {
			pthread_mutex_unlock(&gw->lock);
			break;
		}
		size_t n = 0;
		for (size_t i = 0; i < gw->n_ls;) {
			if (gw->ls[i].dead) {
				close(gw->ls[i].fd);
				gw->ls[i] = gw->ls[--gw->n_ls];
				continue;
			}
			i++;
		}
		pfd = realloc(pfd, (gw->n_ls + 1) * sizeof(*pfd));
		pfd[n++] = (struct pollfd){ .fd = gw->wake[0], .events = POLLIN };
		for (size_t i = 0; i < gw->n_ls; i++)
			pfd[n++] = (struct pollfd){ .fd = gw->ls[i].fd, .events = POLLIN };
		pthread_mutex_unlock(&gw->lock);
		if (poll(pfd, n, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			char b[64];
			while (read(gw->wake[0], b, sizeof(b)) > 0)
				;
		}
		for (size_t i = 1; i < n; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			for (;;) {
				struct sockaddr_storage ss;
				socklen_t sl = sizeof(ss);
				int c = accept4(pfd[i].fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
				if (c < 0)
					break;
				/* an SSE event, and a stream's last chunk, go out at
				 * once: without this, Nagle holds a small write until
				 * the sandbox's delayed ACK (40 ms) */
				int one = 1;
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				/* libmicrohttpd owns (and closes) it from here; a
				 * sandbox past its share retries as often as it
				 * likes: the log is the refusals' (rate-limited) */
				if (MHD_add_connection(gw->d, c, (struct sockaddr *)&ss, sl) != MHD_YES) {
					char a[INET6_ADDRSTRLEN] = "?";
					if (ss.ss_family == AF_INET)
						inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a, sizeof(a));
					else if (ss.ss_family == AF_INET6)
						inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a, sizeof(a));
					refusal_log(gw, "a connection from %s was refused (%d at most from one address, %d in all)",
						    a, PER_IP_LIMIT, CONN_LIMIT);
				}
			}
		}
	}
	free(pfd);
	return NULL;
}

/* ---- answers of the gateway's own, in the provider's shape ---- */

static const char *err_type(int p, unsigned status)
{
	if (p == LCD_PROV_ANTHROPIC) {
		switch (status) {
		case 401: return "authentication_error";
		case 402: return "billing_error";
		case 403: return "permission_error";
		case 404: return "not_found_error";
		case 413: return "request_too_large";
		case 400: case 405: return "invalid_request_error";
		default: return "api_error";
		}
	}
	switch (status) {
	case 402: return "insufficient_quota";
	case 400: case 401: case 403: case 404: case 405: case 413: return "invalid_request_error";
	default: return "server_error";
	}
}

static const char *err_code(unsigned status)
{
	switch (status) {
	case 401: return "invalid_api_key";
	case 402: return "budget_exceeded";
	case 404: return "unknown_url";
	case 413: return "request_too_large";
	case 504: return "timeout";
	default: return NULL;
	}
}

static json_t *err_body(int p, unsigned status, const char *msg)
{
	if (p == LCD_PROV_ANTHROPIC)
		return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", err_type(p, status), "message", msg);
	const char *code = err_code(status);
	return json_pack("{s:{s:s, s:s, s:n, s:o}}", "error", "message", msg, "type", err_type(p, status), "param", "code",
			 code ? json_string(code) : json_null());
}

static enum MHD_Result gw_reply(struct MHD_Connection *c, int p, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum MHD_Result gw_reply(struct MHD_Connection *c, int p, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	_cleanup_json_ json_t *b = err_body(p, status, msg);
	char *text = json_dumps(b, JSON_COMPACT);
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "x-lcd-gateway", "refused");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The error event that ends a stream, in the shape the API streams. */
static char *err_event(const gw_req_t *r, unsigned status, const char *msg)
{
	_cleanup_json_ json_t *b = err_body(r->prov, status, msg);
	_cleanup_free_ char *text = NULL;
	if (r->api == LCD_GW_RESPONSES) {
		json_t *e = json_object_get(b, "error");
		_cleanup_json_ json_t *ev = json_pack("{s:s, s:{s:s, s:{s:O, s:O}}}", "type", "response.failed", "response",
						      "status", "failed", "error", "code", json_object_get(e, "type"),
						      "message", json_object_get(e, "message"));
		text = json_dumps(ev, JSON_COMPACT);
		return lc_strdup_printf("event: response.failed\ndata: %s\n\n", text);
	}
	text = json_dumps(b, JSON_COMPACT);
	if (r->prov == LCD_PROV_OPENAI)
		return lc_strdup_printf("data: %s\n\n", text);
	return lc_strdup_printf("event: error\ndata: %s\n\n", text);
}

/* ---- budgets ---- */

static long long day_start(long long now)
{
	return now / DAY_MS * DAY_MS;
}

static const char *scope_key(int scope, const gw_req_t *r)
{
	return scope == LCD_LEDGER_SANDBOX ? r->sandbox : scope == LCD_LEDGER_TASK ? r->task : r->app;
}

/* Spent in a scope: the ledger, plus, for each request under way, what
 * its usage has been reported to cost so far (with_reserved: or its
 * reservation, if that is more) (gw->lock held). */
static long long spent(gw_t *gw, int scope, const gw_req_t *r, bool with_reserved)
{
	const char *key = scope_key(scope, r);
	lc_error_t *e = NULL;
	long long s = lcd_ledger_spend(gw->lcd->db, scope, key, scope == LCD_LEDGER_APP ? day_start(lc_wall_ms()) : 0, &e);
	if (s < 0) {
		lcd_log("model gateway: cannot read the ledger: %s", e ? e->msg : "?");
		lc_error_free(e);
		s = 0;
	}
	for (const gw_req_t *q = gw->inflight; q; q = q->next)
		if (!strcmp(scope_key(scope, q), key))
			s += with_reserved && q->resv.pusd > q->partial ? q->resv.pusd : q->partial;
	return s;
}

static long long budget_of(const gw_req_t *r, int scope)
{
	return scope == LCD_LEDGER_SANDBOX ? r->b_sandbox : !scope_key(scope, r)[0] ? 0 : scope == LCD_LEDGER_TASK ? r->b_task : r->b_app;
}

static const char *const scope_names[] = { "sandbox", "task", "app (daily)" };

/* The scope whose budget r's spend has reached, or NULL (gw->lock held);
 * extra: pico-dollars to count on top. */
static const char *exhausted(gw_t *gw, const gw_req_t *r, long long extra)
{
	for (int scope = LCD_LEDGER_SANDBOX; scope <= LCD_LEDGER_APP; scope++) {
		long long b = budget_of(r, scope);
		if (b && spent(gw, scope, r, false) + extra >= b)
			return scope_names[scope];
	}
	return NULL;
}

/* The scope whose budget has no room for r's reservation beside what is
 * spent and what the requests under way may still spend, or NULL (gw->lock
 * held).  Checked and r listed under one hold of the lock: two requests
 * can never both take the same room. */
static const char *no_room(gw_t *gw, const gw_req_t *r)
{
	for (int scope = LCD_LEDGER_SANDBOX; scope <= LCD_LEDGER_APP; scope++) {
		long long b = budget_of(r, scope);
		if (b && spent(gw, scope, r, true) + r->resv.pusd > b)
			return scope_names[scope];
	}
	return NULL;
}

/* End every request under way whose budget has run out, but exempt (its
 * last usage report is what ran it out: that answer is complete).  With
 * reservations this is the backstop for an answer whose reported usage is
 * more than its reservation (an input the body's size did not bound). */
static void enforce(gw_t *gw, const gw_req_t *exempt)
{
	pthread_mutex_lock(&gw->lock);
	for (gw_req_t *q = gw->inflight; q; q = q->next) {
		if (q == exempt || q->cut || !q->billable)
			continue;
		const char *scope = exhausted(gw, q, 0);
		if (!scope)
			continue;
		q->cut_scope = scope;
		__atomic_store_n(&q->cut, 1, __ATOMIC_SEQ_CST);
		if (q->multi)
			curl_multi_wakeup(q->multi);
	}
	pthread_mutex_unlock(&gw->lock);
}

static const char *budget_text(const gw_req_t *r, const char *scope, char *buf, size_t len)
{
	long long b = !strcmp(scope, "sandbox") ? r->b_sandbox : !strcmp(scope, "task") ? r->b_task : r->b_app;
	snprintf(buf, len, "the %s's model budget of $%.6g is spent (lcd model gateway)", scope,
		 (double)b / (double)LCD_PUSD_PER_USD);
	return buf;
}

static const char *room_text(const gw_req_t *r, const char *scope, char *buf, size_t len)
{
	long long b = !strcmp(scope, "sandbox") ? r->b_sandbox : !strcmp(scope, "task") ? r->b_task : r->b_app;
	snprintf(buf, len,
		 "the %s's model budget of $%.6g has no room for this request, which may cost up to $%.6g (%lld input "
		 "tokens at most, %lld output tokens: lower max_tokens) (lcd model gateway)",
		 scope, (double)b / (double)LCD_PUSD_PER_USD, (double)r->resv.pusd / (double)LCD_PUSD_PER_USD,
		 r->resv.in_tokens, r->resv.out_tokens);
	return buf;
}

/* ---- refusals: counted per sandbox and reason, logged sparingly ---- */

/* A line in lcd's log for a refusal: LOG_BURST at once, then one a second;
 * what was left out is counted in the next line. */
static void refusal_log(gw_t *gw, const char *fmt, ...)
{
	long long now = lc_now_ms(), dropped = 0;
	pthread_mutex_lock(&gw->lock);
	long long refill = (now - gw->log_at) / 1000;
	if (refill > 0) {
		gw->log_tokens = gw->log_tokens + refill > LOG_BURST ? LOG_BURST : gw->log_tokens + refill;
		gw->log_at += refill * 1000;
	}
	bool say = gw->log_tokens > 0;
	if (say) {
		gw->log_tokens--;
		dropped = gw->log_dropped;
		gw->log_dropped = 0;
	} else {
		gw->log_dropped++;
	}
	pthread_mutex_unlock(&gw->lock);
	if (!say)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dropped)
		lcd_log("model gateway: %s (and %lld refusals not logged before it)", msg, dropped);
	else
		lcd_log("model gateway: %s", msg);
}

/* An identified sandbox's request refused before it reached the provider:
 * one counter per sandbox and reason (gateway_refusals), not a ledger row. */
static void refusal(gw_t *gw, const gw_req_t *r, const char *reason, int status, const char *why)
{
	lc_error_t *e = NULL;
	if (lcd_db_exec(gw->lcd->db, &e,
			"INSERT INTO gateway_refusals (sandbox_id, reason, task_id, app, count, first_at, last_at) "
			"VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (sandbox_id, reason) DO UPDATE SET "
			"count = gateway_refusals.count + 1, last_at = excluded.last_at",
			"ssssii", r->sandbox, reason, r->task[0] ? r->task : NULL, r->app[0] ? r->app : NULL, lc_wall_ms(),
			lc_wall_ms()) < 0) {
		lcd_log("model gateway: sandbox %s: cannot count a refusal: %s", r->sandbox, e->msg);
		lc_error_free(e);
	}
	refusal_log(gw, "sandbox %s%s%s %s %s model %s: %d refused (%s): %s", r->sandbox, r->task[0] ? " task " : "",
		    r->task, lcd_provider_name(r->prov), r->path ? r->path : "-", r->model ? r->model : "-", status, reason,
		    why);
}

/* ---- memory ---- */

/* Take n bytes of the gateway's memory if they fit under memory_max. */
static bool mem_take(gw_t *gw, long long n)
{
	long long cur = __atomic_load_n(&gw->mem, __ATOMIC_SEQ_CST);
	do {
		if (cur + n > gw->cfg.memory_max)
			return false;
	} while (!__atomic_compare_exchange_n(&gw->mem, &cur, cur + n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return true;
}

/* What r holds now (its body, its answer's buffer, its meter) against
 * what it is charged: the difference is charged, whether or not it fits
 * (what is in flight is never broken; its buffers are bounded). */
static void mem_sync(gw_req_t *r)
{
	long long body = (long long)r->len > r->body_reserved ? (long long)r->len : r->body_reserved;
	long long want = body + (long long)r->buf_len + (r->meter ? (long long)lcd_meter_held(r->meter) : 0);
	__atomic_add_fetch(&r->gw->mem, want - r->held, __ATOMIC_SEQ_CST);
	r->held = want;
}

/* ---- a request ---- */

static void req_unref(gw_req_t *r);

/* What a finished request costs.  Whether the provider refused it is
 * told by the provider's own status (r->status), never by the one the
 * sandbox got: a request that went out and that the gateway ended before
 * the provider's answer came (a timeout, a cut, lcd stopping, a
 * connection broken after it was sent) was the provider's to run and to
 * bill, and costs what an answer cut short does. */
static long long bill(const gw_req_t *r, const lcd_usage_t *u)
{
	gw_t *gw = r->gw;
	if (!r->billable || !r->sent_upstream)
		return 0; /* nothing reached the provider, or nothing it bills */
	if (r->status >= 300)
		return u->seen ? lcd_gw_cost(r->prov, u, NULL, &r->price, gw->prices) : 0; /* the provider's refusal */
	if (u->final)
		return lcd_gw_cost(r->prov, u, &r->resv, &r->price, gw->prices);
	/* cut, left, unmetered, broken off, too big to read, no answer
	 * before the gateway ended it: the most it may have cost */
	return lcd_gw_cost_incomplete(r->prov, &r->resv, u, &r->price, gw->prices);
}

/* Record the request in the ledger (once), take it off the list. */
static void finalize(gw_req_t *r, const char *outcome, int status)
{
	if (r->finalized)
		return;
	r->finalized = true;
	gw_t *gw = r->gw;
	lcd_usage_t u = { 0 };
	if (r->meter)
		u = *lcd_meter_usage(r->meter);
	long long cost = bill(r, &u);
	long long now = lc_wall_ms();
	pthread_mutex_lock(&gw->lock);
	if (r->listed) {
		gw_req_t **pp = &gw->inflight;
		while (*pp && *pp != r)
			pp = &(*pp)->next;
		if (*pp)
			*pp = r->next;
		r->listed = false;
	}
	bool over = !strcmp(outcome, "cut") || (r->billable && exhausted(gw, r, cost));
	if (r->billable) {
		lcd_ledger_entry_t e = { .sandbox = r->sandbox, .task = r->task[0] ? r->task : NULL,
					 .app = r->app[0] ? r->app : NULL, .provider = lcd_provider_name(r->prov),
					 .model = r->model, .path = r->path, .outcome = outcome, .status = status, .usage = u,
					 .cost = cost, .reserved = r->resv.pusd, .budget_exceeded = over, .at = now,
					 .ms = now - r->started };
		lc_error_t *e2 = NULL;
		if (lcd_ledger_add(gw->lcd->db, &e, &e2) < 0) {
			lcd_log("model gateway: sandbox %s: cannot record a request in the ledger: %s", r->sandbox, e2->msg);
			lc_error_free(e2);
		}
		LC_FAULT("lcd-ledger-written");
	}
	pthread_mutex_unlock(&gw->lock);
	lcd_log("model gateway: sandbox %s%s%s %s %s model %s: %d %s, tokens in %lld out %lld cache read %lld write %lld, "
		"$%.6f, %lld ms",
		r->sandbox, r->task[0] ? " task " : "", r->task, lcd_provider_name(r->prov), r->path ? r->path : "-",
		r->model ? r->model : "-", status, outcome, u.input, u.output, u.cache_read, u.cache_write,
		(double)cost / (double)LCD_PUSD_PER_USD, now - r->started);
	if (over)
		enforce(gw, NULL);
}

static void abort_upstream(gw_req_t *r)
{
	gw_t *gw = r->gw;
	/* detached under the lock: enforce() wakes multi handles it sees */
	pthread_mutex_lock(&gw->lock);
	CURLM *m = r->multi;
	r->multi = NULL;
	pthread_mutex_unlock(&gw->lock);
	if (r->easy) {
		if (m)
			curl_multi_remove_handle(m, r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}
	curl_url_cleanup(r->url);
	r->url = NULL;
	if (m) {
		/* the multi handle keeps the connections of answers that ended well */
		pthread_mutex_lock(&gw->lock);
		bool keep = r->done && r->result == CURLE_OK && gw->n_pool < MULTI_POOL && !gw->stopping;
		if (keep)
			gw->pool[gw->n_pool++] = m;
		pthread_mutex_unlock(&gw->lock);
		if (!keep)
			curl_multi_cleanup(m);
	}
	if (r->hdrs) {
		for (struct curl_slist *s = r->hdrs; s; s = s->next)
			explicit_bzero(s->data, strlen(s->data)); /* the key */
		curl_slist_free_all(r->hdrs);
		r->hdrs = NULL;
	}
}

static int cut_of(gw_req_t *r)
{
	return __atomic_load_n(&r->cut, __ATOMIC_SEQ_CST);
}

/* Take r onto gw->open if its sandbox has fewer than max_inflight
 * requests under way; false if not. */
static bool open_add(gw_t *gw, gw_req_t *r)
{
	pthread_mutex_lock(&gw->lock);
	int mine = 0;
	for (const gw_req_t *q = gw->open; q; q = q->next_open)
		mine += !strcmp(q->sandbox, r->sandbox);
	bool ok = mine < gw->cfg.max_inflight;
	if (ok) {
		r->next_open = gw->open;
		gw->open = r;
		r->open = true;
	}
	pthread_mutex_unlock(&gw->lock);
	return ok;
}

static void open_remove(gw_req_t *r)
{
	gw_t *gw = r->gw;
	pthread_mutex_lock(&gw->lock);
	for (gw_req_t **pp = &gw->open; *pp; pp = &(*pp)->next_open)
		if (*pp == r) {
			*pp = r->next_open;
			break;
		}
	r->open = false;
	pthread_mutex_unlock(&gw->lock);
}

static void req_free(gw_req_t *r)
{
	if (!r->finalized && r->listed)
		finalize(r, "client_gone", 0);
	if (r->open)
		open_remove(r);
	abort_upstream(r);
	lcd_meter_free(r->meter);
	lc_strv_free(r->resp_hdrs);
	__atomic_sub_fetch(&r->gw->mem, r->held, __ATOMIC_SEQ_CST);
	free(r->uri);
	free(r->path);
	free(r->query);
	free(r->secret);
	free(r->body);
	free(r->model);
	free(r->buf);
	free(r);
}

static void req_unref(gw_req_t *r)
{
	if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_SEQ_CST) == 0)
		req_free(r);
}

/* Bytes that may go to the sandbox now: an SSE stream up to its last
 * complete event (so that a cut can end it cleanly), anything else as it
 * comes. */
static size_t sendable(const gw_req_t *r)
{
	size_t avail = r->buf_len - r->buf_off;
	if (r->flush_all || !r->sse || !r->meter)
		return avail;
	unsigned long long b = lcd_meter_boundary(r->meter);
	if (avail > SSE_HOLD_MAX)
		return avail;
	size_t n = b > r->sent ? (size_t)(b - r->sent) : 0;
	return n < avail ? n : avail;
}

static void on_usage(gw_req_t *r)
{
	gw_t *gw = r->gw;
	const lcd_usage_t *u = lcd_meter_usage(r->meter);
	pthread_mutex_lock(&gw->lock);
	r->partial = r->billable ? lcd_usage_cost(u, &r->price) : 0;
	pthread_mutex_unlock(&gw->lock);
	if (r->billable)
		enforce(gw, u->final ? r : NULL);
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	gw_req_t *r = ud;
	size_t len = size * n;
	r->last_rx = lc_now_ms();
	if (!r->meter)
		r->meter = lcd_meter_new(r->prov, r->sse);
	if (r->buf_off > 0 && (r->buf_off == r->buf_len || r->buf_off > 65536)) {
		memmove(r->buf, r->buf + r->buf_off, r->buf_len - r->buf_off);
		r->buf_len -= r->buf_off;
		r->buf_off = 0;
	}
	char *b = realloc(r->buf, r->buf_len + len);
	if (!b)
		return 0;
	r->buf = b;
	memcpy(r->buf + r->buf_len, p, len);
	r->buf_len += len;
	r->fed += len;
	/* a JSON answer is kept whole to read its usage: not past lcd's
	 * memory (it is then unmetered, and billed at its reservation) */
	if (!r->sse && __atomic_load_n(&r->gw->mem, __ATOMIC_SEQ_CST) + (long long)len > r->gw->cfg.memory_max)
		lcd_meter_drop_body(r->meter);
	if (lcd_meter_feed(r->meter, p, len))
		on_usage(r);
	mem_sync(r);
	LC_FAULT("lcd-gateway-streaming");
	return len;
}

static bool header_dropped(const char *name, size_t n)
{
	static const char *const drop[] = { "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
		"trailer", "transfer-encoding", "upgrade", "content-length", "content-encoding", "set-cookie", "date",
		"server", "alt-svc", "strict-transport-security", NULL };
	for (size_t i = 0; drop[i]; i++)
		if (strlen(drop[i]) == n && !strncasecmp(name, drop[i], n))
			return true;
	return false;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	gw_req_t *r = ud;
	size_t len = size * n;
	r->last_rx = lc_now_ms();
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', len);
		r->status = sp ? atoi(sp + 1) : 0;
		lc_strv_free(r->resp_hdrs);
		r->resp_hdrs = NULL;
		r->sse = false;
		return len;
	}
	size_t l = len;
	while (l && (p[l - 1] == '\r' || p[l - 1] == '\n'))
		l--;
	if (l == 0) {
		if (r->status >= 200)
			r->headers_done = true;
		return len;
	}
	const char *colon = memchr(p, ':', l);
	if (!colon || header_dropped(p, (size_t)(colon - p)))
		return len;
	_cleanup_free_ char *name = strndup(p, (size_t)(colon - p));
	const char *v = colon + 1;
	while (v < p + l && (*v == ' ' || *v == '\t'))
		v++;
	_cleanup_free_ char *value = strndup(v, (size_t)(p + l - v));
	if (!strcasecmp(name, "content-type") && !strncasecmp(value, "text/event-stream", 17))
		r->sse = true;
	lc_strv_push(&r->resp_hdrs, name);
	lc_strv_push(&r->resp_hdrs, value);
	return len;
}

static void drain_done(gw_req_t *r)
{
	CURLMsg *m;
	int left;
	while (r->multi && (m = curl_multi_info_read(r->multi, &left)))
		if (m->msg == CURLMSG_DONE) {
			r->done = true;
			r->result = m->data.result;
		}
}

/* Move the transfer on: wait up to ms for the provider (or for a wakeup:
 * a cut), and notice a sandbox that hung up. */
static void pump(gw_req_t *r, int ms)
{
	int running;
	if (!r->multi)
		return;
	curl_multi_perform(r->multi, &running);
	drain_done(r);
	if (sendable(r) || r->done || cut_of(r))
		return;
	struct curl_waitfd w = { .fd = r->client_fd, .events = CURL_WAIT_POLLIN };
	unsigned nw = r->watch_client && r->client_fd >= 0 ? 1 : 0;
	curl_multi_poll(r->multi, nw ? &w : NULL, nw, ms, NULL);
	if (nw && (w.revents & CURL_WAIT_POLLIN)) {
		char c;
		ssize_t k = recv(r->client_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			r->client_gone = true;
		else if (k > 0)
			r->watch_client = false; /* a next request already: not a hangup */
	}
	curl_multi_perform(r->multi, &running);
	drain_done(r);
}

static bool idle_over(const gw_req_t *r)
{
	return lc_now_ms() - r->last_rx > (long long)r->gw->cfg.idle_timeout * 1000;
}

/* Replace what is held back of an unfinished event with text. */
static void end_with(gw_req_t *r, const char *text)
{
	if (r->sse && r->meter) {
		unsigned long long b = lcd_meter_boundary(r->meter);
		if (b >= r->sent && b - r->sent <= r->buf_len - r->buf_off)
			r->buf_len = r->buf_off + (size_t)(b - r->sent);
	}
	if (text && r->sse) {
		size_t n = strlen(text);
		r->buf = realloc(r->buf, r->buf_len + n);
		memcpy(r->buf + r->buf_len, text, n);
		r->buf_len += n;
	} else {
		r->end_error = true; /* a body cut short: the connection is closed */
	}
	r->flush_all = true;
}

/* Whatever ends the answer: a hangup, a cut, the provider done or silent. */
static bool check_end(gw_req_t *r)
{
	char msg[256];
	if (r->client_gone) {
		/* an answer the provider had already given whole is billed as
		 * it reports, though its client did not wait for it */
		if (r->done && r->result == CURLE_OK && r->meter && lcd_meter_end(r->meter))
			on_usage(r);
		abort_upstream(r);
		finalize(r, "client_gone", r->status);
		r->ended = r->end_error = true;
		return true;
	}
	int cut = cut_of(r);
	if (cut) {
		abort_upstream(r);
		if (cut == 1)
			budget_text(r, r->cut_scope, msg, sizeof(msg));
		else
			snprintf(msg, sizeof(msg), "lcd is stopping");
		_cleanup_free_ char *ev = err_event(r, cut == 1 ? 402 : 503, msg);
		end_with(r, ev);
		finalize(r, cut == 1 ? "cut" : "upstream_error", r->status);
		r->ended = true;
		return true;
	}
	if (r->done) {
		if (r->meter && lcd_meter_end(r->meter))
			on_usage(r);
		if (r->result == CURLE_OK) {
			r->flush_all = true;
			/* a billable answer without its final usage (not JSON, too
			 * big to read, a stream whose usage never came) costs its
			 * reservation: said so, and counted */
			bool unmetered = r->billable && r->status >= 200 && r->status < 300 &&
					 (!r->meter || !lcd_meter_usage(r->meter)->final);
			finalize(r, unmetered ? "unmetered" : "ok", r->status);
		} else {
			snprintf(msg, sizeof(msg), "the provider's answer broke off: %s", curl_easy_strerror(r->result));
			_cleanup_free_ char *ev = err_event(r, 502, msg);
			end_with(r, ev);
			finalize(r, r->result == CURLE_OPERATION_TIMEDOUT ? "timeout" : "upstream_error", r->status);
		}
		abort_upstream(r);
		r->ended = true;
		return true;
	}
	if (idle_over(r)) {
		abort_upstream(r);
		snprintf(msg, sizeof(msg), "the provider sent nothing for %d s", r->gw->cfg.idle_timeout);
		_cleanup_free_ char *ev = err_event(r, 504, msg);
		end_with(r, ev);
		finalize(r, "timeout", r->status);
		r->ended = true;
		return true;
	}
	return false;
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	gw_req_t *r = cls;
	(void)pos;
	for (;;) {
		size_t n = sendable(r);
		if (n) {
			if (n > max)
				n = max;
			memcpy(out, r->buf + r->buf_off, n);
			r->buf_off += n;
			r->sent += n;
			/* the provider is read only once what it sent has gone
			 * on: time a slow sandbox takes is not the provider's
			 * silence (idle_timeout) */
			r->last_rx = lc_now_ms();
			return (ssize_t)n;
		}
		if (r->ended)
			return r->end_error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		if (check_end(r))
			continue;
		pump(r, 1000);
	}
}

static void reader_free(void *cls)
{
	gw_req_t *r = cls;
	if (!r->finalized)
		finalize(r, "client_gone", r->status);
	abort_upstream(r);
	req_unref(r);
}

/* ---- serving ---- */

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)c;
	gw_req_t *r = lc_xmalloc0(sizeof(*r));
	r->gw = cls;
	r->refs = 1;
	r->uri = strdup(uri);
	r->client_fd = -1;
	r->started = lc_wall_ms();
	return r;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	req_unref(*con_cls);
	*con_cls = NULL;
}

static bool route(gw_req_t *r, const char *method, const char *url, unsigned *status)
{
	static const struct {
		int p;
		const char *m, *path;
		lcd_gw_api_t api;
		bool prefix;
	} routes[] = {
		{ LCD_PROV_ANTHROPIC, "POST", "/v1/messages", LCD_GW_MESSAGES, false },
		{ LCD_PROV_ANTHROPIC, "POST", "/v1/messages/count_tokens", LCD_GW_COUNT, false },
		{ LCD_PROV_ANTHROPIC, "GET", "/v1/models", LCD_GW_MODELS, true },
		{ LCD_PROV_OPENAI, "POST", "/v1/chat/completions", LCD_GW_CHAT, false },
		{ LCD_PROV_OPENAI, "POST", "/v1/responses", LCD_GW_RESPONSES, false },
		{ LCD_PROV_OPENAI, "GET", "/v1/models", LCD_GW_MODELS, true },
	};
	bool path_known = false;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t n = strlen(routes[i].path);
		if (routes[i].p != r->prov)
			continue;
		bool match = !strcmp(url, routes[i].path) ||
			     (routes[i].prefix && !strncmp(url, routes[i].path, n) && url[n] == '/' && url[n + 1] &&
			      !strchr(url + n + 1, '/'));
		if (!match)
			continue;
		path_known = true;
		if (!strcmp(method, routes[i].m)) {
			r->api = routes[i].api;
			r->billable = r->api == LCD_GW_MESSAGES || r->api == LCD_GW_CHAT || r->api == LCD_GW_RESPONSES;
			return true;
		}
	}
	*status = path_known ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND;
	return false;
}

static const char *bearer(struct MHD_Connection *c)
{
	const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
	if (k)
		return k;
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (a && !strncasecmp(a, "Bearer ", 7))
		return a + 7;
	return NULL;
}

static bool addr_is(const struct sockaddr *sa, const char *want)
{
	char s[INET6_ADDRSTRLEN] = "";
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, s, sizeof(s));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, s, sizeof(s));
	return want[0] && !strcmp(s, want);
}

/* Who sends this: a gateway sandbox's token, from that sandbox, on its
 * own listener.  *why is the reason for a refusal (for the log). */
static bool identify(gw_t *gw, gw_req_t *r, struct MHD_Connection *c, const char **why)
{
	const char *tok = bearer(c);
	*why = "no token (x-api-key or Authorization: Bearer)";
	if (!tok)
		return false;
	*why = "not a live gateway token";
	if (strlen(tok) != TOKEN_LEN || strncmp(tok, TOKEN_PREFIX, sizeof(TOKEN_PREFIX) - 1))
		return false;
	char hex[65];
	lcd_token_hash(tok, hex);
	_cleanup_json_ json_t *rows = lcd_db_query(
		gw->lcd->db, NULL,
		"SELECT sandbox_id, provider, secret, budget_pusd, task_id, app, function FROM gateway_sandboxes WHERE token_hash = ?",
		"s", hex);
	json_t *row = json_array_get(rows, 0);
	if (!row)
		return false;
#define COPY(dst, key) snprintf(dst, sizeof(dst), "%s", lc_json_str(row, key) ?: "")
	COPY(r->sandbox, "sandbox_id");
	COPY(r->task, "task_id");
	COPY(r->app, "app");
	COPY(r->function, "function");
#undef COPY
	r->prov = lcd_provider_parse(lc_json_str(row, "provider"));
	r->secret = strdup(lc_json_str(row, "secret"));
	r->b_sandbox = json_integer_value(json_object_get(row, "budget_pusd"));
	/* the token must come from its own sandbox, to that sandbox's listener */
	*why = "the token of another sandbox";
	lc_lease_t lease;
	lc_error_t *e = NULL;
	int lr = lc_netpool_read(r->sandbox, &lease, &e);
	lc_error_free(e);
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct sockaddr_storage local;
	socklen_t ll = sizeof(local);
	if (lr != 0 || !ci || !fi || getsockname(fi->connect_fd, (struct sockaddr *)&local, &ll) < 0 ||
	    !((addr_is(ci->client_addr, lease.addr4) && addr_is((struct sockaddr *)&local, lease.gw4)) ||
	      (addr_is(ci->client_addr, lease.addr6) && addr_is((struct sockaddr *)&local, lease.gw6))))
		return false;
	r->client_fd = fi->connect_fd;
	if (r->prov < 0 || !gw->cfg.upstream[r->prov]) {
		*why = "a provider lcd.json has no upstream for";
		return false;
	}
	if (r->app[0]) {
		lcd_app_t *app = lcd_app_get(gw->lcd, r->app);
		const lcd_function_t *fn = app ? lcd_app_function(app, r->function) : NULL;
		r->b_task = fn ? fn->budget_pusd : 0;
		r->b_app = app ? app->daily_budget_pusd : 0;
		lcd_app_unref(app);
	}
	return true;
}

/* A header that would go on (copy_header) with a value that may not:
 * its name in *bad. */
struct hdr_check {
	int prov;
	const char *bad;
};

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	struct hdr_check *h = cls;
	bool passes = lcd_gw_header_passes(h->prov, k) || (h->prov == LCD_PROV_ANTHROPIC && !strcasecmp(k, "anthropic-beta"));
	if (passes && v && !lcd_gw_header_value_ok(v)) {
		h->bad = k;
		return MHD_NO;
	}
	return MHD_YES;
}

static enum MHD_Result begin(gw_t *gw, gw_req_t *r, struct MHD_Connection *c, const char *url, const char *method)
{
	const char *why;
	r->answered = true; /* until it is admitted */
	if (lcd_gw_target_parse(r->uri, &r->path, &r->query, &why) < 0) {
		refusal_log(gw, "refused %s %s: %s", method, r->uri, why);
		int p = strncmp(url, "/v1/chat/", 9) && strncmp(url, "/v1/responses", 13) ? LCD_PROV_ANTHROPIC : LCD_PROV_OPENAI;
		return gw_reply(c, p, MHD_HTTP_BAD_REQUEST, "%s (lcd model gateway)", why);
	}
	if (!identify(gw, r, c, &why)) {
		refusal_log(gw, "refused %s %s from sandbox %s: %s", method, r->path, r->sandbox[0] ? r->sandbox : "-", why);
		int p = r->prov;
		if (p < 0)
			p = strncmp(r->path, "/v1/chat/", 9) && strncmp(r->path, "/v1/responses", 13) ? LCD_PROV_ANTHROPIC
												 : LCD_PROV_OPENAI;
		return gw_reply(c, p, MHD_HTTP_UNAUTHORIZED, "invalid or expired token (lcd model gateway)");
	}
	unsigned st;
	if (!route(r, method, r->path, &st)) {
		refusal(gw, r, "not_served", (int)st, method);
		return gw_reply(c, r->prov, st, "%s %s is not served by the lcd model gateway (%s)", method, r->path,
				lcd_provider_name(r->prov));
	}
	struct hdr_check hc = { r->prov, NULL };
	MHD_get_connection_values(c, MHD_HEADER_KIND, check_header, &hc);
	if (hc.bad) {
		refusal(gw, r, "bad_header", 400, hc.bad);
		return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST,
				"the value of header %s has a control character (lcd model gateway)", hc.bad);
	}
	/* A request is under way from its headers: the body it promised (its
	 * memory is taken below) or is sending counts against its sandbox's
	 * max_inflight, so that one sandbox cannot hold lcd's gateway memory
	 * with bodies it never sends. */
	if (!open_add(gw, r)) {
		char msg[256];
		snprintf(msg, sizeof(msg),
			 "the sandbox has %d requests under way, as many as the gateway takes at once (gateway.max_inflight)",
			 gw->cfg.max_inflight);
		refusal(gw, r, "busy", 429, msg);
		return gw_reply(c, r->prov, MHD_HTTP_TOO_MANY_REQUESTS, "%s (lcd model gateway)", msg);
	}
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
	if (len > (unsigned long long)gw->cfg.max_body) {
		refusal(gw, r, "too_big", 413, "body over max_body");
		return gw_reply(c, r->prov, 413, "request body too large (the gateway takes %lld bytes)", gw->cfg.max_body);
	}
	/* the body's memory is taken now, whole: past memory_max, new
	 * requests wait outside; the ones in flight are not touched */
	if (!mem_take(gw, (long long)len)) {
		refusal(gw, r, "memory", 503, "memory_max");
		return gw_reply(c, r->prov, MHD_HTTP_SERVICE_UNAVAILABLE,
				"the gateway holds as many requests as its memory allows (gateway.memory_max): try again");
	}
	r->body_reserved = r->held = (long long)len;
	r->answered = false;
	return MHD_YES;
}

/* The headers of the sandbox's request that go on: the allow list, with
 * anthropic-beta cut to the betas lcd.json passes. */
struct hdr_ctx {
	gw_t *gw;
	int prov;
	struct curl_slist **list;
};

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	struct hdr_ctx *h = cls;
	_cleanup_free_ char *betas = NULL;
	if (h->prov == LCD_PROV_ANTHROPIC && !strcasecmp(k, "anthropic-beta") && v) {
		betas = lcd_gw_betas(v, h->gw->cfg.betas[h->prov]);
		if (!betas)
			return MHD_YES;
		v = betas;
	} else if (!lcd_gw_header_passes(h->prov, k)) {
		return MHD_YES;
	}
	_cleanup_free_ char *line = lc_strdup_printf("%s: %s", k, v ? v : "");
	*h->list = curl_slist_append(*h->list, line);
	return MHD_YES;
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ud)
{
	(void)h;
	(void)a;
	pthread_mutex_lock(&((gw_t *)ud)->share_lock[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ud)
{
	(void)h;
	pthread_mutex_unlock(&((gw_t *)ud)->share_lock[d]);
}

/* Whether url (as libcurl reads it) has the upstream's scheme, host and
 * port, and no user. */
static bool url_is_upstream(const gw_t *gw, int prov, CURLU *u)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL;
	bool ok = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && !strcmp(scheme, "https") &&
		  curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && !strcasecmp(host, gw->cfg.up_host[prov]) &&
		  curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
		  strtol(port, NULL, 10) == gw->cfg.up_port[prov] && curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_OK;
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(user);
	return ok;
}

/* libcurl has connected and is about to send the request, the key in
 * its headers: the last look at where it goes.  The URL it uses (after
 * anything it did to it) and the port it reached must be the upstream's. */
static int prereq(void *ud, char *peer_ip, char *local_ip, int peer_port, int local_port)
{
	gw_req_t *r = ud;
	(void)local_ip;
	(void)local_port;
	char *eff = NULL;
	CURLU *u = curl_url();
	bool ok = u && curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff &&
		  curl_url_set(u, CURLUPART_URL, eff, 0) == CURLUE_OK && url_is_upstream(r->gw, r->prov, u) &&
		  peer_port == r->gw->cfg.up_port[r->prov];
	curl_url_cleanup(u);
	if (!ok) {
		lcd_log("model gateway: sandbox %s: a request to %s (%s port %d) is not to the upstream %s: not sent",
			r->sandbox, eff ? eff : "?", peer_ip ? peer_ip : "?", peer_port, r->gw->cfg.upstream[r->prov]);
		return CURL_PREREQFUNC_ABORT;
	}
	r->sent_upstream = true;
	return CURL_PREREQFUNC_OK;
}

/* The provider's URL for r: the upstream's, with the upstream's base path
 * and r's validated path and query set as parts (never a string joined
 * to the upstream's), checked to name the upstream's host. */
static CURLU *upstream_url(gw_t *gw, gw_req_t *r)
{
	CURLU *u = curl_url();
	_cleanup_free_ char *path = lc_strdup_printf("%s%s", gw->cfg.up_path[r->prov], r->path);
	if (!u || curl_url_set(u, CURLUPART_URL, gw->cfg.upstream[r->prov], 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_PATH, path, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_QUERY, r->query, 0) != CURLUE_OK || !url_is_upstream(gw, r->prov, u)) {
		curl_url_cleanup(u);
		return NULL;
	}
	return u;
}

static int start_upstream(gw_t *gw, gw_req_t *r, struct MHD_Connection *c, const char *key, lc_error_t **err)
{
	r->easy = curl_easy_init();
	pthread_mutex_lock(&gw->lock);
	r->multi = gw->n_pool ? gw->pool[--gw->n_pool] : NULL;
	pthread_mutex_unlock(&gw->lock);
	if (!r->multi)
		r->multi = curl_multi_init();
	if (!r->easy || !r->multi)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot start a request to the provider");
	r->url = upstream_url(gw, r);
	if (!r->url)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "the URL of %s on %s does not name the upstream's host",
				    r->path, gw->cfg.upstream[r->prov]);
	struct hdr_ctx h = { gw, r->prov, &r->hdrs };
	MHD_get_connection_values(c, MHD_HEADER_KIND, copy_header, &h);
	r->hdrs = curl_slist_append(r->hdrs, "Expect:");
	r->hdrs = curl_slist_append(r->hdrs, "Accept-Encoding: identity");
	for (int k = 0; k < 2; k++) {
		const char *v = k ? gw->cfg.project[r->prov] : gw->cfg.organization[r->prov];
		_cleanup_free_ char *line = v ? lc_strdup_printf("%s: %s", k ? "OpenAI-Project" : "OpenAI-Organization", v) : NULL;
		if (line)
			r->hdrs = curl_slist_append(r->hdrs, line);
	}
	_cleanup_free_ char *auth = r->prov == LCD_PROV_ANTHROPIC ? lc_strdup_printf("x-api-key: %s", key)
								 : lc_strdup_printf("Authorization: Bearer %s", key);
	r->hdrs = curl_slist_append(r->hdrs, auth);
	explicit_bzero(auth, strlen(auth));
	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_CURLU, r->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_DISALLOW_USERNAME_IN_URL, 1L);
	curl_easy_setopt(e, CURLOPT_PROXY, ""); /* no proxy from lcd's environment sees the key */
	curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, prereq);
	curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (gw->cfg.ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, gw->cfg.ca_file);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)gw->cfg.connect_timeout);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)gw->cfg.timeout);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_SHARE, gw->share);
	if (r->api == LCD_GW_MODELS) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
	}
	curl_multi_add_handle(r->multi, e);
	r->last_rx = lc_now_ms();
	r->watch_client = true;
	return 0;
}

/* The body is in: check it, price it, take its room in the budgets, then
 * forward it and answer with what comes. */
static enum MHD_Result forward(gw_t *gw, gw_req_t *r, struct MHD_Connection *c)
{
	char msg[512];
	/* a request with a live token and its whole body is served to its
	 * end, however slow the provider (idle_timeout): until then the short
	 * timeout holds, for a body that stops coming as for headers */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(gw->cfg.idle_timeout + 30));
	if (r->too_big) {
		refusal(gw, r, "too_big", 413, "body over max_body");
		return gw_reply(c, r->prov, 413, "request body too large (the gateway takes %lld bytes)", gw->cfg.max_body);
	}
	if (r->mem_over) {
		refusal(gw, r, "memory", 503, "memory_max");
		return gw_reply(c, r->prov, MHD_HTTP_SERVICE_UNAVAILABLE,
				"the gateway holds as many requests as its memory allows (gateway.memory_max): try again");
	}
	if (r->api != LCD_GW_MODELS) {
		json_error_t je;
		/* duplicate members are refused: the provider must read the
		 * model and the limits the gateway priced, not another copy */
		_cleanup_json_ json_t *b = r->len ? json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &je) : NULL;
		if (!json_is_object(b)) {
			refusal(gw, r, "bad_body", 400, "not a JSON object");
			return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST, "the request body is not a JSON object%s%s",
					r->len ? ": " : "", r->len ? je.text : "");
		}
		const char *model = lc_json_str(b, "model");
		if (!model) {
			refusal(gw, r, "bad_body", 400, "no model");
			return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST, "model: required (the gateway prices by it)");
		}
		r->model = strdup(model);
		if (!lcd_model_name_ok(model)) {
			refusal(gw, r, "bad_body", 400, "not a model name");
			return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST,
					"model: not a model name (letters, digits and ._-:/@, at most 200)");
		}
		r->stream_req = json_is_true(json_object_get(b, "stream"));
		if (r->billable) {
			_cleanup_free_ char *why = NULL;
			if (!lcd_prices_find(gw->prices, r->prov, model, &r->price)) {
				refusal(gw, r, "unpriced", 400, "model");
				return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST,
						"model %s has no price in the gateway's table (model-prices.json): refused", model);
			}
			if (lcd_gw_reserve(r->prov, r->api, b, r->len, &r->price, gw->prices, &r->resv, &why) < 0) {
				refusal(gw, r, "unpriced", 400, why);
				return gw_reply(c, r->prov, MHD_HTTP_BAD_REQUEST, "%s (lcd model gateway)", why);
			}
			if (r->api == LCD_GW_CHAT && r->stream_req) {
				/* metering is not optional: ask for the usage chunk */
				json_t *so = json_object_get(b, "stream_options");
				if (!json_is_object(so)) {
					so = json_object();
					json_object_set_new(b, "stream_options", so);
				}
				json_object_set_new(so, "include_usage", json_true());
			}
			/* what goes to the provider is what was priced, as the
			 * gateway read it */
			free(r->body);
			r->body = json_dumps(b, JSON_COMPACT);
			r->len = strlen(r->body);
			mem_sync(r);
		}
	}
	pthread_mutex_lock(&gw->lock);
	const char *scope = NULL, *why = NULL;
	const char *spent_out = NULL; /* a scope whose budget is spent already */
	if (gw->stopping)
		why = "stopping";
	else if (r->billable && (scope = no_room(gw, r))) {
		why = "budget";
		spent_out = exhausted(gw, r, 0);
	}
	if (!why) {
		r->next = gw->inflight;
		gw->inflight = r;
		r->listed = true;
	}
	pthread_mutex_unlock(&gw->lock);
	if (why && !strcmp(why, "stopping"))
		return gw_reply(c, r->prov, MHD_HTTP_SERVICE_UNAVAILABLE, "lcd is stopping");
	if (why) {
		if (spent_out)
			budget_text(r, spent_out, msg, sizeof(msg));
		else
			room_text(r, scope, msg, sizeof(msg));
		refusal(gw, r, "budget", 402, msg);
		return gw_reply(c, r->prov, 402, "%s", msg);
	}
	lc_error_t *err = NULL;
	_cleanup_free_ char *key = lcd_store_secret_get(gw->lcd->db, r->secret, &err);
	if (!key) {
		lcd_log("model gateway: sandbox %s: secret %s is not set%s%s", r->sandbox, r->secret, err ? ": " : "",
			err ? err->msg : "");
		lc_error_free(err);
		finalize(r, "upstream_error", 503);
		return gw_reply(c, r->prov, MHD_HTTP_SERVICE_UNAVAILABLE,
				"the gateway has no key for this sandbox (secret %s is not set in lcd)", r->secret);
	}
	int rc = start_upstream(gw, r, c, key, &err);
	explicit_bzero(key, strlen(key));
	if (rc < 0) {
		lcd_log("model gateway: sandbox %s: %s", r->sandbox, err->msg);
		lc_error_free(err);
		finalize(r, "upstream_error", 502);
		return gw_reply(c, r->prov, MHD_HTTP_BAD_GATEWAY, "the gateway cannot reach the provider");
	}
	/* the provider's status and headers first */
	while (!r->headers_done && !r->done && !cut_of(r) && !r->client_gone && !idle_over(r))
		pump(r, 1000);
	if (!r->headers_done) {
		unsigned st = 502;
		const char *outcome = "upstream_error";
		if (r->client_gone) {
			abort_upstream(r);
			finalize(r, "client_gone", 0);
			return MHD_NO;
		}
		int cut = cut_of(r);
		if (cut) {
			st = cut == 1 ? 402 : 503;
			outcome = cut == 1 ? "cut" : "upstream_error";
			if (cut == 1)
				budget_text(r, r->cut_scope, msg, sizeof(msg));
			else
				snprintf(msg, sizeof(msg), "lcd is stopping");
		} else if (!r->done || r->result == CURLE_OPERATION_TIMEDOUT) {
			st = 504;
			outcome = "timeout";
			snprintf(msg, sizeof(msg), "the provider did not answer within %d s", gw->cfg.idle_timeout);
		} else {
			snprintf(msg, sizeof(msg), "the provider cannot be reached: %s", curl_easy_strerror(r->result));
		}
		abort_upstream(r);
		finalize(r, outcome, (int)st);
		return gw_reply(c, r->prov, st, "%s", msg);
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, reader, r, reader_free);
	if (!resp) {
		abort_upstream(r);
		finalize(r, "upstream_error", 500);
		return MHD_NO;
	}
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_SEQ_CST);
	for (size_t i = 0; r->resp_hdrs && r->resp_hdrs[i] && r->resp_hdrs[i + 1]; i += 2)
		MHD_add_response_header(resp, r->resp_hdrs[i], r->resp_hdrs[i + 1]);
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	gw_t *gw = cls;
	gw_req_t *r = *con_cls;
	(void)version;
	if (!r)
		return MHD_NO;
	if (!r->begun) {
		r->begun = true;
		r->prov = -1;
		return begin(gw, r, c, url, method);
	}
	if (r->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t add = *upload_size;
		*upload_size = 0;
		if (r->too_big || r->mem_over)
			return MHD_YES;
		if (r->len + add > (size_t)gw->cfg.max_body) {
			r->too_big = true;
		} else {
			/* a body without Content-Length takes its memory as it comes */
			long long have = (long long)r->len > r->body_reserved ? (long long)r->len : r->body_reserved;
			long long extra = (long long)(r->len + add) - have;
			if (extra > 0 && !mem_take(gw, extra)) {
				r->mem_over = true;
			} else {
				if (extra > 0)
					r->held += extra;
				r->body = realloc(r->body, r->len + add + 1);
				memcpy(r->body + r->len, upload, add);
				r->len += add;
				r->body[r->len] = '\0';
				return MHD_YES;
			}
		}
		free(r->body);
		r->body = NULL;
		r->len = 0;
		mem_sync(r);
		return MHD_YES;
	}
	r->answered = true;
	return forward(gw, r, c);
}

/* ---- lcd's side ---- */

static gw_t *gw_of(lcd_t *lcd)
{
	return lcd->gateway;
}

int lcd_gateway_parse(lcd_t *lcd, const lcd_caller_t *who, json_t *v, json_t *secrets, lcd_gw_spec_t *out,
		      lc_net_spec_t *net, lc_error_t **err)
{
	static const char *const keys[] = { "provider", "secret", "budget_usd", NULL };
	gw_t *gw = gw_of(lcd);
	memset(out, 0, sizeof(*out));
	if (!json_is_object(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "model_gateway: expected {\"provider\": \"anthropic\", \"secret\": NAME, \"budget_usd\": N}");
	if (lcd_check_keys(v, "model_gateway", keys, err) < 0)
		return -1;
	if (!gw)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "model_gateway: this lcd serves no model gateway (lcd.json: \"gateway\": {\"upstreams\": …})");
	const char *prov = lc_json_str(v, "provider");
	out->provider = lcd_provider_parse(prov);
	if (out->provider < 0)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "model_gateway.provider: expected \"anthropic\" or \"openai\"");
	if (!gw->cfg.upstream[out->provider])
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "model_gateway.provider: lcd.json's gateway.upstreams has no %s", prov);
	const char *secret = lc_json_str(v, "secret");
	if (!secret)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "model_gateway.secret: required (the secret holding the key)");
	if (lcd_secret_usable(lcd, who, secret, "model_gateway.secret", err) < 0)
		return -1;
	size_t i;
	json_t *s;
	json_array_foreach(secrets, i, s)
		if (!strcmp(json_string_value(s), secret))
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "model_gateway.secret: %s is also in secrets: the key itself would enter the sandbox",
					    secret);
	json_t *b = json_object_get(v, "budget_usd");
	if (b && lcd_usd_parse(b, "model_gateway.budget_usd", 1e6, &out->budget_pusd, err) < 0)
		return -1;
	out->secret = strdup(secret);
	/* the gateway's port on the host side of any sandbox of the pool: lcd
	 * listens only on this sandbox's own */
	_cleanup_free_ char *rule = lc_strdup_printf("%s:%d", gw->pool4, gw->cfg.port);
	_cleanup_free_ char *rule6 = gw->pool6[0] ? lc_strdup_printf("[%s]:%d", gw->pool6, gw->cfg.port) : NULL;
	if (net->mode == LC_NET_NONE)
		net->mode = LC_NET_ALLOW;
	if (lc_net_spec_add_allow(net, rule, err) < 0 || (rule6 && lc_net_spec_add_allow(net, rule6, err) < 0) ||
	    lc_net_validate(net, err) < 0)
		return lc_error_wrap(err, "model_gateway");
	return 0;
}

void lcd_gw_spec_clear(lcd_gw_spec_t *g)
{
	free(g->secret);
	memset(g, 0, sizeof(*g));
}

int lcd_gateway_attach(lcd_t *lcd, const lcd_caller_t *who, const char *id, const lcd_gw_spec_t *g, lc_error_t **err)
{
	gw_t *gw = gw_of(lcd);
	if (!gw)
		return lc_error_set(err, LC_EXIT_STATE, 0, "model gateway: not running");
	char pending[65];
	lc_random_hex(pending, 64); /* replaced by the token's hash at once */
	if (lcd_db_exec(lcd->db, err,
			"INSERT INTO gateway_sandboxes (sandbox_id, token_hash, provider, secret, budget_pusd, task_id, app, "
			"function, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			"ssssisssi", id, pending, lcd_provider_name(g->provider), g->secret, g->budget_pusd,
			who->operator ? NULL : who->task, who->operator ? NULL : who->app,
			who->operator ? NULL : who->function, lc_wall_ms()) < 0)
		return lc_error_wrap(err, "sandbox %s: model gateway", id);
	char addr[INET_ADDRSTRLEN];
	if (token_issue(gw, id, err) < 0 || listener_sync(gw, id, addr, err) < 0)
		return -1;
	lcd_log("sandbox %s: model gateway %s on %s:%d (key from secret %s, budget %s%.6g)", id,
		lcd_provider_name(g->provider), addr, gw->cfg.port, g->secret, g->budget_pusd ? "$" : "none",
		g->budget_pusd ? (double)g->budget_pusd / (double)LCD_PUSD_PER_USD : 0.0);
	return 0;
}

void lcd_gateway_forget(lcd_t *lcd, const char *id)
{
	lcd_db_exec(lcd->db, NULL, "DELETE FROM gateway_sandboxes WHERE sandbox_id = ?", "s", id);
	gw_t *gw = gw_of(lcd);
	if (!gw)
		return;
	token_drop(gw, id);
	listener_drop(gw, id);
}

int lcd_gateway_env(lcd_t *lcd, const char *id, char ***env, lc_error_t **err)
{
	_cleanup_json_ json_t *rows =
		lcd_db_query(lcd->db, err, "SELECT provider FROM gateway_sandboxes WHERE sandbox_id = ?", "s", id);
	if (!rows)
		return -1;
	json_t *row = json_array_get(rows, 0);
	if (!row)
		return 0;
	gw_t *gw = gw_of(lcd);
	if (!gw)
		return lc_error_set(err, LC_EXIT_STATE, 0,
				    "sandbox %s uses the model gateway, which this lcd does not serve (lcd.json: gateway)", id);
	char addr[INET_ADDRSTRLEN];
	if (listener_sync(gw, id, addr, err) < 0)
		return -1;
	char tok[TOKEN_LEN + 1] = "";
	pthread_mutex_lock(&gw->lock);
	for (size_t i = 0; i < gw->n_toks; i++)
		if (!strcmp(gw->toks[i].id, id))
			memcpy(tok, gw->toks[i].token, sizeof(tok));
	pthread_mutex_unlock(&gw->lock);
	if (!tok[0])
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s: its model gateway token is gone", id);
	bool anth = !strcmp(lc_json_str(row, "provider"), "anthropic");
	_cleanup_free_ char *url = lc_strdup_printf("%s=http://%s:%d%s", anth ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL",
						    addr, gw->cfg.port, anth ? "" : "/v1");
	_cleanup_free_ char *key = lc_strdup_printf("%s=%s", anth ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY", tok);
	lc_strv_push(env, url);
	lc_strv_push(env, key);
	explicit_bzero(key, strlen(key));
	explicit_bzero(tok, sizeof(tok));
	return 0;
}

int lcd_gateway_check_app(lcd_t *lcd, const lcd_app_t *app, lc_error_t **err)
{
	const lcd_caller_t op = { .operator = true };
	for (size_t i = 0; i < app->n_functions; i++) {
		const lcd_function_t *f = &app->functions[i];
		if (!f->model_gateway)
			continue;
		if (!gw_of(lcd)) {
			_cleanup_free_ char *how = f->gateway_access_key
				? lc_strdup_printf("deploy with --config %s=direct", f->gateway_access_key)
				: strdup("set its \"access\" to \"direct\"");
			return lc_error_set(err, LC_EXIT_STATE, 0,
					    "functions.%s.model_gateway: this lcd serves no model gateway: configure "
					    "\"gateway\" in lcd.json, or %s", f->name, how);
		}
		lc_net_spec_t net = { 0 };
		lcd_gw_spec_t g;
		int r = lcd_gateway_parse(lcd, &op, f->model_gateway, NULL, &g, &net, err);
		lcd_gw_spec_clear(&g);
		lc_net_spec_clear(&net);
		if (r < 0)
			return lc_error_wrap(err, "functions.%s", f->name);
	}
	return 0;
}

int lcd_gateway_task_begin(lcd_t *lcd, const lcd_caller_t *task, const lcd_function_t *fn, const char *sandbox_id,
			   lc_spec_t *spec, lc_error_t **err)
{
	const lcd_caller_t op = { .operator = true }; /* the manifest's, checked at deploy: the operator's */
	lcd_gw_spec_t g;
	if (lcd_gateway_parse(lcd, &op, fn->model_gateway, NULL, &g, &spec->net, err) < 0) {
		lcd_gw_spec_clear(&g);
		return lc_error_wrap(err, "functions.%s", fn->name);
	}
	lc_net_pool_t pool;
	lc_lease_t lease;
	int r = -1;
	if (lc_netpool_config(&pool, err) < 0 ||
	    lc_netpool_alloc(sandbox_id, &pool, lc_net_mode_name(spec->net.mode), spec->net.policy, &lease, err) < 0)
		goto out;
	if (lcd_gateway_attach(lcd, task, sandbox_id, &g, err) < 0 || lcd_gateway_env(lcd, sandbox_id, &spec->secret_env, err) < 0) {
		lcd_gateway_task_end(lcd, sandbox_id);
		goto out;
	}
	r = 0;
out:
	lcd_gw_spec_clear(&g);
	return r;
}

void lcd_gateway_task_end(lcd_t *lcd, const char *sandbox_id)
{
	lcd_gateway_forget(lcd, sandbox_id);
	/* Only a lease lc_run() never used (it failed before the network's
	 * set-up): one it used is released by its teardown, the last step. */
	lc_lease_t lease;
	lc_error_t *e = NULL;
	if (lc_netpool_adopt(sandbox_id, &lease, NULL) == 0 && lc_netpool_release(sandbox_id, &e) < 0) {
		lcd_log("sandbox %s: %s", sandbox_id, e->msg);
		lc_error_free(e);
	}
}

json_t *lcd_gateway_sandbox_ids(lcd_t *lcd)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT sandbox_id FROM gateway_sandboxes", "");
	if (!rows)
		return NULL;
	json_t *ids = json_object();
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *id = lc_json_str(row, "sandbox_id");
		if (id)
			json_object_set_new(ids, id, json_true());
	}
	return ids;
}

void lcd_gateway_view(lcd_t *lcd, const char *id, json_t *view)
{
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, NULL, "SELECT provider, secret, budget_pusd FROM gateway_sandboxes WHERE sandbox_id = ?", "s", id);
	json_t *row = json_array_get(rows, 0);
	_cleanup_json_ json_t *sum = lcd_ledger_summary(lcd->db, LCD_LEDGER_SANDBOX, id, NULL);
	if (!row || !sum) {
		json_object_set_new(view, "model_gateway", json_null());
		return;
	}
	gw_t *gw = gw_of(lcd);
	json_t *g = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "provider", json_object_get(row, "provider"), "secret",
			      json_object_get(row, "secret"), "requests", json_object_get(sum, "requests"), "unmetered",
			      json_object_get(sum, "unmetered"), "refused", json_object_get(sum, "refused"), "budget_exceeded",
			      json_object_get(sum, "budget_exceeded"), "budget_usd", json_null());
	long long b = json_integer_value(json_object_get(row, "budget_pusd"));
	if (b)
		json_object_set_new(g, "budget_usd", lcd_usd_json(b));
	lc_lease_t lease;
	lc_error_t *e = NULL;
	if (gw && lc_netpool_read(id, &lease, &e) == 0)
		json_object_set_new(g, "base_url", json_sprintf("http://%s:%d%s", lease.gw4, gw->cfg.port,
								 strcmp(lc_json_str(row, "provider"), "openai") ? "" : "/v1"));
	lc_error_free(e);
	json_object_set_new(view, "model_gateway", g);
	json_object_set(view, "spend_usd", json_object_get(sum, "spend_usd"));
	json_object_set(view, "tokens", json_object_get(sum, "tokens"));
}

void lcd_gateway_task_view(lcd_t *lcd, json_t *task)
{
	const char *id = lc_json_str(task, "id");
	_cleanup_json_ json_t *sum = id ? lcd_ledger_summary(lcd->db, LCD_LEDGER_TASK, id, NULL) : NULL;
	if (!sum)
		return;
	json_object_set(task, "spend_usd", json_object_get(sum, "spend_usd"));
	json_object_set(task, "tokens", json_object_get(sum, "tokens"));
	json_object_set(task, "model_requests", json_object_get(sum, "requests"));
	json_object_set(task, "model_unmetered", json_object_get(sum, "unmetered"));
	json_object_set(task, "model_refused", json_object_get(sum, "refused"));
	json_object_set(task, "budget_exceeded", json_object_get(sum, "budget_exceeded"));
}

/* After a restart: records of sandboxes that are gone go; the others get a
 * new token (the old one was in memory only) and their listener. */
static void recover(gw_t *gw)
{
	lcd_t *lcd = gw->lcd;
	lcd_db_exec(lcd->db, NULL,
		    "DELETE FROM gateway_sandboxes WHERE sandbox_id NOT IN (SELECT id FROM sandboxes WHERE state = 'live')", "");
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL,
		"SELECT g.sandbox_id FROM gateway_sandboxes g JOIN sandboxes s ON s.id = g.sandbox_id "
		"WHERE s.node IS NULL OR s.node = ?", "s", lcd_db_node(lcd->db));
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *id = lc_json_str(row, "sandbox_id");
		lc_error_t *e = NULL;
		char addr[INET_ADDRSTRLEN];
		if (token_issue(gw, id, &e) < 0) {
			lcd_log("sandbox %s: model gateway: %s", id, e->msg);
			lc_error_free(e);
			continue;
		}
		if (listener_sync(gw, id, addr, &e) < 0) {
			/* stopped: it listens again when the sandbox is started */
			lc_error_free(e);
			continue;
		}
		lcd_log("sandbox %s: model gateway on %s:%d again, with a new token", id, addr, gw->cfg.port);
	}
}

int lcd_gateway_start(lcd_t *lcd, const lcd_gateway_cfg_t *cfg, lc_error_t **err)
{
	if (!cfg->set) {
		long long n = lcd_db_query_int(lcd->db, NULL, 0, "SELECT count(*) FROM gateway_sandboxes", "");
		if (n > 0)
			lcd_log("%lld sandbox(es) use the model gateway, but lcd.json has no \"gateway\": they cannot reach it", n);
		return 0;
	}
	gw_t *gw = lc_xmalloc0(sizeof(*gw));
	gw->lcd = lcd;
	gw->wake[0] = gw->wake[1] = -1;
	gw->cfg = *cfg;
#define DUP(f) gw->cfg.f = cfg->f ? strdup(cfg->f) : NULL
	for (int i = 0; i < LCD_PROV_N; i++) {
		DUP(upstream[i]);
		DUP(up_host[i]);
		DUP(up_path[i]);
		DUP(organization[i]);
		DUP(project[i]);
		gw->cfg.betas[i] = NULL;
		for (size_t k = 0; cfg->betas[i] && cfg->betas[i][k]; k++)
			lc_strv_push(&gw->cfg.betas[i], cfg->betas[i][k]);
	}
	DUP(ca_file);
#undef DUP
	pthread_mutex_init(&gw->lock, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&gw->share_lock[i], NULL);
	_cleanup_free_ char *src = NULL;
	lc_net_pool_t pool;
	if (lcd_prices_load(&gw->prices, &src, err) < 0 || lc_netpool_config(&pool, err) < 0)
		goto fail;
	snprintf(gw->pool4, sizeof(gw->pool4), "%s", pool.pool4);
	snprintf(gw->pool6, sizeof(gw->pool6), "%s", pool.pool6);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "model gateway: cannot initialise libcurl");
		goto fail;
	}
	gw->share = curl_share_init();
	curl_share_setopt(gw->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(gw->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(gw->share, CURLSHOPT_USERDATA, gw);
	curl_share_setopt(gw->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(gw->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	if (pipe2(gw->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "model gateway: pipe");
		goto fail;
	}
	gw->log_tokens = LOG_BURST;
	/* a connection has header_timeout to show a live token; then
	 * (begin) it is given the provider's idle_timeout and more */
	unsigned timeout = (unsigned)cfg->header_timeout;
	gw->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
					 MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
				 0, NULL, NULL, handler, gw, MHD_OPTION_URI_LOG_CALLBACK, uri_log, gw,
				 MHD_OPTION_NOTIFY_COMPLETED, completed, gw, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
				 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
				 timeout, MHD_OPTION_END);
	if (!gw->d) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "model gateway: cannot start its HTTP server");
		goto fail;
	}
	if (pthread_create(&gw->acceptor, NULL, acceptor, gw) != 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "model gateway: cannot start a thread");
		goto fail;
	}
	gw->acceptor_running = true;
	lcd->gateway = gw;
	recover(gw);
	char ups[512] = "";
	for (int i = 0; i < LCD_PROV_N; i++)
		if (gw->cfg.upstream[i])
			snprintf(ups + strlen(ups), sizeof(ups) - strlen(ups), "%s%s %s", ups[0] ? ", " : "",
				 lcd_provider_name(i), gw->cfg.upstream[i]);
	lcd_log("model gateway: port %d on each gateway sandbox's host address (pool %s); upstreams %s; prices %s",
		gw->cfg.port, gw->pool4, ups, src);
	return 0;
fail:
	lcd->gateway = gw;
	lcd_gateway_stop(lcd);
	return -1;
}

void lcd_gateway_stop(lcd_t *lcd)
{
	gw_t *gw = gw_of(lcd);
	if (!gw)
		return;
	pthread_mutex_lock(&gw->lock);
	gw->stopping = true;
	for (gw_req_t *q = gw->inflight; q; q = q->next) {
		if (!q->cut)
			__atomic_store_n(&q->cut, 2, __ATOMIC_SEQ_CST);
		if (q->multi)
			curl_multi_wakeup(q->multi);
	}
	pthread_mutex_unlock(&gw->lock);
	if (gw->wake[1] >= 0)
		wake(gw);
	if (gw->acceptor_running)
		pthread_join(gw->acceptor, NULL);
	if (gw->d)
		MHD_stop_daemon(gw->d);
	for (size_t i = 0; i < gw->n_ls; i++)
		close(gw->ls[i].fd);
	free(gw->ls);
	for (size_t i = 0; i < gw->n_toks; i++)
		explicit_bzero(&gw->toks[i], sizeof(gw->toks[i]));
	free(gw->toks);
	for (size_t i = 0; i < gw->n_pool; i++)
		curl_multi_cleanup(gw->pool[i]);
	if (gw->share)
		curl_share_cleanup(gw->share);
	if (gw->wake[0] >= 0)
		close(gw->wake[0]);
	if (gw->wake[1] >= 0)
		close(gw->wake[1]);
	lcd_prices_free(gw->prices);
	lcd_gateway_cfg_clear(&gw->cfg);
	lcd->gateway = NULL;
	free(gw);
}
