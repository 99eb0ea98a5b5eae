/* db.h — lcd's SQLite store: one connection guarded by a recursive mutex,
 * WAL, foreign keys on, schema versioned (PRAGMA user_version) and
 * migrated when opened. */
#ifndef LCD_DB_H
#define LCD_DB_H

#include <jansson.h>

#include "error.h"

typedef struct lcd_db lcd_db_t;

#define LCD_DB_SCHEMA_VERSION 8

int lcd_db_open(const char *path, lcd_db_t **out, lc_error_t **err);
void lcd_db_close(lcd_db_t *db);

/* The lock is recursive: hold it across several statements that must see
 * one state.  lcd_db_begin takes it and opens an IMMEDIATE transaction;
 * commit/rollback end the transaction and release it. */
void lcd_db_lock(lcd_db_t *db);
void lcd_db_unlock(lcd_db_t *db);
int lcd_db_begin(lcd_db_t *db, lc_error_t **err);
int lcd_db_commit(lcd_db_t *db, lc_error_t **err);
void lcd_db_rollback(lcd_db_t *db);

/* Statements with positional parameters described by `types`, one char a
 * parameter: 's' const char * (NULL binds NULL), 'i' long long, 'n' NULL
 * (no argument consumed).
 * lcd_db_exec returns the number of rows changed, or -1 with *err. */
int lcd_db_exec(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...);
/* Rows as an array of objects {column: value}; NULL with *err on failure. */
json_t *lcd_db_query(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...);
/* The first column of the first row as an integer, or def when no row. */
long long lcd_db_query_int(lcd_db_t *db, lc_error_t **err, long long def, const char *sql,
			   const char *types, ...);

#endif
