/* sandboxes.h — the sandbox API's records and lifecycle (sandboxes.c): the
 * one place lcd makes sandboxes and writes the sandboxes table. */
#ifndef LCD_SANDBOXES_H
#define LCD_SANDBOXES_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "access.h"
#include "lcd.h"

/* Parts of a request shared by create, exec and sessions; errors name
 * path.  env: {"K": "V"} or ["K=V"], appended to *out.  user: "UID[:GID]"
 * or a number, inside the sandbox's id range. */
int lcd_env_parse(json_t *v, const char *path, char ***out, lc_error_t **err);
int lcd_user_parse(json_t *v, const char *path, uid_t *uid, gid_t *gid, lc_error_t **err);
/* May who hand the secret name to a sandbox (a task: only a secret its
 * function declares), and is it set?  Errors name path. */
int lcd_secret_usable(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *path, lc_error_t **err);
/* An absolute path without ".." components. */
bool lcd_sandbox_path_ok(const char *p);
/* Make n sandboxes from a create request for who, all or none; their ids
 * are appended to ids.  image (optional) replaces the request's image (a
 * fork).  The one place lcd makes sandboxes. */
int lcd_sandbox_make(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
		     lc_error_t **err);
/* The same, with tune(spec, id, ud, err) run on each sandbox's spec right
 * before it is made (its id set): what a request cannot say (a devbox's
 * disk as its upper layer, no_new_privs off), and a caller that must
 * record the id before the sandbox exists. */
typedef int (*lcd_sandbox_tune_t)(lc_spec_t *spec, const char *id, void *ud, lc_error_t **err);
int lcd_sandbox_make_tuned(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
			   lcd_sandbox_tune_t tune, void *ud, lc_error_t **err);
/* The record of a sandbox who may see, by id or name; LC_EXIT_UNKNOWN
 * otherwise. */
json_t *lcd_sandbox_find(lcd_t *lcd, const lcd_caller_t *who, const char *ref, lc_error_t **err);
/* The API's view of a record: state, usage, owner, labels …; NULL when
 * the sandbox is gone (its ttl expired): the record is dropped then. */
json_t *lcd_sandbox_view(lcd_t *lcd, json_t *row);
/* The sandboxes who may see, filtered (each filter may be NULL; labels:
 * "K=V" strings). */
json_t *lcd_sandbox_list(lcd_t *lcd, const lcd_caller_t *who, const char *app, const char *state, char **labels,
			 lc_error_t **err);
/* Terminate and remove (idempotent). */
int lcd_sandbox_delete(lcd_t *lcd, const char *id, lc_error_t **err);
/* An attempt of the task ended: the sandboxes it made are marked for
 * removal (a create still under way for it sees the mark and removes
 * what it made itself), then removed; each failure is logged. */
void lcd_sandboxes_drop_task(lcd_t *lcd, const char *task);
/* A node fell silent: its sandboxes being made or live are lost now; how
 * many (negative: the store failed). */
int lcd_sandboxes_lost(lcd_t *lcd, const char *node);
/* The app's sandboxes, live and ended (kept 30 days), newest first, at
 * most limit: [{id, name, app, task, function, image, labels, state
 * ("running", …, "terminated"), created, terminated, end_reason}].  app
 * NULL: every app (the operator); a task sees its own app only. */
json_t *lcd_sandbox_history(lcd_t *lcd, const lcd_caller_t *who, const char *app, long long limit, lc_error_t **err);
/* The environment entries (K=V) of the secrets a sandbox was given, read
 * from the store for each exec: they are never written elsewhere. */
int lcd_sandbox_secret_env(lcd_t *lcd, json_t *row, char ***env, lc_error_t **err);
int lcd_sandbox_snapshot(lcd_t *lcd, const lcd_caller_t *who, json_t *row, const char *name, json_t **out,
			 lc_error_t **err);
int lcd_sandbox_fork(lcd_t *lcd, const lcd_caller_t *who, json_t *row, int n, json_t **out, lc_error_t **err);
/* At start: tokens are dropped, sandboxes of tasks (none runs now) and
 * half-made ones are removed, records of vanished ones forgotten. */
int lcd_sandboxes_recover(lcd_t *lcd, lc_error_t **err);
/* A node removes what another marked for removal on it (a task of that
 * node ended, lcd_sandbox_delete there): told on this channel, and at
 * each heartbeat. */
#define LCD_SANDBOXES_CHANNEL "lcd_sandboxes"
void lcd_sandboxes_sweep(lcd_t *lcd);
/* The spec a member of image is made with (a create request
 * {"image": image} of the operator) and the image's digest (NULL: host). */
lc_spec_t *lcd_sandbox_pool_spec(lcd_t *lcd, const char *image, char **digest, lc_error_t **err);

#endif
