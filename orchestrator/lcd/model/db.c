/* db.c — SQLite access for lcd: schema, migrations, small query helpers. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "db.h"
#include "util.h"

struct lcd_db {
	sqlite3 *conn;
	pthread_mutex_t lock;
};

/* migrations[i] brings the schema from version i to i + 1.  Never edit a
 * shipped step: add a new one. */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE apps ("
	"  name TEXT PRIMARY KEY,"
	"  manifest TEXT NOT NULL,"
	"  deployed_at INTEGER NOT NULL);"
	"CREATE TABLE tasks ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  id TEXT NOT NULL UNIQUE,"
	"  app TEXT NOT NULL REFERENCES apps(name) ON DELETE CASCADE,"
	"  function TEXT NOT NULL,"
	"  schedule TEXT,"
	"  state TEXT NOT NULL CHECK (state IN ('queued','running','succeeded','failed','timed-out','cancelled')),"
	"  args TEXT NOT NULL,"
	"  result TEXT,"
	"  exit_code INTEGER,"
	"  error TEXT,"
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  sandbox_id TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  started_at INTEGER,"
	"  finished_at INTEGER);"
	"CREATE INDEX tasks_fn_state ON tasks(app, function, state);"
	"CREATE INDEX tasks_state ON tasks(state);"
	"CREATE TABLE maps ("
	"  app TEXT NOT NULL REFERENCES apps(name) ON DELETE CASCADE,"
	"  map TEXT NOT NULL,"
	"  key TEXT NOT NULL,"
	"  value TEXT NOT NULL,"
	"  expires_at INTEGER,"
	"  updated_at INTEGER NOT NULL,"
	"  PRIMARY KEY (app, map, key));"
	"CREATE INDEX maps_expiry ON maps(expires_at) WHERE expires_at IS NOT NULL;"
	"CREATE TABLE schedules ("
	"  app TEXT NOT NULL REFERENCES apps(name) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  paused INTEGER NOT NULL DEFAULT 0,"
	"  last_slot INTEGER NOT NULL,"
	"  PRIMARY KEY (app, name));"
	"CREATE TABLE secrets ("
	"  name TEXT PRIMARY KEY,"
	"  value BLOB NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 1 -> 2: webhook deliveries already handed on (delivery.c) */
	"CREATE TABLE webhook_deliveries ("
	"  app TEXT NOT NULL REFERENCES apps(name) ON DELETE CASCADE,"
	"  hook TEXT NOT NULL,"
	"  delivery TEXT NOT NULL,"
	"  event TEXT NOT NULL,"
	"  task_id TEXT,"
	"  received_at INTEGER NOT NULL,"
	"  PRIMARY KEY (app, hook, delivery));"
	"CREATE INDEX webhook_deliveries_age ON webhook_deliveries(received_at);",
	/* 2 -> 3: the sandbox API.  A task's token is kept as its SHA-256
	 * only; a sandbox's row is written before the sandbox is made, so a
	 * crash at any moment leaves a row that names what to remove. */
	"CREATE TABLE tokens ("
	"  hash TEXT PRIMARY KEY,"
	"  task_id TEXT NOT NULL,"
	"  app TEXT NOT NULL,"
	"  function TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"CREATE INDEX tokens_task ON tokens(task_id);"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT UNIQUE,"
	"  app TEXT,"
	"  task_id TEXT,"
	"  function TEXT,"
	"  state TEXT NOT NULL CHECK (state IN ('creating','live','deleting')),"
	"  image TEXT NOT NULL,"
	"  request TEXT NOT NULL,"
	"  labels TEXT NOT NULL,"
	"  secrets TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"CREATE INDEX sandboxes_task ON sandboxes(task_id);"
	"CREATE INDEX sandboxes_app ON sandboxes(app);",
	/* 3 -> 4: the model gateway (gateway.c, ledger.c).  A sandbox's
	 * gateway token is kept as its SHA-256 only; the ledger keeps one row
	 * per request (and per refusal) after the sandbox is gone. */
	"CREATE TABLE gateway_sandboxes ("
	"  sandbox_id TEXT PRIMARY KEY,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  provider TEXT NOT NULL,"
	"  secret TEXT NOT NULL,"
	"  budget_pusd INTEGER,"
	"  task_id TEXT,"
	"  app TEXT,"
	"  function TEXT,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE gateway_ledger ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  at INTEGER NOT NULL,"
	"  sandbox_id TEXT NOT NULL,"
	"  task_id TEXT,"
	"  app TEXT,"
	"  provider TEXT NOT NULL,"
	"  model TEXT,"
	"  path TEXT NOT NULL,"
	"  status INTEGER NOT NULL,"
	"  outcome TEXT NOT NULL,"
	"  input_tokens INTEGER NOT NULL,"
	"  output_tokens INTEGER NOT NULL,"
	"  cache_read_tokens INTEGER NOT NULL,"
	"  cache_write_tokens INTEGER NOT NULL,"
	"  cost_pusd INTEGER NOT NULL,"
	"  budget_exceeded INTEGER NOT NULL,"
	"  ms INTEGER NOT NULL);"
	"CREATE INDEX gateway_ledger_sandbox ON gateway_ledger(sandbox_id);"
	"CREATE INDEX gateway_ledger_task ON gateway_ledger(task_id);"
	"CREATE INDEX gateway_ledger_app ON gateway_ledger(app, at);",
	/* 4 -> 5: sandboxes that ended, kept 30 days for GET
	 * /v1/sandboxes?history=1 (sandboxes.c) */
	"CREATE TABLE sandbox_history ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT,"
	"  app TEXT,"
	"  task_id TEXT,"
	"  function TEXT,"
	"  image TEXT NOT NULL,"
	"  labels TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  ended_at INTEGER NOT NULL,"
	"  end_reason TEXT NOT NULL);"
	"CREATE INDEX sandbox_history_app ON sandbox_history(app, created_at);"
	"CREATE INDEX sandbox_history_age ON sandbox_history(ended_at);",
	/* 5 -> 6: devboxes (devbox.c).  A box's disk is a file of its own under
	 * lcd/disks/; its row holds the definition, the sandbox that runs it
	 * (written before that sandbox is made, so a crash leaves its id) and
	 * the public host key read from its disk. */
	"CREATE TABLE devboxes ("
	"  name TEXT PRIMARY KEY,"
	"  app TEXT,"
	"  def TEXT NOT NULL,"
	"  sandbox_id TEXT,"
	"  host_key TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  started_at INTEGER,"
	"  stopped_at INTEGER,"
	"  stop_reason TEXT);"
	"CREATE INDEX devboxes_app ON devboxes(app);",
	/* 6 -> 7: the gateway reserves before it forwards (gwreq.c): each
	 * request's reservation beside its cost; refusals are counted per
	 * sandbox and reason, not written one row each. */
	"ALTER TABLE gateway_ledger ADD COLUMN reserved_pusd INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE gateway_refusals ("
	"  sandbox_id TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  task_id TEXT,"
	"  app TEXT,"
	"  count INTEGER NOT NULL,"
	"  first_at INTEGER NOT NULL,"
	"  last_at INTEGER NOT NULL,"
	"  PRIMARY KEY (sandbox_id, reason));"
	"CREATE INDEX gateway_refusals_task ON gateway_refusals(task_id);"
	"CREATE INDEX gateway_refusals_app ON gateway_refusals(app);",
	/* 7 -> 8: each app in a room of its own (grant.c).  A sandbox's name
	 * is unique in its app (the operator's: among the operator's); the
	 * images lcd's sandboxes are snapshotted or forked into have an owner
	 * and, forks, an end. */
	"CREATE TABLE sandboxes_new ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT,"
	"  app TEXT,"
	"  task_id TEXT,"
	"  function TEXT,"
	"  state TEXT NOT NULL CHECK (state IN ('creating','live','deleting')),"
	"  image TEXT NOT NULL,"
	"  request TEXT NOT NULL,"
	"  labels TEXT NOT NULL,"
	"  secrets TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"INSERT INTO sandboxes_new SELECT id, name, app, task_id, function, state, image, request, labels, secrets, "
	"created_at FROM sandboxes;"
	"DROP TABLE sandboxes;"
	"ALTER TABLE sandboxes_new RENAME TO sandboxes;"
	"CREATE INDEX sandboxes_task ON sandboxes(task_id);"
	"CREATE INDEX sandboxes_app ON sandboxes(app);"
	"CREATE UNIQUE INDEX sandboxes_name ON sandboxes(coalesce(app, ''), name) WHERE name IS NOT NULL;"
	"CREATE TABLE images ("
	"  name TEXT PRIMARY KEY,"
	"  digest TEXT,"
	"  app TEXT,"
	"  task_id TEXT,"
	"  kind TEXT NOT NULL CHECK (kind IN ('snapshot','fork')),"
	"  sandbox_id TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  expires_at INTEGER);"
	"CREATE INDEX images_app ON images(app);"
	"CREATE INDEX images_expiry ON images(expires_at) WHERE expires_at IS NOT NULL;"
	/* ... and a webhook's delivery is one by its body too (delivery.c) */
	"ALTER TABLE webhook_deliveries ADD COLUMN body_sha256 TEXT;"
	"CREATE UNIQUE INDEX webhook_deliveries_body ON webhook_deliveries(app, hook, body_sha256) "
	"WHERE body_sha256 IS NOT NULL;",
};

