/* Unit tests for lcd's store (orchestrator/lcd/model/db*.c, store.c) on a
 * temp SQLite db, and again on a private PostgreSQL cluster (dbtest.h). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "dbtest.h"
#include "seal.h"
#include "store.h"
#include "util.h"

static char dir[] = "/tmp/lcd-store-XXXXXX";
static char *path;
static lcd_db_t *db;
static const unsigned char key1[LCD_SEAL_KEY_LEN] = "0123456789abcdef0123456789abcdef";
static const unsigned char key2[LCD_SEAL_KEY_LEN] = "fedcba9876543210fedcba9876543210";

/* One request alone, as a lone spawn is committed: 0, or -1 with *err. */
static int add_one(lcd_db_t *d, const char *app, const char *fn, const char *schedule, json_t *args_list,
		   int concurrency, int queue, long long now, json_t *ids, lc_error_t **err)
{
	lcd_task_add_t r = { .app = app, .function = fn, .schedule = schedule, .args_list = args_list,
			     .concurrency = concurrency, .queue = queue, .ids = ids };
	lcd_task_add_t *one = &r;
	lcd_store_task_add(d, &one, 1, now);
	if (r.err) {
		*err = r.err;
		return -1;
	}
	return 0;
}

static void setup(void)
{
	strcpy(dir, "/tmp/lcd-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	path = dbtest_where(dir);
	ck_assert_ptr_nonnull(path);
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_db_open(path, &db, &err), 0);
	lcd_db_set_seal_key(db, key1);
	ck_assert_int_eq(lcd_store_secrets_seal(db, &err), 0);
	char *scheds[] = { "nightly", NULL };
	ck_assert_int_eq(lcd_store_app_put(db, "demo", "{}", scheds, 1000, NULL, &err), 0);
}

static void teardown(void)
{
	lcd_db_close(db);
	lc_rm_rf(dir, NULL);
	free(path);
}

START_TEST(test_schema_version)
{
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_db_schema_version(db, &err), LCD_DB_SCHEMA_VERSION);
	if (!strcmp(lcd_db_engine(db), "sqlite")) {
		ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "PRAGMA foreign_keys", ""), 1);
		json_t *mode = lcd_db_query(db, &err, "PRAGMA journal_mode", "");
		ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mode, 0), "journal_mode")), "wal");
		json_decref(mode);
	}
	/* Reopening migrates nothing and keeps the data. */
	lcd_db_close(db);
	ck_assert_int_eq(lcd_db_open(path, &db, &err), 0);
	lcd_db_set_seal_key(db, key1);
	json_t *apps = lcd_store_apps(db, &err);
	ck_assert_int_eq(json_array_size(apps), 1);
	json_decref(apps);
	/* A db from a newer lcd is refused, not downgraded. */
	if (!strcmp(lcd_db_engine(db), "sqlite"))
		lcd_db_exec(db, &err, "PRAGMA user_version = 99", "");
	else
		lcd_db_exec(db, &err, "UPDATE lcd_schema SET version = 99", "");
	lcd_db_close(db);
	db = NULL;
	ck_assert_int_eq(lcd_db_open(path, &db, &err), -1);
	ck_assert_ptr_nonnull(strstr(err->msg, "newer"));
	lc_error_free(err);
}
END_TEST

/* One row, else "no KIND named 'NAME'" (LC_EXIT_UNKNOWN); two is the
 * statement's error, not a row to pick from. */
START_TEST(test_query_one)
{
	lc_error_t *err = NULL;
	json_t *row = lcd_db_query_one(db, &err, "app", "demo", "SELECT name FROM apps WHERE name = ?", "s", "demo");
	ck_assert_ptr_nonnull(row);
	ck_assert_str_eq(json_string_value(json_object_get(row, "name")), "demo");
	json_decref(row);
	ck_assert_ptr_null(lcd_db_query_one(db, &err, "app", "gone", "SELECT name FROM apps WHERE name = ?", "s", "gone"));
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	ck_assert_str_eq(err->msg, "no app named 'gone'");
	lc_error_free(err);
	err = NULL;
	ck_assert_ptr_null(lcd_db_query_one(db, &err, "app", "demo",
					    "SELECT name FROM apps WHERE name = ? UNION ALL SELECT name FROM apps", "s", "demo"));
	ck_assert_int_eq(err->exit_code, LC_EXIT_RUNTIME);
	lc_error_free(err);
}
END_TEST

