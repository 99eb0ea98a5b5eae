/* nodes.c — this lcd as a node (nodes.h).  Times in the nodes table are
 * the store's clock (lcd_now_ms(): on PostgreSQL the server's), so the
 * nodes of a cluster judge each other's heartbeats by one clock. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps.h"
#include "image.h"
#include "json.h"
#include "nodes.h"
#include "sandboxes.h"
#include "tasks.h"
#include "util.h"

struct lcd_node {
	lcd_db_listener_t *listener;
	pthread_t listen_thread;
	bool listening;
	bool leads;   /* (atomic) */
	char *name;
	char *address;
	char *token; /* the cluster's (forward.h) */
	int slots;
	bool bounded; /* slots hold this node's tasks back (has_room) */
	int cores;
	long long memory;
	char host[65]; /* this host and state directory, hashed */
};

bool lcd_node_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 63 || !isalnum((unsigned char)name[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("-_.", name[i]))
			return false;
	return true;
}

/* The host (its machine id) and this lcd's state directory: an lcd that
 * starts with the same is this node's own next run. */
static void host_id(char hex[65])
{
	_cleanup_free_ char *mid = NULL;
	if (lc_read_file("/etc/machine-id", &mid, NULL, NULL) < 0) {
		char h[256] = "";
		gethostname(h, sizeof(h) - 1);
		mid = strdup(h);
	}
	_cleanup_free_ char *dir = realpath(lc_lib_dir(), NULL);
	_cleanup_free_ char *id = lc_strdup_printf("%s\n%s", mid, dir ? dir : lc_lib_dir());
	unsigned char md[32];
	lc_sha256_t *h = lc_sha256_new();
	lc_sha256_update(h, id, strlen(id));
	lc_sha256_final(h, md);
	lc_sha256_hex(md, hex);
}

/* [{name, digest}] of the images in this node's store */
static char *images_text(void)
{
	_cleanup_json_ json_t *list = NULL;
	lc_error_t *err = NULL;
	json_t *out = json_array();
	if (lc_image_list(&list, &err) == 0) {
		size_t i;
		json_t *im;
		json_array_foreach(list, i, im)
			json_array_append_new(out, json_pack("{s:O, s:O}", "name", json_object_get(im, "name"), "digest",
							     json_object_get(im, "digest") ?: json_null()));
	}
	lc_error_free(err);
	char *text = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	return text;
}

void lcd_node_set_token(lcd_t *lcd, const char *token)
{
	if (lcd->node && token)
		lcd->node->token = strdup(token);
}

const char *lcd_node_token(lcd_t *lcd)
{
	return lcd->node ? lcd->node->token : NULL;
}

static bool has_image(json_t *images, const char *image)
{
	size_t i;
	json_t *im;
	json_array_foreach(images, i, im)
		if (!strcmp(lc_json_str(im, "name") ?: "", image))
			return true;
	return false;
}

char *lcd_node_place(lcd_t *lcd, const char *image)
{
	const char *me = lcd_db_node(lcd->db);
	/* what each up node holds now (not the heartbeat's count: a burst of
	 * creates must see the ones before it) */
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, NULL,
		"SELECT n.name, n.slots, n.images, (SELECT count(*) FROM tasks t WHERE t.node = n.name AND "
		"t.state = 'running') + (SELECT count(*) FROM sandboxes s WHERE s.node = n.name) AS used FROM nodes n "
		"WHERE n.stopped_at IS NULL AND lcd_now_ms() - n.heartbeat_at <= ? AND n.address IS NOT NULL "
		"OR n.name = ? ORDER BY n.name",
		"is", (long long)LCD_NODE_DEAD_MS, me);
	if (!rows)
		return NULL;
	const char *best = NULL;
	long long best_key = 0;
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		const char *name = lc_json_str(r, "name");
		long long free_slots = json_integer_value(json_object_get(r, "slots")) - json_integer_value(json_object_get(r, "used"));
		_cleanup_json_ json_t *images = json_loads(lc_json_str(r, "images"), 0, NULL);
		bool image_here = !image || !strcmp(image, "host") || has_image(images, image);
		/* room first, then the image, then the most room; this node wins a tie */
		long long key = (free_slots > 0 ? 1LL << 40 : 0) + (image_here ? 1LL << 39 : 0) + free_slots * 2 +
				(!strcmp(name, me) ? 1 : 0);
		if (!best || key > best_key) {
			best = name;
			best_key = key;
		}
	}
	return best ? strdup(best) : NULL;
}

