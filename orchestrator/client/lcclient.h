/* lcclient.h — a small C client of lcd's HTTP API (libcurl + jansson), for
 * lcctl and the workload programs that run as functions.
 *
 * Where it connects (lcc_new's endpoint, or NULL for the default):
 *   - "http://HOST:PORT" (or https://…): TCP, with a bearer token;
 *   - anything else is a unix socket path;
 *   - NULL: $LCD_URL if set, else the socket $LCD_SOCKET, else
 *     $LCRUN_STATE_DIR/lcd.sock, else /run/lcrun/lcd.sock.
 * The token (NULL: $LCD_TOKEN, if set) goes in "Authorization: Bearer".
 * In a task's sandbox LCD_SOCKET and LCD_TOKEN are set, so lcc_new(NULL,
 * NULL, …) reaches lcd with the task's own token.
 *
 * Every call returns 0 (or a count) on success, negative with *err filled
 * on failure: lcd's own message and exit code (error.h: 120 unknown, 119
 * busy/quota, 118 not permitted, 121 invalid, …), or 125 when lcd cannot
 * be reached.  A handle may be used by one thread at a time. */
#ifndef LCCLIENT_H
#define LCCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "error.h"

typedef struct lcc lcc_t;

lcc_t *lcc_new(const char *endpoint, const char *token, lc_error_t **err);
void lcc_free(lcc_t *c);
/* The socket path or URL in use (for messages). */
const char *lcc_endpoint(const lcc_t *c);

/* One request: path is under /v1 ("/sandboxes", "/tasks/ID").  body may be
 * NULL.  With a 2xx answer *answer (optional) gets the parsed body and 0 is
 * returned; otherwise *err gets lcd's error.  status (optional) gets the
 * HTTP status either way. */
int lcc_request(lcc_t *c, const char *method, const char *path, json_t *body, long *status, json_t **answer,
		lc_error_t **err);
/* The same, the body of a 2xx answer handed to sink as it arrives (sink
 * returns false to stop).  body_fd >= 0: the request body is read from it
 * (a raw upload) instead of JSON. */
typedef bool (*lcc_sink_t)(const char *data, size_t len, void *ud);
int lcc_request_stream(lcc_t *c, const char *method, const char *path, json_t *body, int body_fd, lcc_sink_t sink,
		       void *ud, long *status, lc_error_t **err);
/* A path segment escaped for a URL (free it). */
char *lcc_escape(const char *s);

/* A connection switched to another protocol: POST path with "Upgrade:
 * protocol"; on 101 *fd is the connected socket (what follows the answer's
 * head is the other protocol's) and *head (optional) the head, for
 * lcc_header.  Otherwise lcd's error.  Over the unix socket or http://. */
int lcc_upgrade(lcc_t *c, const char *path, const char *protocol, int *fd, char **head, lc_error_t **err);
/* A header's value in such a head (NULL when absent); free it. */
char *lcc_header(const char *head, const char *name);

/* ---- sandboxes ---- */

/* req: the create request ({"image", "limits", "env", …}, NULL: defaults).
 * *id gets the new sandbox's id; *info (optional) its description. */
int lcc_sandbox_create(lcc_t *c, json_t *req, char **id, json_t **info, lc_error_t **err);
int lcc_sandbox_get(lcc_t *c, const char *id, json_t **info, lc_error_t **err);
/* Terminate and remove; a sandbox that is already gone is not an error. */
int lcc_sandbox_delete(lcc_t *c, const char *id, lc_error_t **err);
/* pause, resume, stop, start */
int lcc_sandbox_verb(lcc_t *c, const char *id, const char *verb, lc_error_t **err);

