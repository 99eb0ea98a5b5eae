/* netspare.c — spare network namespaces (see netspare.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "console.h"
#include "net.h"
#include "netspare.h"
#include "proctitle.h"
#include "sync.h"
#include "util.h"

/* The words on netspare.sock (lc_msg_t frames, one request a connection).
 * Nobody hands the holder a namespace: a process that is uid 0 without
 * privileges (a container's root with the state directory mounted in)
 * could hand over its own.  It makes every spare itself. */
enum {
	NS_CLAIM = 1, /* -> NS_FD with a namespace, or NS_NONE */
	NS_FILL,      /* the holder makes spares up to the cap -> NS_N */
	NS_QUIT,      /* -> NS_N; the holder lets its spares go and ends */
	NS_FD,
	NS_NONE,
	NS_N,         /* a = how many are kept */
};

static char *sock_path(void)
{
	return lc_strdup_printf("%s/netspare.sock", lc_run_dir());
}

static bool fill_addr(struct sockaddr_un *a)
{
	_cleanup_free_ char *p = sock_path();
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(p) >= sizeof(a->sun_path))
		return false;
	memcpy(a->sun_path, p, strlen(p));
	return true;
}

/* Host root on the other end: nobody else may hand out, or take, one. */
static bool peer_is_root(int s)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	return getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == 0;
}

/* A network namespace's fd, as the kernel says (nsfs, of type net). */
static bool is_netns(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == NSFS_MAGIC && ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET;
}

/* 100 ms for a word either way: a holder that does not answer at once is
 * no better than none, and a client that does not ask at once holds the
 * holder up. */
static void set_timeouts(int s)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100 * 1000 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int connect_holder(void)
{
	struct sockaddr_un a;
	if (geteuid() != 0 || !fill_addr(&a))
		return -1;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	set_timeouts(s);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 || !peer_is_root(s)) {
		close(s);
		return -1;
	}
	return s;
}

/* One request, its answer (*fd: what came with it, or -1). */
static int ask(int type, lc_msg_t *m, int *fd)
{
	*fd = -1;
	int s = connect_holder();
	if (s < 0)
		return -1;
	int r = lc_msg_send(s, type, 0, 0, NULL);
	if (r == 0)
		r = lc_msg_recv_fd(s, m, fd) == 1 ? 0 : -1;
	close(s);
	return r;
}

int lc_netspare_claim(void)
{
	lc_msg_t m;
	int fd;
	if (ask(NS_CLAIM, &m, &fd) < 0 || m.type != NS_FD || fd < 0 || !is_netns(fd)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* A new network namespace, its loopback up, no process left in it: made
 * by this process, which goes back to its own at once. */
static int make_netns(void)
{
	_cleanup_close_ int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0 || unshare(CLONE_NEWNET) < 0)
		return -1;
	int fd = lc_loopback_up() == 0 ? open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC) : -1;
	if (setns(own, CLONE_NEWNET) < 0) {
		/* Stuck in it: it is no spare, and this process makes none. */
		if (fd >= 0)
			close(fd);
		_exit(0);
	}
	return fd;
}

void lc_netspare_refill(lc_netspare_t *ns)
{
	lc_msg_t m;
	int fd;
	/* Answered once the spares are made: this remover's own removal,
	 * which the benchmarks and gc --wait wait for, comes after. */
	ns->hold = ask(NS_FILL, &m, &fd) < 0 && geteuid() == 0;
	if (fd >= 0)
		close(fd);
}

typedef struct {
	int fd;
	long long made_ms;
} spare_t;

/* Up to the cap, the oldest first in the array. */
static void fill(spare_t *spares, int *n)
{
	while (*n < LC_NETSPARE_CAP && (spares[*n].fd = make_netns()) >= 0)
		spares[(*n)++].made_ms = lc_now_ms();
}

/* A spare a minute old goes: what a new namespace copies from the host's
 * (net.ipv4.conf.*) is never older than that. */