int lcd_node_slots(lcd_t *lcd)
{
	return lcd->node ? lcd->node->slots : 0;
}

bool lcd_node_leads(lcd_t *lcd)
{
	return lcd->node && __atomic_load_n(&lcd->node->leads, __ATOMIC_ACQUIRE);
}

static void set_leads(lcd_t *lcd, bool leads)
{
	struct lcd_node *n = lcd->node;
	if (__atomic_exchange_n(&n->leads, leads, __ATOMIC_ACQ_REL) != leads)
		lcd_log("node %s: %s", n->name,
			leads ? "leads now (the scheduler, the other nodes' heartbeats)" : "no longer leads");
}

/* The running tasks and the sandboxes of a node silent too long. */
static void end_dead(lcd_t *lcd, const char *node, long long silent_ms)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *tasks = lcd_db_query(
		lcd->db, &err, "SELECT id, app, function, sandbox_id FROM tasks WHERE node = ? AND state = 'running'", "s", node);
	if (!tasks) {
		lcd_log("node %s: %s", node, err->msg);
		lc_error_free(err);
		return;
	}
	size_t i;
	json_t *t;
	json_array_foreach(tasks, i, t) {
		const char *id = lc_json_str(t, "id");
		const char *sb = lc_json_str(t, "sandbox_id");
		if (sb)
			lcd_db_exec(lcd->db, NULL,
				    "INSERT INTO node_leftovers (node, sandbox_id, task_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
				    "sss", node, sb, id);
		lcd_app_t *app = lcd_app_get(lcd, lc_json_str(t, "app"));
		const lcd_function_t *fn = app ? lcd_app_function(app, lc_json_str(t, "function")) : NULL;
		_cleanup_free_ char *why = lc_strdup_printf("node_lost: node %s has been silent for %lld s", node,
							    silent_ms / 1000);
		int r;
		if (fn && fn->retry_on_node_loss) {
			r = lcd_store_task_requeue(lcd->db, id, why, &err);
			lcd_log("task %s: %s; queued again (retry_on_node_loss)", id, why);
		} else {
			r = lcd_store_task_finish(lcd->db, id, "failed", NULL, LC_EXIT_RUNTIME, why, lc_wall_ms(), &err);
			lcd_log("task %s: %s; failed", id, why);
		}
		lcd_app_unref(app);
		if (r < 0) {
			lcd_log("task %s: %s", id, err->msg);
			lc_error_free(err);
			err = NULL;
		}
		/* its token dies with the attempt */
		lcd_db_exec(lcd->db, NULL, "DELETE FROM tokens WHERE task_id = ?", "s", id);
	}
	int lost = lcd_sandboxes_lost(lcd, node);
	if (lost > 0 || json_array_size(tasks))
		lcd_log("node %s: silent for %lld s: %zu running task(s) ended, %d sandbox(es) lost", node, silent_ms / 1000,
			json_array_size(tasks), lost > 0 ? lost : 0);
}

static void judge(lcd_t *lcd)
{
	_cleanup_json_ json_t *dead = lcd_db_query(
		lcd->db, NULL,
		"SELECT name, lcd_now_ms() - heartbeat_at AS silent FROM nodes WHERE stopped_at IS NULL AND "
		"lcd_now_ms() - heartbeat_at > ? AND name != ?",
		"is", (long long)LCD_NODE_DEAD_MS, lcd->node->name);
	size_t i;
	json_t *d;
	json_array_foreach(dead, i, d)
		end_dead(lcd, lc_json_str(d, "name"), json_integer_value(json_object_get(d, "silent")));
}

