/* Unit tests for the state helpers of lifecycle.c: process identity, the
 * state lock, read-modify-write of state.json, the status as it is now. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lifecycle.h"
#include "state.h"
#include "util.h"

static char tmpdir[] = "/tmp/lcrun-unit-XXXXXX";

static void setup_dir(void)
{
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	setenv("LCRUN_STATE_DIR", tmpdir, 1);
}

static void teardown_dir(void)
{
	lc_rm_rf(tmpdir, NULL);
	strcpy(tmpdir, "/tmp/lcrun-unit-XXXXXX");
}

START_TEST(test_starttime)
{
	unsigned long long me = lc_proc_starttime(getpid());
	ck_assert(me > 0);
	ck_assert(lc_proc_is(getpid(), me, "x"));
	ck_assert(!lc_proc_is(getpid(), me + 1, "x"));
	/* a zombie is dead, and so is a reaped pid */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	ck_assert(child > 0);
	for (int i = 0; i < 200 && lc_proc_starttime(child); i++)
		usleep(5000);
	ck_assert_int_eq(lc_proc_starttime(child), 0);
	waitpid(child, NULL, 0);
	ck_assert_int_eq(lc_proc_starttime(child), 0);
	ck_assert(!lc_proc_is(0, 0, "x"));
}
END_TEST

static void write_state(const char *id, const char *status, pid_t pid, unsigned long long start)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:I, s:I, s:i}", "id", id, "status", status, "pid", (int)pid,
			      "pid_start", (json_int_t)start, "created", (json_int_t)lc_wall_ms(), "lcrun_pid", 0);
	ck_assert_int_eq(lc_state_write(id, j, NULL), 0);
	json_decref(j);
}

START_TEST(test_lock_and_patch)
{
	const char *id = "0123456789ab";
	write_state(id, "running", getpid(), lc_proc_starttime(getpid()));
	lc_error_t *err = NULL;
	int a = lc_state_lock(id, 0, &err);
	ck_assert_int_ge(a, 0);
	/* a second holder waits, then gives up with BUSY */
	long long t0 = lc_now_ms();
	ck_assert_int_lt(lc_state_lock(id, 100, &err), 0);
	ck_assert_int_ge(lc_now_ms() - t0, 100);
	ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
	lc_error_free(err);
	err = NULL;
	json_t *p = json_pack("{s:s, s:i}", "status", "paused", "extra", 7);
	ck_assert_int_eq(lc_state_patch(id, p, NULL), 0);
	json_decref(p);
	json_t *st = lc_state_read(id, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "paused");
	ck_assert_str_eq(json_string_value(json_object_get(st, "id")), id);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "extra")), 7);
	json_decref(st);
	/* once removed, the waiter learns that it is gone */
	close(a);
	_cleanup_free_ char *f = lc_strdup_printf("%s/%s/state.json", tmpdir, id);
	unlink(f);
	ck_assert_int_lt(lc_state_lock(id, 0, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	lc_error_free(err);
}
END_TEST

START_TEST(test_status_now)
{
	const char *id = "ba9876543210";
	write_state(id, "running", getpid(), lc_proc_starttime(getpid()));
	json_t *st = lc_state_read(id, NULL);
	ck_assert_str_eq(lc_state_status(st, id), "running");
	json_decref(st);
	/* pid 1 recorded with another start time: a recycled pid, dead */
	write_state(id, "running", getpid(), lc_proc_starttime(getpid()) + 5);
	st = lc_state_read(id, NULL);
	ck_assert_str_eq(lc_state_status(st, id), "dead");
	json_decref(st);
	write_state(id, "stopped", 0, 0);
	st = lc_state_read(id, NULL);
	ck_assert_str_eq(lc_state_status(st, id), "stopped");
	json_decref(st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("state");
	tcase_add_checked_fixture(tc, setup_dir, teardown_dir);
	tcase_add_test(tc, test_starttime);
	tcase_add_test(tc, test_lock_and_patch);
	tcase_add_test(tc, test_status_now);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