START_TEST(test_queue_admission)
{
	lc_error_t *err = NULL;
	json_t *ids = json_array();
	int refused = 0;
	for (int i = 0; i < 30; i++) {
		json_t *one = json_pack("[{s:i}]", "i", i);
		if (add_one(db, "demo", "solve", NULL, one, 3, 20, 1000 + i, ids, &err) < 0) {
			ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
			ck_assert_ptr_nonnull(strstr(err->msg, "demo:solve is full"));
			lc_error_free(err);
			err = NULL;
			refused++;
		}
		json_decref(one);
	}
	ck_assert_int_eq(json_array_size(ids), 23);
	ck_assert_int_eq(refused, 7);
	/* Three may run; the fourth start finds the function at its limit. */
	json_t *t[3];
	for (int i = 0; i < 3; i++) {
		t[i] = lcd_store_task_start(db, "demo", "solve", 3, "aaaaaaaaaaaa", 2000, &err);
		ck_assert_ptr_nonnull(t[i]);
		ck_assert_str_eq(json_string_value(json_object_get(t[i], "state")), "running");
		/* oldest first */
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(t[i], "args"), "i")), i);
	}
	ck_assert_ptr_null(lcd_store_task_start(db, "demo", "solve", 3, "bbbbbbbbbbbb", 2000, &err));
	ck_assert_ptr_null(err);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "solve", "queued", &err), 20);
	/* Still full: running + queued = 23. */
	json_t *one = json_pack("[{}]");
	ck_assert_int_eq(add_one(db, "demo", "solve", NULL, one, 3, 20, 3000, ids, &err), -1);
	lc_error_free(err);
	err = NULL;
	/* One ends: one place frees. */
	const char *id0 = json_string_value(json_object_get(t[0], "id"));
	ck_assert_int_eq(lcd_store_task_finish(db, id0, "succeeded", "{\"ok\":true}", 0, NULL, 4000, &err), 1);
	ck_assert_int_eq(lcd_store_task_finish(db, id0, "failed", NULL, 1, NULL, 4000, &err), 0); /* only once */
	ck_assert_int_eq(add_one(db, "demo", "solve", NULL, one, 3, 20, 3000, ids, &err), 0);
	json_decref(one);
	json_t *got = lcd_store_task_get(db, id0, &err);
	ck_assert(json_is_true(json_object_get(json_object_get(got, "result"), "ok")));
	json_decref(got);
	/* A retry goes back to queued; a queued task can be cancelled. */
	const char *id1 = json_string_value(json_object_get(t[1], "id"));
	ck_assert_int_eq(lcd_store_task_requeue(db, id1, "retry", &err), 1);
	ck_assert_int_eq(lcd_store_task_cancel_queued(db, id1, 5000, &err), 1);
	ck_assert_int_eq(lcd_store_task_cancel_queued(db, id1, 5000, &err), 0);
	for (int i = 0; i < 3; i++)
		json_decref(t[i]);
	json_decref(ids);
}
END_TEST

START_TEST(test_spawn_map_all_or_nothing)
{
	lc_error_t *err = NULL;
	json_t *ids = json_array();
	json_t *list = json_array();
	for (int i = 0; i < 50; i++)
		json_array_append_new(list, json_pack("{s:i}", "i", i));
	ck_assert_int_eq(add_one(db, "demo", "m", NULL, list, 5, 40, 1, ids, &err), -1);
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(json_array_size(ids), 0);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "m", "queued", &err), 0);
	ck_assert_int_eq(add_one(db, "demo", "m", NULL, list, 5, 45, 1, ids, &err), 0);
	ck_assert_int_eq(json_array_size(ids), 50);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "m", "queued", &err), 50);
	json_decref(list);
	json_decref(ids);
}
END_TEST

static void *claimer(void *arg)
{
	long n = (long)arg;
	char v[16];
	snprintf(v, sizeof(v), "w%ld", n);
	lc_error_t *err = NULL;
	int r = lcd_store_map_set(db, "demo", "claims", "issue-1", v, 0, true, 1000, &err);
	lc_error_free(err);
	return (void *)(long)r;
}

