/* store.c — the records lcd keeps in its store (db.h), one function per operation.
 * Multi-statement operations run in one writing transaction under the
 * database lock, so concurrent API threads never see half a change. */
#include <limits.h>
#include <string.h>

#include "json.h"
#include "lcrun.h"
#include "seal.h"
#include "store.h"
#include "util.h"

#define TASK_COLUMNS \
	"id, app, function, schedule, state, args, result, exit_code, error, attempts, " \
	"sandbox_id, created_at, started_at, finished_at, node"

/* ---- apps ---- */

int lcd_store_app_put(lcd_db_t *db, const char *name, const char *manifest, char *const *sched_names,
		      long long now_s, bool *replaced, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = NULL;
	if (lcd_db_begin(db, err) < 0)
		return -1;
	long long n = lcd_db_query_int(db, err, 0, "SELECT count(*) FROM apps WHERE name = ?", "s", name);
	if (n < 0)
		goto fail;
	if (replaced)
		*replaced = n > 0;
	/* UPSERT, not REPLACE: a REPLACE would delete the row and cascade. */
	if (lcd_db_exec(db, err,
			"INSERT INTO apps (name, manifest, deployed_at) VALUES (?, ?, ?) "
			"ON CONFLICT(name) DO UPDATE SET manifest = excluded.manifest, deployed_at = excluded.deployed_at",
			"ssi", name, manifest, now_s * 1000) < 0)
		goto fail;
	/* Schedules no longer declared go; declared ones keep their state. */
	rows = lcd_db_query(db, err, "SELECT name FROM schedules WHERE app = ?", "s", name);
	if (!rows)
		goto fail;
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *s = lc_json_str(row, "name");
		bool keep = false;
		for (size_t k = 0; sched_names && sched_names[k]; k++)
			keep |= !strcmp(sched_names[k], s);
		if (!keep && lcd_db_exec(db, err, "DELETE FROM schedules WHERE app = ? AND name = ?", "ss", name, s) < 0)
			goto fail;
	}
	for (size_t k = 0; sched_names && sched_names[k]; k++)
		if (lcd_db_exec(db, err,
				"INSERT INTO schedules (app, name, paused, last_slot) VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING",
				"ssi", name, sched_names[k], now_s) < 0)
			goto fail;
	return lcd_db_commit(db, err);
fail:
	lcd_db_rollback(db);
	return -1;
}

int lcd_store_app_delete(lcd_db_t *db, const char *name, lc_error_t **err)
{
	return lcd_db_exec(db, err, "DELETE FROM apps WHERE name = ?", "s", name);
}

json_t *lcd_store_apps(lcd_db_t *db, lc_error_t **err)
{
	return lcd_db_query(db, err, "SELECT name, manifest, deployed_at FROM apps ORDER BY name", "");
}

/* ---- tasks ---- */

static void parse_json_member(json_t *row, const char *key)
{
	json_t *v = json_object_get(row, key);
	if (!json_is_string(v))
		return;
	json_t *parsed = json_loads(json_string_value(v), JSON_DECODE_ANY, NULL);
	if (parsed)
		json_object_set_new(row, key, parsed);
}

static json_t *task_rows(json_t *rows)
{
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		parse_json_member(row, "args");
		parse_json_member(row, "result");
	}
	return rows;
}

/* A function's running and queued tasks, counted once per batch and kept
 * up to date as the batch's requests are admitted: counting them is a
 * scan of the function's queued rows, which a burst makes long. */
struct fn_count {
	const char *app, *function;
	long long running, queued;
};

static struct fn_count *fn_count(lcd_db_t *db, struct fn_count *counts, size_t *n, const lcd_task_add_t *r)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(counts[i].app, r->app) && !strcmp(counts[i].function, r->function))
			return &counts[i];
	_cleanup_json_ json_t *rows = lcd_db_query(db, NULL,
		"SELECT count(CASE WHEN state = 'running' THEN 1 END) AS running, "
		"count(CASE WHEN state = 'queued' THEN 1 END) AS queued FROM tasks "
		"WHERE app = ? AND function = ? AND state IN ('queued', 'running')", "ss", r->app, r->function);
	if (!rows)
		return NULL;
	json_t *c = json_array_get(rows, 0);
	counts[*n] = (struct fn_count){ r->app, r->function, json_integer_value(json_object_get(c, "running")),
					json_integer_value(json_object_get(c, "queued")) };
	return &counts[(*n)++];
}

