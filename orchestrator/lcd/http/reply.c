/* reply.c — how lcd's HTTP listeners answer: a JSON body (lcd's API, the
 * E2B listener, envd's Connect calls, the webhook listener each with its
 * own flags), an error as {"error", "exit_code"}, the HTTP status of an
 * exit code, text that may not be UTF-8. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "util.h"

struct MHD_Response *api_json_response(json_t *body, size_t flags, bool newline)
{
	char *text = json_dumps(body ? body : json_null(), flags);
	json_decref(body);
	size_t len = strlen(text);
	if (newline) {
		text = realloc(text, len + 2);
		text[len++] = '\n';
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	return r;
}

enum MHD_Result api_send(struct MHD_Connection *c, unsigned status, struct MHD_Response *r)
{
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result api_reply(struct MHD_Connection *c, unsigned status, json_t *body)
{
	/* 15 digits: a spend of $0.0045 reads 0.0045, not 0.0044999999999999997 */
	return api_send(c, status, api_json_response(body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15), true));
}

unsigned api_status_of(int exit_code)
{
	switch (exit_code) {
	case LC_EXIT_UNKNOWN:
	case LC_EXIT_NOENT:
		return MHD_HTTP_NOT_FOUND;
	case LC_EXIT_BUSY:
		return MHD_HTTP_TOO_MANY_REQUESTS;
	case LC_EXIT_INVALID:
	case LC_EXIT_USAGE:
		return MHD_HTTP_BAD_REQUEST;
	case LC_EXIT_STATE:
		return MHD_HTTP_CONFLICT;
	case LC_EXIT_PERM:
		return MHD_HTTP_FORBIDDEN;
	default:
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
}

/* The length of the valid UTF-8 sequence at p, 0 if there is none. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned c = p[0], min;
	size_t n;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		n = 2, min = 0x80, c &= 0x1f;
	else if ((c & 0xf0) == 0xe0)
		n = 3, min = 0x800, c &= 0x0f;
	else if ((c & 0xf8) == 0xf0)
		n = 4, min = 0x10000, c &= 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	return c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) ? 0 : n;
}

json_t *api_text(const char *s)
{
	json_t *j = json_string(s);
	if (j || !s)
		return j;
	size_t len = strlen(s), o = 0;
	char *t = lc_xmalloc0(4 * len + 1);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_len(p);
		if (n) {
			memcpy(t + o, p, n);
			o += n, p += n;
		} else {
			o += (size_t)sprintf(t + o, "\\x%02x", *p++);
		}
	}
	j = json_string(t);
	free(t);
	return j;
}

json_t *api_vtext(const char *fallback, const char *fmt, va_list ap)
{
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	json_t *j = api_text(msg ? msg : fallback);
	free(msg);
	return j;
}

enum MHD_Result api_fail_status(struct MHD_Connection *c, unsigned status, int exit_code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_t *msg = api_vtext("error", fmt, ap);
	va_end(ap);
	return api_reply(c, status, json_pack("{s:o, s:i}", "error", msg, "exit_code", exit_code));
}

enum MHD_Result api_fail_err(struct MHD_Connection *c, lc_error_t *err)
{
	int code = err ? err->exit_code : LC_EXIT_RUNTIME;
	enum MHD_Result r = api_fail_status(c, api_status_of(code), code, "%s", err && err->msg ? err->msg : "internal error");
	lc_error_free(err);
	return r;
}
