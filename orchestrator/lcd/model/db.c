/* db.c — lcd's store: the interface over the engines (db_sqlite.c,
 * db_pg.c), the schema's migrations, the parameter lists. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "db_engine.h"
#include "util.h"

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
	/* 8 -> 9: secrets sealed (seal.c): value holds the sealed text where
	 * sealed is 1 (lcd seals older rows when it starts); meta keeps what
	 * the nodes sharing a store must agree on (the key's check value). */
	"ALTER TABLE secrets ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY,"
	"  value TEXT NOT NULL);",
	/* 9 -> 10: nodes (nodes.c): every lcd sharing the store has a row,
	 * its heartbeat renewed; a task's and a sandbox's rows name the node
	 * that runs or holds them, a devbox's the node its disk is on. */
	"CREATE TABLE nodes ("
	"  name TEXT PRIMARY KEY,"
	"  address TEXT,"
	"  host TEXT NOT NULL,"
	"  cores INTEGER NOT NULL,"
	"  memory INTEGER NOT NULL,"
	"  slots INTEGER NOT NULL,"
	"  used INTEGER NOT NULL,"
	"  images TEXT NOT NULL,"
	"  version TEXT NOT NULL,"
	"  started_at INTEGER NOT NULL,"
	"  heartbeat_at INTEGER NOT NULL,"
	"  stopped_at INTEGER);"
	"ALTER TABLE tasks ADD COLUMN node TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN node TEXT;"
	"ALTER TABLE sandbox_history ADD COLUMN node TEXT;"
	"ALTER TABLE devboxes ADD COLUMN node TEXT;"
	"CREATE INDEX tasks_node ON tasks(node, state);"
	"CREATE INDEX sandboxes_node ON sandboxes(node);",
	/* 10 -> 11: a node that died (nodes.c): its sandboxes are "lost"
	 * until it is back, and what it was running is left for it to kill
	 * then (the sandboxes of its tasks that were failed or queued again). */
	"CREATE TABLE sandboxes_new ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT,"
	"  app TEXT,"
	"  task_id TEXT,"
	"  function TEXT,"
	"  state TEXT NOT NULL CHECK (state IN ('creating','live','deleting','lost')),"
	"  image TEXT NOT NULL,"
	"  request TEXT NOT NULL,"
	"  labels TEXT NOT NULL,"
	"  secrets TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  node TEXT);"
	"INSERT INTO sandboxes_new SELECT id, name, app, task_id, function, state, image, request, labels, secrets, "
	"created_at, node FROM sandboxes;"
	"DROP TABLE sandboxes;"
	"ALTER TABLE sandboxes_new RENAME TO sandboxes;"
	"CREATE INDEX sandboxes_task ON sandboxes(task_id);"
	"CREATE INDEX sandboxes_app ON sandboxes(app);"
	"CREATE INDEX sandboxes_node ON sandboxes(node);"
	"CREATE UNIQUE INDEX sandboxes_name ON sandboxes(coalesce(app, ''), name) WHERE name IS NOT NULL;"
	"CREATE TABLE node_leftovers ("
	"  node TEXT NOT NULL,"
	"  sandbox_id TEXT NOT NULL,"
	"  task_id TEXT,"
	"  PRIMARY KEY (node, sandbox_id));",
};

bool lcd_db_is_url(const char *where)
{
	return where && (!strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11));
}

/* The URL as messages show it: its password (user:PASSWORD@, or a
 * password= parameter) replaced by "***". */
static char *url_for_messages(const char *url)
{
	char *out = strdup(url);
	char *rest = strstr(out, "://");
	if (rest) {
		rest += 3;
		char *at = strchr(rest, '@'), *slash = strchr(rest, '/');
		char *colon = strchr(rest, ':');
		if (at && (!slash || at < slash) && colon && colon < at) {
			char *fixed = lc_strdup_printf("%.*s:***%s", (int)(colon - out), out, at);
			free(out);
			out = fixed;
		}
	}
	char *pw = strstr(out, "password=");
	if (pw) {
		pw += 9;
		size_t len = strcspn(pw, "&");
		char *fixed = lc_strdup_printf("%.*s***%s", (int)(pw - out), out, pw + len);
		free(out);
		out = fixed;
	}
	return out;
}

static int migrate(lcd_db_t *db, lc_error_t **err)
{
	const int target = (int)(sizeof(migrations) / sizeof(migrations[0]));
	if (db->ops->migration_lock(db, true, err) < 0)
		return -1;
	int r = 0;
	long long v = db->ops->version(db, err);
	if (v < 0)
		r = -1;
	else if (v > target)
		r = lc_error_set(err, LC_EXIT_INVALID, 0, "schema version %lld is newer than this lcd knows (%d)", v, target);
	for (int i = (int)v; r == 0 && i < target; i++) {
		if (lcd_db_begin(db, err) < 0) {
			r = -1;
			break;
		}
		if (db->ops->step(db, migrations[i], i + 1, err) < 0) {
			lcd_db_rollback(db);
			r = lc_error_wrap(err, "migration to schema version %d", i + 1);
			break;
		}
		r = lcd_db_commit(db, err);
	}
	db->ops->migration_lock(db, false, NULL);
	return r;
}

