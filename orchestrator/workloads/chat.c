/* chat.c — an OpenAI-compatible chat completions call (see chat.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>

#include "chat.h"
#include "json.h"
#include "util.h"
#include "workload.h"

#define ANSWER_MAX (4 << 20) /* bytes of a provider's answer we read */
#define SNIPPET 200          /* bytes of an unexpected body quoted in a message */

void wl_chat_answer_clear(wl_chat_answer_t *a)
{
	free(a->content);
	free(a->model);
	free(a->finish_reason);
	json_decref(a->usage);
	memset(a, 0, sizeof(*a));
}

char *wl_redact(const char *msg, const char *key)
{
	size_t n = strlen(msg), klen = key ? strlen(key) : 0;
	char *out = lc_xmalloc0(n + 1); /* a run of 6 or more becomes 3: never longer */
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		/* the longest run starting here that the key also contains */
		size_t run = 0;
		if (klen >= 6)
			while (i + run < n && run < klen && memmem(key, klen, msg + i, run + 1))
				run++;
		if (run >= 6) {
			memcpy(out + o, "***", 3);
			o += 3;
			i += run;
		} else {
			out[o++] = msg[i++];
		}
	}
	out[o] = '\0';
	return out;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct buf {
	char *data;
	size_t len;
	bool overflow;
	long retry_after_s; /* -1: none */
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
	struct buf *b = ud;
	size_t n = sz * nm;
	if (b->len + n > ANSWER_MAX) {
		b->overflow = true;
		return 0;
	}
	char *d = realloc(b->data, b->len + n + 1);
	if (!d)
		return 0;
	b->data = d;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
	struct buf *b = ud;
	size_t n = sz * nm;
	static const char name[] = "retry-after:";
	if (n > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1)) {
		char tmp[32] = "";
		size_t k = n - (sizeof(name) - 1);
		if (k >= sizeof(tmp))
			k = sizeof(tmp) - 1;
		memcpy(tmp, p + sizeof(name) - 1, k);
		char *end = NULL;
		long v = strtol(tmp, &end, 10);
		if (end != tmp && v >= 0)
			b->retry_after_s = v;
	}
	return n;
}

/* One printable line of what the provider said, without the key. */
static char *provider_text(const char *s, size_t len, const char *key)
{
	_cleanup_free_ char *p = wl_printable(s, len, SNIPPET);
	return wl_redact(p, key);
}

/* The message of an error answer: OpenAI's {"error": {"message", "type"}}
 * (some providers: {"error": "text"} or {"message": ...}), else the body. */
