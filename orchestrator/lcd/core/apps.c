/* app.c — the deployed apps: kept in lcd.db, parsed once, shared by
 * reference between API threads and task workers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "devbox.h"
#include "gateway.h"
#include "json.h"
#include "lcd.h"
#include "tasks.h"
#include "util.h"

/* The apps as the store has them: "name@deployed_at;…", to see whether
 * another node deployed or deleted one (lcd_apps_sync). */
static char *apps_seen;

static char *signature(json_t *rows)
{
	size_t len = 1, i;
	json_t *row;
	json_array_foreach(rows, i, row)
		len += strlen(lc_json_str(row, "name")) + 24;
	char *s = lc_xmalloc0(len), *p = s;
	json_array_foreach(rows, i, row)
		p += sprintf(p, "%s@%lld;", lc_json_str(row, "name"),
			     (long long)json_integer_value(json_object_get(row, "deployed_at")));
	return s;
}

/* Parse rows into apps appended to *apps (a bad one is said and left out). */
static void parse_rows(json_t *rows, lcd_app_t ***apps, size_t *n)
{
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *name = lc_json_str(row, "name");
		_cleanup_json_ json_t *m = json_loads(lc_json_str(row, "manifest"), 0, NULL);
		lcd_app_t *app = NULL;
		_cleanup_error_ lc_error_t *perr = NULL;
		if (!m || lcd_app_parse(m, &app, &perr) < 0) {
			/* Stored manifests were valid when deployed; a newer lcd may
			 * be stricter.  Say so and keep serving the others. */
			lcd_log("app %s: stored manifest no longer valid: %s", name, perr ? perr->msg : "bad JSON");
			continue;
		}
		*apps = realloc(*apps, (*n + 1) * sizeof(**apps));
		(*apps)[(*n)++] = app;
	}
}

int lcd_apps_load(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_store_apps(lcd->db, err);
	if (!rows)
		return -1;
	parse_rows(rows, &lcd->apps, &lcd->n_apps);
	free(apps_seen);
	apps_seen = signature(rows);
	return 0;
}

void lcd_apps_sync(lcd_t *lcd)
{
	/* Under the apps' lock, as a deploy stores and keeps an app: a deploy
	 * here cannot slip between this read and the swap below. */
	pthread_mutex_lock(&lcd->lock);
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *rows = lcd_store_apps(lcd->db, &err);
	_cleanup_free_ char *sig = rows ? signature(rows) : NULL;
	if (!rows || (apps_seen && !strcmp(sig, apps_seen))) {
		pthread_mutex_unlock(&lcd->lock);
		if (err)
			lcd_log("apps: cannot read them to follow the other nodes: %s", err->msg);
		lc_error_free(err);
		return;
	}
	lcd_app_t **old = lcd->apps;
	size_t n_old = lcd->n_apps;
	lcd->apps = NULL;
	lcd->n_apps = 0;
	parse_rows(rows, &lcd->apps, &lcd->n_apps);
	free(apps_seen);
	apps_seen = lc_steal(sig);
	pthread_cond_broadcast(&lcd->wake);
	pthread_mutex_unlock(&lcd->lock);
	/* an app another node deleted: what of it runs here ends */
	for (size_t i = 0; i < n_old; i++) {
		lcd_app_t *app = lcd_app_get(lcd, old[i]->name);
		if (!app) {
			lcd_log("app %s was deleted on another node", old[i]->name);
			lcd_cancel_app(lcd, old[i]->name);
		}
		lcd_app_unref(app);
	}
	lcd_apps_release(old, n_old);
}

void lcd_apps_free(lcd_t *lcd)
{
	for (size_t i = 0; i < lcd->n_apps; i++)
		lcd_app_unref(lcd->apps[i]);
	free(lcd->apps);
	lcd->apps = NULL;
	lcd->n_apps = 0;
}

static ssize_t find(lcd_t *lcd, const char *name)
{
	for (size_t i = 0; i < lcd->n_apps; i++)
		if (!strcmp(lcd->apps[i]->name, name))
			return (ssize_t)i;
	return -1;
}

lcd_app_t *lcd_app_get(lcd_t *lcd, const char *name)
{
	pthread_mutex_lock(&lcd->lock);
	ssize_t i = find(lcd, name);
	lcd_app_t *app = i >= 0 ? lcd_app_ref(lcd->apps[i]) : NULL;
	pthread_mutex_unlock(&lcd->lock);
	return app;
}

lcd_app_t **lcd_apps_snapshot(lcd_t *lcd, size_t *n)
{
	pthread_mutex_lock(&lcd->lock);
	lcd_app_t **v = lc_xmalloc0((lcd->n_apps + 1) * sizeof(*v));
	for (size_t i = 0; i < lcd->n_apps; i++)
		v[i] = lcd_app_ref(lcd->apps[i]);
	*n = lcd->n_apps;
	pthread_mutex_unlock(&lcd->lock);
	return v;
}

void lcd_apps_release(lcd_app_t **apps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lcd_app_unref(apps[i]);
	free(apps);
}

int lcd_net_policy(const char *function, const char *policy, lc_net_spec_t *spec, lc_error_t **err)
{
	if (!strcmp(policy, "none"))
		return 0;
	if (lc_net_policy_load(policy, spec, err) < 0)
		return lc_error_wrap(err, "functions.%s.net", function);
	return 0;
}

