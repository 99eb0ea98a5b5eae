/* e2b.h — lcd's E2B-compatible listener (lcd.json "e2b_listen"): one
 * libmicrohttpd daemon of its own that speaks, on one port, the E2B
 * control API (e2b.c: what the E2B SDKs call at E2B_API_URL) and envd,
 * the sandbox daemon they call at E2B_SANDBOX_URL (e2b_envd.c), which lcd
 * serves itself from the host through its runner: nothing runs in the
 * sandbox for it.  The second half of this header is what the two files
 * share. */
#ifndef LCD_HTTP_E2B_H
#define LCD_HTTP_E2B_H

#include <stdbool.h>
#include <microhttpd.h>

#include "access.h"
#include "e2bproto.h"
#include "lcd.h"

typedef struct lcd_e2b_cfg {
	const char *listen;     /* HOST:PORT */
	const char *token;      /* the operator's token: an X-API-Key that reaches every sandbox */
	const char *base_image; /* the image template "base" names (NULL: host) */
	unsigned idle_timeout;  /* s a connection may sit idle or half-sent */
	unsigned per_ip;        /* connections one address may hold */
} lcd_e2b_cfg_t;

#define LCD_E2B_PER_IP 512  /* the SDK keeps a connection per running command's stream */

typedef struct lcd_e2b lcd_e2b_t;
/* Listen; the key that sandboxes' access tokens derive from is read from
 * (or, the first time, made in) lcd's state directory. */
int lcd_e2b_start(lcd_t *lcd, const lcd_e2b_cfg_t *cfg, lcd_e2b_t **out, lc_error_t **err);
/* Stop listening; streams end, then the commands they ran are killed. */
void lcd_e2b_stop(lcd_e2b_t *srv);

/* ---- shared by e2b.c and e2b_envd.c ---- */

/* The envd version lcd answers as: the SDK turns features on by it
 * (default user 0.4.0, closeStdin 0.5.2, octet-stream uploads 0.5.7, file
 * metadata 0.6.2, watch events with their entry 0.6.3, watches on network
 * mounts 0.6.4). */
#define LCD_ENVD_VERSION "0.6.4"
#define LCD_ENVD_PORT "49983"

#define LCD_E2B_BASH_CACHE 256

struct lcd_e2b {
	lcd_t *lcd;
	struct MHD_Daemon *d;
	char *token;
	unsigned char key[LCD_E2B_KEY_LEN];
	char *base_image;
	unsigned idle_timeout;
	bool host_bash;               /* the host image has /bin/bash */
	pthread_mutex_t bash_lock;    /* guards bash[]: which sandboxes of images have it */
	struct {
		char id[LC_ID_LEN + 1];
		bool yes;
	} bash[LCD_E2B_BASH_CACHE];
};

typedef struct envd_upload envd_upload_t;

/* A request being received. */
typedef struct e2b_req {
	char *body;
	size_t len;
	bool too_big;
	bool envd;                   /* an envd call (else the control API) */
	lcd_caller_t who;            /* control API: who the API key is */
	char sandbox[LC_ID_LEN + 1]; /* envd: the sandbox it is about */
	envd_upload_t *upload;       /* envd POST /files under way */
} e2b_req_t;

/* body as JSON (NULL: an empty answer). */
enum MHD_Result e2b_reply(struct MHD_Connection *c, unsigned status, json_t *body);
/* An error in E2B's shape: {"code": status, "message"}. */
enum MHD_Result e2b_fail(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The HTTP status of an lcd error (404 unknown, 400 invalid, 409 state, …). */
unsigned e2b_status_of(const lc_error_t *err);

/* envd (e2b_envd.c).  Its paths; at the headers: the caller is checked
 * (the sandbox's access token, or a file URL's signature) and an upload
 * begins (false: answered already, *r the answer); the body's pieces;
 * the call itself; the request's end. */
bool lcd_envd_path(const char *url);
bool lcd_envd_begin(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, const char *url,
		    e2b_req_t *rq, enum MHD_Result *r);
void lcd_envd_upload_data(e2b_req_t *rq, const char *data, size_t n);
enum MHD_Result lcd_envd_handle(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, const char *url,
				e2b_req_t *rq);
void lcd_envd_req_free(e2b_req_t *rq);

#endif