START_TEST(test_claim_race)
{
	pthread_t th[20];
	for (long i = 0; i < 20; i++)
		pthread_create(&th[i], NULL, claimer, (void *)i);
	int won = 0, lost = 0;
	for (int i = 0; i < 20; i++) {
		void *r;
		pthread_join(th[i], &r);
		if ((long)r == 1)
			won++;
		else if ((long)r == 0)
			lost++;
	}
	ck_assert_int_eq(won, 1);
	ck_assert_int_eq(lost, 19);
}
END_TEST

/* The same race between handles of their own (on PostgreSQL: nodes, each
 * with its connection): still exactly one claim wins. */
static void *claimer_own(void *arg)
{
	long n = (long)arg;
	char v[16];
	snprintf(v, sizeof(v), "w%ld", n);
	lcd_db_t *mine = NULL;
	lc_error_t *err = NULL;
	int r = -1;
	if (lcd_db_open(path, &mine, &err) == 0)
		r = lcd_store_map_set(mine, "demo", "claims", "issue-2", v, 0, true, 1000, &err);
	lc_error_free(err);
	lcd_db_close(mine);
	return (void *)(long)r;
}

START_TEST(test_claim_race_handles)
{
	pthread_t th[8];
	for (long i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, claimer_own, (void *)i);
	int won = 0, lost = 0;
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(th[i], &r);
		if ((long)r == 1)
			won++;
		else if ((long)r == 0)
			lost++;
	}
	ck_assert_int_eq(won, 1);
	ck_assert_int_eq(lost, 7);
}
END_TEST

/* Starts racing from handles of their own never pass the function's
 * concurrency: a check-then-write in one transaction holds across them. */
static void *starter_own(void *arg)
{
	(void)arg;
	lcd_db_t *mine = NULL;
	lc_error_t *err = NULL;
	long started = 0;
	if (lcd_db_open(path, &mine, &err) == 0)
		for (int k = 0; k < 5; k++) {
			json_t *t = lcd_store_task_start(mine, "demo", "race", 3, "cccccccccccc", 2000, &err);
			if (t)
				started++;
			json_decref(t);
			if (err)
				started = -100;
		}
	lc_error_free(err);
	lcd_db_close(mine);
	return (void *)started;
}

START_TEST(test_start_race_handles)
{
	lc_error_t *err = NULL;
	json_t *ids = json_array(), *list = json_array();
	for (int i = 0; i < 10; i++)
		json_array_append_new(list, json_pack("{s:i}", "i", i));
	ck_assert_int_eq(add_one(db, "demo", "race", NULL, list, 3, 20, 1000, ids, &err), 0);
	pthread_t th[6];
	for (long i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, starter_own, NULL);
	long started = 0;
	for (int i = 0; i < 6; i++) {
		void *r;
		pthread_join(th[i], &r);
		started += (long)r;
	}
	ck_assert_int_eq(started, 3);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "race", "running", &err), 3);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "race", "queued", &err), 7);
	json_decref(list);
	json_decref(ids);
}
END_TEST

START_TEST(test_map_ttl)
{
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_store_map_set(db, "demo", "m", "k", "v1", 10, false, 1000, &err), 1);
	char *v = lcd_store_map_get(db, "demo", "m", "k", 5000, &err);
	ck_assert_str_eq(v, "v1");
	free(v);
	/* Expired at 1000 + 10 s: invisible to get, list, and a claim wins it. */
	ck_assert_ptr_null(lcd_store_map_get(db, "demo", "m", "k", 11000, &err));
	ck_assert_ptr_null(err);
	json_t *l = lcd_store_map_list(db, "demo", "m", NULL, 11000, &err);
	ck_assert_int_eq(json_array_size(l), 0);
	json_decref(l);
	ck_assert_int_eq(lcd_store_map_set(db, "demo", "m", "k", "v2", 0, true, 5000, &err), 0);
	ck_assert_int_eq(lcd_store_map_set(db, "demo", "m", "k", "v2", 0, true, 11000, &err), 1);
	v = lcd_store_map_get(db, "demo", "m", "k", 99999999, &err);
	ck_assert_str_eq(v, "v2"); /* no ttl now */
	free(v);
	/* gc removes only expired rows */
	ck_assert_int_eq(lcd_store_map_set(db, "demo", "m", "gone", "x", 1, false, 1000, &err), 1);
	ck_assert_int_eq(lcd_store_map_gc(db, 3000, &err), 1);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM maps", ""), 1);
	ck_assert_int_eq(lcd_store_map_del(db, "demo", "m", "k", 1, &err), 1);
	ck_assert_int_eq(lcd_store_map_del(db, "demo", "m", "k", 1, &err), 0);
	/* prefix listing */
	lcd_store_map_set(db, "demo", "m", "issue/1", "a", 0, false, 1, &err);
	lcd_store_map_set(db, "demo", "m", "issue/2", "b", 0, false, 1, &err);
	lcd_store_map_set(db, "demo", "m", "pr/1", "c", 0, false, 1, &err);
	l = lcd_store_map_list(db, "demo", "m", "issue/", 1, &err);
	ck_assert_int_eq(json_array_size(l), 2);
	json_decref(l);
}
END_TEST

