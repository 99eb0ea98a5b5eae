/* db.h — lcd's store, one interface over two engines:
 *
 *   SQLite      a path (lcd.db): one host, no server; WAL, foreign keys
 *               on, the schema version in PRAGMA user_version.
 *   PostgreSQL  a "postgresql://" (or "postgres://") URL: several lcd
 *               nodes share one database; the schema version in the
 *               table lcd_schema.
 *
 * Each handle is one connection guarded by a recursive mutex; the schema
 * is versioned and migrated when a handle is opened (on PostgreSQL by the
 * first node that gets the migration lock, a session advisory lock: the
 * others wait for it and find the schema current).
 *
 * One SQL text for both engines.  Callers write the subset the two speak
 * alike (SQLite >= 3.39, PostgreSQL >= 13): ON CONFLICT upserts and ON
 * CONFLICT DO NOTHING (not INSERT OR REPLACE/IGNORE), IS [NOT] DISTINCT
 * FROM (not IS with a value), count(CASE WHEN ... THEN 1 END) (not sums
 * of comparisons), no scalar max()/min(), no LIMIT -1, an upsert's SET
 * naming the row's own columns as TABLE.column, no PRAGMA outside the
 * engines.  The PostgreSQL engine translates only what cannot be
 * written once (lcd_db_sql_pg): the placeholders ("?" and "?N" become
 * "$N", numbered as SQLite numbers them), and in migration steps the
 * column types (INTEGER is BIGINT there: times are milliseconds; TEXT
 * compares bytewise as in SQLite, COLLATE "C"; BLOB is TEXT: lcd binds
 * text only; PRIMARY KEY AUTOINCREMENT is an identity column).
 * json_extract(doc, '$."key"') exists in both (a function the
 * PostgreSQL engine defines), and so does lcd_now_ms(): the time in ms
 * since the epoch by the store's clock (PostgreSQL: the server's, one
 * clock for every node of a cluster; SQLite: this host's).
 * Why one text and not a statement per engine where they differ: the SQL
 * sits beside the code that uses it, in files many people change; a second
 * copy of each statement would drift from the first unnoticed, and the
 * differences lcd meets are few and mechanical.  What has no common form
 * at all (advisory locks, LISTEN/NOTIFY) is not SQL callers write: it is
 * a function of this interface; a SELECT's FOR UPDATE [SKIP LOCKED] at
 * its end is dropped by the SQLite engine (a writing transaction there
 * holds the whole file).
 *
 * Transactions: lcd_db_begin holds the handle's lock and, on PostgreSQL,
 * a transaction-scoped advisory lock shared by every node: one writing
 * transaction at a time in the whole cluster, the guarantee SQLite's
 * BEGIN IMMEDIATE gives one host, so a check-then-write inside one stays
 * race-free across nodes.
 *
 * A PostgreSQL connection that was lost (a restart of the server) is made
 * again before the next statement; a statement the server refused because
 * it was shutting down (it ran nothing) is sent again on the new
 * connection.  A transaction the loss cut short fails as a whole. */
#ifndef LCD_DB_H
#define LCD_DB_H

#include <stdbool.h>
#include <jansson.h>

#include "error.h"

typedef struct lcd_db lcd_db_t;

#define LCD_DB_SCHEMA_VERSION 11

/* Does where name a PostgreSQL database (a postgresql:// or postgres://
 * URL) rather than an SQLite file? */
bool lcd_db_is_url(const char *where);
/* Open (and migrate) the store at where: an SQLite path or a PostgreSQL
 * URL.  Errors name the path, or the URL without its password. */
int lcd_db_open(const char *where, lcd_db_t **out, lc_error_t **err);
void lcd_db_close(lcd_db_t *db);
/* "sqlite" or "postgresql" */
const char *lcd_db_engine(const lcd_db_t *db);
/* The path, or the URL without its password. */
const char *lcd_db_where(const lcd_db_t *db);
/* The schema version the store is at. */
long long lcd_db_schema_version(lcd_db_t *db, lc_error_t **err);
/* The key the store's secrets are sealed with (seal.h), a copy held by
 * the handle until it is closed; NULL: none was given (secrets can then
 * be neither set nor read). */
