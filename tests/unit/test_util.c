/* Unit tests for util.c and error.c. */
#include <check.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "util.h"

START_TEST(test_parse_size)
{
	long long v;
	ck_assert_int_eq(lc_parse_size("512M", &v), 0);
	ck_assert_int_eq(v, 512LL << 20);
	ck_assert_int_eq(lc_parse_size("2G", &v), 0);
	ck_assert_int_eq(v, 2LL << 30);
	ck_assert_int_eq(lc_parse_size("1048576", &v), 0);
	ck_assert_int_eq(v, 1048576);
	ck_assert_int_eq(lc_parse_size("64MiB", &v), 0);
	ck_assert_int_eq(v, 64LL << 20);
	ck_assert_int_eq(lc_parse_size("12X", &v), -1);
	ck_assert_int_eq(lc_parse_size("", &v), -1);
	ck_assert_int_eq(lc_parse_size("-5", &v), -1);
}
END_TEST

START_TEST(test_error_roundtrip)
{
	lc_error_t *e = NULL, *back = NULL;
	ck_assert_int_eq(lc_error_set(&e, LC_EXIT_NOENT, 2, "bind source %s", "/nope"), -1);
	ck_assert_str_eq(e->msg, "bind source /nope: No such file or directory");
	lc_error_wrap(&e, "cannot start");
	ck_assert_str_eq(e->msg, "cannot start: bind source /nope: No such file or directory");
	char buf[512];
	int n = lc_error_to_buf(e, buf, sizeof(buf));
	lc_error_from_buf(&back, buf, (size_t)n);
	ck_assert_int_eq(back->exit_code, LC_EXIT_NOENT);
	ck_assert_int_eq(back->errnum, 2);
	ck_assert_str_eq(back->msg, e->msg);
	lc_error_free(e);
	lc_error_free(back);
}
END_TEST

/* lc_write_file_atomic leaves the new content and no temporary name; the
 * directory sync it ends with names the directory when it fails. */
START_TEST(test_write_atomic_and_dir_sync)
{
	char dir[] = "/tmp/test_util.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	_cleanup_free_ char *f = lc_strdup_printf("%s/state.json", dir);
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_write_file_atomic(f, "one", 3, 0644, &e), 0);
	ck_assert_int_eq(lc_write_file_atomic(f, "two!", 4, 0600, &e), 0);
	_cleanup_free_ char *got = NULL;
	ck_assert_int_eq(lc_read_file(f, &got, NULL, &e), 0);
	ck_assert_str_eq(got, "two!");
	glob_t g;
	_cleanup_free_ char *pat = lc_strdup_printf("%s/*", dir);
	ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, 1);
	globfree(&g);
	ck_assert_int_eq(lc_fsync_parent(f, &e), 0);
	ck_assert_int_eq(lc_fsync_parent("relative-name", &e), 0); /* the working directory's */
	_cleanup_free_ char *gone = lc_strdup_printf("%s/no-such-dir/file", dir);
	ck_assert_int_eq(lc_fsync_parent(gone, &e), -1);
	ck_assert_ptr_nonnull(strstr(e->msg, "no-such-dir"));
	lc_error_free(e);
	unlink(f);
	rmdir(dir);
}
END_TEST

START_TEST(test_random_hex)
{
	char a[13], b[13];
	lc_random_hex(a, 12);
	lc_random_hex(b, 12);
	ck_assert_int_eq(strlen(a), 12);
	ck_assert_str_ne(a, b);
	for (int i = 0; i < 12; i++)
		ck_assert(strchr("0123456789abcdef", a[i]) != NULL);
}
END_TEST

