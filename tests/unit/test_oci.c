/* Unit tests for lcrun-oci's config.json mapping (runtime/oci/oci_config.c):
 * what each field turns into, and what is refused by name. */
#include <check.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "oci.h"
#include "util.h"

static char bundle[] = "/tmp/lcrun-oci-unit-XXXXXX";

/* lcrun-oci's warnings (oci_main.c) land here: the last one. */
static char last_warning[512];
void oci_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_warning, sizeof(last_warning), fmt, ap);
	va_end(ap);
}

/* A config: the base below with `extra` (JSON members) merged over it. */
static lc_ctr_spec_t *load(const char *extra, lc_error_t **err)
{
	json_t *c = json_loads("{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"rootfs\"},"
			       " \"process\": {\"args\": [\"sh\"], \"cwd\": \"/\"},"
			       " \"linux\": {\"namespaces\": [{\"type\": \"mount\"}, {\"type\": \"network\"},"
			       " {\"type\": \"uts\"}, {\"type\": \"ipc\"}]}}", 0, NULL);
	if (extra) {
		json_t *e = json_loads(extra, 0, NULL);
		ck_assert_msg(e != NULL, "bad test JSON: %s", extra);
		json_object_update_recursive(c, e);
		json_decref(e);
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	json_dump_file(c, path, 0);
	json_decref(c);
	return oci_config_load(bundle, "unit", err);
}

static void refused(const char *extra, const char *want)
{
	lc_error_t *err = NULL;
	lc_ctr_spec_t *s = load(extra, &err);
	ck_assert_msg(s == NULL, "accepted: %s", extra);
	ck_assert_msg(strstr(err->msg, want), "for %s: got '%s', want '%s'", extra, err->msg, want);
	lc_error_free(err);
}

START_TEST(test_basics)
{
	lc_error_t *err = NULL;
	lc_ctr_spec_t *s = load("{\"hostname\": \"h1\", \"process\": {\"env\": [\"A=1\"], \"user\": {\"uid\": 5, \"gid\": 6,"
				" \"umask\": 18, \"additionalGids\": [7, 8]}, \"oomScoreAdj\": -10, \"noNewPrivileges\": true,"
				" \"capabilities\": {\"bounding\": [\"CAP_KILL\", \"CAP_CHOWN\"], \"ambient\": [\"CAP_KILL\"]},"
				" \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"soft\": 10, \"hard\": 20}]}}", &err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	ck_assert_str_eq(s->hostname, "h1");
	ck_assert_str_eq(s->proc.env[0], "A=1");
	ck_assert_int_eq(s->proc.uid, 5);
	ck_assert_int_eq(s->proc.gid, 6);
	ck_assert_int_eq(s->proc.umask, 18);
	ck_assert_int_eq(s->proc.n_gids, 2);
	ck_assert_int_eq(s->proc.gids[1], 8);
	ck_assert(s->proc.oom_set && s->proc.oom_score_adj == -10);
	ck_assert(s->proc.no_new_privs);
	ck_assert_uint_eq(s->proc.caps[LC_CAP_BOUNDING], (1ULL << 5) | 1ULL);
	ck_assert_uint_eq(s->proc.caps[LC_CAP_AMBIENT], 1ULL << 5);
	ck_assert_int_eq(s->proc.n_rlimits, 1);
	ck_assert_int_eq(s->proc.rlimits[0].resource, RLIMIT_NOFILE);
	ck_assert_int_eq(s->proc.rlimits[0].hard, 20);
	ck_assert_int_eq(s->n_ns, 4);
	ck_assert(s->cgroup && strstr(s->cgroup, "/lcrun-oci/unit"));
	char rp[PATH_MAX];
	snprintf(rp, sizeof(rp), "%s/rootfs", bundle);
	ck_assert_str_eq(s->rootfs, rp);
	lc_ctr_spec_free(s);
}
END_TEST

START_TEST(test_mounts)
{
	lc_error_t *err = NULL;
	lc_ctr_spec_t *s = load("{\"mounts\": [{\"destination\": \"/t\", \"type\": \"tmpfs\", \"source\": \"tmpfs\","
				" \"options\": [\"nosuid\", \"ro\", \"rw\", \"size=1m\", \"mode=700\", \"rslave\", \"x-foo\"]},"
				" {\"destination\": \"/b\", \"source\": \"data\", \"options\": [\"rbind\", \"ro\", \"rnodev\"]}]}",
				&err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	ck_assert_int_eq(s->n_mounts, 2);
	ck_assert_uint_eq(s->mounts[0].flags, MS_NOSUID); /* rw cleared ro */
	ck_assert_str_eq(s->mounts[0].data, "size=1m,mode=700");
	ck_assert_uint_eq(s->mounts[0].propagation, MS_SLAVE | MS_REC);
	ck_assert(!s->mounts[0].bind);
	ck_assert(s->mounts[1].bind && s->mounts[1].rec);
	ck_assert_uint_eq(s->mounts[1].flags, MS_RDONLY);
	ck_assert_uint_ne(s->mounts[1].rec_set, 0);
	/* a relative bind source is the bundle's */
	ck_assert(strstr(s->mounts[1].src, "/data") && !strncmp(s->mounts[1].src, bundle, strlen(bundle)));
	lc_ctr_spec_free(s);
	/* filesystem data on a bind is dropped, as the kernel does */
	s = load("{\"mounts\": [{\"destination\": \"/x\", \"source\": \"/y\", \"options\": [\"bind\", \"size=1m\","
		 " \"mode=755\", \"nosuid\", \"shared\"]}]}", &err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	ck_assert(s->mounts[0].bind && s->mounts[0].data == NULL);
	ck_assert_uint_eq(s->mounts[0].flags, MS_NOSUID);
	ck_assert_uint_eq(s->mounts[0].propagation, MS_SHARED);
	lc_ctr_spec_free(s);
	/* no mount namespace: the host's is shared; a uts namespace by path takes the hostname */
	s = load("{\"hostname\": \"h\", \"linux\": {\"namespaces\": [{\"type\": \"uts\", \"path\": \"/proc/1/ns/uts\"}]}}",
		 &err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	ck_assert_int_eq(s->n_ns, 1);
	ck_assert_str_eq(s->hostname, "h");
	lc_ctr_spec_free(s);
}
END_TEST

START_TEST(test_resources)
{
	lc_error_t *err = NULL;
	lc_ctr_spec_t *s = load("{\"linux\": {\"cgroupsPath\": \"/a/b\", \"resources\": {\"devices\": [{\"allow\": false,"
				" \"access\": \"rwm\"}, {\"allow\": true, \"type\": \"c\", \"major\": 10, \"access\": \"r\"}],"
				" \"unified\": {\"cgroup.max.depth\": \"2\"}}}}", &err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	ck_assert(strstr(s->cgroup, "/a/b") && s->cgroup[strlen(s->cgroup) - 1] == 'b');
	/* the config's two rules, then the nodes always allowed */
	ck_assert_int_ge(s->n_devrules, 2 + 9);
	ck_assert(!s->devrules[0].allow && s->devrules[0].type == 'a' && s->devrules[0].major == -1);
	ck_assert(s->devrules[1].allow && s->devrules[1].major == 10 && s->devrules[1].minor == -1);
	ck_assert_uint_eq(s->devrules[1].access, LC_DEV_READ);
	bool found = false;
	for (size_t i = 0; s->unified && s->unified[i]; i++)
		found |= !strcmp(s->unified[i], "cgroup.max.depth=2");
	ck_assert(found);
	lc_ctr_spec_free(s);
	/* cpu shares: a weight where v2 has a cpu controller; elsewhere not
	 * applied, with a warning, so CRI's pods run; a quota stays refused */
	last_warning[0] = '\0';
	s = load("{\"linux\": {\"resources\": {\"cpu\": {\"shares\": 2}}}}", &err);
	ck_assert_msg(s != NULL, "%s", err ? err->msg : "");
	if (lc_cgroup_has_controller("cpu")) {
		ck_assert_int_eq(s->limits.cpu_weight, 1);
		ck_assert_str_eq(last_warning, "");
	} else {
		ck_assert_int_eq(s->limits.cpu_weight, 0);
		ck_assert_msg(strstr(last_warning, "cpu.shares 2 not applied"), "warning: '%s'", last_warning);
		refused("{\"linux\": {\"resources\": {\"cpu\": {\"quota\": 50000}}}}",
			"linux.resources.cpu needs the cgroup v2 'cpu' controller");
	}
	lc_ctr_spec_free(s);
}
END_TEST

START_TEST(test_refusals)
{
	refused("{\"linux\": {\"intelRdt\": {\"closID\": \"x\"}}}", "linux.intelRdt is not supported");
	refused("{\"process\": {\"apparmorProfile\": \"p\"}}", "process.apparmorProfile is not supported");
	refused("{\"linux\": {\"namespaces\": [{\"type\": \"mount\"}, {\"type\": \"bogus\"}]}}",
		"linux.namespaces[1].type: unknown namespace type 'bogus'");
	refused("{\"linux\": {\"namespaces\": [{\"type\": \"mount\"}, {\"type\": \"mount\"}]}}", "listed twice");
	refused("{\"linux\": {\"namespaces\": [{\"type\": \"pid\"}], \"maskedPaths\": [\"/proc/kcore\"]}}",
		"need a mount namespace of the container's own");
	refused("{\"hostname\": \"h\", \"linux\": {\"namespaces\": [{\"type\": \"mount\"}]}}", "needs a uts namespace");
	refused("{\"linux\": {\"sysctl\": {\"vm.swappiness\": \"1\"}}}", "not a namespaced sysctl");
	refused("{\"linux\": {\"namespaces\": [{\"type\": \"mount\"}], \"sysctl\": {\"net.ipv4.ip_forward\": \"1\"}}}",
		"needs a network namespace");
	refused("{\"linux\": {\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", \"flags\": [\"SECCOMP_FILTER_FLAG_LOG\"]}}}",
		"linux.seccomp.flags: SECCOMP_FILTER_FLAG_LOG is not supported");
	refused("{\"mounts\": [{\"destination\": \"/x\", \"type\": \"tmpfs\", \"options\": [\"idmap\"]}]}",
		"mounts[0].options: 'idmap' is not supported");
	refused("{\"mounts\": [{\"destination\": \"/x\", \"source\": \"/y\", \"options\": [\"bind\", \"tmpcopyup\"]}]}",
		"'tmpcopyup' applies to tmpfs mounts only");
	refused("{\"root\": {\"path\": \"missing\"}}", "root.path");
	refused("{\"ociVersion\": \"0.9\"}", "not a 1.x runtime-spec version");
	refused("{\"linux\": {\"cgroupsPath\": \"machine.slice:x:y\"}}", "systemd slice:prefix:name");
	refused("{\"linux\": {\"namespaces\": [{\"type\": \"mount\"}, {\"type\": \"user\"}]}}",
		"needs linux.uidMappings and linux.gidMappings");
	refused("{\"process\": {\"rlimits\": [{\"type\": \"RLIMIT_NOPE\", \"soft\": 1, \"hard\": 1}]}}", "unknown limit");
	refused("{\"hooks\": {\"prestart\": [{\"path\": \"relative\"}]}}", "hooks.prestart[0].path");
	refused("{\"process\": {\"cwd\": \"rel\"}}", "process.cwd: 'rel' is not an absolute path");
	refused("{\"linux\": {\"devices\": [{\"path\": \"/etc/x\", \"type\": \"c\", \"major\": 1, \"minor\": 3}]}}",
		"must be an absolute path under /dev");
}
END_TEST

START_TEST(test_signals)
{
	ck_assert_int_eq(oci_signal_parse("KILL"), SIGKILL);
	ck_assert_int_eq(oci_signal_parse("SIGTERM"), SIGTERM);
	ck_assert_int_eq(oci_signal_parse("sigusr1"), SIGUSR1);
	ck_assert_int_eq(oci_signal_parse("9"), 9);
	ck_assert_int_eq(oci_signal_parse("RTMIN+2"), SIGRTMIN + 2);
	ck_assert_int_eq(oci_signal_parse("NOPE"), -1);
	ck_assert_int_eq(oci_signal_parse("0"), -1);
	ck_assert_int_eq(oci_signal_parse("99"), -1);
}
END_TEST

int main(void)
{
	if (!mkdtemp(bundle))
		return EXIT_FAILURE;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/rootfs", bundle);
	mkdir(p, 0755);
	Suite *s = suite_create("oci");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, test_basics);
	tcase_add_test(tc, test_mounts);
	tcase_add_test(tc, test_resources);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_signals);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	lc_rm_rf(bundle, NULL);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