int lcd_db_open(const char *where, lcd_db_t **out, lc_error_t **err)
{
	lcd_db_t *db = lc_xmalloc0(sizeof(*db));
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&db->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	bool pg = lcd_db_is_url(where);
	db->ops = pg ? &lcd_db_pg_ops : &lcd_db_sqlite_ops;
	db->where = pg ? url_for_messages(where) : strdup(where);
	int r = pg ? lcd_db_pg_open(db, where, err) : lcd_db_sqlite_open(db, where, err);
	if (r == 0)
		r = migrate(db, err);
	if (r < 0) {
		lc_error_wrap(err, "database %s", db->where);
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
		db->ops->close(db);
	pthread_mutex_destroy(&db->lock);
	explicit_bzero(db->seal_key, sizeof(db->seal_key));
	free(db->where);
	free(db->node);
	free(db);
}

const char *lcd_db_engine(const lcd_db_t *db)
{
	return db->ops->name;
}

void lcd_db_set_seal_key(lcd_db_t *db, const unsigned char *key)
{
	memcpy(db->seal_key, key, LCD_SEAL_KEY_LEN);
	db->has_seal_key = true;
}

const unsigned char *lcd_db_seal_key(const lcd_db_t *db)
{
	return db->has_seal_key ? db->seal_key : NULL;
}

void lcd_db_set_node(lcd_db_t *db, const char *name)
{
	free(db->node);
	db->node = name ? strdup(name) : NULL;
}

const char *lcd_db_node(const lcd_db_t *db)
{
	return db->node;
}

const char *lcd_db_where(const lcd_db_t *db)
{
	return db->where;
}

long long lcd_db_schema_version(lcd_db_t *db, lc_error_t **err)
{
	lcd_db_lock(db);
	long long v = db->ops->version(db, err);
	lcd_db_unlock(db);
	return v;
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
	return lcd_db_begin_on(db, NULL, err);
}

int lcd_db_begin_on(lcd_db_t *db, const char *lock, lc_error_t **err)
{
	lcd_db_lock(db);
	if (db->ops->begin(db, lock, err) < 0) {
		lcd_db_unlock(db);
		return -1;
	}
	db->txn++;
	return 0;
}

int lcd_db_commit(lcd_db_t *db, lc_error_t **err)
{
	int r = db->ops->script(db, "COMMIT", err);
	if (r < 0)
		db->ops->script(db, "ROLLBACK", NULL);
	db->txn--;
	lcd_db_unlock(db);
	return r;
}

void lcd_db_rollback(lcd_db_t *db)
{
	db->ops->script(db, "ROLLBACK", NULL);
	db->txn--;
	lcd_db_unlock(db);
}

int lcd_db_notify(lcd_db_t *db, const char *channel, const char *payload, lc_error_t **err)
{
	if (db->ops != &lcd_db_pg_ops)
		return 0;
	return lcd_db_exec(db, err, "SELECT pg_notify(?, ?)", "ss", channel, payload ? payload : "") < 0 ? -1 : 0;
}

int lcd_db_listen(lcd_db_t *db, const char *const *channels, lcd_db_listener_t **out, lc_error_t **err)
{
	*out = NULL;
	if (db->ops != &lcd_db_pg_ops)
		return 0;
	return lcd_db_pg_listen(db, channels, out, err);
}

/* The arguments after types, as a list (at most 64: no statement of lcd's
 * has more). */
#define MAX_PARAMS 64

static int params(const char *types, va_list ap, lcd_db_param_t *p, size_t *n, lc_error_t **err)
{
	size_t k = 0;
	for (const char *t = types; *t; t++, k++) {
		if (k == MAX_PARAMS)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: more than %d parameters", MAX_PARAMS);
		p[k] = (lcd_db_param_t){ .type = *t };
		if (*t == 's')
			p[k].s = va_arg(ap, const char *);
		else if (*t == 'i')
			p[k].i = va_arg(ap, long long);
		else if (*t != 'n')
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: bad parameter type '%c'", *t);
	}
	*n = k;
	return 0;
}

static int run_v(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, va_list ap, lcd_db_sink_t *out)
{
	lcd_db_param_t p[MAX_PARAMS];
	size_t n = 0;
	if (params(types, ap, p, &n, err) < 0)
		return -1;
	lcd_db_lock(db);
	int r = db->ops->run(db, sql, p, n, out, err);
	lcd_db_unlock(db);
	return r;
}

int lcd_db_exec(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	lcd_db_sink_t out = { 0 };
	int r = run_v(db, err, sql, types, ap, &out);
	va_end(ap);
	return r < 0 ? -1 : (int)out.changes;
}

json_t *lcd_db_query(lcd_db_t *db, lc_error_t **err, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	lcd_db_sink_t out = { .rows = json_array() };
	int r = run_v(db, err, sql, types, ap, &out);
	va_end(ap);
	if (r < 0) {
		json_decref(out.rows);
		return NULL;
	}
	return out.rows;
}

json_t *lcd_db_query_one(lcd_db_t *db, lc_error_t **err, const char *kind, const char *name, const char *sql,
			 const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	_cleanup_json_ json_t *rows = json_array();
	lcd_db_sink_t out = { .rows = rows };
	int r = run_v(db, err, sql, types, ap, &out);
	va_end(ap);
	if (r < 0)
		return NULL;
	if (json_array_size(rows) == 0) {
		lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no %s named '%s'", kind, name);
		return NULL;
	}
	if (json_array_size(rows) > 1) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "database: %zu %ss named '%s' where one was expected",
			     json_array_size(rows), kind, name);
		return NULL;
	}
	return json_incref(json_array_get(rows, 0));
}

long long lcd_db_query_int(lcd_db_t *db, lc_error_t **err, long long def, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	long long first = 0;
	bool found = false;
	lcd_db_sink_t out = { .first = &first, .found = &found };
	int r = run_v(db, err, sql, types, ap, &out);
	va_end(ap);
	if (r < 0)
		return -1;
	return found ? first : def;
}
