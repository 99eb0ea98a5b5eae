/* --bind SRC:DST[:OPTIONS] parsing and the idmap setting in a spec's JSON. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lcrun.h"
#include "util.h"

static void parse_ok(const char *arg, bool ro_default, const char *src, const char *dst, bool ro, int idmap)
{
	lc_mount_t m;
	lc_error_t *err = NULL;
	ck_assert_msg(lc_bind_parse(arg, ro_default, &m, &err) == 0, "%s: %s", arg, err ? err->msg : "");
	ck_assert_str_eq(m.src, src);
	ck_assert_str_eq(m.dst, dst);
	ck_assert_msg(m.ro == ro, "%s: ro", arg);
	ck_assert_msg(m.idmap == idmap, "%s: idmap %d, not %d", arg, m.idmap, idmap);
	ck_assert(!m.tmpfs);
	free(m.src);
	free(m.dst);
}

static void parse_bad(const char *arg, const char *what)
{
	lc_mount_t m;
	lc_error_t *err = NULL;
	ck_assert_msg(lc_bind_parse(arg, false, &m, &err) < 0, "%s parsed", arg);
	ck_assert_int_eq(err->exit_code, LC_EXIT_USAGE);
	ck_assert_msg(strstr(err->msg, what), "%s: '%s' lacks '%s'", arg, err->msg, what);
	/* one line that names the argument */
	ck_assert(!strchr(err->msg, '\n'));
	ck_assert(strstr(err->msg, arg));
	lc_error_free(err);
}

START_TEST(test_bind_parse)
{
	parse_ok("/a:/b", false, "/a", "/b", false, LC_IDMAP_AUTO);
	parse_ok("/a:/b", true, "/a", "/b", true, LC_IDMAP_AUTO); /* --ro-bind */
	parse_ok("rel/dir:/b", false, "rel/dir", "/b", false, LC_IDMAP_AUTO);
	parse_ok("/a:/b:ro", false, "/a", "/b", true, LC_IDMAP_AUTO);
	parse_ok("/a:/b:rw", true, "/a", "/b", false, LC_IDMAP_AUTO);
	parse_ok("/a:/b:idmap", false, "/a", "/b", false, LC_IDMAP_ON);
	parse_ok("/a:/b:noidmap", false, "/a", "/b", false, LC_IDMAP_OFF);
	parse_ok("/a:/b:ro,idmap", false, "/a", "/b", true, LC_IDMAP_ON);
	parse_ok("/a:/b:idmap,ro", false, "/a", "/b", true, LC_IDMAP_ON);
	parse_ok("/a:/b:rw,noidmap", true, "/a", "/b", false, LC_IDMAP_OFF);
	parse_ok("/a b:/c d:idmap", false, "/a b", "/c d", false, LC_IDMAP_ON);

	parse_bad("/a", "expected SRC:DST");
	parse_bad(":/b", "expected SRC:DST");
	parse_bad("/a:", "expected SRC:DST");
	parse_bad("/a:/b:", "expected SRC:DST");
	parse_bad("/a:b", "destination must be an absolute path");
	parse_bad("/a:/b:rx", "unknown option 'rx'");
	parse_bad("/a:/b:ro,IDMAP", "unknown option 'IDMAP'");
	parse_bad("/a:/b:ro,rw", "'rw' conflicts");
	parse_bad("/a:/b:idmap,noidmap", "'noidmap' conflicts");
	parse_bad("/a:/b:ro:idmap", "unknown option 'ro:idmap'");
}
END_TEST

START_TEST(test_spec_json_idmap)
{
	lc_spec_t *s = lc_spec_new();
	s->n_mounts = 4;
	s->mounts = lc_xmalloc0(4 * sizeof(lc_mount_t));
	s->mounts[0] = (lc_mount_t){ strdup("/a"), strdup("/a"), false, false, LC_IDMAP_AUTO };
	s->mounts[1] = (lc_mount_t){ strdup("/b"), strdup("/b"), true, false, LC_IDMAP_ON };
	s->mounts[2] = (lc_mount_t){ strdup("/c"), strdup("/c"), false, false, LC_IDMAP_OFF };
	s->mounts[3] = (lc_mount_t){ NULL, strdup("/t"), false, true, LC_IDMAP_AUTO };
	json_t *j = lc_spec_to_json(s);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "mounts"), 1), "idmap")), "on");
	lc_spec_t *r = lc_spec_from_json(j);
	ck_assert_uint_eq(r->n_mounts, 4);
	ck_assert_int_eq(r->mounts[0].idmap, LC_IDMAP_AUTO);
	ck_assert_int_eq(r->mounts[1].idmap, LC_IDMAP_ON);
	ck_assert(r->mounts[1].ro);
	ck_assert_int_eq(r->mounts[2].idmap, LC_IDMAP_OFF);
	ck_assert(r->mounts[3].tmpfs);
	ck_assert_str_eq(r->mounts[2].src, "/c");
	/* a state.json written before idmap existed: AUTO */
	json_object_del(json_array_get(json_object_get(j, "mounts"), 1), "idmap");
	lc_spec_t *old = lc_spec_from_json(j);
	ck_assert_int_eq(old->mounts[1].idmap, LC_IDMAP_AUTO);
	lc_spec_free(old);
	lc_spec_free(r);
	lc_spec_free(s);
	json_decref(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bind");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_bind_parse);
	tcase_add_test(tc, test_spec_json_idmap);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
