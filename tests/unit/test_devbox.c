/* Unit tests for a devbox's definition (orchestrator/lcd/model/devbox_def.c) and
 * the manifest's "devboxes" (manifest.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "devbox_def.h"
#include "manifest.h"
#include "util.h"

#define KEY "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ1y0b6c7kLqW0o8yMRIz3rQxv2nN0Gx0T0h8vOSVmbX me@host"

static json_t *j(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);
	ck_assert_msg(v != NULL, "test JSON broken: %s", je.text);
	return v;
}

/* Parse text as devbox `name`: the error's message, or NULL when valid. */
static char *parse(const char *name, const char *text, lcd_devbox_def_t *d)
{
	json_t *v = j(text);
	lc_error_t *err = NULL;
	int r = lcd_devbox_def_parse("devboxes.x", name, v, d, &err);
	json_decref(v);
	if (r == 0) {
		ck_assert_ptr_null(err);
		return NULL;
	}
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	char *m = strdup(err->msg);
	lc_error_free(err);
	lcd_devbox_def_clear(d);
	return m;
}

START_TEST(test_defaults)
{
	lcd_devbox_def_t d;
	ck_assert_ptr_null(parse("box", "{\"authorized_keys\": [\"" KEY "\"]}", &d));
	ck_assert_str_eq(d.image, "agent-box");
	ck_assert_int_eq(d.disk, 50LL << 30);
	ck_assert_int_eq(d.keep_warm, 3600);
	ck_assert_str_eq(d.net, "open");
	ck_assert_str_eq(d.user, "agent");
	ck_assert_int_eq(d.memory, -1);
	ck_assert(d.cpus == 0);
	ck_assert_ptr_null(d.secrets);
	ck_assert_str_eq(d.authorized_keys[0], KEY);
	lcd_devbox_def_clear(&d);
}
END_TEST

START_TEST(test_full_and_round_trip)
{
	lcd_devbox_def_t d, e;
	ck_assert_ptr_null(parse("agent-box",
				 "{\"image\": \"agent-box\", \"disk\": \"50G\", \"cpus\": 2, \"memory\": \"8G\", "
				 "\"keep_warm\": 3600, \"secrets\": [\"ANTHROPIC_API_KEY\", \"GITHUB_TOKEN\"], "
				 "\"net\": \"model-api\", \"user\": \"dev\", "
				 "\"authorized_keys\": \"# mine\\n" KEY "\\n\\n  " KEY "2\\r\\n\"}",
				 &d));
	ck_assert_int_eq(d.memory, 8LL << 30);
	ck_assert(d.cpus == 2);
	ck_assert_str_eq(d.secrets[1], "GITHUB_TOKEN");
	ck_assert_str_eq(d.net, "model-api");
	ck_assert_int_eq(lc_strv_len(d.authorized_keys), 2); /* comments and blank lines dropped */
	ck_assert_str_eq(d.authorized_keys[1], KEY "2");
	/* what lcd stores parses back to the same */
	json_t *stored = lcd_devbox_def_json(&d);
	char *text = json_dumps(stored, 0);
	ck_assert_ptr_null(parse("agent-box", text, &e));
	ck_assert_int_eq(e.disk, d.disk);
	ck_assert_int_eq(e.memory, d.memory);
	ck_assert_str_eq(e.user, "dev");
	ck_assert_int_eq(lc_strv_len(e.authorized_keys), 2);
	free(text);
	json_decref(stored);
	/* no limits stay none through the round trip */
	lcd_devbox_def_clear(&e);
	lcd_devbox_def_clear(&d);
	ck_assert_ptr_null(parse("b", "{\"authorized_keys\": [\"" KEY "\"]}", &d));
	stored = lcd_devbox_def_json(&d);
	ck_assert(json_is_null(json_object_get(stored, "memory")));
	text = json_dumps(stored, 0);
	ck_assert_ptr_null(parse("b", text, &e));
	ck_assert_int_eq(e.memory, -1);
	free(text);
	json_decref(stored);
	lcd_devbox_def_clear(&e);
	lcd_devbox_def_clear(&d);
}
END_TEST