/* A group committed together: each request is admitted or refused on its
 * own, in order, against the rows the earlier ones of the group added. */
START_TEST(test_spawn_group)
{
	json_t *ids[4], *args[4];
	lcd_task_add_t r[4], *reqs[4];
	for (int i = 0; i < 4; i++) {
		ids[i] = json_array();
		args[i] = json_pack("[{s:i}, {s:i}]", "i", 2 * i, "i", 2 * i + 1);
		r[i] = (lcd_task_add_t){ .app = "demo", .function = i == 2 ? "other" : "solve", .args_list = args[i],
					 .concurrency = 1, .queue = 3, .ids = ids[i] };
		reqs[i] = &r[i];
	}
	lcd_store_task_add(db, reqs, 4, 1);
	/* solve holds 4: the first two requests fit, the fourth does not;
	 * the third is another function's */
	ck_assert_ptr_null(r[0].err);
	ck_assert_ptr_null(r[1].err);
	ck_assert_ptr_null(r[2].err);
	ck_assert_ptr_nonnull(r[3].err);
	ck_assert_int_eq(r[3].err->exit_code, LC_EXIT_BUSY);
	ck_assert_ptr_nonnull(strstr(r[3].err->msg, "0 running, 4 queued"));
	ck_assert(r[0].can_start && r[1].can_start && r[2].can_start);
	ck_assert_int_eq(json_array_size(ids[0]), 2);
	ck_assert_int_eq(json_array_size(ids[1]), 2);
	ck_assert_int_eq(json_array_size(ids[3]), 0);
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "solve", "queued", &err), 4);
	ck_assert_int_eq(lcd_store_task_count(db, "demo", "other", "queued", &err), 2);
	/* in order: the first request's tasks come first */
	json_t *t = lcd_store_task_start(db, "demo", "solve", 1, "aaaaaaaaaaaa", 2, &err);
	ck_assert_str_eq(json_string_value(json_object_get(t, "id")), json_string_value(json_array_get(ids[0], 0)));
	json_decref(t);
	/* at its concurrency, a function's new task cannot start at once */
	json_t *one = json_pack("[{}]");
	json_t *more = json_array();
	lcd_task_add_t late = { .app = "demo", .function = "other", .args_list = one, .concurrency = 1, .queue = 3,
				.ids = more }, *lp = &late;
	t = lcd_store_task_start(db, "demo", "other", 1, "bbbbbbbbbbbb", 2, &err);
	ck_assert_ptr_nonnull(t);
	json_decref(t);
	lcd_store_task_add(db, &lp, 1, 3);
	ck_assert_ptr_null(late.err);
	ck_assert(!late.can_start);
	lc_error_free(r[3].err);
	for (int i = 0; i < 4; i++) {
		json_decref(ids[i]);
		json_decref(args[i]);
	}
	json_decref(one);
	json_decref(more);
}
END_TEST

START_TEST(test_app_delete_cascades)
{
	lc_error_t *err = NULL;
	json_t *ids = json_array(), *one = json_pack("[{}]");
	ck_assert_int_eq(add_one(db, "demo", "solve", NULL, one, 1, 1, 1, ids, &err), 0);
	lcd_store_map_set(db, "demo", "m", "k", "v", 0, false, 1, &err);
	ck_assert_int_eq(lcd_store_app_delete(db, "demo", &err), 1);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM tasks", ""), 0);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM maps", ""), 0);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM schedules", ""), 0);
	json_decref(one);
	json_decref(ids);
}
END_TEST

