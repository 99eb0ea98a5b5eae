/* common.c — the helpers every lcctl verb shares (common.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "json.h"
#include "util.h"

/* ---- the client (orchestrator/client/lcclient.c) ---- */

static lcc_t *cli;

int lcctl_connect(const char *socket, lc_error_t **err)
{
	cli = lcc_new(socket, NULL, err);
	return cli ? 0 : -1;
}

void lcctl_disconnect(void)
{
	if (cli)
		lcc_free(cli);
	cli = NULL;
}

lcc_t *lcctl_client(void)
{
	return cli;
}

int lcctl_request(const char *method, const char *path, json_t *body, json_t **out, lc_error_t **err)
{
	return lcc_request(cli, method, path, body, NULL, out, err);
}

int lcctl_get_list(const char *path, const char *key, bool json, json_t **out, json_t **list)
{
	lc_error_t *err = NULL;
	*list = NULL;
	if (lcctl_request("GET", path, NULL, out, &err) < 0)
		return lcctl_fail(err);
	*list = json_object_get(*out, key);
	if (json) {
		lcctl_print_json(*list);
		return 0;
	}
	return -1;
}

/* ---- failures ---- */

int lcctl_fail(lc_error_t *err)
{
	int code = err ? err->exit_code : LC_EXIT_RUNTIME;
	lc_error_print(err, "lcctl");
	lc_error_free(err);
	return code;
}

int lcctl_fail_errno(const char *fmt, ...)
{
	int saved = errno;
	char what[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	lc_error_t *err = NULL;
	lc_error_set(&err, LC_EXIT_RUNTIME, saved, "%s", what);
	return lcctl_fail(err);
}

int lcctl_usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("lcctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return LC_EXIT_USAGE;
}

int lcctl_help(const char *word, const char *help)
{
	if (!word) {
		fputs(help, stderr);
		return LC_EXIT_USAGE;
	}
	if (!strcmp(word, "--help") || !strcmp(word, "-h") || !strcmp(word, "help")) {
		fputs(help, stdout);
		return 0;
	}
	return -1;
}

/* ---- option values ---- */

bool lcctl_parse_int(const char *s, long long *out)
{
	char *end = NULL;
	errno = 0;
	long long n = strtoll(s, &end, 10);
	if (errno || !*s || *end)
		return false;
	*out = n;
	return true;
}

bool lcctl_parse_number(const char *s, double *out)
{
	char *end = NULL;
	double x = strtod(s, &end);
	if (!*s || *end)
		return false;
	*out = x;
	return true;
}

/* ---- printing ---- */

void lcctl_print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
	if (s)
		puts(s);
	free(s);
}

const char *lcctl_str(json_t *o, const char *k)
{
	return lc_json_str(o, k) ?: "-";
}

void lcctl_fmt_time(json_t *v, char *buf, size_t len)
{
	if (!json_is_integer(v)) {
		snprintf(buf, len, "-");
		return;
	}
	time_t t = (time_t)(json_integer_value(v) / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
