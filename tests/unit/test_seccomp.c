/* Unit tests for seccomp.c: profile errors with positions, the BPF cache,
 * and what the default profile does to a process that installs it. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lcrun.h"
#include "seccomp.h"
#include "util.h"

#define DEFAULT_JSON LC_SRCDIR "/policies/default.json"

static char tmpdir[] = "/tmp/lcrun-test-seccomp.XXXXXX";

/* Write content to tmpdir/name and return the path (static buffer). */
static const char *write_profile(const char *name, const char *content)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
	return path;
}

/* Compile path and expect failure; return the message (caller frees). */
static char *compile_error(const char *path, int want_exit)
{
	lc_seccomp_prog_t prog;
	lc_error_t *err = NULL;
	ck_assert_int_lt(lc_seccomp_compile_file(path, &prog, &err), 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_int_eq(err->exit_code, want_exit);
	char *msg = strdup(err->msg);
	lc_error_free(err);
	ck_assert_ptr_null(prog.filter);
	return msg;
}

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

START_TEST(test_default_compiles)
{
	lc_seccomp_prog_t prog;
	lc_error_t *err = NULL;
	int r = lc_seccomp_compile_file(DEFAULT_JSON, &prog, &err);
	ck_assert_msg(r == 0, "%s", err ? err->msg : "");
	ck_assert(!prog.unconfined);
	ck_assert_ptr_nonnull(prog.filter);
	ck_assert_int_gt(prog.len, 10);
	lc_seccomp_prog_free(&prog);
}
END_TEST

START_TEST(test_invalid_json_position)
{
	const char *p = write_profile("bad.json", "{\n"
						  "  \"defaultAction\": \"SCMP_ACT_ALLOW\",\n"
						  "  \"syscalls\": [\n"
						  "    { \"names\": [\"read\"] \"action\": \"SCMP_ACT_ALLOW\" }\n"
						  "  ]\n"
						  "}\n");
	_cleanup_free_ char *msg = compile_error(p, LC_EXIT_INVALID);
	/* The stray "action" string starts at line 4, column 26. */
	_cleanup_free_ char *want = lc_strdup_printf("%s:4:", p);
	ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "got: %s", msg);
	ck_assert_msg(strstr(msg, "invalid JSON"), "got: %s", msg);
}
END_TEST

START_TEST(test_unknown_syscall_position)
{
	const char *p = write_profile("unknown.json", "{\n"
						      "  \"defaultAction\": \"SCMP_ACT_ERRNO\",\n"
						      "  \"syscalls\": [\n"
						      "    { \"names\": [\"read\", \"write\"], \"action\": \"SCMP_ACT_ALLOW\" },\n"
						      "    { \"names\": [\"getpid\",\n"
						      "                \"frobnicate_at\"], \"action\": \"SCMP_ACT_ALLOW\" }\n"
						      "  ]\n"
						      "}\n");
	_cleanup_free_ char *msg = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want = lc_strdup_printf("%s:6:17: syscalls[1].names[1]: unknown syscall \"frobnicate_at\"", p);
	ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "got: %s\nwant: %s", msg, want);
}
END_TEST

START_TEST(test_wrong_type_path)
{
	const char *p = write_profile("type.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
						   "  { \"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\" },\n"
						   "  { \"names\": [\"write\"], \"action\": 5 } ] }\n");
	_cleanup_free_ char *msg = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want = lc_strdup_printf("%s: syscalls[1].action: expected a string, got an integer", p);
	ck_assert_str_eq(msg, want);

	p = write_profile("type2.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
					"  { \"names\": [\"socket\"], \"action\": \"SCMP_ACT_ALLOW\",\n"
					"    \"args\": [ { \"index\": \"0\", \"value\": 40, \"op\": \"SCMP_CMP_NE\" } ] } ] }\n");
	_cleanup_free_ char *msg2 = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want2 = lc_strdup_printf("%s: syscalls[0].args[0].index: expected an integer, got a string", p);
	ck_assert_str_eq(msg2, want2);

	p = write_profile("type3.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": {} }");
	_cleanup_free_ char *msg3 = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want3 = lc_strdup_printf("%s: syscalls: expected an array, got an object", p);
	ck_assert_str_eq(msg3, want3);

	p = write_profile("type4.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
					"  { \"names\": [\"read\"], \"action\": \"SCMP_ACT_ALOW\" } ] }\n");
	_cleanup_free_ char *msg4 = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want4 = lc_strdup_printf("%s:2:34: syscalls[0].action: unknown action \"SCMP_ACT_ALOW\"", p);
	ck_assert_str_eq(msg4, want4);
}
END_TEST

