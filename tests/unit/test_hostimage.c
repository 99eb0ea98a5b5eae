/* Unit tests for hostimage.c's skeleton cache: the directory is found by a
 * fast hash of its key and taken only when its stored key is the same byte
 * for byte (rootless, so that the test needs no id range). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostimage.h"
#include "lcrun.h"
#include "util.h"

static char tmpdir[] = "/tmp/lcrun-test-hostimage.XXXXXX";

static char *skel(void)
{
	char *out = NULL;
	lc_error_t *err = NULL;
	int r = lc_hostimage_skel(&out, true, &err);
	ck_assert_msg(r == 0, "%s", err ? err->msg : "");
	return out;
}

/* The directory holding skeleton root s (its key file next to it). */
static char *keyfile(const char *s)
{
	_cleanup_free_ char *d = strdup(s);
	*strrchr(d, '/') = '\0';
	return lc_strdup_printf("%s/key", d);
}

static int count_entries(const char *dir)
{
	_cleanup_dir_ DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	return n;
}

START_TEST(test_skel_key)
{
	_cleanup_free_ char *hostdir = lc_strdup_printf("%s/host", tmpdir);
	_cleanup_free_ char *first = skel();
	struct stat st;
	_cleanup_free_ char *nss = lc_strdup_printf("%s/etc/nsswitch.conf", first);
	ck_assert_int_eq(stat(first, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	_cleanup_free_ char *kf = keyfile(first);
	_cleanup_free_ char *key = NULL;
	size_t klen;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_read_file(kf, &key, &klen, &err), 0);
	ck_assert_msg(!strncmp(key, "skel-v3 ", 8), "key: %.40s", key);
	ck_assert_ptr_nonnull(strstr(key, "/etc/nsswitch.conf "));

	/* Same key: the same directory, nothing built again. */
	_cleanup_free_ char *again = skel();
	ck_assert_str_eq(again, first);
	ck_assert_int_eq(count_entries(hostdir), 1);

	/* The stored key differs in one byte (what another key at the same
	 * index looks like): not taken; the next index gets the skeleton. */
	key[klen - 2] ^= 0x01;
	ck_assert_int_eq(lc_write_file_atomic(kf, key, klen, 0600, &err), 0);
	_cleanup_free_ char *moved = skel();
	ck_assert_str_ne(moved, first);
	ck_assert_int_eq(count_entries(hostdir), 2);
	_cleanup_free_ char *kf2 = keyfile(moved);
	_cleanup_free_ char *key2 = NULL;
	size_t klen2;
	ck_assert_int_eq(lc_read_file(kf2, &key2, &klen2, &err), 0);
	key[klen - 2] ^= 0x01;
	ck_assert_int_eq(klen2, klen);
	ck_assert(!memcmp(key2, key, klen));
	_cleanup_free_ char *still = skel();
	ck_assert_str_eq(still, moved);

	/* A cut-short key, or none (an unfinished or older directory), is
	 * not taken either. */
	ck_assert_int_eq(truncate(kf2, (off_t)klen / 2), 0);
	_cleanup_free_ char *third = skel();
	ck_assert_str_ne(third, first);
	ck_assert_str_ne(third, moved);
	_cleanup_free_ char *kf3 = keyfile(third);
	ck_assert_int_eq(unlink(kf3), 0);
	_cleanup_free_ char *fourth = skel();
	ck_assert_str_ne(fourth, third);
	ck_assert_int_eq(count_entries(hostdir), 4);
	ck_assert_int_eq(access(nss, F_OK), 0);
}
END_TEST

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	setenv("LCRUN_ROOT", tmpdir, 1);
	Suite *s = suite_create("hostimage");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_skel_key);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	lc_rm_rf(tmpdir, NULL);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
