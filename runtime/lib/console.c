/* console.c — terminals for `lcrun exec -t`: a pty made in the sandbox's
 * own devpts, raw mode on the caller's terminal, fd passing. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "console.h"
#include "sync.h"
#include "util.h"

int lc_tty_raw(int fd, struct termios *saved)
{
	if (!isatty(fd))
		return 1;
	if (tcgetattr(fd, saved) < 0)
		return -1;
	struct termios raw = *saved;
	cfmakeraw(&raw);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	return tcsetattr(fd, TCSADRAIN, &raw) < 0 ? -1 : 0;
}

void lc_tty_restore(int fd, const struct termios *saved)
{
	tcsetattr(fd, TCSADRAIN, saved);
}

int lc_pty_open(int *master, int *slave, lc_error_t **err)
{
	/* /dev/ptmx is a symlink into the sandbox's devpts; whoever is root
	 * in the sandbox could replace it, so check what was opened. */
	_cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (m < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /dev/ptmx in the sandbox");
	struct stat st;
	if (fstat(m, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 || minor(st.st_rdev) != 2)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "/dev/ptmx in the sandbox is not the pty multiplexer");
	int unlock = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot unlock the pty");
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open the pty's terminal");
	int fl = fcntl(m, F_GETFL);
	fcntl(m, F_SETFL, fl & ~O_NONBLOCK);
	*master = lc_steal_fd(m);
	*slave = s;
	return 0;
}

int lc_send_fd(int sock, const void *data, size_t len, int fd, int flags)
{
	struct iovec iov = { (void *)data, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL | flags) == (ssize_t)len ? 0 : -1;
}

int lc_msg_send_fd(int sock, int type, int a, int fd)
{
	lc_msg_t m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	m.a = a;
	return lc_send_fd(sock, &m, sizeof(m), fd, 0);
}

ssize_t lc_recv_fd(int sock, void *data, size_t len, int *fd, int flags)
{
	*fd = -1;
	struct iovec iov = { data, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return r;
}

int lc_msg_recv_fd(int sock, lc_msg_t *m, int *fd)
{
	ssize_t r;
	do /* ECONNRESET: as lc_msg_recv (sync.c) */
		r = lc_recv_fd(sock, m, sizeof(*m), fd, 0);
	while (r < 0 && (errno == EINTR || errno == ECONNRESET));
	if (r == 0)
		return 0;
	if (r != (ssize_t)sizeof(*m)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	m->text[sizeof(m->text) - 1] = '\0';
	return 1;
}