/* One request of a batch, inside the batch's transaction: a savepoint of
 * its own, so a refused or failed request leaves the others in place. */
static int task_add_one(lcd_db_t *db, lcd_task_add_t *r, struct fn_count *c, long long now)
{
	size_t n = json_array_size(r->args_list);
	size_t had = json_array_size(r->ids);
	if (!c)
		return lc_error_set(&r->err, LC_EXIT_RUNTIME, 0, "database: cannot count the tasks of %s:%s", r->app,
				    r->function);
	if (c->running + c->queued + (long long)n > (long long)r->concurrency + r->queue)
		return lc_error_set(&r->err, LC_EXIT_BUSY, 0,
				    "%s:%s is full: %lld running, %lld queued (concurrency %d, queue %d); %zu more refused",
				    r->app, r->function, c->running, c->queued, r->concurrency, r->queue, n);
	r->can_start = c->running < r->concurrency;
	if (lcd_db_exec(db, &r->err, "SAVEPOINT task_add", "") < 0)
		return -1;
	size_t i;
	json_t *args;
	json_array_foreach(r->args_list, i, args) {
		char id[LC_ID_LEN + 1];
		lc_random_hex(id, LC_ID_LEN);
		_cleanup_free_ char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
		if (lcd_db_exec(db, &r->err,
				"INSERT INTO tasks (id, app, function, schedule, state, args, created_at) "
				"VALUES (?, ?, ?, ?, 'queued', ?, ?)",
				"sssssi", id, r->app, r->function, r->schedule, text, now) < 0)
			goto fail;
		json_array_append_new(r->ids, json_string(id));
	}
	if (lcd_db_exec(db, &r->err, "RELEASE task_add", "") < 0)
		goto fail;
	c->queued += (long long)n;
	return 0;
fail:
	while (json_array_size(r->ids) > had)
		json_array_remove(r->ids, json_array_size(r->ids) - 1);
	lcd_db_exec(db, NULL, "ROLLBACK TO task_add", "");
	lcd_db_exec(db, NULL, "RELEASE task_add", "");
	return -1;
}

void lcd_store_task_add(lcd_db_t *db, lcd_task_add_t *const *reqs, size_t n, long long now)
{
	lc_error_t *err = NULL;
	if (lcd_db_begin(db, &err) == 0) {
		struct fn_count *counts = lc_xmalloc0(n * sizeof(*counts));
		size_t n_counts = 0;
		bool queued = false;
		for (size_t i = 0; i < n; i++)
			queued |= task_add_one(db, reqs[i], fn_count(db, counts, &n_counts, reqs[i]), now) == 0;
		free(counts);
		/* the other nodes hear of it once it is committed */
		if (queued)
			lcd_db_notify(db, LCD_QUEUE_CHANNEL, NULL, NULL);
		if (lcd_db_commit(db, &err) == 0)
			return;
	}
	/* Nothing of the batch was kept: every request fails with that. */
	for (size_t i = 0; i < n; i++) {
		if (!reqs[i]->err) {
			json_array_clear(reqs[i]->ids);
			lc_error_set(&reqs[i]->err, err->exit_code, err->errnum, "%s", err->msg);
		}
	}
	lc_error_free(err);
}

