/* store.h — lcd's records: apps, tasks (with queue admission), maps,
 * secrets, schedules.  Every function is safe to call from any thread;
 * times are milliseconds since the epoch unless the name says otherwise. */
#ifndef LCD_STORE_H
#define LCD_STORE_H

#include <stdbool.h>
#include <jansson.h>

#include "db.h"

/* ---- apps ---- */
/* Insert or replace the app's manifest; schedules listed in sched_names
 * get a row (existing rows keep their pause flag and last slot; new ones
 * start at now_s so that a fresh schedule does not fire for the past). */
int lcd_store_app_put(lcd_db_t *db, const char *name, const char *manifest, char *const *sched_names,
		      long long now_s, bool *replaced, lc_error_t **err);
/* Delete the app and everything it owns (tasks, maps, schedules). 0 if no
 * such app, 1 if deleted. */
int lcd_store_app_delete(lcd_db_t *db, const char *name, lc_error_t **err);
json_t *lcd_store_apps(lcd_db_t *db, lc_error_t **err); /* [{name, manifest(text), deployed_at}] */

/* ---- tasks ---- */
/* The channel (lcd_db_notify) on which the nodes hear that a task was
 * queued or left the running: a node with room may take one now. */
#define LCD_QUEUE_CHANNEL "lcd_queue"
/* A request to queue one task per element of args_list for
 * app/function, all or none: refused with LC_EXIT_BUSY (in err) when
 * running + queued + n would exceed capacity (concurrency + queue).  The
 * new ids are appended to ids; can_start says whether fewer than
 * concurrency were running when it was admitted. */
typedef struct {
	const char *app, *function, *schedule;
	json_t *args_list;
	int concurrency, queue;
	json_t *ids;
	lc_error_t *err;  /* out: set when the request was not queued */
	bool can_start;   /* out */
} lcd_task_add_t;
/* Queue a batch of requests in one transaction (one commit for all), in
 * order; each is decided on its own (a savepoint each), and each is
 * durable when this returns without an error in it. */
void lcd_store_task_add(lcd_db_t *db, lcd_task_add_t *const *reqs, size_t n, long long now);
/* Move the oldest queued task of app/function to running if fewer than
 * concurrency run; sets its sandbox id and its node (lcd_db_node).  Returns the task row, or NULL
 * (with *err NULL) when nothing is to start. */
json_t *lcd_store_task_start(lcd_db_t *db, const char *app, const char *function, int concurrency,
			     const char *sandbox_id, long long now, lc_error_t **err);
/* Running -> state (succeeded, failed, timed-out, cancelled).  result_json
 * may be NULL.  Returns rows changed (0 when it was no longer running). */
int lcd_store_task_finish(lcd_db_t *db, const char *id, const char *state, const char *result_json,
			  int exit_code, const char *error, long long now, lc_error_t **err);
/* Running -> queued again (a retry). */
int lcd_store_task_requeue(lcd_db_t *db, const char *id, const char *error, lc_error_t **err);
/* Queued -> cancelled; returns 1 if it was queued. */
int lcd_store_task_cancel_queued(lcd_db_t *db, const char *id, long long now, lc_error_t **err);
/* One task as the API shows it (args and result parsed), or NULL. */
json_t *lcd_store_task_get(lcd_db_t *db, const char *id, lc_error_t **err);
/* Newest first; app/state may be NULL; limit <= 0: no limit. */
json_t *lcd_store_task_list(lcd_db_t *db, const char *app, const char *state, long long limit, lc_error_t **err);
/* Functions that have queued tasks: [{app, function}]. */
json_t *lcd_store_task_pending(lcd_db_t *db, lc_error_t **err);
/* Count tasks of app/function in a state. */
long long lcd_store_task_count(lcd_db_t *db, const char *app, const char *function, const char *state,
			       lc_error_t **err);

/* ---- maps ---- */
/* value is a string; ttl_s <= 0: no expiry.  With if_absent the key is set
 * only when no live value exists: returns 1 if this call set it, 0 if a
 * live value was there (the claim was lost).  Without it returns 1. */
int lcd_store_map_set(lcd_db_t *db, const char *app, const char *map, const char *key, const char *value,
		      long long ttl_s, bool if_absent, long long now, lc_error_t **err);
/* The live value (malloc'd) or NULL with *err NULL when absent/expired. */
char *lcd_store_map_get(lcd_db_t *db, const char *app, const char *map, const char *key, long long now,
			lc_error_t **err);
int lcd_store_map_del(lcd_db_t *db, const char *app, const char *map, const char *key, long long now,
		      lc_error_t **err);
json_t *lcd_store_map_list(lcd_db_t *db, const char *app, const char *map, const char *prefix, long long now,
			   lc_error_t **err);
/* Drop expired keys; returns how many. */
int lcd_store_map_gc(lcd_db_t *db, long long now, lc_error_t **err);

/* ---- secrets ---- */
/* Secrets are sealed with the handle's key (lcd_db_set_seal_key, seal.h);
 * names and times are not. */
/* At start, with the key set: check the key against the store's (the
 * first lcd to seal anything records a check value: a node with another
 * key is refused, LC_EXIT_INVALID), then seal the rows written before
 * secrets were sealed. */
int lcd_store_secrets_seal(lcd_db_t *db, lc_error_t **err);
int lcd_store_secret_set(lcd_db_t *db, const char *name, const char *value, long long now, lc_error_t **err);
/* The value (malloc'd) or NULL with *err NULL when unknown. */
char *lcd_store_secret_get(lcd_db_t *db, const char *name, lc_error_t **err);
int lcd_store_secret_delete(lcd_db_t *db, const char *name, lc_error_t **err);
json_t *lcd_store_secret_names(lcd_db_t *db, lc_error_t **err); /* [{name, updated_at}] */

/* ---- schedules ---- */
json_t *lcd_store_schedules(lcd_db_t *db, lc_error_t **err); /* [{app, name, paused, last_slot}] */
int lcd_store_schedule_pause(lcd_db_t *db, const char *app, const char *name, bool paused, lc_error_t **err);
int lcd_store_schedule_set_slot(lcd_db_t *db, const char *app, const char *name, long long slot_s,
				lc_error_t **err);

#endif
