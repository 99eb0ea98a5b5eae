/* access.h — who calls, and what a task may reach (access.c): the callers
 * of the API, task tokens, a task's access to the API from its sandbox. */
#ifndef LCD_ACCESS_H
#define LCD_ACCESS_H

#include <stdbool.h>

#include "lcd.h"

/* The caller of one request: the operator (the operator socket, or the TCP
 * listener's bearer token), or a task through its own token, which reaches
 * only its app (maps, functions, tasks) and the sandboxes it made. */
typedef struct lcd_caller {
	bool operator;
	char task[LC_ID_LEN + 1];
	char app[64];
	char function[64];
} lcd_caller_t;
#define LCD_TOKEN_LEN 64
/* The SHA-256 of a token, in hex: what lcd.db keeps of it. */
void lcd_token_hash(const char *token, char hex[65]);
/* Find a live task token (stored as its SHA-256 only). */
bool lcd_token_check(lcd_t *lcd, const char *token, lcd_caller_t *who);
/* Give a task's sandbox its access to the API: a fresh token (LCD_TOKEN,
 * through spec->secret_env, never written down), the task socket bound at
 * /run/lcd.sock (LCD_SOCKET), the Python client on PYTHONPATH, the
 * workload programs read-only at /run/lcd/bin, the apps' files read-only
 * at /run/lcd/apps, LC_TASK_APP and LC_TASK_FUNCTION. */
int lcd_task_access(lcd_t *lcd, const char *task, const lcd_app_t *app, const lcd_function_t *fn, lc_spec_t *spec,
		    lc_error_t **err);
/* An attempt of the task ended (however): its token dies and the sandboxes
 * it made are removed.  Idempotent. */
void lcd_task_release(lcd_t *lcd, const char *task);

#endif
