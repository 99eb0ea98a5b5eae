/* Unit tests for app manifest validation (orchestrator/lcd/manifest.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manifest.h"

static const char *good =
	"{\"name\": \"demo\","
	" \"functions\": {"
	"   \"solve\": {\"command\": [\"/bin/true\"], \"timeout\": 30, \"concurrency\": 3, \"queue\": 20,"
	"             \"retries\": 1, \"secrets\": [\"MODEL_KEY\"], \"limits\": {\"memory\": \"512M\", \"pids\": 64}},"
	"   \"shell\": {\"command\": \"echo hi\"}},"
	" \"schedules\": {\"nightly\": {\"cron\": \"0 3 * * *\", \"function\": \"solve\", \"args\": {\"n\": 1}}},"
	" \"maps\": [\"claims\"],"
	" \"webhooks\": {\"github\": {\"function\": \"solve\", \"secret\": \"GH_SECRET\"}}}";

static char *parse_err(const char *text)
{
	json_error_t je;
	json_t *m = json_loads(text, 0, &je);
	ck_assert_msg(m != NULL, "test JSON broken: %s", je.text);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	int r = lcd_app_parse(m, &app, &err);
	json_decref(m);
	ck_assert_int_eq(r, -1);
	ck_assert_ptr_null(app);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	char *msg = strdup(err->msg);
	lc_error_free(err);
	return msg;
}

/* Replace the first occurrence of `from` in the good manifest. */
static char *mutate(const char *from, const char *to)
{
	const char *p = strstr(good, from);
	ck_assert_ptr_nonnull(p);
	char *out = malloc(strlen(good) + strlen(to) + 1);
	size_t pre = (size_t)(p - good);
	memcpy(out, good, pre);
	strcpy(out + pre, to);
	strcat(out, p + strlen(from));
	return out;
}

static void expect(const char *from, const char *to, const char *msg)
{
	char *text = mutate(from, to);
	char *got = parse_err(text);
	ck_assert_msg(strcmp(got, msg) == 0, "got '%s', want '%s'", got, msg);
	free(got);
	free(text);
}

START_TEST(test_good)
{
	json_t *m = json_loads(good, 0, NULL);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), 0);
	json_decref(m);
	ck_assert_str_eq(app->name, "demo");
	const lcd_function_t *f = lcd_app_function(app, "solve");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->timeout, 30);
	ck_assert_int_eq(f->concurrency, 3);
	ck_assert_int_eq(f->queue, 20);
	ck_assert_int_eq(f->retries, 1);
	ck_assert_str_eq(f->secrets[0], "MODEL_KEY");
	ck_assert_int_eq(f->limits.memory, 512LL << 20);
	ck_assert_int_eq(f->limits.pids, 64);
	ck_assert_str_eq(f->net, "none");
	ck_assert_ptr_null(f->image);
	const lcd_function_t *sh = lcd_app_function(app, "shell");
	ck_assert_str_eq(sh->argv[0], "/bin/sh");
	ck_assert_str_eq(sh->argv[2], "echo hi");
	ck_assert_int_eq(sh->concurrency, 1);
	ck_assert_int_eq(sh->limits.memory, -1);
	const lcd_schedule_t *s = lcd_app_schedule(app, "nightly");
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->function, "solve");
	ck_assert(lcd_app_has_map(app, "claims"));
	ck_assert(!lcd_app_has_map(app, "other"));
	ck_assert_int_eq(app->n_webhooks, 1);
	ck_assert_int_eq(app->sandboxes_max, LCD_SANDBOXES_MAX_DEFAULT);
	lcd_app_unref(app);
}
END_TEST

START_TEST(test_sandboxes_max)
{
	char *text = mutate("\"maps\": [\"claims\"]", "\"maps\": [\"claims\"], \"sandboxes\": {\"max\": 0}");
	json_t *m = json_loads(text, 0, NULL);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), 0);
	ck_assert_int_eq(app->sandboxes_max, 0); /* its tasks may make none */
	lcd_app_unref(app);
	json_decref(m);
	free(text);
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"max\": -2}", "sandboxes.max: expected a non-negative integer");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"max\": 20000}", "sandboxes.max: at most 10000");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"mx\": 2}", "sandboxes.mx: unknown key");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": 3", "sandboxes: expected an object {\"max\": N}");
}
END_TEST

