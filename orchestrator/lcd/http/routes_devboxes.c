/* api_devbox.c — the routes under /v1/devboxes and /v1/disks, and the
 * proxy: POST /v1/devboxes/NAME/connect with "Upgrade: lcrun-ssh" starts
 * the box if it is stopped, waits until its sshd answers, answers 101 and
 * from then on splices the connection to port 22 inside the box's network
 * namespace (nothing listens on the host).  Each such connection is a
 * session of the box (keep_warm counts from the last one's end).  The
 * operator's only: a task's token gets 403 (api.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "devbox.h"
#include "devbox_def.h"
#include "reply.h"
#include "routes_devboxes.h"
#include "util.h"

#define UPGRADE_PROTO "lcrun-ssh"

/* ---- the spliced connection ---- */

typedef struct splice {
	lcd_t *lcd;
	char name[64];
	int box;                             /* TCP to the box's port 22 */
	MHD_socket sock;                     /* the client's, after the 101 */
	struct MHD_UpgradeResponseHandle *urh;
	lcd_req_t *rq;
} splice_t;


static void *box_to_client(void *arg)
{
	splice_t *s = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	lcd_pump(s->box, s->sock);
	/* sshd closed: the client's side ends too */
	shutdown(s->sock, SHUT_RDWR);
	return NULL;
}

static void splice_free(void *arg)
{
	splice_t *s = arg;
	if (s->box >= 0)
		close(s->box);
	free(s);
}

/* MHD runs this in the connection's own thread (a thread per connection):
 * it may block for the whole session. */
static void upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
		     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)con_cls;
	splice_t *s = cls;
	s->rq->on_done = NULL; /* ours now */
	s->sock = sock;
	s->urh = urh;
	int fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl & ~O_NONBLOCK);
	lcd_devbox_session_begin(s->lcd, s->name, s->box);
	pthread_t th;
	bool back = pthread_create(&th, NULL, box_to_client, s) == 0;
	if (back && (!extra_in_size || lc_write_all(s->box, extra_in, extra_in_size) == 0))
		lcd_pump(sock, s->box);
	/* the client closed its side: sshd sees EOF and ends the session */
	shutdown(s->box, SHUT_WR);
	if (back)
		pthread_join(th, NULL);
	else
		shutdown(s->box, SHUT_RDWR);
	lcd_devbox_session_end(s->lcd, s->name, s->box);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	splice_free(s);
}

static enum MHD_Result h_connect(call_t *call, const char *name)
{
	const char *up = MHD_lookup_connection_value(call->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
	if (!up || strcasecmp(up, UPGRADE_PROTO))
		return FAIL(call, LC_EXIT_USAGE, "connect needs \"Upgrade: " UPGRADE_PROTO "\" (lcctl devbox NAME proxy speaks it)");
	lc_error_t *err = NULL;
	int fd = -1;
	_cleanup_free_ char *key = NULL;
	if (lcd_devbox_connect(call->lcd, name, &fd, &key, &err) < 0)
		return api_fail_err(call->c, err);
	splice_t *s = lc_xmalloc0(sizeof(*s));
	s->lcd = call->lcd;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->box = fd;
	s->rq = call->rq;
	/* Until MHD hands the socket over, the request owns the connection
	 * (a client gone before that: closed when the request completes). */
	call->rq->on_done = splice_free;
	call->rq->on_done_arg = s;
	struct MHD_Response *r = MHD_create_response_for_upgrade(upgraded, s);
	MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, UPGRADE_PROTO);
	MHD_add_response_header(r, "X-Lcrun-Host-Key", key);
	enum MHD_Result ret = MHD_queue_response(call->c, MHD_HTTP_SWITCHING_PROTOCOLS, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- the routes ---- */

/* out, or the error that making it left in *err */
static enum MHD_Result reply_or_fail(call_t *call, json_t *out, lc_error_t **err)
{
	if (!out)
		return api_fail_err(call->c, *err);
	return api_reply(call->c, MHD_HTTP_OK, out);
}

static enum MHD_Result h_devboxes(call_t *call)
{
	char **s = call->seg;
	const char *m = call->method;
	lc_error_t *err = NULL;
	json_t *out = NULL;
	if (call->n == 1) {
		if (!strcmp(m, "GET")) {
			json_t *l = lcd_devbox_list(call->lcd, &err);
			return reply_or_fail(call, l ? json_pack("{s:o}", "devboxes", l) : NULL, &err);
		}
		if (!strcmp(m, "POST")) {
			if (!call->body)
				return FAIL(call, LC_EXIT_INVALID, "request body: expected the devbox (JSON)");
			if (lcd_devbox_create(call->lcd, call->body, &out, &err) < 0)
				return api_fail_err(call->c, err);
			return api_reply(call->c, MHD_HTTP_CREATED, out);
		}
		return FAIL(call, LC_EXIT_USAGE, "%s not allowed on /v1/devboxes", m);
	}
	const char *name = s[1];
	if (!lcd_name_valid(name))
		return FAIL(call, LC_EXIT_UNKNOWN, "no devbox named '%s'", name);
	if (call->n == 2) {
		if (!strcmp(m, "GET")) {
			out = lcd_devbox_show(call->lcd, name, &err);
			return reply_or_fail(call, out, &err);
		}
		if (!strcmp(m, "DELETE")) {
			if (lcd_devbox_remove(call->lcd, name, &err) < 0)
				return api_fail_err(call->c, err);
			return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "name", name, "deleted", 1));
		}
		return FAIL(call, LC_EXIT_USAGE, "%s not allowed on a devbox", m);
	}
	if (call->n == 3 && !strcmp(m, "POST")) {
		if (!strcmp(s[2], "connect"))
			return h_connect(call, name);
		if (!strcmp(s[2], "start")) {
			if (lcd_devbox_start(call->lcd, name, &out, &err) < 0)
				return api_fail_err(call->c, err);
			return api_reply(call->c, MHD_HTTP_OK, out);
		}
		if (!strcmp(s[2], "stop")) {
			if (lcd_devbox_stop(call->lcd, name, "stopped by the operator", &err) < 0)
				return api_fail_err(call->c, err);
			out = lcd_devbox_show(call->lcd, name, &err);
			return reply_or_fail(call, out, &err);
		}
	}
	return api_fail_status(call->c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s /v1/devboxes/NAME/%s", m,
			       call->n > 2 ? s[2] : "");
}

static enum MHD_Result h_disks(call_t *call)
{
	lc_error_t *err = NULL;
	if (call->n == 1 && !strcmp(call->method, "GET")) {
		json_t *l = lcd_disks_json(call->lcd, &err);
		return reply_or_fail(call, l ? json_pack("{s:o}", "disks", l) : NULL, &err);
	}
	if (call->n == 2 && !strcmp(call->method, "DELETE")) {
		if (lcd_disk_delete(call->lcd, call->seg[1], &err) < 0)
			return api_fail_err(call->c, err);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "name", call->seg[1], "deleted", 1));
	}
	return api_fail_status(call->c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s /v1/disks%s", call->method,
			       call->n > 1 ? "/NAME" : "");
}

enum MHD_Result lcd_api_devboxes(call_t *call)
{
	if (!strcmp(call->seg[0], "disks"))
		return h_disks(call);
	return h_devboxes(call);
}
