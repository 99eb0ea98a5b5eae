/* tokens.c — task tokens, and what a task's sandbox gets to reach lcd.
 *
 * Every attempt of a task gets a token of its own: 256 random bits, given
 * to the task's command as LCD_TOKEN through spec->secret_env (so never in
 * state.json, logs or the task's record) and kept by lcd as its SHA-256
 * only.  It dies when the attempt ends, however it ends, and every token
 * dies when lcd starts (no task survives a restart).  With it the task
 * calls the API over a socket of its own (http/api.c), bound into its
 * sandbox at /run/lcd.sock; that socket serves nobody but that task, and
 * only with its token. */
#include <errno.h>
#include <string.h>

#include "access.h"
#include "json.h"
#include "lcd.h"
#include "sandboxes.h"
#include "util.h"

void lcd_token_hash(const char *token, char hex[65])
{
	unsigned char md[32];
	lc_sha256_t *h = lc_sha256_new();
	lc_sha256_update(h, token, strlen(token));
	lc_sha256_final(h, md);
	lc_sha256_hex(md, hex);
}

static void copy_field(char *dst, size_t len, json_t *row, const char *key)
{
	const char *v = lc_json_str(row, key);
	snprintf(dst, len, "%s", v ? v : "");
}

bool lcd_token_check(lcd_t *lcd, const char *token, lcd_caller_t *who)
{
	if (!token || strlen(token) != LCD_TOKEN_LEN)
		return false;
	char hex[65];
	lcd_token_hash(token, hex);
	_cleanup_json_ json_t *rows =
		lcd_db_query(lcd->db, NULL, "SELECT task_id, app, function FROM tokens WHERE hash = ?", "s", hex);
	json_t *row = json_array_get(rows, 0);
	if (!row)
		return false;
	memset(who, 0, sizeof(*who));
	copy_field(who->task, sizeof(who->task), row, "task_id");
	copy_field(who->app, sizeof(who->app), row, "app");
	copy_field(who->function, sizeof(who->function), row, "function");
	return true;
}

static int add_mount(lc_spec_t *spec, const char *src, const char *dst, bool ro)
{
	lc_mount_t *m = realloc(spec->mounts, (spec->n_mounts + 1) * sizeof(*m));
	if (!m)
		return -1;
	spec->mounts = m;
	m = &spec->mounts[spec->n_mounts++];
	memset(m, 0, sizeof(*m));
	m->src = strdup(src);
	m->dst = strdup(dst);
	m->ro = ro;
	return 0;
}

int lcd_task_access(lcd_t *lcd, const char *task, const lcd_app_t *app, const lcd_function_t *fn, lc_spec_t *spec,
		    lc_error_t **err)
{
	char token[LCD_TOKEN_LEN + 1], hex[65];
	lc_random_hex(token, LCD_TOKEN_LEN);
	lcd_token_hash(token, hex);
	if (lcd_db_exec(lcd->db, err, "INSERT INTO tokens (hash, task_id, app, function, created_at) VALUES (?, ?, ?, ?, ?)",
			"ssssi", hex, task, app->name, fn->name, lc_wall_ms()) < 0)
		return lc_error_wrap(err, "task %s: cannot record its token", task);
	_cleanup_free_ char *kv = lc_strdup_printf("LCD_TOKEN=%s", token);
	lc_strv_push(&spec->secret_env, kv);
	explicit_bzero(kv, strlen(kv));
	explicit_bzero(token, sizeof(token));
	_cleanup_free_ char *a = lc_strdup_printf("LC_TASK_APP=%s", app->name);
	_cleanup_free_ char *f = lc_strdup_printf("LC_TASK_FUNCTION=%s", fn->name);
	lc_strv_push(&spec->env, a);
	lc_strv_push(&spec->env, f);
	if (lcd->task_socket_open) {
		_cleanup_free_ char *sock = NULL;
		if (lcd->task_socket_open(lcd, task, &sock, err) < 0)
			return -1;
		lc_strv_push(&spec->env, "LCD_SOCKET=/run/lcd.sock");
		/* This task's own socket, read-only and not idmapped: root's on
		 * the host, nobody's inside, which the task may not chmod or
		 * touch; connect() needs no write access to the mount. */
		if (add_mount(spec, sock, "/run/lcd.sock", true) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "task %s: out of memory", task);
		spec->mounts[spec->n_mounts - 1].idmap = LC_IDMAP_OFF;
	}
	if (lcd->python_dir) {
		lc_strv_push(&spec->env, "PYTHONPATH=/run/lcd/python");
		if (add_mount(spec, lcd->python_dir, "/run/lcd/python", true) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "task %s: out of memory", task);
	}
	if ((lcd->workloads_dir && add_mount(spec, lcd->workloads_dir, "/run/lcd/bin", true) < 0) ||
	    (lcd->apps_dir && add_mount(spec, lcd->apps_dir, "/run/lcd/apps", true) < 0))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "task %s: out of memory", task);
	return 0;
}

void lcd_task_release(lcd_t *lcd, const char *task)
{
	lc_error_t *err = NULL;
	if (lcd->task_socket_close)
		lcd->task_socket_close(lcd, task);
	if (lcd_db_exec(lcd->db, &err, "DELETE FROM tokens WHERE task_id = ?", "s", task) < 0) {
		lcd_log("task %s: cannot drop its token: %s", task, err->msg);
		lc_error_free(err);
		err = NULL;
	}
	lcd_sandboxes_drop_task(lcd, task);
}
