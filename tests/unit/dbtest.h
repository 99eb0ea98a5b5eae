/* dbtest.h — the stores a unit test of lcd's model runs on: an SQLite
 * file in the test's temp dir, and (where a PostgreSQL server is
 * installed and a cluster can be made: on the host, not in a sandbox) a
 * private PostgreSQL cluster, tests/pg-cluster, made once per program and
 * stopped when it exits.  LCD_TEST_DATABASE (a URL) names a database to
 * use instead of making one. */
#ifndef DBTEST_H
#define DBTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "util.h"

static char dbtest_dir[] = "/tmp/lcd-pgtest-XXXXXX";
static char *dbtest_url;
static int dbtest_pg; /* the TCase running: 1 on PostgreSQL */
static pid_t dbtest_owner; /* the process that made the cluster (check forks a child per test) */

static void dbtest_stop(void)
{
	if (getpid() != dbtest_owner)
		return;
	_cleanup_free_ char *cmd = lc_strdup_printf("'%s/tests/pg-cluster' stop '%s' >/dev/null 2>&1; rm -rf '%s'",
						    LC_SRCDIR, dbtest_dir, dbtest_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "dbtest: cannot stop the cluster in %s\n", dbtest_dir);
}

/* The URL of a PostgreSQL database for this program, or NULL (said on
 * stderr) when none can be had here. */
static const char *dbtest_pg_url(void)
{
	static int tried;
	const char *env = getenv("LCD_TEST_DATABASE");
	if (env && *env)
		return env;
	if (tried++)
		return dbtest_url;
	if (!mkdtemp(dbtest_dir))
		return NULL;
	dbtest_owner = getpid();
	_cleanup_free_ char *cmd = lc_strdup_printf("'%s/tests/pg-cluster' start '%s' 2>&1", LC_SRCDIR, dbtest_dir);
	FILE *f = popen(cmd, "r");
	char line[4096] = "";
	size_t got = f ? fread(line, 1, sizeof(line) - 1, f) : 0;
	int rc = f ? pclose(f) : -1;
	line[got] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (rc != 0 || strncmp(line, "postgresql://", 13)) {
		fprintf(stderr, "dbtest: no PostgreSQL cluster here, its tests are left out: %s\n", line);
		dbtest_stop();
		return NULL;
	}
	dbtest_owner = getpid();
	atexit(dbtest_stop);
	dbtest_url = strdup(line);
	return dbtest_url;
}

/* Where this TCase keeps its store (malloc'd): dir/lcd.db, or the
 * PostgreSQL database emptied of every table (the next open migrates it
 * from the start). */
static char *dbtest_where(const char *dir)
{
	if (!dbtest_pg)
		return lc_strdup_printf("%s/lcd.db", dir);
	const char *url = dbtest_pg_url();
	if (!url)
		return NULL;
	/* with psql: a store lcd would refuse to open (a newer schema) too */
	_cleanup_free_ char *cmd = lc_strdup_printf(
		"PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 '%s' -c 'DROP SCHEMA public CASCADE' -c 'CREATE SCHEMA public' >/dev/null", url);
	int r = system(cmd) == 0 ? 0 : -1;
	if (r < 0)
		fprintf(stderr, "dbtest: cannot empty %s\n", url);
	return r < 0 ? NULL : strdup(url);
}

static void dbtest_on_pg(void)
{
	dbtest_pg = 1;
}

static void dbtest_on_sqlite(void)
{
	dbtest_pg = 0;
}

#endif
