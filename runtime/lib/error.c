/* error.c — lc_error_t: one message naming the object, once. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static char *vfmt(const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

int lc_error_set(lc_error_t **err, int exit_code, int errnum, const char *fmt, ...)
{
	if (!err || *err)
		return -1;
	lc_error_t *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *m = vfmt(fmt, ap);
	va_end(ap);
	if (m && errnum) {
		char *full = NULL;
		if (asprintf(&full, "%s: %s", m, strerror(errnum)) >= 0) {
			free(m);
			m = full;
		}
	}
	e->msg = m ? m : strdup("out of memory");
	e->errnum = errnum;
	e->exit_code = exit_code ? exit_code : LC_EXIT_RUNTIME;
	*err = e;
	return -1;
}

int lc_error_wrap(lc_error_t **err, const char *fmt, ...)
{
	if (!err || !*err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *ctx = vfmt(fmt, ap);
	va_end(ap);
	char *full = NULL;
	if (ctx && asprintf(&full, "%s: %s", ctx, (*err)->msg) >= 0) {
		free((*err)->msg);
		(*err)->msg = full;
	}
	free(ctx);
	return -1;
}

void lc_error_print(const lc_error_t *err, const char *prog)
{
	if (!err)
		return;
	/* One line, always: fold any newline a message picked up. */
	fprintf(stderr, "%s: ", prog);
	for (const char *p = err->msg; p && *p; p++)
		fputc(*p == '\n' ? ' ' : *p, stderr);
	fputc('\n', stderr);
}

void lc_error_free(lc_error_t *err)
{
	if (!err)
		return;
	free(err->msg);
	free(err);
}

int lc_error_to_buf(const lc_error_t *err, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d %d %s", err->exit_code, err->errnum, err->msg ? err->msg : "");
	if (n < 0)
		return -1;
	return (size_t)n >= len ? (int)len - 1 : n;
}

int lc_error_from_buf(lc_error_t **err, const char *buf, size_t len)
{
	int code = LC_EXIT_RUNTIME, errnum = 0, off = 0;
	char tmp[4096];
	size_t n = len < sizeof(tmp) - 1 ? len : sizeof(tmp) - 1;
	memcpy(tmp, buf, n);
	tmp[n] = '\0';
	if (sscanf(tmp, "%d %d %n", &code, &errnum, &off) < 2)
		off = 0;
	lc_error_t *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	e->exit_code = code;
	e->errnum = errnum;
	e->msg = strdup(tmp + off);
	*err = e;
	return -1;
}