/* Tasks the store says run here that no worker here runs, started more
 * than a minute ago: their start's commit was cut (the store took it, this
 * node did not hear so), so they never ran.  Queued again. */
static void unconfirmed(lcd_t *lcd)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL,
		"SELECT id FROM tasks WHERE node = ? AND state = 'running' AND started_at < ?", "si", lcd->node->name,
		lc_wall_ms() - 60000);
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		const char *id = lc_json_str(r, "id");
		if (lcd_task_runs_here(lcd, id))
			continue;
		if (lcd_store_task_requeue(lcd->db, id, "its start was not confirmed here (the store was unreachable)", NULL) > 0)
			lcd_log("task %s: marked running here but never started (a start cut off from the store); queued again",
				id);
	}
}

bool lcd_node_has_room(lcd_t *lcd)
{
	if (!lcd->node || !lcd->node->bounded)
		return true;
	long long used = lcd_node_used(lcd);
	return used >= 0 && used < lcd_node_slots(lcd);
}

long long lcd_node_used(lcd_t *lcd)
{
	const char *me = lcd_db_node(lcd->db);
	return lcd_db_query_int(lcd->db, NULL, -1,
				"SELECT (SELECT count(*) FROM tasks WHERE node = ?1 AND state = 'running') + "
				"(SELECT count(*) FROM sandboxes WHERE node = ?1)",
				"s", me);
}

int lcd_node_start(lcd_t *lcd, const lcd_node_cfg_t *cfg, lc_error_t **err)
{
	struct lcd_node *n = lc_xmalloc0(sizeof(*n));
	char host[256] = "";
	if (!cfg->name && gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "lcd");
	host[strcspn(host, ".")] = '\0'; /* the short name */
	n->name = strdup(cfg->name ? cfg->name : host);
	n->address = cfg->address ? strdup(cfg->address) : NULL;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	n->cores = cores > 0 ? (int)cores : 1;
	n->memory = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	n->slots = cfg->slots > 0 ? cfg->slots : 16 * n->cores;
	/* One lcd on SQLite takes tasks as it always did (each function's
	 * concurrency alone), unless lcd.json sets node_slots: its default
	 * counts its sandboxes too, and an lcd holding many would run none. */
	n->bounded = cfg->slots > 0 || strcmp(lcd_db_engine(lcd->db), "sqlite");
	host_id(n->host);
	lcd->node = n;
	if (!lcd_node_name_valid(n->name))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "node name '%s': letters, digits, '-', '_', '.' (at most 63): set node_name in lcd.json",
				    n->name);
	_cleanup_free_ char *images = images_text();
	if (lcd_db_begin(lcd->db, err) < 0)
		return -1;
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, err,
		"SELECT host, stopped_at, lcd_now_ms() - heartbeat_at AS silent FROM nodes WHERE name = ?", "s", n->name);
	json_t *row = rows ? json_array_get(rows, 0) : NULL;
	if (!rows)
		goto fail;
	if (row && strcmp(lc_json_str(row, "host"), n->host) &&
	    json_is_null(json_object_get(row, "stopped_at")) &&
	    json_integer_value(json_object_get(row, "silent")) < LCD_NODE_DEAD_MS) {
		lc_error_set(err, LC_EXIT_BUSY, 0,
			     "node %s is up elsewhere (its heartbeat %lld ms ago): give this lcd another node_name", n->name,
			     (long long)json_integer_value(json_object_get(row, "silent")));
		goto fail;
	}
	if (lcd_db_exec(lcd->db, err,
			"INSERT INTO nodes (name, address, host, cores, memory, slots, used, images, version, started_at, "
			"heartbeat_at, stopped_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, lcd_now_ms(), lcd_now_ms(), NULL) "
			"ON CONFLICT (name) DO UPDATE SET address = excluded.address, host = excluded.host, "
			"cores = excluded.cores, memory = excluded.memory, slots = excluded.slots, used = 0, "
			"images = excluded.images, version = excluded.version, started_at = excluded.started_at, "
			"heartbeat_at = excluded.heartbeat_at, stopped_at = NULL",
			"sssiiiss", n->name, n->address, n->host, (long long)n->cores, n->memory, (long long)n->slots, images,
			PACKAGE_VERSION) < 0)
		goto fail;
	/* SQLite: one lcd is the only node; rows a former node name left
	 * (node_name, or the host's name, changed) are this node's */
	if (!strcmp(lcd_db_engine(lcd->db), "sqlite")) {
		static const char *const adopt[] = {
			"UPDATE tasks SET node = ? WHERE node IS NOT NULL AND node != ?1",
			"UPDATE sandboxes SET node = ? WHERE node IS NOT NULL AND node != ?1",
			"UPDATE devboxes SET node = ? WHERE node IS NOT NULL AND node != ?1",
			"DELETE FROM nodes WHERE name != ?",
		};
		for (size_t i = 0; i < sizeof(adopt) / sizeof(adopt[0]); i++)
			if (lcd_db_exec(lcd->db, err, adopt[i], "s", n->name) < 0)
				goto fail;
	}
	if (lcd_db_commit(lcd->db, err) < 0)
		return -1;
	lcd_db_set_node(lcd->db, n->name);
	/* SQLite: the only node leads from the start (PostgreSQL: the
	 * listener takes the leader's lock, lcd_node_listen_start) */
	n->leads = !strcmp(lcd_db_engine(lcd->db), "sqlite");
	return 0;