START_TEST(test_paths)
{
	expect("\"timeout\": 30", "\"timeout\": 0", "functions.solve.timeout: expected a positive integer");
	expect("\"timeout\": 30", "\"timeout\": \"30\"", "functions.solve.timeout: expected a positive integer");
	expect("\"queue\": 20", "\"queue\": -1", "functions.solve.queue: expected a non-negative integer");
	expect("\"concurrency\": 3", "\"concurency\": 3", "functions.solve.concurency: unknown key");
	expect("[\"/bin/true\"]", "[]", "functions.solve.command: expected a non-empty string or array of strings");
	expect("[\"/bin/true\"]", "[\"/bin/true\", 3]", "functions.solve.command[1]: expected a non-empty string");
	expect("\"MODEL_KEY\"", "\"MODEL-KEY\"",
	       "functions.solve.secrets[0]: bad secret name (letters, digits, '_'; not starting with a digit)");
	expect("\"512M\"", "\"lots\"", "functions.solve.limits.memory: expected a size (bytes, or like \"512M\")");
	expect("\"0 3 * * *\"", "\"0 25 * * *\"",
	       "schedules.nightly.cron: bad cron expression '0 25 * * *': hour 25 out of range 0-23");
	expect("\"function\": \"solve\", \"args\"", "\"function\": \"nope\", \"args\"",
	       "schedules.nightly.function: no function 'nope' in this app");
	expect("\"name\": \"demo\"", "\"name\": \"Demo App\"",
	       "name: bad app name (lowercase letters, digits, '-', '_'; at most 63)");
	expect("\"maps\": [\"claims\"]", "\"maps\": [\"a/b\"]",
	       "maps[0]: bad map name (lowercase letters, digits, '-', '_'; at most 63)");
	expect("\"webhooks\": {\"github\": {\"function\": \"solve\"", "\"webhooks\": {\"github\": {\"function\": \"x\"",
	       "webhooks.github.function: no function 'x' in this app");
	expect("\"nightly\": {", "\"shell\": {", "schedules.shell: a function has the same name");
	char *m = parse_err("{\"name\": \"x\"}");
	ck_assert_str_eq(m, "functions: required");
	free(m);
	m = parse_err("[1]");
	ck_assert_str_eq(m, "manifest: expected a JSON object");
	free(m);
}
END_TEST

static time_t at(int y, int mon, int d, int h, int mi)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi };
	return timegm(&tm);
}

START_TEST(test_schedule_due)
{
	lcd_schedule_t s = { 0 };
	ck_assert_int_eq(lcd_cron_parse("0 3 * * *", &s.cron, NULL), 0);
	long long out[10], newest;
	size_t skipped;
	/* nothing due yet */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 2, 0), at(2030, 1, 1, 2, 59), 10, out, &newest, &skipped), 0);
	ck_assert_int_eq(newest, 0);
	/* on time: one slot */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 2, 59), at(2030, 1, 1, 3, 0) + 5, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 1, 3, 0));
	ck_assert_uint_eq(skipped, 0);
	/* the last slot is not due again */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 3, 0), at(2030, 1, 1, 3, 0) + 50, 10, out, &newest, &skipped), 0);
	/* down for 5 days, catchup all: each missed slot once, oldest first */
	long long last = at(2030, 1, 1, 3, 0), now = at(2030, 1, 6, 12, 0);
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 5);
	ck_assert_int_eq(out[0], at(2030, 1, 2, 3, 0));
	ck_assert_int_eq(out[4], at(2030, 1, 6, 3, 0));
	ck_assert_int_eq(newest, at(2030, 1, 6, 3, 0));
	/* ... but no more than max, the newest ones */
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 3, out, &newest, &skipped), 3);
	ck_assert_int_eq(out[0], at(2030, 1, 4, 3, 0));
	ck_assert_uint_eq(skipped, 2);
	/* catchup one: a single run for all of them */
	s.catchup = LCD_CATCHUP_ONE;
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 6, 3, 0));
	ck_assert_uint_eq(skipped, 4);
	/* catchup none: missed slots are skipped, a slot due this minute fires */
	s.catchup = LCD_CATCHUP_NONE;
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 0);
	ck_assert_uint_eq(skipped, 5);
	ck_assert_int_eq(newest, at(2030, 1, 6, 3, 0)); /* still recorded as done */
	ck_assert_uint_eq(lcd_schedule_due(&s, last, at(2030, 1, 6, 3, 0) + 30, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 6, 3, 0));
	ck_assert_uint_eq(skipped, 4);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_sandboxes_max);
	tcase_add_test(tc, test_schedule_due);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