START_TEST(test_shell_quote)
{
	static const char *const cases[][2] = { { "", "''" },
						{ "plain", "'plain'" },
						{ "a b$c`d\\e\"f", "'a b$c`d\\e\"f'" },
						{ "it's", "'it'\\''s'" },
						{ "''", "''\\'''\\'''" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *q = lc_shell_quote(cases[i][0]);
		ck_assert_str_eq(q, cases[i][1]);
		free(q);
	}
}
END_TEST

START_TEST(test_strv_sort)
{
	char **v = NULL;
	lc_strv_sort(v);
	const char *in[] = { "roman", "calc-add", "word-freq", "Zeta", "fizzbuzz", "calc" };
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		lc_strv_push(&v, in[i]);
	lc_strv_sort(v);
	const char *want[] = { "Zeta", "calc", "calc-add", "fizzbuzz", "roman", "word-freq" };
	ck_assert_uint_eq(lc_strv_len(v), 6);
	for (size_t i = 0; i < 6; i++)
		ck_assert_str_eq(v[i], want[i]);
	lc_strv_free(v);
}
END_TEST

/* A process forked while another thread is inside lc_idmap_userns (lcd
 * forks monitors and staging processes from threads) must still be able to
 * call it: the cache's lock is not inherited held. */
static atomic_bool stop_spin;

static void *spin_idmap(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_spin)) {
		int fd = lc_idmap_userns(0, 200000, 0, 200000, 1000, NULL);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

START_TEST(test_idmap_after_fork_from_threads)
{
	if (geteuid() != 0)
		return; /* a user namespace with a mapped range needs root */
	int fd = lc_idmap_userns(0, 200000, 0, 200000, 1000, NULL);
	if (fd < 0)
		return; /* root of a sandbox's own user namespace: no such mapping here */
	close(fd);
	pthread_t t;
	atomic_store(&stop_spin, false);
	ck_assert_int_eq(pthread_create(&t, NULL, spin_idmap, NULL), 0);
	int hung = 0;
	for (int i = 0; i < 300 && !hung; i++) {
		pid_t p = fork();
		if (p == 0) {
			signal(SIGALRM, SIG_DFL); /* not check's timeout handler */
			alarm(1);
			int f = lc_idmap_userns(0, 200000, 0, 200000, 1000, NULL);
			_exit(f >= 0 ? 0 : 1);
		}
		int st = 0;
		ck_assert_int_eq(waitpid(p, &st, 0), p);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			hung++;
		else
			ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
	}
	atomic_store(&stop_spin, true);
	pthread_join(t, NULL);
	ck_assert_msg(hung == 0, "a child forked from a threaded process hung in lc_idmap_userns");
}
END_TEST

/* Transparent huge pages that may serve anonymous memory without being
 * asked: 2 MiB ones set to "always", or smaller (multi-size) ones set to
 * "always" or to "inherit" from that. */
static bool thp_unasked(void)
{
	char buf[128];
	bool top = false, any = false;
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		top = fgets(buf, sizeof(buf), f) && strstr(buf, "[always]");
		fclose(f);
	}
	glob_t g;
	if (glob("/sys/kernel/mm/transparent_hugepage/hugepages-*/enabled", 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc && !any; i++) {
			FILE *h = fopen(g.gl_pathv[i], "r");
			if (!h)
				continue;
			if (fgets(buf, sizeof(buf), h))
				any = strstr(buf, "[always]") || (top && strstr(buf, "[inherit]"));
			fclose(h);
		}
		globfree(&g);
	}
	return top || any;
}

/* Minor page faults of allocating and writing seven 128 KiB blocks (as
 * libnftables' cache does), in a child of its own, with or without
 * lc_heap_prefault first; -1: the kernel could not fault the pages in
 * (MADV_POPULATE_WRITE, 5.14). */
static long faults_of_tables(bool prefault)
{
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t p = fork();
	if (p == 0) {
		long none = -1;
		if (prefault && !lc_heap_prefault(1 << 20))
			_exit(write(pfd[1], &none, sizeof(none)) == sizeof(none) ? 0 : 1);
		struct rusage a, b;
		getrusage(RUSAGE_SELF, &a);
		char *blocks[7];
		for (int i = 0; i < 7; i++) {
			blocks[i] = malloc(128 << 10);
			memset(blocks[i], i + 1, 128 << 10);
		}
		getrusage(RUSAGE_SELF, &b);
		long n = b.ru_minflt - a.ru_minflt;
		for (int i = 0; i < 7; i++)
			free(blocks[i]);
		_exit(write(pfd[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
	}
	close(pfd[1]);
	long n = -1;
	ck_assert_int_eq(read(pfd[0], &n, sizeof(n)), sizeof(n));
	close(pfd[0]);
	int st;
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	return n;
}

START_TEST(test_heap_prefault)
{
	long without = faults_of_tables(false), with = faults_of_tables(true);
	if (with < 0) {
		fprintf(stderr, "test_heap_prefault: skipped, this kernel has no MADV_POPULATE_WRITE\n");
		return;
	}
	/* 224 pages written: a fault each without (unless huge pages serve
	 * the heap unasked: one fault for many pages), a handful with */
	if (!thp_unasked())
		ck_assert_msg(without >= 200, "without lc_heap_prefault: %ld faults", without);
	ck_assert_msg(with <= 20, "with lc_heap_prefault: %ld faults (without: %ld)", with, without);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_error_roundtrip);
	tcase_add_test(tc, test_write_atomic_and_dir_sync);
	tcase_add_test(tc, test_random_hex);
	tcase_add_test(tc, test_shell_quote);
	tcase_add_test(tc, test_strv_sort);
	tcase_add_test(tc, test_idmap_after_fork_from_threads);
	tcase_add_test(tc, test_heap_prefault);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