fail:
	lcd_db_rollback(lcd->db);
	return -1;
}

static void beat(lcd_t *lcd)
{
	struct lcd_node *n = lcd->node;
	long long used = lcd_node_used(lcd);
	_cleanup_free_ char *images = images_text();
	lc_error_t *err = NULL;
	if (lcd_db_exec(lcd->db, &err,
			"UPDATE nodes SET heartbeat_at = lcd_now_ms(), used = ?, images = ?, stopped_at = NULL "
			"WHERE name = ? AND host = ?",
			"isss", used < 0 ? 0 : used, images, n->name, n->host) < 0) {
		lcd_log("node %s: heartbeat: %s", n->name, err->msg);
		lc_error_free(err);
	}
}

void *lcd_node_thread(void *arg)
{
	lcd_t *lcd = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		beat(lcd);
		lcd_apps_sync(lcd);
		lcd_sandboxes_sweep(lcd);
		unconfirmed(lcd);
		if (lcd_node_leads(lcd))
			judge(lcd);
		if (lcd_sleep(lcd, &lcd->tick, LCD_NODE_BEAT_MS))
			return NULL;
	}
}

static bool stopping(lcd_t *lcd)
{
	pthread_mutex_lock(&lcd->lock);
	bool s = lcd->stopping;
	pthread_mutex_unlock(&lcd->lock);
	return s;
}

static void wake_dispatcher(lcd_t *lcd)
{
	pthread_mutex_lock(&lcd->lock);
	pthread_cond_broadcast(&lcd->wake);
	pthread_cond_broadcast(&lcd->changed);
	pthread_mutex_unlock(&lcd->lock);
}

static void *listen_thread(void *arg)
{
	lcd_t *lcd = arg;
	struct lcd_node *n = lcd->node;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	bool lost = false;
	while (!stopping(lcd)) {
		_cleanup_free_ char *channel = NULL, *payload = NULL;
		lc_error_t *err = NULL;
		int r = lcd_db_listen_wait(n->listener, 1000, &channel, &payload, &err);
		set_leads(lcd, lcd_db_listener_lock(n->listener, "leader"));
		if (r < 0) {
			if (!lost)
				lcd_log("node %s: %s (listening again when it is back)", n->name, err->msg);
			lost = true;
			lc_error_free(err);
			continue;
		}
		if (lost && r >= 0) {
			/* what was told meanwhile is not known: as if all of it */
			lcd_log("node %s: listening again", n->name);
			lost = false;
			wake_dispatcher(lcd);
			lcd_apps_sync(lcd);
			lcd_sandboxes_sweep(lcd);
		}
		if (r == 0)
			continue;
		if (!strcmp(channel, LCD_QUEUE_CHANNEL))
			wake_dispatcher(lcd);
		else if (!strcmp(channel, LCD_APPS_CHANNEL))
			lcd_apps_sync(lcd);
		else if (!strcmp(channel, LCD_SANDBOXES_CHANNEL))
			lcd_sandboxes_sweep(lcd);
	}
	return NULL;
}

