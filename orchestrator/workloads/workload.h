/* workload.h — what every workload program (a function's command, run by
 * lcd in a task's sandbox) needs: its arguments, its configuration, its
 * result, and one way to fail.
 *
 * A task's arguments are in $LC_TASK_ARGS (/run/task/args.json); its result
 * goes to $LC_TASK_RESULT (/run/task/result.json), which lcd keeps whether
 * the task succeeds or fails; the app's config comes as environment
 * variables.  A failure is one line "PROG: message" on stderr (the task's
 * log) and a result {"error": message, ...} so that `lcctl run` and the
 * caller of lcc_task_wait see why. */
#ifndef LC_WORKLOAD_H
#define LC_WORKLOAD_H

#include <stdbool.h>
#include <jansson.h>

#include "error.h"
#include "lcclient.h"

/* Exit codes of the workload programs (docs/guides/sandboxed-coding-agent.md).  0 is success. */
enum {
	WL_EXIT_FAILED = 1,   /* ran to the end, but the verdict is no (tests failed) */
	WL_EXIT_PROVIDER = 2, /* the model provider failed or answered nothing usable */
	WL_EXIT_REFUSED = 3,  /* the patch broke the contract */
	WL_EXIT_USAGE = 4,    /* bad arguments or configuration */
	WL_EXIT_LCD = 5,      /* lcd (the sandbox API, a spawned task) failed */
};

/* The program's name for messages ("plan-patch"). */
void wl_set_name(const char *name);
const char *wl_name(void);

/* The task's arguments (an object; {} when there are none).  NULL and *err
 * when args.json cannot be read or is not an object. */
json_t *wl_args(lc_error_t **err);

/* A config value: the environment variable, or def when it is unset or
 * empty. */
const char *wl_config(const char *key, const char *def);
/* A positive integer config value in [min, max], or def; -1 and *err when
 * it is set but not such a number. */
long long wl_config_int(const char *key, long long def, long long min, long long max, lc_error_t **err);

/* Write the result (atomically).  Returns 0, or -1 with a message on stderr. */
int wl_result(json_t *result);

/* Fail: print "NAME: message" on stderr, write the result {"error":
 * message} merged with extra (stolen; may be NULL), return code. */
int wl_fail(int code, json_t *extra, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with an lc_error_t's message (freed). */
int wl_fail_err(int code, json_t *extra, lc_error_t *err);

/* Text made safe for a log line or a message: control characters and
 * invalid UTF-8 become '?', at most max bytes (then "…"). */
char *wl_printable(const char *s, size_t len, size_t max);

/* The last max bytes of s (cut at a UTF-8 boundary, invalid bytes made
 * '?'), with "[… N bytes before]" in front when something was cut. */
char *wl_tail(const char *s, size_t len, size_t max);

/* Every regular file below dir (symbolic links and __pycache__ passed
 * over), sorted by path: [{"path", "content", "mode"}], at most max_files
 * files and max_bytes in all; contents must be UTF-8 text.  NULL and *err
 * (WL_EXIT_USAGE) otherwise; an empty tree is an error too. */
json_t *wl_tree_read(const char *dir, size_t max_files, size_t max_bytes, lc_error_t **err);
/* The content of path in such a list, or NULL. */
json_t *wl_tree_find(json_t *files, const char *path);

/* Run a shell line in a sandbox: as user ("UID:GID"; NULL the sandbox's
 * own), in workdir (NULL "/"), with env (borrowed, may be NULL). */
int wl_sh(lcc_t *c, const char *id, const char *user, const char *workdir, const char *cmd, json_t *env,
	  long timeout_s, lcc_exec_result_t *res, lc_error_t **err);
/* Put files ([{path, content, mode}], paths relative and normalised) under
 * root in a sandbox: the directories made by root and given to user, the
 * files uploaded (they belong to the sandbox's user) with their modes. */
int wl_tree_upload(lcc_t *c, const char *id, const char *root, const char *user, json_t *files, lc_error_t **err);

#endif
