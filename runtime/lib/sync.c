/* sync.c — fixed-size messages over the SOCK_SEQPACKET pair that links
 * lcrun, the staging process and the sandbox's pid 1. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "sync.h"

int lc_msg_send(int fd, int type, int a, int b, const char *text)
{
	lc_msg_t m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	m.a = a;
	m.b = b;
	if (text)
		snprintf(m.text, sizeof(m.text), "%s", text);
	for (;;) {
		ssize_t w = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		return w == (ssize_t)sizeof(m) ? 0 : -1;
	}
}

int lc_msg_send_error(int fd, const lc_error_t *e)
{
	char buf[2048];
	lc_error_to_buf(e, buf, sizeof(buf));
	return lc_msg_send(fd, LC_MSG_ERROR, 0, 0, buf);
}

int lc_msg_recv(int fd, lc_msg_t *m)
{
	for (;;) {
		ssize_t r = recv(fd, m, sizeof(*m), 0);
		/* ECONNRESET: the last holder of the other end closed it with
		 * a message of ours unread (pid 1 failing before it read its
		 * GO).  Reported once, ahead of what it had sent: read on. */
		if (r < 0 && (errno == EINTR || errno == ECONNRESET))
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
		if (r != (ssize_t)sizeof(*m))
			return -1;
		m->text[sizeof(m->text) - 1] = '\0';
		return 1;
	}
}
