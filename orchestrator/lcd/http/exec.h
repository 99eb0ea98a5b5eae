/* exec.h — a command in a sandbox over the API (exec.c): exec, the NDJSON
 * stream, sessions (a shell's state kept between runs). */
#ifndef LCD_EXEC_H
#define LCD_EXEC_H

#include <stdbool.h>
#include <jansson.h>
#include <microhttpd.h>

#include "api.h"

/* End the sessions of a sandbox (it is being removed). */
void lcd_sessions_drop(lcd_t *lcd, const char *sandbox);
/* POST …/exec (stream: NDJSON). */
enum MHD_Result lcd_api_exec(call_t *call, json_t *row, bool stream);
/* …/sessions, …/sessions/S/run, DELETE …/sessions/S (seg[2] is "sessions"). */
enum MHD_Result lcd_api_sessions(call_t *call, json_t *row);

#endif