static void drop_old(spare_t *spares, int *n)
{
	while (*n > 0 && lc_now_ms() - spares[0].made_ms > LC_NETSPARE_MAX_AGE_S * 1000LL) {
		close(spares[0].fd);
		memmove(spares, spares + 1, (size_t)--*n * sizeof(*spares));
	}
}

/* The holder: answers one request a connection, until idle or moved. */
static void serve(int lfd, spare_t *spares, int *n, const struct stat *bound)
{
	int idle_s = 0;
	_cleanup_free_ char *path = sock_path();
	for (;;) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int r = poll(&p, 1, 1000);
		if (r == 0) {
			struct stat st;
			/* The state directory removed, or another holder's socket
			 * put there: this one can no longer be reached. */
			if (++idle_s >= LC_NETSPARE_IDLE_S || stat(path, &st) < 0 || st.st_ino != bound->st_ino ||
			    st.st_dev != bound->st_dev)
				break;
			drop_old(spares, n);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		_cleanup_close_ int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0 || !peer_is_root(c))
			continue;
		idle_s = 0;
		set_timeouts(c);
		lc_msg_t m;
		int fd = -1;
		r = lc_msg_recv_fd(c, &m, &fd);
		if (fd >= 0)
			close(fd); /* nothing comes with a request */
		if (r != 1)
			continue;
		drop_old(spares, n);
		if (m.type == NS_CLAIM) {
			/* The oldest: none waits long for its turn. */
			if (*n > 0 && lc_msg_send_fd(c, NS_FD, 0, spares[0].fd) == 0) {
				close(spares[0].fd);
				memmove(spares, spares + 1, (size_t)--*n * sizeof(*spares));
			} else {
				lc_msg_send(c, NS_NONE, 0, 0, NULL);
			}
		} else if (m.type == NS_FILL) {
			fill(spares, n);
			lc_msg_send(c, NS_N, *n, 0, NULL);
		} else if (m.type == NS_QUIT) {
			lc_msg_send(c, NS_N, *n, 0, NULL);
			break;
		}
	}
}

void lc_netspare_hold(const lc_netspare_t *ns)
{
	if (!ns->hold)
		return;
	/* One holder a state directory: the one with the lock, for its life. */
	_cleanup_free_ char *lock = lc_strdup_printf("%s/netspare.lock", lc_run_dir());
	_cleanup_close_ int lk = lc_lock_file(lock, LOCK_EX | LOCK_NB, NULL);
	if (lk < 0)
		return;
	struct sockaddr_un a;
	if (!fill_addr(&a))
		return; /* a state directory's path too long for a socket: no spares */
	lc_proc_title("lcrun-netspare");
	/* Nothing of the caller's kept busy for its life but what it must. */
	if (chdir("/") < 0)
		return;
	spare_t spares[LC_NETSPARE_CAP];
	int n = 0;
	fill(spares, &n);
	_cleanup_close_ int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct stat bound;
	_cleanup_free_ char *path = sock_path();
	if (n > 0 && lfd >= 0) {
		/* A socket there is a dead holder's: the lock was free. */
		unlink(path);
		mode_t old = umask(077);
		int r = bind(lfd, (struct sockaddr *)&a, sizeof(a));
		umask(old);
		if (r == 0 && stat(path, &bound) == 0 && listen(lfd, 64) == 0) {
			serve(lfd, spares, &n, &bound);
			/* Gone from the path before the spares go: the next
			 * holder binds its own. */
			struct stat st;
			if (stat(path, &st) == 0 && st.st_ino == bound.st_ino && st.st_dev == bound.st_dev)
				unlink(path);
		}
	}
	for (int i = 0; i < n; i++)
		close(spares[i].fd);
}

int lc_netspare_release(void)
{
	lc_msg_t m;
	int fd;
	int r = ask(NS_QUIT, &m, &fd);
	if (fd >= 0)
		close(fd);
	return r == 0 && m.type == NS_N ? 1 : 0;
}
