/* idmap.c — user namespaces whose only use is their id maps:
 * mount_setattr(MOUNT_ATTR_IDMAP) takes one to say how an idmapped mount
 * shows the ids of its files.  Lower layers use the sandboxes' range
 * (0 -> uid_base, uid_count ids); an idmapped bind maps its source's owner
 * alone onto the sandbox's user.  Making one costs a short-lived process,
 * so they are kept for the life of the caller (lcd makes many sandboxes)
 * and handed out as dup'ed fds. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "idmap.h"
#include "util.h"

typedef struct {
	uid_t uid_from, uid_to;
	gid_t gid_from, gid_to;
	unsigned count;
	int fd;
} userns_entry_t;

#define MAX_CACHED 32
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static userns_entry_t cache[MAX_CACHED];
static size_t n_cached;
static pid_t cache_pid; /* a forked child may have closed the cached fds */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* lcd forks (monitors, tasks' staging processes) from threads while other
 * threads may be inside lc_idmap_userns: a child must not inherit
 * cache_lock held by a thread that does not exist in it, or its own first
 * call would wait forever.  fork() takes the lock around the copy. */
static void lock_cache(void)
{
	pthread_mutex_lock(&cache_lock);
}

static void unlock_cache(void)
{
	pthread_mutex_unlock(&cache_lock);
}

static void register_atfork(void)
{
	pthread_atfork(lock_cache, unlock_cache, unlock_cache);
}

/* The child only holds the namespace while its maps are written: it
 * shares the caller's memory (CLONE_VM: no copy of the page tables, most
 * of what a fork costs here) and runs nothing but pause() on a stack of
 * its own.  clone itself makes the namespace, so there is no word to wait
 * for before writing the maps; SIGKILL ends the child. */
static int hold_userns(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

/* child: where to leave the killed child's pid for the caller to reap
 * (NULL: reaped here, which waits for it to be scheduled and die). */
static int make_userns(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count, pid_t *child,
		       lc_error_t **err)
{
	static const size_t stack_size = 16384;
	_cleanup_free_ char *stack = malloc(stack_size);
	if (!stack)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot create a user namespace for idmapped mounts");
	pid_t pid = clone(hold_userns, stack + stack_size, CLONE_VM | CLONE_NEWUSER | SIGCHLD, NULL);
	if (pid < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a user namespace for idmapped mounts%s",
				    errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
	int fd = -1;
	char path[64], map[64];
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	snprintf(map, sizeof(map), "%u %u %u\n", (unsigned)uid_from, (unsigned)uid_to, count);
	if (lc_write_file(path, map, err) == 0) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
		snprintf(map, sizeof(map), "%u %u %u\n", (unsigned)gid_from, (unsigned)gid_to, count);
		if (lc_write_file(path, map, err) == 0) {
			snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", path);
		}
	}
	kill(pid, SIGKILL);
	/* Left to the caller to reap: the child may be killed a moment after
	 * its stack is freed below, which it never touches again (it sleeps
	 * in pause(), or has not run yet; SIGKILL has no handler, so the
	 * kernel writes no frame there on its way out). */
	if (child && fd >= 0) {
		*child = pid;
		return fd;
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return fd;
}

int lc_userns_new(uid_t base, unsigned count, pid_t *child, lc_error_t **err)
{
	return make_userns(0, base, 0, (gid_t)base, count, child, err);
}

int lc_idmap_userns(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count, lc_error_t **err)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&cache_lock);
	if (cache_pid != getpid()) {
		n_cached = 0; /* not closed: their numbers may be in use for something else now */
		cache_pid = getpid();
	}
	for (size_t i = 0; i < n_cached; i++) {
		userns_entry_t *e = &cache[i];
		if (e->uid_from == uid_from && e->uid_to == uid_to && e->gid_from == gid_from && e->gid_to == gid_to &&
		    e->count == count) {
			int fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 3);
			pthread_mutex_unlock(&cache_lock);
			if (fd < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot duplicate a user namespace fd");
			return fd;
		}
	}
	int fd = make_userns(uid_from, uid_to, gid_from, gid_to, count, NULL, err);
	if (fd >= 0 && n_cached < MAX_CACHED) {
		int keep = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (keep >= 0)
			cache[n_cached++] = (userns_entry_t){ uid_from, uid_to, gid_from, gid_to, count, keep };
	}
	pthread_mutex_unlock(&cache_lock);
	return fd;
}