static int sql_fail(lcd_db_t *db, lc_error_t **err, const char *what)
{
	int code = sqlite3_errcode(db->conn);
	/* SQLite says "database or disk is full": name the disk, as every
	 * other write that meets a full disk does (ENOSPC) */
	if (code == SQLITE_FULL)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOSPC, "database: %s: cannot write lcd.db, its disk is full", what);
	int exit_code = (code == SQLITE_BUSY || code == SQLITE_LOCKED) ? LC_EXIT_BUSY : LC_EXIT_RUNTIME;
	return lc_error_set(err, exit_code, 0, "database: %s: %s", what, sqlite3_errmsg(db->conn));
}

static int exec_plain(lcd_db_t *db, const char *sql, lc_error_t **err)
{
	char *msg = NULL;
	if (sqlite3_exec(db->conn, sql, NULL, NULL, &msg) != SQLITE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: %s", msg ? msg : "error");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int migrate(lcd_db_t *db, const char *path, lc_error_t **err)
{
	const int target = (int)(sizeof(migrations) / sizeof(migrations[0]));
	long long v = lcd_db_query_int(db, err, 0, "PRAGMA user_version", "");
	if (v < 0)
		return -1;
	if (v > target)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "%s has schema version %lld, newer than this lcd knows (%d)", path, v, target);
	for (int i = (int)v; i < target; i++) {
		if (lcd_db_begin(db, err) < 0)
			return -1;
		_cleanup_free_ char *bump = lc_strdup_printf("PRAGMA user_version = %d", i + 1);
		if (exec_plain(db, migrations[i], err) < 0 || exec_plain(db, bump, err) < 0) {
			lcd_db_rollback(db);
			return lc_error_wrap(err, "%s: migration to schema version %d", path, i + 1);
		}
		if (lcd_db_commit(db, err) < 0)
			return -1;
	}
	return 0;
}

int lcd_db_open(const char *path, lcd_db_t **out, lc_error_t **err)
{
	lcd_db_t *db = lc_xmalloc0(sizeof(*db));
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&db->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	/* Secrets live here: create it 0600 before SQLite does (its -wal and
	 * -shm files take the database file's mode). */
	int pfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (pfd < 0 || fchmod(pfd, 0600) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create database %s", path);
		if (pfd >= 0)
			close(pfd);
		lcd_db_close(db);
		return -1;
	}
	close(pfd);
	int rc = sqlite3_open_v2(path, &db->conn,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot open database %s: %s", path,
			     db->conn ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
		lcd_db_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db->conn, 5000);
	if (exec_plain(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
		       err) < 0 ||
	    migrate(db, path, err) < 0) {
		lc_error_wrap(err, "database %s", path);
		lcd_db_close(db);
		return -1;
	}
	*out = db;
	return 0;
}

void lcd_db_close(lcd_db_t *db)
{
	if (!db)
		return;
	if (db->conn)
		sqlite3_close(db->conn);
	pthread_mutex_destroy(&db->lock);
	free(db);
}

void lcd_db_lock(lcd_db_t *db)
{
	pthread_mutex_lock(&db->lock);
}

void lcd_db_unlock(lcd_db_t *db)
{
	pthread_mutex_unlock(&db->lock);
}

int lcd_db_begin(lcd_db_t *db, lc_error_t **err)
{
	lcd_db_lock(db);
	if (exec_plain(db, "BEGIN IMMEDIATE", err) < 0) {
		lcd_db_unlock(db);
		return -1;
	}
	return 0;
}

int lcd_db_commit(lcd_db_t *db, lc_error_t **err)
{
	int r = exec_plain(db, "COMMIT", err);
	if (r < 0)
		exec_plain(db, "ROLLBACK", NULL);
	lcd_db_unlock(db);
	return r;
}

void lcd_db_rollback(lcd_db_t *db)
{
	exec_plain(db, "ROLLBACK", NULL);
	lcd_db_unlock(db);
}

static sqlite3_stmt *prepare(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		sql_fail(db, err, "prepare");
		return NULL;
	}
	int idx = 1;
	for (const char *t = types; *t; t++, idx++) {
		int rc;
		if (*t == 's') {
			const char *s = va_arg(ap, const char *);
			rc = s ? sqlite3_bind_text(st, idx, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, idx);
		} else if (*t == 'i') {
			rc = sqlite3_bind_int64(st, idx, va_arg(ap, long long));
		} else {
			rc = sqlite3_bind_null(st, idx);
		}
		if (rc != SQLITE_OK) {
			sql_fail(db, err, "bind");
			sqlite3_finalize(st);
			return NULL;
		}
	}
	return st;
}