START_TEST(test_missing_file)
{
	lc_seccomp_prog_t prog;
	lc_error_t *err = NULL;
	ck_assert_int_lt(lc_seccomp_prepare("/nonexistent/profile.json", &prog, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_NOENT);
	ck_assert_msg(strstr(err->msg, "/nonexistent/profile.json"), "got: %s", err->msg);
	lc_error_free(err);
}
END_TEST

START_TEST(test_unconfined)
{
	lc_seccomp_prog_t prog;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_seccomp_prepare("unconfined", &prog, &err), 0);
	ck_assert(prog.unconfined);
	ck_assert_ptr_null(prog.filter);
	ck_assert_int_eq(lc_seccomp_install(&prog, &err), 0);
	lc_seccomp_prog_free(&prog);
}
END_TEST

static char *default_cache_path(uint64_t caps)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_read_file(DEFAULT_JSON, &text, &len, &err), 0);
	char *p = lc_seccomp_cache_path(text, len, caps, &err);
	ck_assert_ptr_nonnull(p);
	return p;
}

static void prepare_ok(const char *profile, lc_seccomp_prog_t *prog)
{
	lc_error_t *err = NULL;
	int r = lc_seccomp_prepare(profile, prog, &err);
	ck_assert_msg(r == 0, "%s", err ? err->msg : "");
}

static bool same_prog(const lc_seccomp_prog_t *a, const lc_seccomp_prog_t *b)
{
	return a->len == b->len && memcmp(a->filter, b->filter, a->len * sizeof(struct sock_filter)) == 0;
}

