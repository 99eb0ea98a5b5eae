/* util.c — small helpers: strings, files, sizes, ids, time. */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include "util.h"

void lc_strvfreep(char ***v)
{
	lc_strv_free(*v);
}

char *lc_strdup_printf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s)
		abort();
	return s;
}

void *lc_xmalloc0(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p)
		abort();
	return p;
}

size_t lc_strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

int lc_strv_push(char ***v, const char *s)
{
	size_t n = lc_strv_len(*v);
	char **nv = realloc(*v, (n + 2) * sizeof(char *));
	if (!nv)
		abort();
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}

void lc_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

void lc_close_fds_except(const int *keep, size_t n)
{
	int sorted[16];
	size_t k = 0;
	for (size_t i = 0; i < n && k < sizeof(sorted) / sizeof(sorted[0]); i++)
		if (keep[i] >= 3)
			sorted[k++] = keep[i];
	qsort(sorted, k, sizeof(int), cmp_int);
	unsigned int from = 3;
	for (size_t i = 0; i < k; i++) {
		if ((unsigned int)sorted[i] > from)
			syscall(SYS_close_range, from, (unsigned int)sorted[i] - 1, 0);
		if ((unsigned int)sorted[i] + 1 > from)
			from = (unsigned int)sorted[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

int lc_signals_to_fd(const int *sigs, size_t n, sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < n; i++)
		sigaddset(&set, sigs[i]);
	pthread_sigmask(SIG_BLOCK, &set, old);
	return signalfd(-1, &set, SFD_CLOEXEC);
}

void lc_stdio_to_null(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int i = 0; null >= 0 && i < 3; i++)
		dup2(null, i);
}

static pthread_mutex_t secrets_lock = PTHREAD_MUTEX_INITIALIZER;
static char **secrets;
static size_t n_secrets, cap_secrets;

void lc_secret_note(char *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&secrets_lock);
	if (n_secrets == cap_secrets) {
		size_t cap = cap_secrets ? 2 * cap_secrets : 16;
		char **v = realloc(secrets, cap * sizeof(*v));
		if (!v)
			abort();
		secrets = v;
		cap_secrets = cap;
	}
	secrets[n_secrets++] = s;
	pthread_mutex_unlock(&secrets_lock);
}

void lc_secret_unnote(char *s)
{
	pthread_mutex_lock(&secrets_lock);
	for (size_t i = n_secrets; i-- > 0;) {
		if (secrets[i] == s) {
			secrets[i] = secrets[--n_secrets];
			break;
		}
	}
	pthread_mutex_unlock(&secrets_lock);
}

void lc_secrets_note(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		lc_secret_note(v[i]);
}

void lc_secrets_unnote(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		lc_secret_unnote(v[i]);
}

/* In a detached helper, single-threaded (no lock: the thread that may
 * have held it at the fork is not in this process). */
static void secrets_wipe(void)
{
	for (size_t i = 0; i < n_secrets; i++)
		explicit_bzero(secrets[i], strlen(secrets[i]));
}

bool lc_single_threaded(void)
{
	_cleanup_close_ int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	char buf[1024];
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* field 20 is num_threads; the comm field (2) may hold spaces */
	char *p = strrchr(buf, ')');
	int field = 2;
	for (; p && *p; p++)
		if (*p == ' ' && ++field == 20)
			return atoi(p + 1) == 1;
	return false;
}

