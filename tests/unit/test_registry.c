/* Unit tests for registry references (runtime/lib/registry.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "util.h"

static void ok(const char *ref, const char *base, const char *repo, const char *tag)
{
	char *b = NULL, *r = NULL, *t = NULL;
	lc_error_t *err = NULL;
	ck_assert_msg(lc_registry_ref(ref, &b, &r, &t, &err) == 0, "%s: %s", ref, err ? err->msg : "");
	ck_assert_str_eq(b, base);
	ck_assert_str_eq(r, repo);
	ck_assert_str_eq(t, tag);
	free(b);
	free(r);
	free(t);
}

static void bad(const char *ref, const char *says)
{
	char *b = NULL, *r = NULL, *t = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_registry_ref(ref, &b, &r, &t, &err), -1);
	ck_assert_int_eq(err->exit_code, LC_EXIT_USAGE);
	ck_assert_msg(strstr(err->msg, says), "%s: %s", ref, err->msg);
	lc_error_free(err);
}

START_TEST(test_refs)
{
	/* loopback speaks plain HTTP, the rest HTTPS unless told */
	ok("127.0.0.1:5000/lcrun/snap:v1", "http://127.0.0.1:5000", "lcrun/snap", "v1");
	ok("localhost/a", "http://localhost", "a", "latest");
	ok("[::1]:5000/a/b", "http://[::1]:5000", "a/b", "latest");
	ok("registry.example:443/team/img:2.0", "https://registry.example:443", "team/img", "2.0");
	ok("http://10.0.0.5:5000/x:y", "http://10.0.0.5:5000", "x", "y");
	ok("https://127.0.0.1:5000/x", "https://127.0.0.1:5000", "x", "latest");
	char digest[80];
	snprintf(digest, sizeof(digest), "sha256:%064d", 7);
	char *ref = lc_strdup_printf("host:5000/x/y@%s", digest);
	ok(ref, "https://host:5000", "x/y", digest);
	free(ref);
	bad("nohost", "expected REGISTRY/REPOSITORY");
	bad("host/", "expected REGISTRY/REPOSITORY");
	bad("host/Upper", "lowercase");
	bad("host/x@sha256:abc", "a digest is sha256:HEX");
	bad("host/x:", "empty repository or tag");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("refs");
	tcase_add_test(tc, test_refs);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
