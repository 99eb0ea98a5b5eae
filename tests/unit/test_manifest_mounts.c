/* A function's "mounts" in an app manifest (orchestrator/lcd/model/manifest.c):
 * what is accepted, and the JSON path of what is not. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

static lcd_app_t *parse(const char *mounts, lc_error_t **err)
{
	char *text = NULL;
	if (asprintf(&text, "{\"name\": \"m\", \"functions\": {\"f\": {\"command\": \"true\", \"mounts\": %s}}}", mounts) < 0)
		abort();
	json_error_t je;
	json_t *m = json_loads(text, 0, &je);
	ck_assert_msg(m != NULL, "test JSON broken: %s: %s", text, je.text);
	free(text);
	lcd_app_t *app = NULL;
	int r = lcd_app_parse(m, &app, err);
	json_decref(m);
	ck_assert((r == 0) == (app != NULL));
	return app;
}

static void bad(const char *mounts, const char *msg)
{
	lc_error_t *err = NULL;
	lcd_app_t *app = parse(mounts, &err);
	ck_assert_msg(app == NULL, "%s parsed", mounts);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	ck_assert_msg(strcmp(err->msg, msg) == 0, "%s: got '%s', want '%s'", mounts, err->msg, msg);
	lc_error_free(err);
}

START_TEST(test_mounts_good)
{
	lc_error_t *err = NULL;
	lcd_app_t *app = parse("[{\"source\": \"/srv/repo\", \"target\": \"/work\"},"
			       " {\"source\": \"/srv/cache\", \"target\": \"/cache\", \"readonly\": true, \"idmap\": false},"
			       " {\"source\": \"/srv/x\", \"target\": \"/x\", \"idmap\": true},"
			       " {\"source\": \"/srv/y\", \"target\": \"/y\", \"idmap\": \"auto\", \"readonly\": false}]", &err);
	ck_assert_msg(app != NULL, "%s", err ? err->msg : "");
	const lcd_function_t *f = lcd_app_function(app, "f");
	ck_assert_uint_eq(f->n_mounts, 4);
	ck_assert_str_eq(f->mounts[0].src, "/srv/repo");
	ck_assert_str_eq(f->mounts[0].dst, "/work");
	ck_assert(!f->mounts[0].ro);
	ck_assert_int_eq(f->mounts[0].idmap, LC_IDMAP_AUTO);
	ck_assert(f->mounts[1].ro);
	ck_assert_int_eq(f->mounts[1].idmap, LC_IDMAP_OFF);
	ck_assert_int_eq(f->mounts[2].idmap, LC_IDMAP_ON);
	ck_assert_int_eq(f->mounts[3].idmap, LC_IDMAP_AUTO);
	ck_assert(!f->mounts[0].tmpfs);
	lcd_app_unref(app);
	app = parse("[]", &err);
	ck_assert_uint_eq(lcd_app_function(app, "f")->n_mounts, 0);
	lcd_app_unref(app);
}
END_TEST

START_TEST(test_mounts_bad)
{
	bad("{}", "functions.f.mounts: expected an array of objects");
	bad("[\"/srv:/x\"]", "functions.f.mounts[0]: expected an object");
	bad("[{\"target\": \"/x\"}]", "functions.f.mounts[0].source: required");
	bad("[{\"source\": \"/a\", \"target\": \"/x\"}, {\"source\": \"/b\"}]", "functions.f.mounts[1].target: required");
	bad("[{\"source\": \"srv\", \"target\": \"/x\"}]",
	    "functions.f.mounts[0].source: expected an absolute path (no '.' or '..' parts)");
	bad("[{\"source\": \"/srv/../etc\", \"target\": \"/x\"}]",
	    "functions.f.mounts[0].source: expected an absolute path (no '.' or '..' parts)");
	bad("[{\"source\": \"/srv/.\", \"target\": \"/x\"}]",
	    "functions.f.mounts[0].source: expected an absolute path (no '.' or '..' parts)");
	bad("[{\"source\": 7, \"target\": \"/x\"}]",
	    "functions.f.mounts[0].source: expected an absolute path (no '.' or '..' parts)");
	bad("[{\"source\": \"/srv\", \"target\": \"x\"}]",
	    "functions.f.mounts[0].target: expected an absolute path (no '.' or '..' parts)");
	bad("[{\"source\": \"/srv\", \"target\": \"/\"}]", "functions.f.mounts[0].target: / and /run/task are the sandbox's own");
	bad("[{\"source\": \"/srv\", \"target\": \"/run/task/x\"}]",
	    "functions.f.mounts[0].target: / and /run/task are the sandbox's own");
	bad("[{\"source\": \"/srv\", \"target\": \"/x\", \"readonly\": \"yes\"}]",
	    "functions.f.mounts[0].readonly: expected true or false");
	bad("[{\"source\": \"/srv\", \"target\": \"/x\", \"idmap\": \"on\"}]",
	    "functions.f.mounts[0].idmap: expected true, false or \"auto\"");
	bad("[{\"source\": \"/srv\", \"target\": \"/x\", \"ro\": true}]", "functions.f.mounts[0].ro: unknown key");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manifest_mounts");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_mounts_good);
	tcase_add_test(tc, test_mounts_bad);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
