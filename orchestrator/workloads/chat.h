/* chat.h — one call of an OpenAI-compatible chat completions API
 * (POST BASE_URL/chat/completions) with libcurl: TLS verified, a timeout
 * for the whole request, one retry on 5xx and 429 after a backoff (or the
 * provider's Retry-After, up to a cap), no redirects.
 *
 * The key is sent only as "Authorization: Bearer KEY".  It is never part
 * of an error message: whatever the provider says is cleaned to one
 * printable line, and any run of 6 or more of the key's characters in it
 * is replaced by "***" (providers quote a masked key back in a 401). */
#ifndef LC_CHAT_H
#define LC_CHAT_H

#include <stddef.h>
#include <jansson.h>

#include "error.h"

typedef struct wl_chat_opts {
	const char *base_url;  /* e.g. https://api.openai.com/v1 (a trailing / is fine) */
	const char *model;
	const char *api_key;   /* NULL or "": no Authorization header */
	long timeout_s;        /* the whole request, each attempt */
	long connect_timeout_s;
	int retries;           /* more attempts after a 5xx or 429 (1) */
	long backoff_ms;       /* before a retry, unless Retry-After asks for more */
	long backoff_max_ms;   /* Retry-After is honoured up to this */
} wl_chat_opts_t;

typedef struct wl_chat_answer {
	char *content;         /* the first choice's message content (NUL-terminated) */
	size_t len;
	char *model;           /* the model that answered, as the provider says */
	char *finish_reason;
	json_t *usage;         /* the provider's usage object (or null) */
	int attempts;
	long status;           /* the last HTTP status (0: none) */
} wl_chat_answer_t;

void wl_chat_answer_clear(wl_chat_answer_t *a);

/* POST request (an object: messages, response_format, …; "model" is set
 * from opts) and read the first choice's content.  On failure *err says
 * what the provider answered (status and its message) or why there was no
 * answer, and a->status / a->attempts say how far it got. */
int wl_chat_complete(const wl_chat_opts_t *o, json_t *request, wl_chat_answer_t *a, lc_error_t **err);

/* msg with every run of 6 or more characters that also occurs in key
 * replaced by "***" (a new string). */
char *wl_redact(const char *msg, const char *key);

#endif