int lcd_node_listen_start(lcd_t *lcd, lc_error_t **err)
{
	struct lcd_node *n = lcd->node;
	static const char *const channels[] = { LCD_QUEUE_CHANNEL, LCD_APPS_CHANNEL, LCD_SANDBOXES_CHANNEL, NULL };
	if (lcd_db_listen(lcd->db, channels, &n->listener, err) < 0)
		return -1;
	if (!n->listener) {
		set_leads(lcd, true);
		return 0; /* SQLite: nobody else to hear from, nobody else to lead */
	}
	set_leads(lcd, lcd_db_listener_lock(n->listener, "leader"));
	int e = pthread_create(&n->listen_thread, NULL, listen_thread, lcd);
	if (e != 0) {
		lcd_db_listen_close(n->listener);
		n->listener = NULL;
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "node %s: cannot start its listener", n->name);
	}
	n->listening = true;
	return 0;
}

void lcd_node_listen_stop(lcd_t *lcd)
{
	struct lcd_node *n = lcd->node;
	if (!n || !n->listening)
		return;
	pthread_join(n->listen_thread, NULL);
	n->listening = false;
	lcd_db_listen_close(n->listener);
	n->listener = NULL;
}

void lcd_node_stop(lcd_t *lcd)
{
	struct lcd_node *n = lcd->node;
	if (!n)
		return;
	if (lcd->db)
		lcd_db_exec(lcd->db, NULL, "UPDATE nodes SET stopped_at = lcd_now_ms(), used = 0 WHERE name = ? AND host = ?",
			    "ss", n->name, n->host);
	free(n->name);
	free(n->address);
	if (n->token)
		explicit_bzero(n->token, strlen(n->token));
	free(n->token);
	free(n);
	lcd->node = NULL;
}

json_t *lcd_nodes_list(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, err,
		"SELECT name, address, cores, memory, slots, used, images, version, started_at, heartbeat_at, "
		"CASE WHEN stopped_at IS NOT NULL THEN 'stopped' WHEN lcd_now_ms() - heartbeat_at > ? THEN 'dead' "
		"ELSE 'up' END AS state FROM nodes ORDER BY name",
		"i", (long long)LCD_NODE_DEAD_MS);
	if (!rows)
		return NULL;
	json_t *out = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		long long slots = json_integer_value(json_object_get(r, "slots"));
		long long used = json_integer_value(json_object_get(r, "used"));
		const char *state = lc_json_str(r, "state");
		json_t *images = json_loads(lc_json_str(r, "images"), 0, NULL);
		json_array_append_new(
			out, json_pack("{s:O, s:s, s:O, s:O, s:O, s:I, s:I, s:I, s:o, s:O, s:O, s:O}", "name",
				       json_object_get(r, "name"), "state", state, "address", json_object_get(r, "address"),
				       "cores", json_object_get(r, "cores"), "memory", json_object_get(r, "memory"), "slots",
				       (json_int_t)slots, "used", (json_int_t)used, "free",
				       (json_int_t)(strcmp(state, "up") || used >= slots ? 0 : slots - used), "images",
				       images ? images : json_array(), "version", json_object_get(r, "version"), "started",
				       json_object_get(r, "started_at"), "heartbeat", json_object_get(r, "heartbeat_at")));
	}
	return out;
}
