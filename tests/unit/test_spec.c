/* Unit tests for spec.c, caps.c and limits.c: what flags turn into. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* lcd's task runner gets the spec as this text: every member must come
 * back, the secret ones and the allow list too. */
START_TEST(test_spec_wire_roundtrip)
{
	lc_spec_t *s = lc_spec_new();
	s->id = strdup("0123456789ab");
	lc_strv_push(&s->argv, "/bin/true");
	lc_strv_push(&s->secret_env, "TOKEN=s3cret");
	s->user_set = true;
	s->forward_signals = true;
	s->timeout = 7;
	s->new_privs = true;
	s->limits.disk = 10LL << 30;
	lc_strv_push(&s->sysctls, "net.ipv4.ping_group_range=0 0");
	s->net.mode = LC_NET_ALLOW;
	s->net.n_allow = 2;
	s->net.allow = calloc(2, sizeof(*s->net.allow));
	s->net.allow[0] = (lc_net_rule_t){ .family = AF_INET, .addr = { 10, 1, 2, 0 }, .prefix = 24,
					   .ports = { 443, 8080 }, .n_ports = 2 };
	s->net.allow[1] = (lc_net_rule_t){ .family = AF_INET6, .addr = { 0xfd, 0 }, .prefix = 8 };
	s->net.n_hosts = 1;
	s->net.hosts = calloc(1, sizeof(*s->net.hosts));
	s->net.hosts[0] = (lc_host_entry_t){ strdup("api.example"), strdup("10.1.2.3") };
	s->net.dns = strdup("10.1.2.53");
	s->mounts = calloc(1, sizeof(*s->mounts));
	s->n_mounts = 1;
	s->mounts[0] = (lc_mount_t){ NULL, strdup("/tmp"), false, true, LC_IDMAP_AUTO };
	json_t *j = lc_spec_to_wire(s);
	char *text = json_dumps(j, JSON_COMPACT);
	json_t *back = json_loads(text, 0, NULL);
	lc_spec_t *b = lc_spec_from_json(back);
	ck_assert_str_eq(b->id, "0123456789ab");
	ck_assert_str_eq(b->secret_env[0], "TOKEN=s3cret");
	ck_assert(b->user_set && b->forward_signals && b->new_privs);
	ck_assert_int_eq(b->timeout, 7);
	ck_assert_int_eq(b->limits.disk, 10LL << 30);
	ck_assert_str_eq(b->sysctls[0], "net.ipv4.ping_group_range=0 0");
	ck_assert_int_eq(b->net.mode, LC_NET_ALLOW);
	ck_assert_uint_eq(b->net.n_allow, 2);
	ck_assert_mem_eq(&b->net.allow[0], &s->net.allow[0], sizeof(lc_net_rule_t));
	ck_assert_mem_eq(&b->net.allow[1], &s->net.allow[1], sizeof(lc_net_rule_t));
	ck_assert_uint_eq(b->net.n_hosts, 1);
	ck_assert_str_eq(b->net.hosts[0].name, "api.example");
	ck_assert_str_eq(b->net.hosts[0].ip, "10.1.2.3");
	ck_assert_str_eq(b->net.dns, "10.1.2.53");
	ck_assert(b->mounts[0].tmpfs && !b->mounts[0].src);
	ck_assert_str_eq(b->mounts[0].dst, "/tmp");
	/* what state.json keeps leaves the secret and the id out */
	json_t *plain = lc_spec_to_json(s);
	ck_assert_ptr_null(json_object_get(plain, "secret_env"));
	ck_assert_ptr_null(json_object_get(plain, "id"));
	json_decref(plain);
	free(text);
	json_decref(back);
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
	tcase_add_test(tc, test_spec_wire_roundtrip);
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