START_TEST(test_errors)
{
	static const struct {
		const char *name, *text, *want;
	} cases[] = {
		{ "Box", "{}", "devboxes.x: bad devbox name" },
		{ "b", "[]", "devboxes.x: expected an object" },
		{ "b", "{\"disk\": \"50Q\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.disk: expected a size" },
		{ "b", "{\"disk\": \"1M\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.disk: expected a size" },
		{ "b", "{\"cpus\": -1, \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.cpus:" },
		{ "b", "{\"keep_warm\": -5, \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.keep_warm:" },
		{ "b", "{\"keep_warm\": \"1h\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.keep_warm:" },
		{ "b", "{\"secrets\": [\"9X\"], \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.secrets[0]:" },
		{ "b", "{\"net\": \"/etc/x.json\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.net:" },
		{ "b", "{\"user\": \"root\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.user:" },
		{ "b", "{\"user\": \"a b\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.user:" },
		{ "b", "{}", "devboxes.x.authorized_keys: no public key" },
		{ "b", "{\"authorized_keys\": \"# only a comment\\n\"}", "devboxes.x.authorized_keys: no public key" },
		{ "b", "{\"authorized_keys\": [\"not a key\"]}", "devboxes.x.authorized_keys[0]:" },
		{ "b", "{\"authorized_keys\": [\"ssh-ed25519 AAAA\\nssh-rsa BBBB\"]}", "devboxes.x.authorized_keys[0]:" },
		{ "b", "{\"authorized_keys\": 7}", "devboxes.x.authorized_keys: expected" },
		{ "b", "{\"diks\": \"5G\", \"authorized_keys\": [\"" KEY "\"]}", "devboxes.x.diks: unknown key" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		lcd_devbox_def_t d;
		char *m = parse(cases[i].name, cases[i].text, &d);
		ck_assert_msg(m != NULL, "case %zu passed", i);
		ck_assert_msg(strstr(m, cases[i].want) == m, "case %zu: '%s' does not start with '%s'", i, m, cases[i].want);
		free(m);
	}
}
END_TEST

START_TEST(test_request_paths)
{
	/* lcctl devbox create's request: no path prefix */
	json_t *v = j("{\"disk\": \"x\", \"authorized_keys\": [\"" KEY "\"]}");
	lcd_devbox_def_t d;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_devbox_def_parse("", "b", v, &d, &err), -1);
	ck_assert_msg(!strncmp(err->msg, "disk: ", 6), "%s", err->msg);
	lc_error_free(err);
	err = NULL;
	lcd_devbox_def_clear(&d);
	ck_assert_int_eq(lcd_devbox_def_parse("", "B!", v, &d, &err), -1);
	ck_assert_msg(!strncmp(err->msg, "name: bad devbox name", 21), "%s", err->msg);
	lc_error_free(err);
	lcd_devbox_def_clear(&d);
	json_decref(v);
}
END_TEST

static lcd_app_t *app_of(const char *text, char **msg)
{
	json_t *m = j(text);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	int r = lcd_app_parse(m, &app, &err);
	json_decref(m);
	*msg = r < 0 ? strdup(err->msg) : NULL;
	lc_error_free(err);
	return app;
}

START_TEST(test_manifest)
{
	char *msg;
	/* an app of devboxes only */
	lcd_app_t *app = app_of("{\"name\": \"boxes\", \"devboxes\": {\"agent-box\": {\"disk\": \"10G\", "
				"\"authorized_keys\": [\"" KEY "\"]}, \"other\": {\"image\": \"host\", \"authorized_keys\": [\"" KEY "\"]}}}",
				&msg);
	ck_assert_msg(app != NULL, "%s", msg);
	ck_assert_int_eq(app->n_functions, 0);
	ck_assert_int_eq(app->n_devboxes, 2);
	ck_assert_int_eq(app->devboxes[0].disk, 10LL << 30);
	ck_assert_str_eq(app->devboxes[1].image, "host");
	lcd_app_unref(app);
	/* with functions too */
	app = app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\"}}, \"devboxes\": {\"d\": "
		     "{\"authorized_keys\": [\"" KEY "\"]}}}",
		     &msg);
	ck_assert_msg(app != NULL, "%s", msg);
	ck_assert_int_eq(app->n_functions, 1);
	lcd_app_unref(app);
	/* errors name the path */
	ck_assert_ptr_null(app_of("{\"name\": \"a\"}", &msg));
	ck_assert_str_eq(msg, "functions: required");
	free(msg);
	ck_assert_ptr_null(app_of("{\"name\": \"a\", \"devboxes\": {}}", &msg));
	ck_assert_str_eq(msg, "devboxes: expected an object with at least one devbox");
	free(msg);
	ck_assert_ptr_null(app_of("{\"name\": \"a\", \"devboxes\": {\"d\": {\"disk\": 5, \"authorized_keys\": [\"" KEY "\"]}}}", &msg));
	ck_assert_msg(strstr(msg, "devboxes.d.disk: expected a size") == msg, "%s", msg);
	free(msg);
	ck_assert_ptr_null(app_of("{\"name\": \"a\", \"functions\": {}, \"devboxes\": {\"d\": {\"authorized_keys\": [\"" KEY "\"]}}}",
				  &msg));
	ck_assert_str_eq(msg, "functions: expected an object with at least one function");
	free(msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("devbox");
	TCase *tc = tcase_create("def");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_full_and_round_trip);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_request_paths);
	tcase_add_test(tc, test_manifest);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
