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

#include "lifecycle.h"
#include "netspare.h"
#include "sandbox_priv.h"
#include "util.h"

/* The words on netspare.sock (lc_msg_t frames, one request a connection). */
enum {
	NS_CLAIM = 1, /* -> NS_FD with a namespace, or NS_NONE */
	NS_COUNT,     /* -> NS_N, a = how many are kept */
	NS_PUT,       /* with a namespace -> NS_KEPT, or NS_FULL (the sender's to close) */
	NS_QUIT,      /* -> NS_KEPT; the holder lets its spares go and ends */
	NS_FD,
	NS_NONE,
	NS_N,
	NS_KEPT,
	NS_FULL,
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

static int connect_holder(void)
{
	struct sockaddr_un a;
	if (geteuid() != 0 || !fill_addr(&a))
		return -1;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	/* A holder that does not answer at once is no better than none. */
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100 * 1000 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 || !peer_is_root(s)) {
		close(s);
		return -1;
	}
	return s;
}

/* One request, its answer (*fd: what came with it, or -1). */
static int ask(int type, int passfd, lc_msg_t *m, int *fd)
{
	*fd = -1;
	int s = connect_holder();
	if (s < 0)
		return -1;
	int r = passfd >= 0 ? lc_msg_send_fd(s, type, 0, passfd) : lc_msg_send(s, type, 0, 0, NULL);
	if (r == 0)
		r = lc_msg_recv_fd(s, m, fd) == 1 ? 0 : -1;
	close(s);
	return r;
}

int lc_netspare_claim(void)
{
	lc_msg_t m;
	int fd;
	if (ask(NS_CLAIM, -1, &m, &fd) < 0 || m.type != NS_FD || fd < 0 || !is_netns(fd)) {
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
	ns->hold = false;
	lc_msg_t m;
	int fd;
	if (ask(NS_COUNT, -1, &m, &fd) < 0 || m.type != NS_N) {
		if (fd >= 0)
			close(fd);
		ns->hold = geteuid() == 0;
		return;
	}
	for (int n = m.a; n < LC_NETSPARE_CAP; n++) {
		_cleanup_close_ int spare = make_netns();
		int got;
		if (spare < 0 || ask(NS_PUT, spare, &m, &got) < 0 || m.type != NS_KEPT)
			return;
	}
}

/* The holder: answers one request a connection, until idle or moved. */
static void serve(int lfd, int *spares, int *count, const struct stat *bound)
{
	int n = *count;
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
		struct timeval tv = { .tv_sec = 0, .tv_usec = 100 * 1000 };
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		lc_msg_t m;
		int fd = -1;
		if (lc_msg_recv_fd(c, &m, &fd) != 1) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		switch (m.type) {
		case NS_CLAIM:
			if (n > 0 && lc_msg_send_fd(c, NS_FD, 0, spares[n - 1]) == 0) {
				close(spares[--n]);
			} else {
				lc_msg_send(c, NS_NONE, 0, 0, NULL);
			}
			break;
		case NS_COUNT:
			lc_msg_send(c, NS_N, n, 0, NULL);
			break;
		case NS_PUT:
			if (fd >= 0 && n < LC_NETSPARE_CAP && is_netns(fd)) {
				spares[n++] = fd;
				fd = -1;
				lc_msg_send(c, NS_KEPT, 0, 0, NULL);
			} else {
				lc_msg_send(c, NS_FULL, 0, 0, NULL);
			}
			break;
		case NS_QUIT:
			lc_msg_send(c, NS_KEPT, 0, 0, NULL);
			*count = n;
			return;
		default:
			break;
		}
		if (fd >= 0)
			close(fd);
	}
	*count = n;
}

void lc_netspare_hold(const lc_netspare_t *ns)
{
	if (!ns->hold)
		return;
	/* One holder a state directory: the one with the lock, for its life. */
	_cleanup_free_ char *lock = lc_strdup_printf("%s/netspare.lock", lc_run_dir());
	_cleanup_close_ int lk = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
		return;
	lc_proc_title("lcrun-netspare");
	int spares[LC_NETSPARE_CAP], n = 0;
	while (n < LC_NETSPARE_CAP && (spares[n] = make_netns()) >= 0)
		n++;
	struct sockaddr_un a;
	_cleanup_close_ int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct stat bound;
	_cleanup_free_ char *path = sock_path();
	if (n > 0 && lfd >= 0 && fill_addr(&a)) {
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
		close(spares[i]);
}

int lc_netspare_release(void)
{
	lc_msg_t m;
	int fd;
	int r = ask(NS_QUIT, -1, &m, &fd);
	if (fd >= 0)
		close(fd);
	return r == 0 && m.type == NS_KEPT ? 1 : 0;
}
