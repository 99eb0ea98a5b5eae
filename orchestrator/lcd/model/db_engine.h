/* db_engine.h — what db.c asks of an engine (db_sqlite.c, db_pg.c).
 * Private to the store: nothing above model/db*.c includes it. */
#ifndef LCD_DB_ENGINE_H
#define LCD_DB_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <jansson.h>

#include "db.h"
#include "seal.h"

typedef struct lcd_db_param {
	char type; /* 's', 'i', 'n' */
	const char *s;
	long long i;
} lcd_db_param_t;

/* Where a statement's result goes: rows (each an object) when rows is
 * set; else the first column of the first row into *first (*found set). */
typedef struct lcd_db_sink {
	json_t *rows;
	long long *first;
	bool *found;
	long long changes;
} lcd_db_sink_t;

typedef struct lcd_db_ops {
	const char *name;
	/* One statement with its parameters. */
	int (*run)(lcd_db_t *db, const char *sql, const lcd_db_param_t *p, size_t n, lcd_db_sink_t *out,
		   lc_error_t **err);
	/* Statements without parameters (transaction control). */
	int (*script)(lcd_db_t *db, const char *sql, lc_error_t **err);
	/* Open a writing transaction. */
	int (*begin)(lcd_db_t *db, const char *lock, lc_error_t **err); /* lock NULL: the writers' one */
	/* Migrations: held by one opener at a time; the version; one step
	 * (its text as this engine runs it) and the version it brings, in the
	 * transaction begin opened. */
	int (*migration_lock)(lcd_db_t *db, bool take, lc_error_t **err);
	long long (*version)(lcd_db_t *db, lc_error_t **err);
	int (*step)(lcd_db_t *db, const char *sql, int version, lc_error_t **err);
	void (*close)(lcd_db_t *db);
} lcd_db_ops_t;

struct lcd_db {
	const lcd_db_ops_t *ops;
	pthread_mutex_t lock;
	int txn;     /* transactions open on this handle (0 or 1) */
	char *where; /* the path, or the URL without its password: for messages */
	void *conn;  /* the engine's */
	unsigned char seal_key[LCD_SEAL_KEY_LEN];
	bool has_seal_key;
	char *node;
};

int lcd_db_pg_listen(lcd_db_t *db, const char *const *channels, lcd_db_listener_t **out, lc_error_t **err);

extern const lcd_db_ops_t lcd_db_sqlite_ops;
extern const lcd_db_ops_t lcd_db_pg_ops;
int lcd_db_sqlite_open(lcd_db_t *db, const char *path, lc_error_t **err);
int lcd_db_pg_open(lcd_db_t *db, const char *url, lc_error_t **err);

#endif
