/* reply.h — how lcd's HTTP listeners answer (reply.c). */
#ifndef LCD_REPLY_H
#define LCD_REPLY_H

#include <stdarg.h>
#include <stdbool.h>
#include <jansson.h>
#include <microhttpd.h>

#include "error.h"

/* A response with body (taken; NULL: null) as JSON dumped with jansson's
 * flags, a newline after it when newline is set, and its Content-Type:
 * callers add their own headers, then api_send it. */
struct MHD_Response *api_json_response(json_t *body, size_t flags, bool newline);
/* Queue r with status on c, and let go of r. */
enum MHD_Result api_send(struct MHD_Connection *c, unsigned status, struct MHD_Response *r);
/* lcd's API: body (taken) as one compact line of JSON. */
enum MHD_Result api_reply(struct MHD_Connection *c, unsigned status, json_t *body);
/* s as a JSON string; bytes that are not UTF-8 (a file's name may hold
 * such) written as \xNN, where json_string would give nothing at all. */
json_t *api_text(const char *s);
enum MHD_Result api_fail_status(struct MHD_Connection *c, unsigned status, int exit_code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The error's status from its exit code (api_status_of), then freed. */
enum MHD_Result api_fail_err(struct MHD_Connection *c, lc_error_t *err);
unsigned api_status_of(int exit_code);
/* The formatted message as api_text; fallback when it cannot be made. */
json_t *api_vtext(const char *fallback, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