void lcd_db_set_seal_key(lcd_db_t *db, const unsigned char *key);
const unsigned char *lcd_db_seal_key(const lcd_db_t *db);
/* The node this handle's lcd is (nodes.c): the store names it in the
 * rows of what it runs and holds.  NULL until set. */
void lcd_db_set_node(lcd_db_t *db, const char *name);
const char *lcd_db_node(const lcd_db_t *db);

/* The lock is recursive: hold it across several statements that must see
 * one state.  lcd_db_begin takes it and opens a writing transaction (see
 * above); commit/rollback end the transaction and release it. */
void lcd_db_lock(lcd_db_t *db);
void lcd_db_unlock(lcd_db_t *db);
int lcd_db_begin(lcd_db_t *db, lc_error_t **err);
/* A writing transaction that holds, instead of the one lock of every
 * writer, a cluster-wide lock of its own name (PostgreSQL: an advisory
 * lock keyed by name): for work that only competes with itself, such as
 * taking a function's next task.  On SQLite the same as lcd_db_begin. */
int lcd_db_begin_on(lcd_db_t *db, const char *lock, lc_error_t **err);
int lcd_db_commit(lcd_db_t *db, lc_error_t **err);
void lcd_db_rollback(lcd_db_t *db);

/* Statements with positional parameters described by `types`, one char a
 * parameter: 's' const char * (NULL binds NULL), 'i' long long, 'n' NULL
 * (no argument consumed).
 * lcd_db_exec returns the number of rows changed, or -1 with *err. */
int lcd_db_exec(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...);
/* Rows as an array of objects {column: value}; NULL with *err on failure.
 * Integers (and PostgreSQL's booleans, as 0 and 1) are JSON integers. */
json_t *lcd_db_query(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...);
/* The one row a statement gives, as lcd_db_query gives rows (a new
 * reference).  No row: NULL with LC_EXIT_UNKNOWN, "no KIND named 'NAME'"
 * (kind "devbox", name the one asked for); more than one: NULL with
 * LC_EXIT_RUNTIME (the statement was to name one). */
json_t *lcd_db_query_one(lcd_db_t *db, lc_error_t **err, const char *kind, const char *name, const char *sql,
			 const char *types, ...);
/* The first column of the first row as an integer, or def when no row. */
long long lcd_db_query_int(lcd_db_t *db, lc_error_t **err, long long def, const char *sql,
			   const char *types, ...);

/* ---- between the nodes of a cluster (PostgreSQL; no-ops on SQLite,
 * where one lcd is the only node) ---- */
/* Tell every node listening on channel (LISTEN/NOTIFY); inside a
 * transaction it is sent when the transaction commits. */
int lcd_db_notify(lcd_db_t *db, const char *channel, const char *payload, lc_error_t **err);
/* A connection of its own that hears channels, and holds the cluster's
 * session locks (lcd_db_listener_lock).  *out NULL on SQLite. */
typedef struct lcd_db_listener lcd_db_listener_t;
int lcd_db_listen(lcd_db_t *db, const char *const *channels, lcd_db_listener_t **out, lc_error_t **err);
/* Wait up to ms: 1 with one notification's channel and payload
 * (malloc'd), 0 when none came, -1 when the connection was lost: it is
 * made again on the next call, and the caller acts as if it had heard
 * every channel (what was sent meanwhile is not known). */
int lcd_db_listen_wait(lcd_db_listener_t *l, int ms, char **channel, char **payload, lc_error_t **err);
/* Try to take (or check that this connection still holds) the session
 * lock of that name: true while held.  A lost connection loses it. */
bool lcd_db_listener_lock(lcd_db_listener_t *l, const char *name);
void lcd_db_listen_close(lcd_db_listener_t *l);

/* A statement as the PostgreSQL engine sends it (malloc'd): placeholders
 * numbered $N; ddl: a migration step, its column types translated too. */
char *lcd_db_sql_pg(const char *sql, bool ddl);

#endif