int lc_fork_detached(const int *keep, size_t n)
{
	/* The middle process shares the caller's memory (vfork: the caller
	 * waits until it has exited): only the grandchild's fork copies the
	 * caller's page tables, and the middle's exit tears none down.  Two
	 * forks cost three such copies and teardowns, about 1 ms each where
	 * page-table work is dear (see Benchmarks), on the other core while a
	 * run's command runs (remover_start). */
	pid_t mid = vfork();
	if (mid < 0)
		return -1;
	if (mid == 0) {
		pid_t g = fork();
		if (g != 0)
			_exit(g < 0 ? 1 : 0); /* 1: no helper; the caller does the work */
		/* Nothing of the caller's but keep: not its secrets, not its
		 * stdio. */
		secrets_wipe();
		lc_stdio_to_null();
		lc_close_fds_except(keep, n);
		setsid();
		/* Not the signals the caller blocked to forward them. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		return 0;
	}
	int st = 0;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : -1;
}

/* ---- the process's heir (util.h) ---------------------------------------- */

typedef struct {
	int (*fn)(void *, int);
	void *arg;
	int keep[9]; /* the caller's keep, and the pidfd */
	size_t n;
	int null_fd;
	int pidfd;
} heir_t;

static bool heir_allowed, heir_taken;

void lc_heir_allow(void)
{
	heir_allowed = true;
}

/* System calls only, none that fails: the caller runs on meanwhile, with
 * the same errno. */
static int heir_entry(void *p)
{
	heir_t *h = p;
	for (int i = 0; i < 3; i++)
		dup2(h->null_fd, i);
	lc_close_fds_except(h->keep, h->n);
	setsid();
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	_exit(h->fn(h->arg, h->pidfd));
}

pid_t lc_heir_start(int (*fn)(void *, int), void *arg, const int *keep, size_t n)
{
	if (!heir_allowed || heir_taken || n > 8)
		return -1;
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		return -1;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	/* Its stack, and this block at the top of it: never unmapped, only
	 * the pages it touches are memory. */
	const size_t size = 8 << 20;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE,
			   -1, 0);
	if (null < 0 || stack == MAP_FAILED || mprotect(stack, 4096, PROT_NONE) < 0) {
		if (stack != MAP_FAILED)
			munmap(stack, size);
		if (null >= 0)
			close(null);
		close(pidfd);
		return -1;
	}
	heir_t *h = (heir_t *)(stack + size) - 1;
	h->fn = fn;
	h->arg = arg;
	memcpy(h->keep, keep, n * sizeof(int));
	h->keep[n] = pidfd;
	h->n = n + 1;
	h->null_fd = null;
	h->pidfd = pidfd;
	char *top = (char *)((uintptr_t)h & ~(uintptr_t)15);
	pid_t pid = clone(heir_entry, top, CLONE_VM | SIGCHLD, h);
	close(null);
	close(pidfd);
	if (pid < 0) {
		munmap(stack, size);
		return -1;
	}
	heir_taken = true;
	/* Its exit must not write into the memory it leaves to the heir:
	 * no tid to clear and wake (the heir's thread pointer is this
	 * thread's), no robust futex list to walk (as the staging process
	 * leaves pid 1's, sandbox.c). */
	syscall(SYS_set_tid_address, NULL);
	syscall(SYS_set_robust_list, NULL, sizeof(struct robust_list_head));
	return pid;
}

void lc_heir_wait(int pidfd)
{
	/* The caller's memory is let go (exit_mm) before its exit is
	 * signalled on its pidfd. */
	struct pollfd p = { pidfd, POLLIN, 0 };
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	close(pidfd);
	secrets_wipe();
}

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* linux/memfd.h, 6.3 */
#endif

int lc_memfd_noexec(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC);
	return fd;
}

int lc_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

ssize_t lc_read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int write_replace(const char *path, const void *buf, size_t len, mode_t mode, bool sync, lc_error_t **err)
{
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp.%d", path, getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", tmp);
	if (lc_write_all(fd, buf, len) < 0 || (sync && fsync(fd) < 0)) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot write %s", tmp);
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot rename %s into place", path);
	}
	return sync ? lc_fsync_parent(path, err) : 0;
}

int lc_fsync_parent(const char *path, lc_error_t **err)
{
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!dir)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot sync the directory of %s", path);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot sync directory %s", dir);
	return 0;
}

int lc_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode, lc_error_t **err)
{
	return write_replace(path, buf, len, mode, true, err);
}

int lc_write_file_replace(const char *path, const void *buf, size_t len, mode_t mode, lc_error_t **err)
{
	return write_replace(path, buf, len, mode, false, err);
}

int lc_write_file(const char *path, const char *s, lc_error_t **err)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", path);
	size_t len = strlen(s);
	ssize_t w = write(fd, s, len);
	int e = errno;
	close(fd);
	if (w < 0 || (size_t)w != len)
		return lc_error_set(err, LC_EXIT_RUNTIME, w < 0 ? e : EIO, "cannot write '%s' to %s", s, path);
	return 0;
}