json_t *lcd_store_task_start(lcd_db_t *db, const char *app, const char *function, int concurrency,
			     const char *sandbox_id, long long now, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = NULL;
	/* One taker of the function's tasks at a time in the whole cluster
	 * (its lock): the running count it reads stays true until it commits;
	 * takers of other functions go on meanwhile. */
	_cleanup_free_ char *lock = lc_strdup_printf("task:%s/%s", app, function);
	if (lcd_db_begin_on(db, lock, err) < 0)
		return NULL;
	long long running = lcd_db_query_int(db, err, 0,
		"SELECT count(*) FROM tasks WHERE app = ? AND function = ? AND state = 'running'", "ss", app, function);
	if (running < 0)
		goto fail;
	if (running >= concurrency) {
		lcd_db_rollback(db);
		return NULL;
	}
	rows = lcd_db_query(db, err,
		"SELECT id FROM tasks WHERE app = ? AND function = ? AND state = 'queued' ORDER BY seq LIMIT 1 "
		"FOR UPDATE SKIP LOCKED",
		"ss", app, function);
	if (!rows)
		goto fail;
	if (json_array_size(rows) == 0) {
		lcd_db_rollback(db);
		return NULL;
	}
	const char *id = lc_json_str(json_array_get(rows, 0), "id");
	if (lcd_db_exec(db, err,
			"UPDATE tasks SET state = 'running', sandbox_id = ?, started_at = ?, finished_at = NULL, "
			"attempts = attempts + 1, node = ? WHERE id = ?", "siss", sandbox_id, now, lcd_db_node(db), id) < 0)
		goto fail;
	json_t *task = lcd_store_task_get(db, id, err);
	if (!task)
		goto fail;
	if (lcd_db_commit(db, err) < 0) {
		json_decref(task);
		return NULL;
	}
	return task;
fail:
	lcd_db_rollback(db);
	return NULL;
}

/* A task left the running: its function may start another, anywhere. */
static int freed(lcd_db_t *db, int n)
{
	if (n > 0)
		lcd_db_notify(db, LCD_QUEUE_CHANNEL, NULL, NULL);
	return n;
}

int lcd_store_task_finish(lcd_db_t *db, const char *id, const char *state, const char *result_json,
			  int exit_code, const char *error, long long now, lc_error_t **err)
{
	return freed(db, lcd_db_exec(db, err,
				     "UPDATE tasks SET state = ?, result = ?, exit_code = ?, error = ?, finished_at = ? "
				     "WHERE id = ? AND state = 'running'",
				     "ssisis", state, result_json, (long long)exit_code, error, now, id));
}

int lcd_store_task_requeue(lcd_db_t *db, const char *id, const char *error, lc_error_t **err)
{
	return freed(db, lcd_db_exec(db, err,
				     "UPDATE tasks SET state = 'queued', error = ?, sandbox_id = NULL WHERE id = ? AND state = 'running'",
				     "ss", error, id));
}

int lcd_store_task_cancel_queued(lcd_db_t *db, const char *id, long long now, lc_error_t **err)
{
	return lcd_db_exec(db, err,
			   "UPDATE tasks SET state = 'cancelled', finished_at = ?, error = 'cancelled while queued' "
			   "WHERE id = ? AND state = 'queued'", "is", now, id);
}