/* Policies named by functions must load now, not when a task starts. */
static int check_policies(const lcd_app_t *app, lc_error_t **err)
{
	for (size_t i = 0; i < app->n_functions; i++) {
		lc_net_spec_t net = { 0 };
		int r = lcd_net_policy(app->functions[i].name, app->functions[i].net, &net, err);
		lc_net_spec_clear(&net);
		if (r < 0)
			return -1;
	}
	return 0;
}

int lcd_bind_source(const lcd_t *lcd, const char *source, bool resolve, char **out, lc_error_t **err)
{
	_cleanup_free_ char *path = resolve ? realpath(source, NULL) : strdup(source);
	if (!path)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "bind source %s", source);
	for (size_t i = 0; lcd->bind_roots && lcd->bind_roots[i]; i++) {
		const char *root = lcd->bind_roots[i];
		size_t n = strlen(root);
		if (!strcmp(root, "/") || (!strncmp(path, root, n) && (path[n] == '/' || path[n] == '\0'))) {
			if (out)
				*out = lc_steal(path);
			return 0;
		}
	}
	if (!lcd->bind_roots || !lcd->bind_roots[0])
		return lc_error_set(err, LC_EXIT_PERM, 0, "%s: lcd binds no host path into tasks unless lcd.json "
				    "lists it under \"bind_roots\"", source);
	return lc_error_set(err, LC_EXIT_PERM, 0, "%s%s%s is not under lcd's bind_roots", source,
			    strcmp(source, path) ? " -> " : "", strcmp(source, path) ? path : "");
}

/* Mount sources must lie under lcd.json's bind_roots: deploying an app
 * must not be a way to write to any host path as its owner. */
static int check_mounts(const lcd_t *lcd, const lcd_app_t *app, lc_error_t **err)
{
	for (size_t i = 0; i < app->n_functions; i++)
		for (size_t k = 0; k < app->functions[i].n_mounts; k++)
			if (lcd_bind_source(lcd, app->functions[i].mounts[k].src, false, NULL, err) < 0)
				return lc_error_wrap(err, "functions.%s.mounts[%zu].source", app->functions[i].name, k);
	return 0;
}

int lcd_deploy(lcd_t *lcd, json_t *manifest, bool *replaced, lcd_app_t **out, lc_error_t **err)
{
	lcd_app_t *app = NULL;
	if (lcd_app_parse(manifest, &app, err) < 0)
		return -1;
	if (check_policies(app, err) < 0 || check_mounts(lcd, app, err) < 0 || lcd_devboxes_check_app(lcd, app, err) < 0 ||
	    lcd_gateway_check_app(lcd, app, err) < 0) {
		lcd_app_unref(app);
		return -1;
	}
	_cleanup_free_ char *text = json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_strv_ char **scheds = NULL;
	for (size_t i = 0; i < app->n_schedules; i++)
		lc_strv_push(&scheds, app->schedules[i].name);
	/* The app lock is held across the store so two deploys of one app
	 * land in the same order in the db and in memory. */
	pthread_mutex_lock(&lcd->lock);
	if (lcd_store_app_put(lcd->db, app->name, text, scheds, lcd_now_s(lcd), replaced, err) < 0) {
		pthread_mutex_unlock(&lcd->lock);
		lcd_app_unref(app);
		return lc_error_wrap(err, "cannot store app %s", app->name);
	}
	ssize_t i = find(lcd, app->name);
	if (i >= 0) {
		lcd_app_unref(lcd->apps[i]);
		lcd->apps[i] = app;
	} else {
		lcd->apps = realloc(lcd->apps, (lcd->n_apps + 1) * sizeof(*lcd->apps));
		lcd->apps[lcd->n_apps++] = app;
	}
	if (out)
		*out = lcd_app_ref(app);
	pthread_cond_broadcast(&lcd->wake);
	pthread_mutex_unlock(&lcd->lock);
	lcd_db_notify(lcd->db, LCD_APPS_CHANNEL, app->name, NULL);
	lcd_devboxes_sync_app(lcd, app);
	lcd_log("deployed app %s (%zu functions, %zu schedules, %zu devboxes)", app->name, app->n_functions,
		app->n_schedules, app->n_devboxes);
	return 0;
}

int lcd_app_remove(lcd_t *lcd, const char *name, lc_error_t **err)
{
	pthread_mutex_lock(&lcd->lock);
	ssize_t i = find(lcd, name);
	if (i < 0) {
		pthread_mutex_unlock(&lcd->lock);
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no app named '%s'", name);
	}
	lcd_app_t *app = lcd->apps[i];
	lcd->apps[i] = lcd->apps[--lcd->n_apps];
	pthread_mutex_unlock(&lcd->lock);

	/* Its running tasks are killed first; their rows go with the app.
	 * Its devboxes stop and are forgotten; their disks stay. */
	lcd_cancel_app(lcd, name);
	lcd_devboxes_drop_app(lcd, name);
	_cleanup_json_ json_t *tasks = lcd_store_task_list(lcd->db, name, NULL, 0, NULL);
	int r = lcd_store_app_delete(lcd->db, name, err);
	if (r >= 0)
		r = lcd_db_exec(lcd->db, err, "DELETE FROM sandbox_history WHERE app = ?", "s", name);
	if (r >= 0) {
		size_t k;
		json_t *t;
		char buf[4096];
		json_array_foreach(tasks, k, t) {
			const char *id = lc_json_str(t, "id");
			unlink(lcd_task_log_path(lcd, id, buf, sizeof(buf)));
		}
		lcd_log("deleted app %s", name);
		lcd_db_notify(lcd->db, LCD_APPS_CHANNEL, name, NULL);
	}
	lcd_app_unref(app);
	return r < 0 ? -1 : 0;
}
