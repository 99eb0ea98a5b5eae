/* api.h — lcd's HTTP API (api.c: listeners, authentication, routing, the
 * task/app/map/secret routes) and what its route files share: the request
 * (call_t), and forward.c's requests that another node answers.  The
 * routes' own headers: routes_sandboxes.h, routes_devboxes.h, exec.h;
 * how every listener answers: reply.h. */
#ifndef LCD_API_H
#define LCD_API_H

#include <stdbool.h>
#include <microhttpd.h>

#include "access.h"
#include "lcd.h"
#include "reply.h"

typedef struct lcd_api lcd_api_t;
/* The API's listeners: the TCP one ("HOST:PORT", NULL: none) with its
 * bearer token, how long a connection may sit idle or half-sent (s) and
 * how many connections one address may hold; the unix sockets' idle
 * time, and the connections one task, one local uid may hold there. */
typedef struct lcd_api_cfg {
	const char *addr;
	const char *token;
	unsigned idle_timeout, per_ip;
	unsigned unix_idle_timeout;
	int task_connections, operator_connections;
	const char *cluster_token; /* the other nodes' (forward.h): the operator's on TCP too */
} lcd_api_cfg_t;
#define LCD_TCP_IDLE_TIMEOUT_S 60
#define LCD_TCP_PER_IP 64
#define LCD_UNIX_IDLE_TIMEOUT_S 30
#define LCD_TASK_CONNECTIONS 32
#define LCD_OPERATOR_CONNECTIONS 256
/* Serve the operator on an already listening unix socket fd, each task on
 * a socket of its own (lcd->task_socket_open; a token of that task is
 * needed there), and on cfg->addr (if set) requiring a bearer token. */
int lcd_api_start(lcd_t *lcd, int unix_fd, const lcd_api_cfg_t *cfg, lcd_api_t **out, lc_error_t **err);
void lcd_api_stop(lcd_api_t *api);
/* Add a piece of a request body (libmicrohttpd's upload, *n bytes; *n is
 * set to 0).  Past max bytes the body stops growing and *too_big is set. */
void lcd_body_append(char **body, size_t *len, bool *too_big, const char *piece, size_t *n, size_t max);
struct addrinfo;
/* A listener's "HOST:PORT" (or "[V6]:PORT"), numeric: freeaddrinfo() the
 * result; errors name `what` and the address. */
struct addrinfo *lcd_listen_addr(const char *addr, const char *what, lc_error_t **err);

typedef struct lcd_upload lcd_upload_t;

/* A request being received (libmicrohttpd's per-request pointer). */
typedef struct lcd_req {
	char *body;
	size_t len;
	bool too_big;
	lcd_caller_t who;      /* set once the headers are in */
	lcd_upload_t *upload;  /* PUT …/files: the body goes to the sandbox as it arrives */
	struct lcd_fwd *fwd;   /* a request another node answers (forward.c) */
	void (*on_done)(void *); /* run when the request completes (a devbox
				    connection MHD never handed over) */
	void *on_done_arg;
} lcd_req_t;

typedef struct {
	struct MHD_Connection *c;
	lcd_t *lcd;
	const char *method;
	char **seg;   /* path segments after /v1 */
	size_t n;
	const char *rest_key; /* for .../keys/KEY: everything after "keys/" */
	json_t *body; /* parsed body, when there is one */
	const lcd_caller_t *who;
	lcd_req_t *rq;
} call_t;

const char *api_query(call_t *call, const char *key);
/* A non-negative integer query parameter; false when malformed. */
bool api_query_int(call_t *call, const char *key, long long *out);
#define FAIL(call, code, ...) api_fail_status((call)->c, api_status_of(code), code, __VA_ARGS__)

/* ---- forward.c: one API over the cluster ---- */
/* Copy from -> to until EOF or an error (one way of a spliced
 * connection: a devbox's SSH, here or through another node). */
void lcd_pump(int from, int to);
typedef struct lcd_fwd lcd_fwd_t;
/* When the request's headers are in: does another node answer it (what
 * it is about is there)?  1: yes, *out the request with its head sent on:
 * pass its body with lcd_forward_data and answer with lcd_forward_end;
 * 0: answer here; -1: the node could not be reached, *r is the answer. */
int lcd_forward_begin(struct MHD_Connection *c, lcd_t *lcd, const lcd_caller_t *who, const char *method,
		       const char *url, lcd_fwd_t **out, enum MHD_Result *r);
void lcd_forward_data(lcd_fwd_t *f, const char *data, size_t len);
/* The body is all sent: answer with the node's answer, as it comes.  rq
 * gives f up here (rq->fwd is cleared when the answer takes it). */
enum MHD_Result lcd_forward_end(struct MHD_Connection *c, lcd_fwd_t *f, lcd_req_t *rq);
void lcd_forward_free(lcd_fwd_t *f);
/* POST /v1/sandboxes: true when placement puts the sandbox on another
 * node, *r its answer from there. */
bool lcd_forward_create(call_t *call, enum MHD_Result *r);

#endif