START_TEST(test_cache)
{
	_cleanup_free_ char *cache = default_cache_path(0);
	lc_seccomp_prog_t compiled, first, second, other, repaired;
	lc_error_t *err = NULL;
	unlink(cache);

	long long t0 = now_us();
	ck_assert_int_eq(lc_seccomp_compile_file(DEFAULT_JSON, &compiled, &err), 0);
	long long t_compile = now_us() - t0;

	prepare_ok(NULL, &first); /* compiles and writes the cache */
	ck_assert(same_prog(&first, &compiled));
	struct stat st;
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	_cleanup_free_ char *dir = lc_strdup_printf("%s/seccomp", tmpdir);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);

	t0 = now_us();
	prepare_ok(NULL, &second);
	long long t_cache = now_us() - t0;
	ck_assert(same_prog(&second, &compiled));
	printf("seccomp default.json: %u BPF instructions; compile %lld us, from cache %lld us\n", compiled.len,
	       t_compile, t_cache);

	/* A hit is not rewritten: the file is the same inode. */
	ck_assert_int_eq(stat(cache, &st), 0);
	ino_t ino = st.st_ino;
	lc_seccomp_prog_t hit;
	prepare_ok(NULL, &hit);
	ck_assert(same_prog(&hit, &compiled));
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_eq(st.st_ino, ino);
	lc_seccomp_prog_free(&hit);

	/* Proof that prepare takes the program from the cache when the key
	 * matches: the default profile's key with another program's
	 * instructions (and their check) is what prepare returns. */
	const char *allow = write_profile("allow.json", "{ \"defaultAction\": \"SCMP_ACT_ALLOW\" }");
	prepare_ok(allow, &other);
	ck_assert(!same_prog(&other, &compiled));
	_cleanup_free_ char *text = NULL;
	size_t len;
	ck_assert_int_eq(lc_read_file(allow, &text, &len, &err), 0);
	_cleanup_free_ char *allow_cache = lc_seccomp_cache_path(text, len, 0, &err);
	ck_assert_str_ne(allow_cache, cache);
	_cleanup_free_ char *def = NULL, *alw = NULL;
	size_t def_len, alw_len;
	ck_assert_int_eq(lc_read_file(cache, &def, &def_len, &err), 0);
	ck_assert_int_eq(lc_read_file(allow_cache, &alw, &alw_len, &err), 0);
	struct { char magic[8]; uint32_t n_insns, key_len; uint64_t check; } hd, ha;
	memcpy(&hd, def, sizeof(hd));
	memcpy(&ha, alw, sizeof(ha));
	ck_assert_int_eq(hd.n_insns, compiled.len);
	ck_assert_int_eq(def_len, sizeof(hd) + hd.key_len + compiled.len * sizeof(struct sock_filter));
	size_t ibytes = ha.n_insns * sizeof(struct sock_filter);
	hd.n_insns = ha.n_insns;
	hd.check = lc_hash64(alw + sizeof(ha) + ha.key_len, ibytes, hd.key_len);
	memcpy(def, &hd, sizeof(hd));
	FILE *f = fopen(cache, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite(def, 1, sizeof(hd) + hd.key_len, f), sizeof(hd) + hd.key_len);
	ck_assert_int_eq(fwrite(alw + sizeof(ha) + ha.key_len, 1, ibytes, f), ibytes);
	fclose(f);
	lc_seccomp_prog_t forged;
	prepare_ok(NULL, &forged);
	ck_assert(same_prog(&forged, &other));
	lc_seccomp_prog_free(&forged);

	/* A valid file of another key at the default profile's index (what a
	 * collision of the index looks like) is a miss: recompiled and
	 * rewritten, never taken. */
	ck_assert_int_eq(rename(allow_cache, cache), 0);
	lc_seccomp_prog_t swapped;
	prepare_ok(NULL, &swapped);
	ck_assert(same_prog(&swapped, &compiled));
	lc_seccomp_prog_free(&swapped);
	prepare_ok(allow, &swapped); /* allow's own entry is made again */
	ck_assert(same_prog(&swapped, &other));
	lc_seccomp_prog_free(&swapped);
	ck_assert_int_eq(access(allow_cache, F_OK), 0);

	/* One byte of the stored key changed (the instructions and their
	 * check intact): a miss. */
	ck_assert_int_eq(stat(cache, &st), 0);
	ino = st.st_ino;
	int kfd = open(cache, O_RDWR);
	ck_assert_int_ge(kfd, 0);
	char kb;
	off_t koff = (off_t)sizeof(hd) + 200; /* inside the profile's text */
	ck_assert_int_eq(pread(kfd, &kb, 1, koff), 1);
	kb ^= 0x01;
	ck_assert_int_eq(pwrite(kfd, &kb, 1, koff), 1);
	close(kfd);
	prepare_ok(NULL, &swapped);
	ck_assert(same_prog(&swapped, &compiled));
	lc_seccomp_prog_free(&swapped);
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_ne(st.st_ino, ino);

	/* Cut short in the instructions: a miss. */
	ck_assert_int_eq(truncate(cache, st.st_size - (off_t)sizeof(struct sock_filter)), 0);
	prepare_ok(NULL, &swapped);
	ck_assert(same_prog(&swapped, &compiled));
	lc_seccomp_prog_free(&swapped);
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_eq(st.st_size, def_len);

	/* Group- or other-writable: never taken. */
	ck_assert_int_eq(chmod(cache, 0620), 0);
	ck_assert_int_eq(stat(cache, &st), 0);
	ino = st.st_ino;
	prepare_ok(NULL, &swapped);
	ck_assert(same_prog(&swapped, &compiled));
	lc_seccomp_prog_free(&swapped);
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_ne(st.st_ino, ino);
	ck_assert_int_eq(st.st_mode & 07777, 0600);

	/* A short file is ignored and rewritten. */
	ck_assert_int_eq(truncate(cache, 20), 0);
	prepare_ok(NULL, &repaired);
	ck_assert(same_prog(&repaired, &compiled));
	ck_assert_int_eq(stat(cache, &st), 0);
	ck_assert_int_gt(st.st_size, (off_t)(compiled.len * sizeof(struct sock_filter)));
	lc_seccomp_prog_free(&repaired);

	/* A flipped byte in the instructions fails the checksum: recompiled. */
	int fd = open(cache, O_RDWR);
	ck_assert_int_ge(fd, 0);
	char b;
	ck_assert_int_eq(pread(fd, &b, 1, st.st_size - 3), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, st.st_size - 3), 1);
	close(fd);
	prepare_ok(NULL, &repaired);
	ck_assert(same_prog(&repaired, &compiled));
	lc_seccomp_prog_t again;
	prepare_ok(NULL, &again); /* and the rewritten file is good again */
	ck_assert(same_prog(&again, &compiled));

	lc_seccomp_prog_free(&again);
	lc_seccomp_prog_free(&repaired);
	lc_seccomp_prog_free(&compiled);
	lc_seccomp_prog_free(&first);
	lc_seccomp_prog_free(&second);
	lc_seccomp_prog_free(&other);
}
END_TEST

