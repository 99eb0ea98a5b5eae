/* workload.c — arguments, config, result and failure of a workload
 * program (see workload.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch_contract.h"
#include "util.h"
#include "workload.h"

static const char *prog = "workload";

void wl_set_name(const char *name)
{
	prog = name;
}

const char *wl_name(void)
{
	return prog;
}

static const char *env_or(const char *key, const char *def)
{
	const char *v = getenv(key);
	return v && *v ? v : def;
}

json_t *wl_args(lc_error_t **err)
{
	const char *path = env_or("LC_TASK_ARGS", "/run/task/args.json");
	json_error_t je;
	json_t *a = json_load_file(path, JSON_DECODE_ANY, &je);
	if (!a) {
		if (errno == ENOENT && !getenv("LC_TASK_ARGS"))
			return json_object(); /* run by hand, outside a task */
		lc_error_set(err, WL_EXIT_USAGE, 0, "cannot read the arguments %s: %s", path, je.text);
		return NULL;
	}
	if (json_is_null(a)) {
		json_decref(a);
		return json_object();
	}
	if (!json_is_object(a)) {
		json_decref(a);
		lc_error_set(err, WL_EXIT_USAGE, 0, "the arguments must be a JSON object");
		return NULL;
	}
	return a;
}

const char *wl_config(const char *key, const char *def)
{
	return env_or(key, def);
}

long long wl_config_int(const char *key, long long def, long long min, long long max, lc_error_t **err)
{
	const char *v = wl_config(key, NULL);
	if (!v)
		return def;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max)
		return lc_error_set(err, WL_EXIT_USAGE, 0, "config %s: expected a number from %lld to %lld, not '%s'", key,
				    min, max, v);
	return n;
}

int wl_result(json_t *result)
{
	const char *path = env_or("LC_TASK_RESULT", "/run/task/result.json");
	_cleanup_free_ char *text = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_SORT_KEYS);
	if (!text) {
		fprintf(stderr, "%s: cannot encode the result\n", prog);
		return -1;
	}
	lc_error_t *err = NULL;
	size_t n = strlen(text);
	text = realloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = '\0';
	if (lc_write_file_atomic(path, text, n + 1, 0644, &err) < 0) {
		lc_error_print(err, prog);
		lc_error_free(err);
		return -1;
	}
	return 0;
}

static int fail_msg(int code, json_t *extra, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
	json_t *r = json_is_object(extra) ? extra : json_object();
	if (extra && r != extra)
		json_decref(extra);
	json_object_set_new(r, "error", json_string(msg)); /* msg is valid UTF-8 (wl_printable) */
	wl_result(r);
	json_decref(r);
	return code;
}

int wl_fail(int code, json_t *extra, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *raw = NULL;
	if (vasprintf(&raw, fmt, ap) < 0)
		raw = NULL;
	va_end(ap);
	_cleanup_free_ char *msg = wl_printable(raw ? raw : "out of memory", raw ? strlen(raw) : 13, 4096);
	return fail_msg(code, extra, msg);
}

int wl_fail_err(int code, json_t *extra, lc_error_t *err)
{
	int r = wl_fail(code, extra, "%s", err && err->msg ? err->msg : "failed");
	lc_error_free(err);
	return r;
}

/* s[0..len) as valid UTF-8: every byte that starts no well-formed
 * sequence becomes '?'; controls too unless keep_space (\t \n \r kept). */
static char *utf8_clean(const char *s, size_t len, bool keep_space)
{
	char *out = lc_xmalloc0(len + 1);
	size_t o = 0, i = 0;
	while (i < len) {
		size_t ok = pc_utf8_valid_prefix((const unsigned char *)s + i, len - i);
		for (size_t k = 0; k < ok; k++) {
			unsigned char c = (unsigned char)s[i + k];
			bool ctl = c < 0x20 || c == 0x7f;
			if (ctl && !(keep_space && (c == '\n' || c == '\t' || c == '\r')))
				c = '?';
			out[o++] = (char)c;
		}
		i += ok;
		if (i < len) {
			out[o++] = '?';
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

/* Cut s to at most max bytes at a character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

char *wl_printable(const char *s, size_t len, size_t max)
{
	_cleanup_free_ char *c = utf8_clean(s, len, false);
	size_t n = strlen(c);
	size_t keep = utf8_cut(c, n, max);
	if (keep == n)
		return lc_steal(c);
	return lc_strdup_printf("%.*s…", (int)keep, c);
}

char *wl_tail(const char *s, size_t len, size_t max)
{
	_cleanup_free_ char *c = utf8_clean(s, len, true);
	size_t n = strlen(c);
	if (n <= max)
		return lc_steal(c);
	size_t start = n - max;
	while (start < n && ((unsigned char)c[start] & 0xc0) == 0x80)
		start++;
	return lc_strdup_printf("[… %zu bytes before]\n%s", start, c + start);
}
