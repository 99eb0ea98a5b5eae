/* sync.h — messages between lcrun, the staging process and pid 1 over
 * their socket pair (sync.c).  Not part of the stable API. */
#ifndef LC_SYNC_H
#define LC_SYNC_H

#include "error.h"

enum {
	LC_MSG_USERNS = 1, /* staging -> parent: user namespace made (write the maps unless joined) */
	LC_MSG_GO,         /* parent -> staging: directory made; maps written; network set up */
	LC_MSG_PID,        /* staging -> parent: host pid of pid 1 in a */
	LC_MSG_READY,      /* pid 1 -> parent: root set up, command starting */
	LC_MSG_ERROR,      /* any -> parent: serialized lc_error_t in text */
	LC_MSG_EXIT,       /* pid 1 -> parent: command ended: a = code, b = signal */
	LC_MSG_STAGING,    /* forked child -> threaded parent: host pid of the staging process */
	LC_MSG_DISK,       /* parent -> staging, before the first GO: the disk's mount (fd) */
			   /* it cloned into the cgroup in a (-1: none, it is the staging process) */
};
typedef struct lc_msg {
	int type;
	int a, b;
	char text[2048];
} lc_msg_t;
int lc_msg_send(int fd, int type, int a, int b, const char *text);
int lc_msg_send_error(int fd, const lc_error_t *e);
/* 1 on a message, 0 on EOF, -1 on error. */
int lc_msg_recv(int fd, lc_msg_t *m);

#endif