typedef struct lcc_exec_result {
	int exit_code;   /* the command's status (128+N for a signal, 124 on timeout) */
	int signal;
	bool timed_out;
	bool truncated;  /* lcc_sandbox_exec: output beyond the cap was dropped */
	char *out, *err; /* NUL-terminated (lcc_sandbox_exec only); free with lcc_exec_result_clear */
	size_t out_len, err_len;
} lcc_exec_result_t;
void lcc_exec_result_clear(lcc_exec_result_t *r);
/* Run a command and capture its output.  req: {"argv": […]} or {"cmd":
 * "shell line"}, plus env, workdir, user, timeout, stdin (base64),
 * max_output. */
int lcc_sandbox_exec(lcc_t *c, const char *id, json_t *req, lcc_exec_result_t *res, lc_error_t **err);
/* The same, streamed: on_output(1 or 2, bytes, len, ud) as output happens,
 * in order; res gets the status. */
typedef void (*lcc_output_cb)(int stream, const char *data, size_t len, void *ud);
int lcc_sandbox_exec_stream(lcc_t *c, const char *id, json_t *req, lcc_output_cb on_output, void *ud,
			    lcc_exec_result_t *res, lc_error_t **err);
/* A shell command line, for the simple case: lcc_sandbox_exec with cmd. */
int lcc_sandbox_sh(lcc_t *c, const char *id, const char *cmd, lcc_exec_result_t *res, lc_error_t **err);

/* Files: a regular file from memory or an fd (mode: 0 for 0644), or with
 * tar a tar stream from fd extracted into the directory path.  Download: a
 * file into memory or to an fd, or with tar the file/directory path as a
 * tar stream to fd. */
int lcc_sandbox_upload(lcc_t *c, const char *id, const char *path, const void *data, size_t len, unsigned mode,
		       lc_error_t **err);
int lcc_sandbox_upload_fd(lcc_t *c, const char *id, const char *path, int fd, bool tar, unsigned mode,
			  lc_error_t **err);
int lcc_sandbox_download(lcc_t *c, const char *id, const char *path, char **data, size_t *len, lc_error_t **err);
int lcc_sandbox_download_fd(lcc_t *c, const char *id, const char *path, int fd, bool tar, lc_error_t **err);

/* snapshot: *digest optional.  fork: *ids gets a JSON array of ids. */
int lcc_sandbox_snapshot(lcc_t *c, const char *id, const char *image, char **digest, lc_error_t **err);
int lcc_sandbox_fork(lcc_t *c, const char *id, int n, json_t **ids, lc_error_t **err);

/* ---- maps (app: NULL means $LC_TASK_APP, the calling task's app) ---- */
/* 1 and *value when the key is set, 0 when it is absent. */
int lcc_map_get(lcc_t *c, const char *app, const char *map, const char *key, char **value, lc_error_t **err);
/* 1 when set; 0 when if_absent and a live value was there (the claim was
 * lost).  ttl_s <= 0: no expiry. */
int lcc_map_set(lcc_t *c, const char *app, const char *map, const char *key, const char *value, long long ttl_s,
		bool if_absent, lc_error_t **err);
/* 1 when deleted, 0 when it was absent. */
int lcc_map_del(lcc_t *c, const char *app, const char *map, const char *key, lc_error_t **err);

/* ---- tasks (app: NULL means $LC_TASK_APP, as for maps) ---- */
/* args NULL: {}.  *task_id gets the new task's id. */
int lcc_spawn(lcc_t *c, const char *app, const char *function, json_t *args, char **task_id, lc_error_t **err);
/* One task per element of args_list, all or none; *ids a JSON array. */
int lcc_spawn_map(lcc_t *c, const char *app, const char *function, json_t *args_list, json_t **ids,
		  lc_error_t **err);
/* Wait (up to timeout_s; <= 0: as long as it takes) for the task to end:
 * 1 and *task when it ended, 0 and *task as it is when the time ran out. */
int lcc_task_wait(lcc_t *c, const char *task_id, int timeout_s, json_t **task, lc_error_t **err);
/* Cancel a queued or running task: 1 when it was, 0 when it had ended. */
int lcc_task_cancel(lcc_t *c, const char *task_id, lc_error_t **err);

#endif