START_TEST(test_failed_prepare_leaves_nothing)
{
	const char *p = write_profile("broken.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [ { \"names\": [\"nope_nope\"], \"action\": \"SCMP_ACT_ALLOW\" } ] }");
	_cleanup_free_ char *text = NULL;
	size_t len;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_read_file(p, &text, &len, &err), 0);
	_cleanup_free_ char *cache = lc_seccomp_cache_path(text, len, 0, &err);
	lc_seccomp_prog_t prog;
	ck_assert_int_lt(lc_seccomp_prepare(p, &prog, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	ck_assert_msg(strstr(err->msg, "nope_nope"), "got: %s", err->msg);
	lc_error_free(err);
	ck_assert_int_eq(access(cache, F_OK), -1);
	ck_assert_ptr_null(prog.filter);
}
END_TEST

START_TEST(test_caps_conditions)
{
	const char *p = write_profile("caps.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
						   "  { \"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\" },\n"
						   "  { \"names\": [\"mount\"], \"action\": \"SCMP_ACT_ALLOW\",\n"
						   "    \"includes\": { \"caps\": [\"CAP_SYS_ADMIN\"] } } ] }\n");
	lc_seccomp_prog_t without, with;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_seccomp_prepare_caps(p, 0, &without, &err), 0);
	ck_assert_int_eq(lc_seccomp_prepare_caps(p, 1ULL << 21 /* CAP_SYS_ADMIN */, &with, &err), 0);
	ck_assert(!same_prog(&without, &with));
	lc_seccomp_prog_free(&without);
	lc_seccomp_prog_free(&with);

	p = write_profile("badcap.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
					 "  { \"names\": [\"mount\"], \"action\": \"SCMP_ACT_ALLOW\",\n"
					 "    \"includes\": { \"caps\": [\"CAP_SYS_WIZARD\"] } } ] }\n");
	_cleanup_free_ char *msg = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want = lc_strdup_printf("%s:3:28: syscalls[0].includes.caps[0]: unknown capability", p);
	ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "got: %s", msg);
}
END_TEST

static void compile_text(const char *name, const char *text, lc_seccomp_prog_t *prog)
{
	lc_error_t *err = NULL;
	int r = lc_seccomp_compile_file(write_profile(name, text), prog, &err);
	ck_assert_msg(r == 0, "%s", err ? err->msg : "");
}

START_TEST(test_kernel_and_arch_conditions)
{
#define GROUP(cond) "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n" \
	"  { \"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\" },\n" \
	"  { \"names\": [\"getppid\"], \"action\": \"SCMP_ACT_ALLOW\", " cond " } ] }\n"
	lc_seccomp_prog_t plain, old_kernel, future_kernel, other_arch, native_excluded;
	compile_text("plain.json", "{ \"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [\n"
				   "  { \"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\" } ] }\n", &plain);
	compile_text("k1.json", GROUP("\"includes\": { \"minKernel\": \"1.0\" }"), &old_kernel);
	compile_text("k999.json", GROUP("\"includes\": { \"minKernel\": \"999.0\" }"), &future_kernel);
	/* No host is both: one of the two names is never native. */
	compile_text("arch.json", GROUP("\"includes\": { \"arches\": [\"s390\"] }"), &other_arch);
	compile_text("xarch.json", GROUP("\"excludes\": { \"arches\": [\"amd64\", \"arm64\", \"riscv64\", \"x86\"] }"),
		     &native_excluded);
	ck_assert(!same_prog(&old_kernel, &plain));     /* the rule applies */
	ck_assert(same_prog(&future_kernel, &plain));   /* the rule is left out */
	ck_assert(same_prog(&other_arch, &plain));
	ck_assert(same_prog(&native_excluded, &plain));
	lc_seccomp_prog_free(&plain);
	lc_seccomp_prog_free(&old_kernel);
	lc_seccomp_prog_free(&future_kernel);
	lc_seccomp_prog_free(&other_arch);
	lc_seccomp_prog_free(&native_excluded);

	const char *p = write_profile("badk.json", GROUP("\"includes\": { \"minKernel\": \"six\" }"));
	_cleanup_free_ char *msg = compile_error(p, LC_EXIT_INVALID);
	_cleanup_free_ char *want = lc_strdup_printf("%s:3:82: syscalls[1].includes.minKernel: \"six\" is not a kernel version", p);
	ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "got: %s", msg);
#undef GROUP
}
END_TEST

/* ---- behaviour: install the default filter in a child ------------------------ */

static int report_fd = -1;
static int failures;

static void expect(const char *what, long r, int want_errno)
{
	int e = errno;
	char line[256];
	if (want_errno == 0 && r < 0)
		snprintf(line, sizeof(line), "%s: failed with %s, expected success\n", what, strerror(e));
	else if (want_errno && r >= 0)
		snprintf(line, sizeof(line), "%s: succeeded, expected %s\n", what, strerror(want_errno));
	else if (want_errno && e != want_errno)
		snprintf(line, sizeof(line), "%s: got %s, expected %s\n", what, strerror(e), strerror(want_errno));
	else
		return;
	failures++;
	lc_write_all(report_fd, line, strlen(line));
}

