/* trash.c — removing sandbox directories off the caller's path: trash/
 * (lc_lib_dir()'s) takes a sandbox directory in one rename, trash-state
 * (lc_run_dir()'s) its state directory, and a remover deletes them there
 * while it holds a flock on them; lcrun gc removes what a killed remover
 * left. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proctitle.h"
#include "state.h"
#include "trash.h"
#include "util.h"

void lc_sb_remove_now(const char *dir)
{
	/* The overlay may still be mounted for a moment in the dying
	 * namespaces: rmdir then reports EBUSY. */
	for (int i = 0; i < 200; i++) {
		lc_error_t *e = NULL;
		if (lc_rm_rf(dir, &e) == 0)
			break;
		/* out of fds (lcrun's RLIMIT_NOFILE): trying again does not
		 * help, and the error that made the run fail is the one to
		 * say; lcrun gc removes the directory of a dead sandbox */
		if (e && (e->errnum == EMFILE || e->errnum == ENFILE)) {
			lc_error_free(e);
			break;
		}
		if (i == 199)
			lc_error_print(e, "lcrun: warning");
		lc_error_free(e);
		usleep(i < 20 ? 500 : 5000);
	}
}

char *lc_trash_dir(void)
{
	return lc_strdup_printf("%s/trash", lc_lib_dir());
}

/* A fresh name for sandbox id's directory in trash/ (made if need be), or
 * NULL when there is no trash/ to move it to. */
char *lc_trash_entry(const char *id)
{
	_cleanup_free_ char *trash = lc_trash_dir();
	if (mkdir(trash, 0700) < 0 && errno != EEXIST)
		return NULL;
	char tag[9];
	lc_random_hex(tag, 8);
	return lc_strdup_printf("%s/%s.%s", trash, id, tag);
}

struct rm_job {
	char *dir;
	int lock_fd;
};

static void *rm_thread(void *arg)
{
	struct rm_job *j = arg;
	lc_sb_remove_now(j->dir);
	close(j->lock_fd);
	free(j->dir);
	free(j);
	return NULL;
}

/* Removing the sandbox directory file by file costs about 3 ms on ext4
 * here even when it holds only what lcrun made (24 entries; more with a
 * big upper layer), all of it on the caller's path.  Instead: one rename
 * into trash/ (0700, beside sandboxes/) and a remover that deletes it
 * there, holding a flock on it meanwhile; lcrun gc removes what such a
 * remover left (killed: no lock held).  Single-threaded, the remover is a
 * detached grandchild (it runs ordinary library code); from a threaded
 * caller (lcd), a detached thread.  -1: nothing moved, remove it now. */
int lc_sb_remove_later(const char *dir, const char *id)
{
	_cleanup_free_ char *dst = lc_trash_entry(id);
	if (!dst)
		return -1;
	if (rename(dir, dst) < 0)
		return -1;
	int fd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (fd >= 0)
			close(fd);
		lc_sb_remove_now(dst);
		return 0;
	}
	if (lc_single_threaded()) {
		lc_sb_remove_detached(dst, fd, -1, 0, false);
		close(fd); /* the lock stays with the remover */
		return 0;
	}
	struct rm_job *j = lc_xmalloc0(sizeof(*j));
	j->dir = lc_steal(dst);
	j->lock_fd = fd;
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, rm_thread, j) != 0)
		rm_thread(j);
	pthread_attr_destroy(&a);
	return 0;
}

/* A batch's trash holds its sandboxes' directories under their ids; the
 * state directories of the same ids went into trash-state (state_to_trash)
 * and go first, while the batch's entry is still locked: whoever waits
 * for the trash (gc --wait) waits for them too. */
void lc_sb_remove_batch_now(const char *dir)
{
	lc_state_trash_rm_ids(dir);
	lc_sb_remove_now(dir);
}

void lc_sb_remove_detached(const char *dir, int lock_fd, int hold_fd, int nice, bool batch)
{
	int keep[2] = { lock_fd, hold_fd };
	int r = lc_fork_detached(keep, hold_fd >= 0 ? 2 : 1);
	if (r == 0) {
		lc_proc_title("lcrun-rm");
		if (nice && setpriority(PRIO_PROCESS, 0, nice) < 0) {
			/* the default priority will do */
		}
		if (hold_fd >= 0)
			close(hold_fd); /* the namespaces held for it go now */
		(batch ? lc_sb_remove_batch_now : lc_sb_remove_now)(dir);
		_exit(0);
	}
	if (r < 0)
		(batch ? lc_sb_remove_batch_now : lc_sb_remove_now)(dir);
}

char *lc_state_trash(const char *id)
{
	/* Not "trash": that is LCRUN_ROOT's, which may be the same directory. */
	return lc_strdup_printf("%s/trash-state%s%s", lc_run_dir(), id ? "/" : "", id ? id : "");
}

void lc_state_trash_rm_ids(const char *dir)
{
	_cleanup_dir_ DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!lc_id_valid(de->d_name))
			continue;
		_cleanup_free_ char *st = lc_state_trash(de->d_name);
		lc_rm_rf(st, NULL);
	}
}
