/* error.h — how liblcrun reports failures.
 *
 * A function that can fail returns a negative int and fills *err with the
 * errno (0 if none), the process exit code lcrun should use, and a message
 * that names the object and what went wrong.  Callers either wrap the error
 * with context or print it once, at the top. */
#ifndef LC_ERROR_H
#define LC_ERROR_H

#include <stdarg.h>
#include <stdio.h>

/* Exit codes of lcrun/lcctl itself (the command's own code passes through
 * unchanged).  Kept in 117..125 so they rarely collide with a command's. */
enum {
	LC_EXIT_STATE = 117,    /* object is in the wrong state (stopped, paused) */
	LC_EXIT_PERM = 118,     /* needs root / not permitted for this caller */
	LC_EXIT_BUSY = 119,     /* conflict: name taken, locked, pool exhausted */
	LC_EXIT_UNKNOWN = 120,  /* no such sandbox, image, policy, app */
	LC_EXIT_INVALID = 121,  /* a file's content is invalid (JSON, profile) */
	LC_EXIT_NOENT = 122,    /* a path given does not exist */
	LC_EXIT_USAGE = 123,    /* unknown option or a bad value */
	LC_EXIT_TIMEOUT = 124,  /* --timeout expired */
	LC_EXIT_RUNTIME = 125,  /* the host refused: kernel, cgroup, netlink */
	LC_EXIT_CANNOT_EXEC = 126,
	LC_EXIT_NOT_FOUND = 127,
};

typedef struct lc_error {
	int errnum;    /* errno, 0 when not from a syscall */
	int exit_code; /* one of LC_EXIT_* */
	char *msg;
} lc_error_t;

/* Fill *err (if err is non-NULL and *err is NULL) and return -1.
 * errnum is appended as ": strerror(errnum)" when non-zero. */
int lc_error_set(lc_error_t **err, int exit_code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Prefix an existing error with context ("context: old message"). */
int lc_error_wrap(lc_error_t **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "prog: message" on one line to stderr. */
void lc_error_print(const lc_error_t *err, const char *prog);
void lc_error_free(lc_error_t *err);
/* Serialize an error into buf (for passing it over a pipe) and back. */
int lc_error_to_buf(const lc_error_t *err, char *buf, size_t len);
int lc_error_from_buf(lc_error_t **err, const char *buf, size_t len);

#endif
