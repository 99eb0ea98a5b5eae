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

/* Print "lcctl: message" and return the error's exit code (frees err). */
int lcctl_fail(lc_error_t *err);
/* The same for a failed system call (errno): LC_EXIT_RUNTIME. */
int lcctl_fail_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "lcctl: message" and return LC_EXIT_USAGE. */
int lcctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* --help, -h or help: the word that asks a noun for its usage. */
bool lcctl_is_help(const char *word);

/* An option's value as a whole number (all of s, in range) or a number. */
bool lcctl_parse_int(const char *s, long long *out);
bool lcctl_parse_number(const char *s, double *out);

void lcctl_print_json(json_t *j);
/* o[k] when it is a string, else "-" (for tables). */
const char *lcctl_str(json_t *o, const char *k);
/* A time in ms since the epoch as YYYY-MM-DDTHH:MM:SSZ ("-" when not a number). */
void lcctl_fmt_time(json_t *v, char *buf, size_t len);

#endif