int lcd_db_exec(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...)
{
	va_list ap;
	lcd_db_lock(db);
	va_start(ap, types);
	sqlite3_stmt *st = prepare(db, err, sql, types, ap);
	va_end(ap);
	int r = -1;
	if (st) {
		int rc;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc == SQLITE_DONE)
			r = sqlite3_changes(db->conn);
		else
			sql_fail(db, err, "step");
		sqlite3_finalize(st);
	}
	lcd_db_unlock(db);
	return r;
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

static json_t *query_v(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = prepare(db, err, sql, types, ap);
	if (!st)
		return NULL;
	json_t *rows = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *row = json_object();
		for (int i = 0; i < sqlite3_column_count(st); i++) {
			json_t *v = column_json(st, i);
			json_object_set_new(row, sqlite3_column_name(st, i), v ? v : json_null());
		}
		json_array_append_new(rows, row);
	}
	if (rc != SQLITE_DONE) {
		sql_fail(db, err, "query");
		json_decref(rows);
		rows = NULL;
	}
	sqlite3_finalize(st);
	return rows;
}

json_t *lcd_db_query(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...)
{
	va_list ap;
	lcd_db_lock(db);
	va_start(ap, types);
	json_t *rows = query_v(db, err, sql, types, ap);
	va_end(ap);
	lcd_db_unlock(db);
	return rows;
}

long long lcd_db_query_int(lcd_db_t *db, lc_error_t **err, long long def, const char *sql, const char *types, ...)
{
	va_list ap;
	lcd_db_lock(db);
	va_start(ap, types);
	sqlite3_stmt *st = prepare(db, err, sql, types, ap);
	va_end(ap);
	long long r = -1;
	if (st) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			r = sqlite3_column_int64(st, 0);
		else if (rc == SQLITE_DONE)
			r = def;
		else
			sql_fail(db, err, "query");
		sqlite3_finalize(st);
	}
	lcd_db_unlock(db);
	return r;
}