json_t *lcd_store_task_get(lcd_db_t *db, const char *id, lc_error_t **err)
{
	json_t *rows = lcd_db_query(db, err, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?", "s", id);
	if (!rows)
		return NULL;
	json_t *t = json_incref(json_array_get(task_rows(rows), 0));
	json_decref(rows);
	return t;
}

json_t *lcd_store_task_list(lcd_db_t *db, const char *app, const char *state, long long limit, lc_error_t **err)
{
	json_t *rows = lcd_db_query(db, err,
		"SELECT " TASK_COLUMNS " FROM tasks WHERE (?1 IS NULL OR app = ?1) AND (?2 IS NULL OR state = ?2) "
		"ORDER BY seq DESC LIMIT ?3", "ssi", app, state, limit > 0 ? limit : LLONG_MAX);
	return rows ? task_rows(rows) : NULL;
}

json_t *lcd_store_task_pending(lcd_db_t *db, lc_error_t **err)
{
	return lcd_db_query(db, err,
			    "SELECT app, function, min(seq) AS first FROM tasks WHERE state = 'queued' "
			    "GROUP BY app, function ORDER BY first", "");
}

long long lcd_store_task_count(lcd_db_t *db, const char *app, const char *function, const char *state,
			       lc_error_t **err)
{
	return lcd_db_query_int(db, err, 0,
		"SELECT count(*) FROM tasks WHERE app = ? AND function = ? AND state = ?", "sss", app, function, state);
}

/* ---- maps ---- */

int lcd_store_map_set(lcd_db_t *db, const char *app, const char *map, const char *key, const char *value,
		      long long ttl_s, bool if_absent, long long now, lc_error_t **err)
{
	long long exp = ttl_s > 0 ? now + ttl_s * 1000 : 0;
	/* One statement, so two racing claims are ordered by SQLite: the
	 * second finds a live row and its DO UPDATE ... WHERE changes nothing. */
	if (if_absent)
		return lcd_db_exec(db, err,
			"INSERT INTO maps (app, map, key, value, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4, nullif(?5, 0), ?6) "
			"ON CONFLICT(app, map, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at, "
			"updated_at = excluded.updated_at WHERE maps.expires_at IS NOT NULL AND maps.expires_at <= ?6",
			"ssssii", app, map, key, value, exp, now);
	return lcd_db_exec(db, err,
		"INSERT INTO maps (app, map, key, value, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4, nullif(?5, 0), ?6) "
		"ON CONFLICT(app, map, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at, "
		"updated_at = excluded.updated_at",
		"ssssii", app, map, key, value, exp, now) < 0 ? -1 : 1;
}

#define LIVE "(expires_at IS NULL OR expires_at > ?)"

char *lcd_store_map_get(lcd_db_t *db, const char *app, const char *map, const char *key, long long now,
			lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_db_query(db, err,
		"SELECT value FROM maps WHERE app = ? AND map = ? AND key = ? AND " LIVE, "sssi", app, map, key, now);
	const char *v = rows ? lc_json_str(json_array_get(rows, 0), "value") : NULL;
	return v ? strdup(v) : NULL;
}

int lcd_store_map_del(lcd_db_t *db, const char *app, const char *map, const char *key, long long now,
		      lc_error_t **err)
{
	/* An expired key counts as absent: deleting it reports 0. */
	if (lcd_db_begin(db, err) < 0)
		return -1;
	long long live = lcd_db_query_int(db, err, 0,
		"SELECT count(*) FROM maps WHERE app = ? AND map = ? AND key = ? AND " LIVE, "sssi", app, map, key, now);
	if (live < 0 || lcd_db_exec(db, err, "DELETE FROM maps WHERE app = ? AND map = ? AND key = ?", "sss",
				    app, map, key) < 0) {
		lcd_db_rollback(db);
		return -1;
	}
	return lcd_db_commit(db, err) < 0 ? -1 : (int)live;
}

json_t *lcd_store_map_list(lcd_db_t *db, const char *app, const char *map, const char *prefix, long long now,
			   lc_error_t **err)
{
	return lcd_db_query(db, err,
		"SELECT key, value, expires_at FROM maps WHERE app = ? AND map = ? AND " LIVE
		" AND (? IS NULL OR substr(key, 1, length(?5)) = ?5) ORDER BY key",
		"ssiss", app, map, now, prefix, prefix);
}

int lcd_store_map_gc(lcd_db_t *db, long long now, lc_error_t **err)
{
	return lcd_db_exec(db, err, "DELETE FROM maps WHERE expires_at IS NOT NULL AND expires_at <= ?", "i", now);
}

/* ---- secrets ---- */

#define KEY_CHECK "lcd secret key check"

static const unsigned char *seal_key(lcd_db_t *db, const char *name, lc_error_t **err)
{
	const unsigned char *key = lcd_db_seal_key(db);
	if (!key)
		lc_error_set(err, LC_EXIT_STATE, 0, "secret %s: lcd has no secret key (secret_key_file)", name);
	return key;
}

int lcd_store_secrets_seal(lcd_db_t *db, lc_error_t **err)
{
	const unsigned char *key = seal_key(db, "key check", err);
	if (!key)
		return -1;
	_cleanup_free_ char *check = lcd_seal(key, "", KEY_CHECK, err);
	if (!check || lcd_db_exec(db, err, "INSERT INTO meta (key, value) VALUES ('secret_key_check', ?) ON CONFLICT DO NOTHING",
				  "s", check) < 0)
		return -1;
	_cleanup_json_ json_t *rows = lcd_db_query(db, err, "SELECT value FROM meta WHERE key = 'secret_key_check'", "");
	const char *stored = rows ? lc_json_str(json_array_get(rows, 0), "value") : NULL;
	if (!stored)
		return rows ? lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: the secret key's check value is gone") : -1;
	lc_error_t *e = NULL;
	_cleanup_free_ char *opened = lcd_unseal(key, "", stored, &e);
	lc_error_free(e);
	if (!opened || strcmp(opened, KEY_CHECK))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "this store's secrets were sealed with another key: every lcd that shares it needs the "
				    "same secret_key_file");
	_cleanup_json_ json_t *plain = lcd_db_query(db, err, "SELECT name, value FROM secrets WHERE sealed = 0", "");
	if (!plain)
		return -1;
	size_t i;
	json_t *row;
	json_array_foreach(plain, i, row) {
		const char *name = lc_json_str(row, "name");
		const char *value = lc_json_str(row, "value");
		_cleanup_free_ char *sealed = value ? lcd_seal(key, name, value, err) : NULL;
		if (!sealed || lcd_db_exec(db, err, "UPDATE secrets SET value = ?, sealed = 1 WHERE name = ? AND sealed = 0",
					   "ss", sealed, name) < 0)
			return -1;
	}
	/* the plain values read here are not left in this heap */
	json_array_foreach(plain, i, row) {
		json_t *v = json_object_get(row, "value");
		if (json_is_string(v))
			explicit_bzero((char *)json_string_value(v), json_string_length(v));
	}
	return (int)json_array_size(plain);
}

