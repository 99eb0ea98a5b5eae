/* console.h — terminals, ptys and fds passed over sockets (console.c).  Not
 * part of the stable API. */
#ifndef LC_CONSOLE_H
#define LC_CONSOLE_H

#include <sys/types.h>
#include <termios.h>

#include "error.h"
#include "sync.h"

/* Put fd's terminal in raw mode; saved gets the old settings.  0 if fd is
 * a terminal and was changed, 1 if it is no terminal, -1 on error. */
int lc_tty_raw(int fd, struct termios *saved);
void lc_tty_restore(int fd, const struct termios *saved);
/* Open a new pty in the current mount namespace's /dev/pts (through
 * /dev/ptmx, checked to be the real ptmx): master and peer (slave). */
int lc_pty_open(int *master, int *slave, lc_error_t **err);
/* An lc_msg (type, a) carrying one fd (SCM_RIGHTS), and the receiving side of any
 * lc_msg that may carry one (*fd = -1 when none); returns as lc_msg_recv. */
int lc_msg_send_fd(int sock, int type, int a, int fd);
/* Any bytes with one fd (the pty master to an OCI console socket). */
/* flags: sendmsg's, besides MSG_NOSIGNAL (MSG_DONTWAIT: never block). */
int lc_send_fd(int sock, const void *data, size_t len, int fd, int flags);
/* Its receiving side: up to len bytes and *fd (-1 when none came); flags
 * are recvmsg's (MSG_CMSG_CLOEXEC always); returns recvmsg's result. */
ssize_t lc_recv_fd(int sock, void *data, size_t len, int *fd, int flags);
int lc_msg_recv_fd(int sock, lc_msg_t *m, int *fd);

#endif
