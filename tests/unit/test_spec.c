/* Unit tests for spec.c, caps.c and limits.c: what flags turn into. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>

#include "lcrun.h"
#include "util.h"

START_TEST(test_rlimit_parse)
{
	lc_rlimit_t rl;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_rlimit_parse("nofile=100:200", &rl, &err), 0);
	ck_assert_int_eq(rl.resource, RLIMIT_NOFILE);
	ck_assert_int_eq(rl.soft, 100);
	ck_assert_int_eq(rl.hard, 200);
	ck_assert_int_eq(lc_rlimit_parse("core=unlimited", &rl, &err), 0);
	ck_assert(rl.soft == RLIM_INFINITY && rl.hard == RLIM_INFINITY);
	ck_assert_int_eq(lc_rlimit_parse("nofile=300:200", &rl, &err), -1);
	ck_assert_int_eq(err->exit_code, LC_EXIT_USAGE);
	ck_assert(strstr(err->msg, "soft limit above hard limit"));
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lc_rlimit_parse("bogus=1", &rl, &err), -1);
	ck_assert(strstr(err->msg, "unknown limit 'bogus'"));
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lc_rlimit_parse("nofile", &rl, &err), -1);
	lc_error_free(err);
}
END_TEST

START_TEST(test_caps)
{
	/* Docker's default set, as /proc/self/status prints it */
	ck_assert_uint_eq(lc_caps_default(), 0xa80425fbULL);
	ck_assert_int_eq(lc_cap_from_name("NET_RAW"), CAP_NET_RAW);
	ck_assert_int_eq(lc_cap_from_name("cap_sys_admin"), CAP_SYS_ADMIN);
	ck_assert_int_eq(lc_cap_from_name("CAP_SYS_PTRACE"), CAP_SYS_PTRACE);
	ck_assert_int_eq(lc_cap_from_name("all"), 64);
	ck_assert_int_eq(lc_cap_from_name("no_such_cap"), -1);
}
END_TEST

START_TEST(test_spec_json_roundtrip)
{
	lc_spec_t *s = lc_spec_new();
	lc_strv_push(&s->argv, "make");
	lc_strv_push(&s->argv, "test");
	lc_strv_push(&s->env, "A=1");
	s->workdir = strdup("/src");
	s->uid = 1000;
	s->gid = 100;
	s->caps &= ~(1ULL << CAP_NET_RAW);
	s->limits.memory = 64LL << 20;
	s->limits.cpus = 0.5;
	s->n_mounts = 1;
	s->mounts = calloc(1, sizeof(*s->mounts));
	s->mounts[0] = (lc_mount_t){ strdup("/host"), strdup("/data"), true, false };
	s->rlimits = calloc(1, sizeof(*s->rlimits));
	s->n_rlimits = 1;
	s->rlimits[0] = (lc_rlimit_t){ RLIMIT_NOFILE, 10, 20 };
	s->net.mode = LC_NET_OPEN;
	json_t *j = lc_spec_to_json(s);
	lc_spec_t *b = lc_spec_from_json(j);
	ck_assert_str_eq(b->argv[1], "test");
	ck_assert_str_eq(b->env[0], "A=1");
	ck_assert_str_eq(b->workdir, "/src");
	ck_assert_int_eq(b->uid, 1000);
	ck_assert_int_eq(b->gid, 100);
	ck_assert_uint_eq(b->caps, s->caps);
	ck_assert_int_eq(b->limits.memory, 64LL << 20);
	ck_assert(b->limits.cpus > 0.49 && b->limits.cpus < 0.51);
	ck_assert_int_eq(b->limits.pids, -1);
	ck_assert_str_eq(b->mounts[0].dst, "/data");
	ck_assert(b->mounts[0].ro);
	ck_assert_int_eq(b->rlimits[0].hard, 20);
	ck_assert_int_eq(b->net.mode, LC_NET_OPEN);
	json_decref(j);
	lc_spec_free(s);
	lc_spec_free(b);
}
END_TEST

START_TEST(test_limits_load)
{
	setenv("LCRUN_POLICY_DIR", LC_SRCDIR "/policies", 1);
	lc_limits_t lim = { -1, -1, -1, 0, 0, 0, false };
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_limits_load("agent", &lim, &err), 0);
	ck_assert_int_eq(lim.memory, 4LL << 30);
	ck_assert_int_eq(lim.pids, 1024);
	ck_assert(lim.cpus > 1.99 && lim.cpus < 2.01);
	ck_assert_int_eq(lc_limits_load("best-effort", &lim, &err), 0);
	ck_assert(lim.best_effort);
	ck_assert_int_eq(lc_limits_load("nosuch", &lim, &err), -1);
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	ck_assert(strstr(err->msg, "agent"));
	lc_error_free(err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spec");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_rlimit_parse);
	tcase_add_test(tc, test_caps);
	tcase_add_test(tc, test_spec_json_roundtrip);
	tcase_add_test(tc, test_limits_load);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