int lc_read_file(const char *path, char **out, size_t *lenp, lc_error_t **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "cannot open %s", path);
	return lc_read_fd(fd, path, out, lenp, err);
}

int lc_read_fd(int fd, const char *path, char **out, size_t *lenp, lc_error_t **err)
{
	/* A regular file's size is known: one buffer of that size (and room
	 * to see its end), not one doubled from 4 KiB, each copied into the
	 * next (a 20 KiB profile touched 60 KiB of fresh heap, a page fault
	 * each 4 KiB).  It is only a hint: what is read decides. */
	struct stat st;
	size_t cap = 4096, len = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size < (off_t)(64 << 20))
		cap = (size_t)st.st_size + 2;
	char *buf = malloc(cap);
	if (!buf)
		abort();
	for (;;) {
		if (len + 1 >= cap) {
			cap *= 2;
			char *nb = realloc(buf, cap);
			if (!nb)
				abort();
			buf = nb;
		}
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot read %s", path);
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	*out = buf;
	if (lenp)
		*lenp = len;
	return 0;
}

ssize_t lc_read_small(int dirfd, const char *path, char *buf, size_t size, bool one_record)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t r = read(fd, buf + len, size - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		len += (size_t)r;
		if (one_record && len + 1 < size)
			break;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

int lc_mkdir_p(const char *path, mode_t mode, lc_error_t **err)
{
	/* Nearly always there already, or only its last part missing: one
	 * mkdir, not one for each part of the path. */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	_cleanup_free_ char *p = strdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create directory %s", p);
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create directory %s", p);
	return 0;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev, lc_error_t **err)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot stat %s", name);
	if (S_ISDIR(st.st_mode)) {
		if (st.st_dev != dev)
			return lc_error_set(err, LC_EXIT_RUNTIME, EBUSY, "refusing to remove %s: it is a mount point", name);
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, 0) == 0)
			fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", name);
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", name);
		}
		struct dirent *de;
		int r = 0;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (rm_rf_at(dirfd(d), de->d_name, dev, err) < 0) {
				r = -1;
				break;
			}
		}
		closedir(d);
		if (r < 0)
			return r;
		if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove directory %s", name);
		return 0;
	}
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove %s", name);
	return 0;
}

int lc_rm_rf(const char *path, lc_error_t **err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot stat %s", path);
	if (rm_rf_at(AT_FDCWD, path, st.st_dev, err) < 0)
		return lc_error_wrap(err, "cannot remove %s", path);
	return 0;
}

void lc_random_hex(char *out, size_t n)
{
	unsigned char raw[32];
	size_t nb = (n + 1) / 2;
	if (nb > sizeof(raw))
		nb = sizeof(raw);
	if (getrandom(raw, nb, 0) != (ssize_t)nb) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		srandom((unsigned)(ts.tv_nsec ^ getpid()));
		for (size_t i = 0; i < nb; i++)
			raw[i] = (unsigned char)random();
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++)
		out[i] = hex[(raw[i / 2] >> ((i & 1) ? 0 : 4)) & 0xf];
	out[n] = '\0';
}

/* LCRUN_TRACE=1: phase timings on stderr, for finding where start-up
 * goes.  The clock starts at the first call in lcrun; forked children
 * (staging, pid 1) inherit it, so their lines share one time line.  One
 * write(2) per line and no stdio lock: it is called in children forked
 * from a threaded process too. */