static void *thread_fn(void *arg)
{
	return arg;
}

static void child_checks(const lc_seccomp_prog_t *prog)
{
	lc_error_t *err = NULL;
	pid_t me = getpid();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || lc_seccomp_install(prog, &err) < 0) {
		expect("install", -1, 0);
		return;
	}
	expect("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -1L, 0L), EPERM);
	expect("add_key", syscall(SYS_add_key, "user", "k", "v", 1L, -2L), EPERM);
	expect("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM);
	expect("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
	expect("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
	expect("unshare(CLONE_NEWNS|CLONE_NEWNET)", unshare(CLONE_NEWNS | CLONE_NEWNET), EPERM);
	expect("unshare(CLONE_FILES)", unshare(CLONE_FILES), 0);
	expect("setns", setns(0, 0), EPERM);
	expect("mount", mount("none", "/mnt", "tmpfs", 0, NULL), EPERM);
	expect("umount2", umount2("/", MNT_DETACH), EPERM);
	expect("pivot_root", syscall(SYS_pivot_root, "/", "/"), EPERM);
	expect("fsopen", syscall(SYS_fsopen, "tmpfs", 0), EPERM);
	char params[120] = { 0 }; /* struct io_uring_params */
	expect("io_uring_setup", syscall(SYS_io_uring_setup, 1, params), EPERM);
	expect("init_module", syscall(SYS_init_module, NULL, 0, ""), EPERM);
	expect("finit_module", syscall(SYS_finit_module, -1, "", 0), EPERM);
	expect("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
	expect("reboot", syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
	expect("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	expect("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
	struct timespec ts = { 0 };
	expect("clock_settime", clock_settime(CLOCK_REALTIME, &ts), EPERM);
	expect("socket(AF_VSOCK)", socket(40, SOCK_STREAM, 0), EPERM);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	expect("socket(AF_UNIX)", s, 0);
	close(s);
	expect("personality(query)", personality(0xffffffff), 0);
	expect("personality(READ_IMPLIES_EXEC)", personality(READ_IMPLIES_EXEC), ENOSYS);
	expect("syscall 1000", syscall(1000), ENOSYS);
	struct clone_args ca = { .exit_signal = SIGCHLD };
	long r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		_exit(0);
	expect("clone3", r, ENOSYS);
	r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	expect("clone(CLONE_NEWUSER)", r, EPERM);
	r = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	expect("clone(CLONE_NEWPID)", r, EPERM);

	pid_t pid = fork();
	if (pid == 0)
		_exit(7);
	expect("fork", pid, 0);
	int status = 0;
	if (pid > 0) {
		waitpid(pid, &status, 0);
		expect("fork child exit status", WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1, 0);
	}
	pthread_t t;
	int pr = pthread_create(&t, NULL, thread_fn, NULL);
	errno = pr;
	expect("pthread_create", pr ? -1 : 0, 0);
	if (!pr)
		pthread_join(t, NULL);
	expect("getpid", getpid() == me ? 0 : -1, 0);
}

START_TEST(test_default_behaviour)
{
	lc_seccomp_prog_t prog;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_seccomp_compile_file(DEFAULT_JSON, &prog, &err), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		report_fd = p[1];
		child_checks(&prog);
		_exit(failures ? 1 : 0);
	}
	close(p[1]);
	char buf[8192];
	ssize_t n = lc_read_all(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	buf[n > 0 ? n : 0] = '\0';
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d:\n%s", status, buf);
	lc_seccomp_prog_free(&prog);
}
END_TEST

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	setenv("LCRUN_ROOT", tmpdir, 1);
	setenv("LCRUN_POLICY_DIR", LC_SRCDIR "/policies", 1);

	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_default_compiles);
	tcase_add_test(tc, test_invalid_json_position);
	tcase_add_test(tc, test_unknown_syscall_position);
	tcase_add_test(tc, test_wrong_type_path);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_unconfined);
	tcase_add_test(tc, test_cache);
	tcase_add_test(tc, test_failed_prepare_leaves_nothing);
	tcase_add_test(tc, test_caps_conditions);
	tcase_add_test(tc, test_kernel_and_arch_conditions);
	tcase_add_test(tc, test_default_behaviour);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	lc_error_t *err = NULL;
	lc_rm_rf(tmpdir, &err);
	lc_error_free(err);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
