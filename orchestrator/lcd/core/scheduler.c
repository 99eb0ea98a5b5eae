/* scheduler.c — the scheduler: fires each schedule at its cron minute (UTC),
 * catches up on slots missed while lcd was down (at most once per slot),
 * collects expired map keys and images (images.c), and re-kills sandboxes
 * of cancelled tasks.
 *
 * Its clock is time(NULL), unless a clock file is set (lcd --clock-file or
 * LCD_TEST_CLOCK): then "now" is read from that file on every tick.  It is
 * a test hook: it moves nothing but the scheduler's idea of the time. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps.h"
#include "images.h"
#include "json.h"
#include "lcd.h"
#include "nodes.h"
#include "scheduler.h"
#include "tasks.h"
#include "util.h"

#define TICK_MS 500
#define MAP_GC_EVERY_MS 30000
#define IMAGE_GC_EVERY_MS 60000

int lcd_schedule_fire(lcd_t *lcd, const lcd_app_t *app, const lcd_schedule_t *s, json_t *ids, lc_error_t **err)
{
	_cleanup_json_ json_t *list = json_pack("[O]", s->args);
	if (lcd_spawn(lcd, app, s->function, s->name, list, ids, err) < 0)
		return lc_error_wrap(err, "schedule %s:%s", app->name, s->name);
	return 0;
}

static json_t *schedule_row(json_t *rows, const char *app, const char *name)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
		if (!strcmp(lc_json_str(r, "app"), app) &&
		    !strcmp(lc_json_str(r, "name"), name))
			return r;
	return NULL;
}

/* Fire what is due for one schedule.  The slot is recorded before the
 * task is queued, so a crash in between loses the slot rather than
 * firing it twice. */
static void tick_schedule(lcd_t *lcd, const lcd_app_t *app, const lcd_schedule_t *s, json_t *row, long long now)
{
	long long last = json_integer_value(json_object_get(row, "last_slot"));
	long long minute = now - (now % 60);
	if (json_integer_value(json_object_get(row, "paused"))) {
		/* Slots passed while paused are not owed when it resumes. */
		if (last < minute)
			lcd_store_schedule_set_slot(lcd->db, app->name, s->name, minute, NULL);
		return;
	}
	long long *due = lc_xmalloc0(((size_t)lcd->catchup_max + 1) * sizeof(*due));
	long long newest;
	size_t skipped;
	size_t n = lcd_schedule_due(s, last, now, (size_t)lcd->catchup_max, due, &newest, &skipped);
	if (newest == 0) {
		free(due);
		return;
	}
	lc_error_t *err = NULL;
	if (lcd_store_schedule_set_slot(lcd->db, app->name, s->name, newest, &err) < 0) {
		lcd_log("schedule %s:%s: %s", app->name, s->name, err->msg);
		lc_error_free(err);
		free(due);
		return;
	}
	if (skipped)
		lcd_log("schedule %s:%s: %zu missed slot(s) not fired (catchup)", app->name, s->name, skipped);
	for (size_t i = 0; i < n; i++) {
		_cleanup_json_ json_t *ids = json_array();
		char when[32];
		time_t tt = (time_t)due[i];
		struct tm tm;
		gmtime_r(&tt, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%MZ", &tm);
		if (lcd_schedule_fire(lcd, app, s, ids, &err) < 0) {
			lcd_log("schedule %s:%s slot %s: %s", app->name, s->name, when, err->msg);
			lc_error_free(err);
			err = NULL;
		} else {
			lcd_log("schedule %s:%s slot %s: task %s", app->name, s->name, when,
				json_string_value(json_array_get(ids, 0)));
		}
	}
	free(due);
}

static void tick(lcd_t *lcd)
{
	long long now = lcd_now_s(lcd);
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *rows = lcd_store_schedules(lcd->db, &err);
	if (!rows) {
		lcd_log("scheduler: %s", err ? err->msg : "cannot read schedules");
		lc_error_free(err);
		return;
	}
	size_t n;
	lcd_app_t **apps = lcd_apps_snapshot(lcd, &n);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < apps[i]->n_schedules; k++) {
			json_t *row = schedule_row(rows, apps[i]->name, apps[i]->schedules[k].name);
			if (row)
				tick_schedule(lcd, apps[i], &apps[i]->schedules[k], row, now);
		}
	lcd_apps_release(apps, n);
}

void *lcd_scheduler(void *arg)
{
	lcd_t *lcd = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	long long last_gc = 0, last_image_gc = 0;
	for (;;) {
		/* one node of a cluster runs the schedules and the map expiry */
		bool leads = lcd_node_leads(lcd);
		if (leads)
			tick(lcd);
		lcd_kill_running(lcd, true);
		if (leads && lc_now_ms() - last_gc >= MAP_GC_EVERY_MS) {
			lc_error_t *err = NULL;
			int n = lcd_store_map_gc(lcd->db, lc_wall_ms(), &err);
			if (n > 0)
				lcd_log("maps: %d expired key(s) collected", n);
			lc_error_free(err);
			last_gc = lc_now_ms();
		}
		if (lc_now_ms() - last_image_gc >= IMAGE_GC_EVERY_MS) {
			lcd_images_collect(lcd);
			last_image_gc = lc_now_ms();
		}
		if (lcd_sleep(lcd, &lcd->tick, TICK_MS))
			return NULL;
	}
}

json_t *lcd_schedules_json(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_store_schedules(lcd->db, err);
	if (!rows)
		return NULL;
	long long now = lcd_now_s(lcd);
	json_t *out = json_array();
	size_t n;
	lcd_app_t **apps = lcd_apps_snapshot(lcd, &n);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < apps[i]->n_schedules; k++) {
			const lcd_schedule_t *s = &apps[i]->schedules[k];
			json_t *row = schedule_row(rows, apps[i]->name, s->name);
			bool paused = row && json_integer_value(json_object_get(row, "paused"));
			long long next = lcd_cron_next(&s->cron, (time_t)now);
			json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:o}", "app", apps[i]->name,
				"name", s->name, "cron", s->cron_expr, "function", s->function, "paused", paused,
				"last_slot", (json_int_t)(row ? json_integer_value(json_object_get(row, "last_slot")) : 0),
				"next", paused || next < 0 ? json_null() : json_integer(next)));
		}
	lcd_apps_release(apps, n);
	return out;
}