START_TEST(test_redeploy_keeps_schedule_state)
{
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_store_schedule_pause(db, "demo", "nightly", true, &err), 1);
	ck_assert_int_eq(lcd_store_schedule_set_slot(db, "demo", "nightly", 4242, &err), 1);
	char *scheds[] = { "nightly", "hourly", NULL };
	bool replaced = false;
	ck_assert_int_eq(lcd_store_app_put(db, "demo", "{}", scheds, 9000, &replaced, &err), 0);
	ck_assert(replaced);
	json_t *s = lcd_store_schedules(db, &err);
	ck_assert_int_eq(json_array_size(s), 2);
	json_t *h = json_array_get(s, 0), *n = json_array_get(s, 1);
	ck_assert_str_eq(json_string_value(json_object_get(h, "name")), "hourly");
	ck_assert_int_eq(json_integer_value(json_object_get(h, "last_slot")), 9000);
	ck_assert_int_eq(json_integer_value(json_object_get(n, "paused")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(n, "last_slot")), 4242);
	json_decref(s);
	char *none[] = { NULL };
	ck_assert_int_eq(lcd_store_app_put(db, "demo", "{}", none, 9000, NULL, &err), 0);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM schedules", ""), 0);
}
END_TEST

START_TEST(test_secrets)
{
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_store_secret_set(db, "KEY", "s3cr3t", 1, &err), 1);
	ck_assert_int_eq(lcd_store_secret_set(db, "KEY", "other", 2, &err), 1);
	char *v = lcd_store_secret_get(db, "KEY", &err);
	ck_assert_str_eq(v, "other");
	free(v);
	json_t *names = lcd_store_secret_names(db, &err);
	ck_assert_int_eq(json_array_size(names), 1);
	ck_assert_ptr_null(json_object_get(json_array_get(names, 0), "value"));
	json_decref(names);
	ck_assert_int_eq(lcd_store_secret_delete(db, "KEY", &err), 1);
	ck_assert_ptr_null(lcd_store_secret_get(db, "KEY", &err));
	ck_assert_ptr_null(err);
}
END_TEST

/* At rest a secret is sealed: the store holds no plain value, another
 * key opens nothing (and a node with it is refused at start), a sealed
 * value moved to another name does not open; rows from before sealing
 * are sealed at start. */
START_TEST(test_secrets_sealed)
{
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_store_secret_set(db, "KEY", "s3cr3t-plain", 1, &err), 1);
	json_t *rows = lcd_db_query(db, &err, "SELECT value, sealed FROM secrets", "");
	const char *stored = json_string_value(json_object_get(json_array_get(rows, 0), "value"));
	ck_assert_ptr_nonnull(stored);
	ck_assert_ptr_null(strstr(stored, "s3cr3t"));
	ck_assert_int_eq(strncmp(stored, "v1:", 3), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(rows, 0), "sealed")), 1);
	/* moved to another name: does not open */
	ck_assert_int_eq(lcd_db_exec(db, &err, "INSERT INTO secrets (name, value, sealed, updated_at) VALUES ('OTHER', ?, 1, 1)",
				     "s", stored), 1);
	json_decref(rows);
	ck_assert_ptr_null(lcd_store_secret_get(db, "OTHER", &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	lc_error_free(err);
	err = NULL;
	/* a second handle with another key: refused at start, opens nothing */
	lcd_db_t *other = NULL;
	ck_assert_int_eq(lcd_db_open(path, &other, &err), 0);
	lcd_db_set_seal_key(other, key2);
	ck_assert_int_eq(lcd_store_secrets_seal(other, &err), -1);
	ck_assert_ptr_nonnull(strstr(err->msg, "same secret_key_file"));
	lc_error_free(err);
	err = NULL;
	ck_assert_ptr_null(lcd_store_secret_get(other, "KEY", &err));
	ck_assert_ptr_nonnull(strstr(err->msg, "does not open"));
	lc_error_free(err);
	err = NULL;
	lcd_db_close(other);
	/* a row from before sealing: sealed by the next start, still readable */
	ck_assert_int_eq(lcd_db_exec(db, &err, "INSERT INTO secrets (name, value, updated_at) VALUES ('OLD', 'old-plain', 1)",
				     ""), 1);
	ck_assert_ptr_null(lcd_store_secret_get(db, "OLD", &err));
	ck_assert_ptr_nonnull(strstr(err->msg, "not sealed"));
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lcd_store_secrets_seal(db, &err), 1);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM secrets WHERE value LIKE '%plain%'", ""), 0);
	char *v = lcd_store_secret_get(db, "OLD", &err);
	ck_assert_str_eq(v, "old-plain");
	free(v);
	ck_assert_int_eq(lcd_store_secrets_seal(db, &err), 0);
	/* no key: nothing is set */
	lcd_db_t *nokey = NULL;
	ck_assert_int_eq(lcd_db_open(path, &nokey, &err), 0);
	ck_assert_int_eq(lcd_store_secret_set(nokey, "X", "y", 1, &err), -1);
	ck_assert_ptr_nonnull(strstr(err->msg, "secret_key_file"));
	lc_error_free(err);
	lcd_db_close(nokey);
}
END_TEST

