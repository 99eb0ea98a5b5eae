/* cron.c — parse and evaluate 5-field cron expressions (UTC). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cron.h"

struct field {
	const char *name;
	int lo, hi;
	const char *const *names; /* names[i] stands for lo + i */
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const dow_names[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

static const struct field fields[5] = {
	{ "minute", 0, 59, NULL },
	{ "hour", 0, 23, NULL },
	{ "day-of-month", 1, 31, NULL },
	{ "month", 1, 12, month_names },
	{ "day-of-week", 0, 7, dow_names },
};

static int fail(char **errmsg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **errmsg, const char *fmt, ...)
{
	if (errmsg) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(errmsg, fmt, ap) < 0)
			*errmsg = NULL;
		va_end(ap);
	}
	return -1;
}

/* A number or (for month/day-of-week) a three-letter name. */
static int parse_value(const struct field *f, const char **p, int *out, char **errmsg)
{
	const char *s = *p;
	if (isdigit((unsigned char)*s)) {
		long v = 0;
		while (isdigit((unsigned char)*s)) {
			v = v * 10 + (*s - '0');
			if (v > 1000)
				break;
			s++;
		}
		if (v < f->lo || v > f->hi)
			return fail(errmsg, "%s %ld out of range %d-%d", f->name, v, f->lo, f->hi);
		*out = (int)v;
		*p = s;
		return 0;
	}
	if (f->names && isalpha((unsigned char)*s)) {
		for (int i = 0; f->names[i]; i++) {
			if (strncasecmp(s, f->names[i], 3) == 0 && !isalpha((unsigned char)s[3])) {
				*out = f->lo + i;
				*p = s + 3;
				return 0;
			}
		}
	}
	size_t n = strcspn(s, ",-/");
	return fail(errmsg, "%s: bad value '%.*s'", f->name, (int)n, s);
}

static int parse_field(const struct field *f, const char *text, uint64_t *bits, bool *star, char **errmsg)
{
	*bits = 0;
	*star = text[0] == '*';
	const char *p = text;
	for (;;) {
		int lo, hi, step = 1;
		bool single = false;
		if (*p == '*') {
			lo = f->lo;
			hi = f->hi;
			p++;
		} else {
			if (parse_value(f, &p, &lo, errmsg) < 0)
				return -1;
			hi = lo;
			single = *p != '-';
			if (*p == '-') {
				p++;
				if (parse_value(f, &p, &hi, errmsg) < 0)
					return -1;
				if (hi < lo)
					return fail(errmsg, "%s: range %d-%d runs backwards", f->name, lo, hi);
			}
		}
		if (*p == '/') {
			p++;
			if (!isdigit((unsigned char)*p))
				return fail(errmsg, "%s: step must be a positive number", f->name);
			long v = 0;
			while (isdigit((unsigned char)*p) && v <= 1000)
				v = v * 10 + (*p++ - '0');
			if (v < 1 || v > f->hi)
				return fail(errmsg, "%s: step %ld out of range 1-%d", f->name, v, f->hi);
			step = (int)v;
			/* "5/10" means 5-max/10, as most crons read it. */
			if (single)
				hi = f->hi;
		}
		for (int v = lo; v <= hi; v += step)
			*bits |= 1ULL << v;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p)
			return fail(errmsg, "%s: unexpected '%c' in '%s'", f->name, *p, text);
		return 0;
	}
}

static const struct {
	const char *macro, *expr;
} macros[] = {
	{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
	{ "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },   { "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

int lcd_cron_parse(const char *expr, lcd_cron_t *out, char **errmsg)
{
	if (errmsg)
		*errmsg = NULL;
	if (!expr)
		return fail(errmsg, "empty cron expression");
	while (isspace((unsigned char)*expr))
		expr++;
	if (*expr == '@') {
		for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
			if (strcmp(expr, macros[i].macro) == 0)
				return lcd_cron_parse(macros[i].expr, out, errmsg);
		return fail(errmsg, "unknown cron macro '%s'", expr);
	}
	char buf[256];
	if (strlen(expr) >= sizeof(buf))
		return fail(errmsg, "cron expression too long");
	strcpy(buf, expr);
	char *parts[6] = { 0 };
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (n == 5)
			return fail(errmsg, "expected 5 fields (minute hour day-of-month month day-of-week), got more");
		parts[n++] = tok;
	}
	if (n != 5)
		return fail(errmsg, "expected 5 fields (minute hour day-of-month month day-of-week), got %d", n);
	lcd_cron_t c = { 0 };
	uint64_t bits[5];
	bool star[5];
	for (int i = 0; i < 5; i++)
		if (parse_field(&fields[i], parts[i], &bits[i], &star[i], errmsg) < 0)
			return -1;
	c.minute = bits[0];
	c.hour = (uint32_t)bits[1];
	c.dom = (uint32_t)bits[2];
	c.month = (uint32_t)bits[3];
	c.dow = (uint32_t)(bits[4] & 0x7f);
	if (bits[4] & (1u << 7))
		c.dow |= 1; /* 7 is Sunday too */
	c.dom_star = star[2];
	c.dow_star = star[4];
	*out = c;
	return 0;
}

static bool day_matches(const lcd_cron_t *c, const struct tm *tm)
{
	bool dom = c->dom & (1u << tm->tm_mday);
	bool dow = c->dow & (1u << tm->tm_wday);
	if (c->dom_star || c->dow_star)
		return dom && dow;
	return dom || dow;
}

bool lcd_cron_match(const lcd_cron_t *c, time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	return (c->minute & (1ULL << tm.tm_min)) && (c->hour & (1u << tm.tm_hour)) &&
	       (c->month & (1u << (tm.tm_mon + 1))) && day_matches(c, &tm);
}

time_t lcd_cron_next(const lcd_cron_t *c, time_t t)
{
	time_t cur = t - (t % 60) + 60;
	if (t < 0)
		return -1;
	time_t limit = t + (time_t)8 * 366 * 86400;
	struct tm tm;
	while (cur <= limit) {
		gmtime_r(&cur, &tm);
		if (!(c->month & (1u << (tm.tm_mon + 1)))) {
			/* first minute of next month */
			tm.tm_mon++;
			tm.tm_mday = 1;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
			cur = timegm(&tm);
			continue;
		}
		if (!day_matches(c, &tm)) {
			tm.tm_mday++;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
			cur = timegm(&tm);
			continue;
		}
		if (!(c->hour & (1u << tm.tm_hour))) {
			cur += 3600 - tm.tm_min * 60;
			continue;
		}
		if (!(c->minute & (1ULL << tm.tm_min))) {
			cur += 60;
			continue;
		}
		return cur;
	}
	return -1;
}
