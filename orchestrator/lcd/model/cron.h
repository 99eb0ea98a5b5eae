/* cron.h — standard 5-field cron expressions, evaluated in UTC.
 *
 *   minute hour day-of-month month day-of-week
 *
 * Each field is `*`, a number, a range `a-b`, a step `*\/n` or `a-b/n`, or a
 * comma list of those; months and weekdays also take names (jan, mon).
 * Day-of-week 0 and 7 are Sunday.  As in Vixie cron, when both day fields
 * are restricted (neither starts with `*`) a day matches if EITHER matches;
 * otherwise both must.  The macros @yearly @annually @monthly @weekly
 * @daily @midnight @hourly are accepted. */
#ifndef LCD_CRON_H
#define LCD_CRON_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct lcd_cron {
	uint64_t minute; /* bit n: minute n (0..59) */
	uint32_t hour;   /* 0..23 */
	uint32_t dom;    /* 1..31 */
	uint32_t month;  /* 1..12 */
	uint32_t dow;    /* 0..6, Sunday = 0 */
	bool dom_star;   /* the field started with '*' */
	bool dow_star;
} lcd_cron_t;

/* Parse expr; on error returns -1 and sets *errmsg (malloc'd, names the
 * field and the problem). */
int lcd_cron_parse(const char *expr, lcd_cron_t *out, char **errmsg);
/* Does the minute containing t (UTC) match? */
bool lcd_cron_match(const lcd_cron_t *c, time_t t);
/* First matching minute strictly after t, or -1 if none within 8 years
 * (e.g. "0 0 31 2 *"). */
time_t lcd_cron_next(const lcd_cron_t *c, time_t t);

#endif
