/* db_sqlite.c — the SQLite engine of lcd's store: one file, WAL, foreign
 * keys on, the schema version in PRAGMA user_version. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sqlite3.h>

#include "db_engine.h"
#include "util.h"

static sqlite3 *conn(lcd_db_t *db)
{
	return db->conn;
}

static int sql_fail(lcd_db_t *db, lc_error_t **err, const char *what)
{
	int code = sqlite3_errcode(conn(db));
	/* SQLite says "database or disk is full": name the disk, as every
	 * other write that meets a full disk does (ENOSPC) */
	if (code == SQLITE_FULL)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOSPC, "database: %s: cannot write lcd.db, its disk is full", what);
	int exit_code = (code == SQLITE_BUSY || code == SQLITE_LOCKED) ? LC_EXIT_BUSY : LC_EXIT_RUNTIME;
	return lc_error_set(err, exit_code, 0, "database: %s: %s", what, sqlite3_errmsg(conn(db)));
}

static int script(lcd_db_t *db, const char *sql, lc_error_t **err)
{
	char *msg = NULL;
	if (sqlite3_exec(conn(db), sql, NULL, NULL, &msg) != SQLITE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: %s", msg ? msg : "error");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static json_t *column_json(sqlite3_stmt *st, int i)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		return json_integer(sqlite3_column_int64(st, i));
	case SQLITE_FLOAT:
		return json_real(sqlite3_column_double(st, i));
	case SQLITE_NULL:
		return json_null();
	default:
		return json_stringn((const char *)sqlite3_column_text(st, i), (size_t)sqlite3_column_bytes(st, i));
	}
}

/* A SELECT's FOR UPDATE [SKIP LOCKED] (db.h): SQLite has no row locks;
 * its writing transaction holds the whole file.  The length of the
 * statement without it, or -1: all of it. */
static int without_row_lock(const char *sql)
{
	static const char *const tails[] = { " FOR UPDATE SKIP LOCKED", " FOR UPDATE" };
	size_t n = strlen(sql);
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		size_t t = strlen(tails[i]);
		if (n > t && !strcasecmp(sql + n - t, tails[i]))
			return (int)(n - t);
	}
	return -1;
}

static int run(lcd_db_t *db, const char *sql, const lcd_db_param_t *p, size_t n, lcd_db_sink_t *out, lc_error_t **err)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(conn(db), sql, without_row_lock(sql), &st, NULL) != SQLITE_OK)
		return sql_fail(db, err, "prepare");
	for (size_t k = 0; k < n; k++) {
		int idx = (int)k + 1, rc;
		if (p[k].type == 's')
			rc = p[k].s ? sqlite3_bind_text(st, idx, p[k].s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, idx);
		else if (p[k].type == 'i')
			rc = sqlite3_bind_int64(st, idx, p[k].i);
		else
			rc = sqlite3_bind_null(st, idx);
		if (rc != SQLITE_OK) {
			sql_fail(db, err, "bind");
			sqlite3_finalize(st);
			return -1;
		}
	}
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (out->rows) {
			json_t *row = json_object();
			for (int i = 0; i < sqlite3_column_count(st); i++) {
				json_t *v = column_json(st, i);
				json_object_set_new(row, sqlite3_column_name(st, i), v ? v : json_null());
			}
			json_array_append_new(out->rows, row);
		} else if (out->first && !*out->found) {
			*out->first = sqlite3_column_int64(st, 0);
			*out->found = true;
			rc = SQLITE_DONE;
			break;
		}
	}
	int r = 0;
	if (rc == SQLITE_DONE)
		out->changes = sqlite3_changes(conn(db));
	else
		r = sql_fail(db, err, out->rows || out->first ? "query" : "step");
	sqlite3_finalize(st);
	return r;
}

static int begin(lcd_db_t *db, const char *lock, lc_error_t **err)
{
	(void)lock; /* one writer at a time, whatever it names */
	return script(db, "BEGIN IMMEDIATE", err);
}

/* One lcd per state directory (lcd.c's lock file): nothing to hold here. */
static int migration_lock(lcd_db_t *db, bool take, lc_error_t **err)
{
	(void)db, (void)take, (void)err;
	return 0;
}

static long long version(lcd_db_t *db, lc_error_t **err)
{
	long long v = 0;
	bool found = false;
	lcd_db_sink_t out = { .first = &v, .found = &found };
	return run(db, "PRAGMA user_version", NULL, 0, &out, err) < 0 ? -1 : v;
}

static int step(lcd_db_t *db, const char *sql, int to, lc_error_t **err)
{
	_cleanup_free_ char *bump = lc_strdup_printf("PRAGMA user_version = %d", to);
	return script(db, sql, err) < 0 || script(db, bump, err) < 0 ? -1 : 0;
}

/* lcd_now_ms(): this host's wall clock, as the PostgreSQL engine's
 * function of that name gives the server's. */
static void now_ms(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc, (void)argv;
	sqlite3_result_int64(ctx, lc_wall_ms());
}

static void close_conn(lcd_db_t *db)
{
	sqlite3_close(conn(db));
	db->conn = NULL;
}

const lcd_db_ops_t lcd_db_sqlite_ops = {
	.name = "sqlite",
	.run = run,
	.script = script,
	.begin = begin,
	.migration_lock = migration_lock,
	.version = version,
	.step = step,
	.close = close_conn,
};

int lcd_db_sqlite_open(lcd_db_t *db, const char *path, lc_error_t **err)
{
	/* Secrets live here: create it 0600 before SQLite does (its -wal and
	 * -shm files take the database file's mode). */
	int pfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (pfd < 0 || fchmod(pfd, 0600) < 0) {
		int e = errno;
		if (pfd >= 0)
			close(pfd);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot create it");
	}
	close(pfd);
	sqlite3 *c = NULL;
	int rc = sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot open it: %s", c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
		sqlite3_close(c);
		return -1;
	}
	db->conn = c;
	sqlite3_busy_timeout(c, 5000);
	sqlite3_create_function(c, "lcd_now_ms", 0, SQLITE_UTF8, NULL, now_ms, NULL, NULL);
	/* FULL, not NORMAL: lcd answers "done" (a task accepted, a secret
	 * set, an app deployed, a ledger row) once the commit returns, and in
	 * WAL mode only FULL syncs the WAL at each commit; NORMAL keeps the
	 * file whole at a power cut but may lose the last commits (see
	 * docs/design/faults.md, "Power loss", for the cost measured). */
	return script(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;", err);
}
