/* common.h — what every lcctl verb uses (common.c): the one client of lcd,
 * the one-line failures and usage errors, the checks of option values, and
 * the printing of JSON and of table cells.
 *
 * Every failure is one line on stderr, "lcctl: ...", and an exit code from
 * error.h (lcd's own code for the error, passed through). */
#ifndef LCCTL_COMMON_H
#define LCCTL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "lcclient.h"
#include "lcrun.h"

/* Make the client of lcd: socket is --socket's value, NULL for $LCD_URL /
 * $LCD_SOCKET / the default (lcclient.h).  It connects at the first call. */
int lcctl_connect(const char *socket, lc_error_t **err);
void lcctl_disconnect(void);
lcc_t *lcctl_client(void);
/* One request to lcd: 2xx, *out (optional) gets the parsed body; otherwise
 * *err gets lcd's message and exit code. */
int lcctl_request(const char *method, const char *path, json_t *body, json_t **out, lc_error_t **err);
/* GET a listing: *list gets its `key` array (owned by *out), printed as
 * JSON when json.  Returns the exit code when that is all (printed as JSON,
 * or failed: the line is printed), -1 when the caller prints a table. */
int lcctl_get_list(const char *path, const char *key, bool json, json_t **out, json_t **list);

/* Print "lcctl: message" and return the error's exit code (frees err). */
int lcctl_fail(lc_error_t *err);
/* The same for a failed system call (errno): LC_EXIT_RUNTIME. */
int lcctl_fail_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "lcctl: message" and return LC_EXIT_USAGE. */
int lcctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A noun's first word: none (NULL) prints help on stderr and returns
 * LC_EXIT_USAGE; --help, -h or help prints it on stdout and returns 0;
 * -1 for any other word (a verb to run). */
int lcctl_help(const char *word, const char *help);

/* An option's value as a whole number (all of s, in range) or a number. */
bool lcctl_parse_int(const char *s, long long *out);
bool lcctl_parse_number(const char *s, double *out);

void lcctl_print_json(json_t *j);
/* o[k] when it is a string, else "-" (for tables). */
const char *lcctl_str(json_t *o, const char *k);
/* A time in ms since the epoch as YYYY-MM-DDTHH:MM:SSZ ("-" when not a number). */
void lcctl_fmt_time(json_t *v, char *buf, size_t len);

#endif
