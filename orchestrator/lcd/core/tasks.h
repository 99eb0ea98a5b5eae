/* tasks.h — the task queue (tasks.c): spawn, cancel, wait, the
 * dispatcher and its workers, recovery at start. */
#ifndef LCD_TASKS_H
#define LCD_TASKS_H

#include <stdbool.h>
#include <jansson.h>

#include "lcd.h"

/* Queue tasks (one per element of args_list) for app:function; all or
 * nothing, LC_EXIT_BUSY when the function's queue is full. */
int lcd_spawn(lcd_t *lcd, const lcd_app_t *app, const char *function, const char *schedule, json_t *args_list,
	      json_t *ids, lc_error_t **err);
int lcd_cancel(lcd_t *lcd, const char *id, lc_error_t **err);
/* Wait until the task has ended or timeout_ms passed; returns the task. */
json_t *lcd_task_wait(lcd_t *lcd, const char *id, long long timeout_ms, lc_error_t **err);
bool lcd_state_final(const char *state);
/* Does a worker of this lcd run the task now? */
bool lcd_task_runs_here(lcd_t *lcd, const char *id);
/* At start: tasks left running by a crash are failed or queued again
 * (per retries), their sandboxes killed, their directories removed. */
int lcd_recover(lcd_t *lcd, lc_error_t **err);
void *lcd_dispatcher(void *arg);
/* Kill every running task's sandbox (cancel flags stay as they are). */
void lcd_kill_running(lcd_t *lcd, bool only_cancelled);
/* Kill running tasks of one app and mark them cancelled. */
void lcd_cancel_app(lcd_t *lcd, const char *app);
const char *lcd_task_log_path(lcd_t *lcd, const char *id, char *buf, size_t len);

#endif