/* The key file: made 0600 with 64 hex digits, read back; one others may
 * read, or of the wrong length, is refused. */
START_TEST(test_seal_key_file)
{
	char kdir[] = "/tmp/lcd-key-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(kdir));
	_cleanup_free_ char *k = lc_strdup_printf("%s/lcd.key", kdir);
	lc_error_t *err = NULL;
	unsigned char key[LCD_SEAL_KEY_LEN], again[LCD_SEAL_KEY_LEN];
	ck_assert_int_eq(lcd_seal_key_create(k, &err), 0);
	struct stat st;
	ck_assert_int_eq(stat(k, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(lcd_seal_key_read(k, key, &err), 0);
	ck_assert_int_eq(lcd_seal_key_create(k, &err), -1); /* never overwritten */
	ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lcd_seal_key_read(k, again, &err), 0);
	ck_assert_int_eq(memcmp(key, again, sizeof(key)), 0);
	char *sealed = lcd_seal(key, "N", "value", &err);
	char *plain = lcd_unseal(key, "N", sealed, &err);
	ck_assert_str_eq(plain, "value");
	free(plain);
	/* a byte changed: does not open */
	sealed[10] = sealed[10] == 'A' ? 'B' : 'A';
	ck_assert_ptr_null(lcd_unseal(key, "N", sealed, &err));
	lc_error_free(err);
	err = NULL;
	free(sealed);
	ck_assert_int_eq(chmod(k, 0644), 0);
	ck_assert_int_eq(lcd_seal_key_read(k, key, &err), -1);
	ck_assert_ptr_nonnull(strstr(err->msg, "chmod 600"));
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(chmod(k, 0600), 0);
	ck_assert_int_eq(lc_write_file_atomic(k, "abcd\n", 5, 0600, &err), 0);
	ck_assert_int_eq(lcd_seal_key_read(k, key, &err), -1);
	ck_assert_ptr_nonnull(strstr(err->msg, "64 hex digits"));
	lc_error_free(err);
	lc_rm_rf(kdir, NULL);
}
END_TEST

static TCase *store_tcase(const char *name, void (*engine)(void))
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, engine, NULL);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_schema_version);
	tcase_add_test(tc, test_query_one);
	tcase_add_test(tc, test_queue_admission);
	tcase_add_test(tc, test_spawn_map_all_or_nothing);
	tcase_add_test(tc, test_spawn_group);
	tcase_add_test(tc, test_claim_race);
	tcase_add_test(tc, test_claim_race_handles);
	tcase_add_test(tc, test_start_race_handles);
	tcase_add_test(tc, test_map_ttl);
	tcase_add_test(tc, test_app_delete_cascades);
	tcase_add_test(tc, test_redeploy_keeps_schedule_state);
	tcase_add_test(tc, test_secrets);
	tcase_add_test(tc, test_secrets_sealed);
	return tc;
}

int main(void)
{
	Suite *s = suite_create("store");
	TCase *seal = tcase_create("seal");
	tcase_add_test(seal, test_seal_key_file);
	suite_add_tcase(s, seal);
	suite_add_tcase(s, store_tcase("sqlite", dbtest_on_sqlite));
	if (dbtest_pg_url())
		suite_add_tcase(s, store_tcase("postgresql", dbtest_on_pg));
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