void lc_trace(const char *what)
{
	static int on = -1;
	static struct timespec t0;
	if (on < 0) {
		const char *v = getenv("LCRUN_TRACE");
		on = !v ? 0 : *v == '1' ? 1 : !strcmp(v, "cpu") ? 2 : 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
	}
	if (!on)
		return;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	char buf[192], who[32], cpu[32] = "";
	/* [pid], or [pid/tid] from a thread other than the main one (lcd's) */
	pid_t pid = getpid(), tid = gettid();
	if (tid == pid)
		snprintf(who, sizeof(who), "%d", (int)pid);
	else
		snprintf(who, sizeof(who), "%d/%d", (int)pid, (int)tid);
	if (on == 2) { /* the CPU time of the calling process so far (contrib/bench/phases --cpu) */
		struct timespec c;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
		snprintf(cpu, sizeof(cpu), " cpu %7.3f ms", (double)c.tv_sec * 1e3 + (double)c.tv_nsec / 1e6);
	}
	int n = snprintf(buf, sizeof(buf), "lcrun: trace %8.3f ms%s [%s] %s\n",
			 (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6, cpu, who, what);
	if (n > 0 && write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0) {
		/* nothing to do: tracing is best effort */
	}
}

long long lc_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long lc_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lc_parse_size(const char *s, long long *out)
{
	if (!s || !*s)
		return -1;
	errno = 0;
	char *end = NULL;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	long long mul = 1;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': mul = 1LL << 10; break;
		case 'm': case 'M': mul = 1LL << 20; break;
		case 'g': case 'G': mul = 1LL << 30; break;
		case 't': case 'T': mul = 1LL << 40; break;
		case 'b': case 'B': mul = 1; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -1;
	}
	if (v * (double)mul > 9.0e18)
		return -1;
	*out = (long long)(v * (double)mul);
	return 0;
}

json_t *lc_strv_to_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

char **lc_json_to_strv(json_t *arr)
{
	if (!json_is_array(arr))
		return NULL;
	char **v = lc_xmalloc0(sizeof(char *));
	size_t i;
	json_t *s;
	json_array_foreach(arr, i, s)
		if (json_is_string(s))
			lc_strv_push(&v, json_string_value(s));
	return v;
}

int lc_lock_file(const char *path, int op, lc_error_t **err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return lc_error_set(err, errno == EACCES ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno, "cannot open %s", path);
	while (flock(fd, op) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot lock %s", path);
	}
	return fd;
}

bool lc_pump(int from, int to)
{
	char buf[16384];
	ssize_t n = read(from, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)
		return false;
	return lc_write_all(to, buf, (size_t)n) == 0;
}

char *lc_shell_quote(const char *s)
{
	size_t n = 3;
	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	char *q = lc_xmalloc0(n), *o = q;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o = '\'';
	return q;
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void lc_strv_sort(char **v)
{
	size_t n = lc_strv_len(v);
	if (n > 1)
		qsort(v, n, sizeof(*v), strp_cmp);
}

/* On ext2/3/4, FS_TOPDIR_FL: the directories made in path are placed as
 * top-level ones, which the Orlov allocator spreads over the block groups
 * instead of packing them into path's.  It matters for the churn of
 * sandbox directories: an ext4 without a journal skips, one by one, every
 * inode of a group freed in the last minute when it allocates there (its
 * recently_deleted check), and with every sandbox's ~30 inodes made and
 * freed in one group, each allocation cost 170-830 us instead of 36-88 us
 * (a loop of ten 13-inode trees made and removed, 40 rounds).  But the
 * spreading itself searches the groups: a mkdir in a spread directory
 * took 0.21 ms, against 0.02 ms in a plain one, on this 252 GB ext4.
 * For the state directories (/run on this machine is that ext4; three
 * or four inodes a sandbox) the search cost more than the churn: spread
 * false clears the flag (1,000 runs alternated, 0.34 ms a run less, and
 * no slower at the end than at the start).  Elsewhere (tmpfs, no such
 * flag): nothing. */
void lc_dir_spread(const char *path, bool spread)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int flags = 0;
	if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0 || !(flags & FS_TOPDIR_FL) == !spread)
		return;
	flags = spread ? flags | FS_TOPDIR_FL : flags & ~FS_TOPDIR_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0) {
		/* only a placement hint */
	}
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* linux/mman.h, 5.14 */
#endif

bool lc_heap_prefault(size_t size)
{
	/* Allocations up to size from the heap, which keeps what is freed,
	 * instead of mmap per allocation; then the heap grown by size and
	 * its pages faulted in with one call. */
	if (mallopt(M_MMAP_THRESHOLD, (int)(2 * size)) != 1 || mallopt(M_TRIM_THRESHOLD, (int)(4 * size)) != 1)
		return false;
	char *p = malloc(size);
	if (!p)
		return false;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + size) & ~(pg - 1);
	bool done = b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE) == 0;
	free(p);
	return done;
}