static char *error_text(const struct buf *b, const char *key)
{
	_cleanup_json_ json_t *j = json_loadb(b->data ? b->data : "", b->len, 0, NULL);
	json_t *e = json_object_get(j, "error");
	const char *msg = lc_json_str(e, "message");
	const char *type = lc_json_str(e, "type");
	if (!msg)
		msg = json_string_value(e);
	if (!msg)
		msg = lc_json_str(j, "message");
	if (msg) {
		_cleanup_free_ char *m = provider_text(msg, strlen(msg), key);
		if (type) {
			_cleanup_free_ char *t = provider_text(type, strlen(type), key);
			return lc_strdup_printf("%s (%s)", m, t);
		}
		return lc_steal(m);
	}
	if (!b->len)
		return strdup("an empty body");
	_cleanup_free_ char *body = provider_text(b->data, b->len, key);
	return lc_strdup_printf("a body of %zu bytes: \"%s\"", b->len, body);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Read the first choice of a 2xx answer into a. */
static int read_answer(const struct buf *b, const char *key, wl_chat_answer_t *a, lc_error_t **err)
{
	json_error_t je;
	/* NUL (\u0000) allowed: the contract refuses it by name */
	_cleanup_json_ json_t *j = json_loadb(b->data ? b->data : "", b->len, JSON_ALLOW_NUL, &je);
	if (!json_is_object(j)) {
		_cleanup_free_ char *body = provider_text(b->data ? b->data : "", b->len, key);
		return lc_error_set(err, WL_EXIT_PROVIDER, 0,
				    "the provider answered %ld with a body that is not a JSON object (%zu bytes: \"%s\")",
				    a->status, b->len, body);
	}
	json_t *m = json_object_get(j, "model");
	if (json_is_string(m))
		a->model = wl_printable(json_string_value(m), json_string_length(m), 200);
	a->usage = json_incref(json_object_get(j, "usage"));
	if (!a->usage)
		a->usage = json_null();
	json_t *choices = json_object_get(j, "choices");
	if (!json_is_array(choices) || json_array_size(choices) == 0)
		return lc_error_set(err, WL_EXIT_PROVIDER, 0, "the provider answered %ld with no choices (\"choices\": %s)",
				    a->status, json_is_array(choices) ? "[]" : "missing");
	json_t *c0 = json_array_get(choices, 0);
	json_t *fr = json_object_get(c0, "finish_reason");
	if (json_is_string(fr))
		a->finish_reason = wl_printable(json_string_value(fr), json_string_length(fr), 64);
	json_t *msg = json_object_get(c0, "message");
	json_t *content = json_object_get(msg, "content");
	if (!json_is_string(content)) {
		const char *refusal = lc_json_str(msg, "refusal");
		if (refusal) {
			_cleanup_free_ char *r = provider_text(refusal, strlen(refusal), key);
			return lc_error_set(err, WL_EXIT_PROVIDER, 0, "the model refused: %s", r);
		}
		if (json_object_get(msg, "tool_calls"))
			return lc_error_set(err, WL_EXIT_PROVIDER, 0, "the model answered with a tool call, not a patch");
		return lc_error_set(err, WL_EXIT_PROVIDER, 0, "the provider's answer has no message content (finish_reason %s)",
				    a->finish_reason ? a->finish_reason : "missing");
	}
	if (a->finish_reason && !strcmp(a->finish_reason, "length"))
		return lc_error_set(err, WL_EXIT_PROVIDER, 0,
				    "the model's answer was cut off at its token limit (finish_reason length, %zu bytes)",
				    json_string_length(content));
	a->len = json_string_length(content);
	a->content = lc_xmalloc0(a->len + 1);
	memcpy(a->content, json_string_value(content), a->len);
	return 0;
}

int wl_chat_complete(const wl_chat_opts_t *o, json_t *request, wl_chat_answer_t *a, lc_error_t **err)
{
	memset(a, 0, sizeof(*a));
	pthread_once(&curl_once, curl_init_once);
	const char *key = o->api_key && *o->api_key ? o->api_key : NULL;
	size_t blen = strlen(o->base_url);
	while (blen > 0 && o->base_url[blen - 1] == '/')
		blen--;
	_cleanup_free_ char *url = lc_strdup_printf("%.*s/chat/completions", (int)blen, o->base_url);
	_cleanup_free_ char *shown_url = wl_redact(url, key);
	json_object_set_new(request, "model", json_string(o->model));
	_cleanup_free_ char *body = json_dumps(request, JSON_COMPACT);
	if (!body)
		return lc_error_set(err, WL_EXIT_USAGE, 0, "cannot encode the request (not UTF-8?)");

	CURL *curl = curl_easy_init();
	if (!curl)
		return lc_error_set(err, WL_EXIT_PROVIDER, 0, "cannot initialise libcurl");
	struct curl_slist *hdr = NULL;
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Accept: application/json");
	_cleanup_free_ char *auth = key ? lc_strdup_printf("Authorization: Bearer %s", key) : NULL;
	if (auth)
		hdr = curl_slist_append(hdr, auth);
	char errbuf[CURL_ERROR_SIZE];
	int r = -1;
	for (;;) {
		struct buf b = { .retry_after_s = -1 };
		errbuf[0] = '\0';
		curl_easy_reset(curl);
		curl_easy_setopt(curl, CURLOPT_URL, url);
		curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
		curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT, o->timeout_s > 0 ? o->timeout_s : 120L);
		curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s > 0 ? o->connect_timeout_s : 10L);
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(curl, CURLOPT_HEADERDATA, &b);
		curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(curl, CURLOPT_USERAGENT, "lcrun-planner/" PACKAGE_VERSION);
		a->attempts++;
		CURLcode rc = curl_easy_perform(curl);
		a->status = 0;
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a->status);
		if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && b.overflow)) {
			_cleanup_free_ char *why = wl_redact(*errbuf ? errbuf : curl_easy_strerror(rc), key);
			if (rc == CURLE_OPERATION_TIMEDOUT)
				lc_error_set(err, WL_EXIT_PROVIDER, 0, "the provider did not answer within %ld s (POST %s): %s",
					     o->timeout_s, shown_url, why);
			else
				lc_error_set(err, WL_EXIT_PROVIDER, 0, "cannot reach the provider (POST %s): %s", shown_url, why);
			free(b.data);
			break;
		}
		if (b.overflow) {
			lc_error_set(err, WL_EXIT_PROVIDER, 0, "the provider's answer is larger than %d bytes", ANSWER_MAX);
			free(b.data);
			break;
		}
		if (a->status >= 200 && a->status < 300) {
			r = read_answer(&b, key, a, err);
			free(b.data);
			break;
		}
		bool again = (a->status == 429 || a->status >= 500) && a->attempts <= o->retries;
		if (!again) {
			_cleanup_free_ char *what = error_text(&b, key);
			lc_error_set(err, WL_EXIT_PROVIDER, 0, "the provider answered %ld: %s (%d attempt%s)", a->status, what,
				     a->attempts, a->attempts == 1 ? "" : "s");
			free(b.data);
			break;
		}
		long wait = o->backoff_ms;
		if (b.retry_after_s >= 0 && b.retry_after_s * 1000 > wait)
			wait = b.retry_after_s * 1000 > o->backoff_max_ms ? o->backoff_max_ms : b.retry_after_s * 1000;
		fprintf(stderr, "%s: the provider answered %ld; retrying in %ld ms\n", wl_name(), a->status, wait);
		free(b.data);
		sleep_ms(wait);
	}
	curl_slist_free_all(hdr);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	curl_easy_cleanup(curl);
	return r;
}