int lcd_store_secret_set(lcd_db_t *db, const char *name, const char *value, long long now, lc_error_t **err)
{
	const unsigned char *key = seal_key(db, name, err);
	_cleanup_free_ char *sealed = key ? lcd_seal(key, name, value, err) : NULL;
	if (!sealed)
		return -1;
	return lcd_db_exec(db, err,
		"INSERT INTO secrets (name, value, sealed, updated_at) VALUES (?, ?, 1, ?) "
		"ON CONFLICT(name) DO UPDATE SET value = excluded.value, sealed = 1, updated_at = excluded.updated_at",
		"ssi", name, sealed, now);
}

char *lcd_store_secret_get(lcd_db_t *db, const char *name, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_db_query(db, err, "SELECT value, sealed FROM secrets WHERE name = ?", "s", name);
	json_t *row = rows ? json_array_get(rows, 0) : NULL;
	const char *v = lc_json_str(row, "value");
	if (!v)
		return NULL;
	if (json_integer_value(json_object_get(row, "sealed")) != 1) {
		lc_error_set(err, LC_EXIT_STATE, 0, "secret %s is not sealed yet (lcd seals it when it starts)", name);
		return NULL;
	}
	const unsigned char *key = seal_key(db, name, err);
	return key ? lcd_unseal(key, name, v, err) : NULL;
}

int lcd_store_secret_delete(lcd_db_t *db, const char *name, lc_error_t **err)
{
	return lcd_db_exec(db, err, "DELETE FROM secrets WHERE name = ?", "s", name);
}

json_t *lcd_store_secret_names(lcd_db_t *db, lc_error_t **err)
{
	return lcd_db_query(db, err, "SELECT name, updated_at FROM secrets ORDER BY name", "");
}

/* ---- schedules ---- */

json_t *lcd_store_schedules(lcd_db_t *db, lc_error_t **err)
{
	return lcd_db_query(db, err, "SELECT app, name, paused, last_slot FROM schedules ORDER BY app, name", "");
}

int lcd_store_schedule_pause(lcd_db_t *db, const char *app, const char *name, bool paused, lc_error_t **err)
{
	return lcd_db_exec(db, err, "UPDATE schedules SET paused = ? WHERE app = ? AND name = ?", "iss",
			   (long long)paused, app, name);
}

int lcd_store_schedule_set_slot(lcd_db_t *db, const char *app, const char *name, long long slot_s,
				lc_error_t **err)
{
	return lcd_db_exec(db, err, "UPDATE schedules SET last_slot = ? WHERE app = ? AND name = ?", "iss",
			   slot_s, app, name);
}
