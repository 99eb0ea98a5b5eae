/* lcctl.h — what lcctl's files share: lcctl.c (options, the app, task,
 * map, secret and schedule verbs) and sandbox.c (lcctl sandbox …). */
#ifndef LCCTL_COMMON_H
#define LCCTL_COMMON_H

#include <jansson.h>

#include "lcclient.h"
#include "lcrun.h"

/* The client of lcd, made from --socket / $LCD_URL / $LCD_SOCKET. */
lcc_t *lcctl_client(void);
/* Print "lcctl: message" and return the error's exit code. */
int lcctl_fail(lc_error_t *err);
/* Print "lcctl: message" and return LC_EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void lcctl_print_json(json_t *j);
/* o[k] when it is a string, else "-" (for tables). */
const char *lcctl_str(json_t *o, const char *k);
/* A time in ms since the epoch as YYYY-MM-DDTHH:MM:SSZ ("-" when not a number). */
void lcctl_fmt_time(json_t *v, char *buf, size_t len);
/* lcctl sandbox VERB …: argv holds what follows "sandbox". */
int lcctl_sandbox(int argc, char **argv);
/* lcctl devbox …, disk …, ssh-config: argv[0] is that word (devbox.c). */
int lcctl_devbox(int argc, char **argv);
/* The caller's public keys (each line of ~/.ssh/NAME.pub), for devboxes. */
json_t *lcctl_caller_keys(void);

#endif
