/* Unit tests for the cron parser and evaluator (orchestrator/lcd/model/cron.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

static time_t at(int y, int mon, int d, int h, int mi)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi };
	return timegm(&tm);
}

static lcd_cron_t parse_ok(const char *e)
{
	lcd_cron_t c;
	char *msg = NULL;
	int r = lcd_cron_parse(e, &c, &msg);
	ck_assert_msg(r == 0, "'%s' should parse: %s", e, msg ? msg : "");
	free(msg);
	return c;
}

static char *parse_bad(const char *e)
{
	lcd_cron_t c;
	char *msg = NULL;
	ck_assert_msg(lcd_cron_parse(e, &c, &msg) == -1, "'%s' should be refused", e);
	ck_assert_ptr_nonnull(msg);
	return msg;
}

START_TEST(test_fields)
{
	lcd_cron_t c = parse_ok("*/15 9-17 * * 1-5");
	ck_assert_uint_eq(c.minute, (1ULL << 0) | (1ULL << 15) | (1ULL << 30) | (1ULL << 45));
	ck_assert_uint_eq(c.hour, 0x3fe00); /* 9..17 */
	ck_assert_uint_eq(c.dow, 0x3e);     /* mon..fri */
	ck_assert(c.dom_star);
	ck_assert(!c.dow_star);

	c = parse_ok("1,2,5-7 0 1 1 *");
	ck_assert_uint_eq(c.minute, (1ULL << 1) | (1ULL << 2) | (1ULL << 5) | (1ULL << 6) | (1ULL << 7));
	c = parse_ok("0-20/10 * * * *");
	ck_assert_uint_eq(c.minute, (1ULL << 0) | (1ULL << 10) | (1ULL << 20));
	c = parse_ok("5/20 * * * *"); /* start/step runs to the field's end */
	ck_assert_uint_eq(c.minute, (1ULL << 5) | (1ULL << 25) | (1ULL << 45));
	c = parse_ok("0 0 * jan,JUL sun");
	ck_assert_uint_eq(c.month, (1u << 1) | (1u << 7));
	ck_assert_uint_eq(c.dow, 1u);
	c = parse_ok("0 0 * * 7"); /* 7 is Sunday */
	ck_assert_uint_eq(c.dow, 1u);
	c = parse_ok("@daily");
	ck_assert_uint_eq(c.minute, 1u);
	ck_assert_uint_eq(c.hour, 1u);
}
END_TEST

START_TEST(test_errors)
{
	char *m;
	m = parse_bad("61 * * * *");
	ck_assert_msg(strstr(m, "minute") && strstr(m, "61"), "%s", m);
	free(m);
	m = parse_bad("* * * *");
	ck_assert_msg(strstr(m, "5 fields"), "%s", m);
	free(m);
	m = parse_bad("* * * * * *");
	free(m);
	m = parse_bad("* 24 * * *");
	ck_assert_msg(strstr(m, "hour"), "%s", m);
	free(m);
	m = parse_bad("* * 0 * *");
	ck_assert_msg(strstr(m, "day-of-month"), "%s", m);
	free(m);
	m = parse_bad("* * * 13 *");
	free(m);
	m = parse_bad("* * * * 8");
	free(m);
	m = parse_bad("5-1 * * * *");
	ck_assert_msg(strstr(m, "backwards"), "%s", m);
	free(m);
	m = parse_bad("*/0 * * * *");
	free(m);
	m = parse_bad("a * * * *");
	free(m);
	m = parse_bad("1,,2 * * * *");
	free(m);
	m = parse_bad("@sometimes");
	free(m);
	m = parse_bad("");
	free(m);
}
END_TEST

START_TEST(test_day_rules)
{
	/* Both day fields restricted: either matches (standard cron). */
	lcd_cron_t c = parse_ok("0 12 13 * 5"); /* the 13th, or any Friday */
	ck_assert(lcd_cron_match(&c, at(2026, 11, 13, 12, 0)));  /* Friday the 13th */
	ck_assert(lcd_cron_match(&c, at(2026, 11, 20, 12, 0)));  /* a Friday */
	ck_assert(lcd_cron_match(&c, at(2026, 10, 13, 12, 0)));  /* a Tuesday the 13th */
	ck_assert(!lcd_cron_match(&c, at(2026, 11, 19, 12, 0))); /* Thursday the 19th */
	/* Only day-of-week restricted: day-of-month is not a way in. */
	c = parse_ok("0 12 * * 5");
	ck_assert(!lcd_cron_match(&c, at(2026, 10, 13, 12, 0)));
	ck_assert(lcd_cron_match(&c, at(2026, 11, 20, 12, 0)));
	/* A day field starting with '*' counts as unrestricted (Vixie). */
	c = parse_ok("0 12 */2 * 5");
	ck_assert(lcd_cron_match(&c, at(2026, 11, 13, 12, 0)));  /* odd day and a Friday */
	ck_assert(!lcd_cron_match(&c, at(2026, 10, 13, 12, 0))); /* odd day, a Tuesday */
	ck_assert(!lcd_cron_match(&c, at(2026, 11, 20, 12, 0))); /* a Friday, even day */
}
END_TEST

START_TEST(test_next)
{
	lcd_cron_t c = parse_ok("30 3 * * *");
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 1, 1, 0, 0)), at(2026, 1, 1, 3, 30));
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 1, 1, 3, 30)), at(2026, 1, 2, 3, 30)); /* strictly after */
	c = parse_ok("0 0 29 2 *"); /* leap day */
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 3, 1, 0, 0)), at(2028, 2, 29, 0, 0));
	c = parse_ok("0 0 31 2 *"); /* never */
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 1, 1, 0, 0)), -1);
	c = parse_ok("*/5 * * * *");
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 12, 31, 23, 58)), at(2027, 1, 1, 0, 0));
	c = parse_ok("0 9 1 * mon"); /* the 1st or any Monday at 09:00 */
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 11, 29, 10, 0)), at(2026, 11, 30, 9, 0)); /* Monday */
	ck_assert_int_eq(lcd_cron_next(&c, at(2026, 11, 30, 9, 0)), at(2026, 12, 1, 9, 0));  /* the 1st */
	/* next() agrees with match() minute by minute over two days */
	c = parse_ok("7,37 */3 * * 1-5");
	time_t t = at(2026, 11, 27, 0, 0);
	time_t nx = lcd_cron_next(&c, t);
	for (time_t m = t + 60; m < t + 2 * 86400; m += 60) {
		if (lcd_cron_match(&c, m)) {
			ck_assert_int_eq(m, nx);
			nx = lcd_cron_next(&c, m);
		}
		ck_assert(m <= nx);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cron");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_day_rules);
	tcase_add_test(tc, test_next);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
