/* shared.c — what N sandboxes started from one spec can make once.
 *
 * lcrun fork starts N sandboxes from one spec (lc_run_batch, batch.c).
 * Left alone, each of them would prepare the same seccomp program again,
 * make the same map-only user namespace for the idmapped lower layers
 * again, resolve the same image and look up the same host image layers
 * again, and fork a remover of its own that deletes its directory while
 * the other sandboxes are still starting.  Made once before the first,
 * those serve every sandbox; the directories go into one trash directory
 * of the batch instead, emptied by one remover in the background once
 * every sandbox has ended.
 *
 * Nothing here is shared between the sandboxes themselves: each still has
 * its own id, directory, upper, cgroup, namespaces and user namespace (the
 * idmap namespace is only the mapping lower layers are mounted with, the
 * same for every sandbox, as lcd shares it too), and installs the program
 * it would have prepared itself from the same profile and capabilities. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "console.h"
#include "hostimage.h"
#include "idmap.h"
#include "image.h"
#include "shared.h"
#include "trash.h"
#include "util.h"

int lc_run_shared_host_layers(const lc_run_shared_t *sh, const lc_spec_t *spec, bool rootless, char **skel,
			      char **etc, lc_error_t **err)
{
	*skel = *etc = NULL;
	if (sh && sh->skel && sh->etc) {
		*skel = strdup(sh->skel);
		*etc = strdup(sh->etc);
		return 0;
	}
	uid_t ou = rootless ? geteuid() : lc_uid_base();
	gid_t og = rootless ? getegid() : (gid_t)lc_uid_base();
	if (lc_hostimage_skel(skel, rootless, err) < 0)
		return -1;
	return lc_hostimage_etc(*skel, spec, ou, og, etc, err);
}

int lc_run_shared_new(const lc_spec_t *spec, lc_run_shared_t **out, lc_error_t **err)
{
	_cleanup_free_ char *trash = lc_trash_dir();
	lc_run_shared_t *sh = lc_xmalloc0(sizeof(*sh));
	sh->idmap_userns_fd = sh->trash_fd = -1;
	sh->hold[0] = sh->hold[1] = -1;
	sh->owner = getpid();
	*out = NULL;
	if (lc_seccomp_prepare_caps(spec->seccomp, spec->caps, &sh->prog, err) < 0)
		goto fail;
	/* the image and, when it runs on the host image, that image's layers */
	bool host = !spec->rootfs;
	if (spec->image) {
		if (lc_image_resolve(spec->image, &sh->img, err) < 0)
			goto fail;
		host = sh->img->base_host;
	}
	if (host && lc_run_shared_host_layers(NULL, spec, geteuid() != 0, &sh->skel, &sh->etc, err) < 0)
		goto fail;
	if (geteuid() == 0) {
		sh->idmap_userns_fd = lc_idmap_userns(0, lc_uid_base(), 0, (gid_t)lc_uid_base(), lc_uid_count(), err);
		if (sh->idmap_userns_fd < 0)
			goto fail;
	}
	/* trash/batch-RANDOM (0700 beside sandboxes/, so a rename reaches it),
	 * locked for as long as sandboxes may put things there: lcrun gc
	 * leaves a locked entry alone and removes one whose holder died. */
	if (mkdir(trash, 0700) < 0 && errno != EEXIST) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", trash);
		goto fail;
	}
	char tag[13];
	lc_random_hex(tag, 12);
	sh->trash = lc_strdup_printf("%s/" LC_BATCH_TRASH_PREFIX "%s", trash, tag);
	if (mkdir(sh->trash, 0700) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", sh->trash);
		free(sh->trash);
		sh->trash = NULL;
		goto fail;
	}
	sh->trash_fd = open(sh->trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sh->trash_fd < 0 || flock(sh->trash_fd, LOCK_EX | LOCK_NB) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot lock %s", sh->trash);
		goto fail;
	}
	/* Best effort: without it the sandboxes tear their namespaces down
	 * themselves, as a run's do without a remover. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sh->hold) < 0)
		sh->hold[0] = sh->hold[1] = -1;
	*out = sh;
	return 0;
fail:
	lc_run_shared_free(sh);
	return -1;
}

int lc_run_shared_seccomp(const lc_run_shared_t *sh, lc_seccomp_prog_t *prog)
{
	*prog = sh->prog;
	prog->filter = NULL;
	if (sh->prog.filter) {
		size_t bytes = sh->prog.len * sizeof(*sh->prog.filter);
		prog->filter = lc_xmalloc0(bytes);
		memcpy(prog->filter, sh->prog.filter, bytes);
	}
	return 0;
}

int lc_run_shared_hold(const lc_run_shared_t *sh, int fd)
{
	if (!sh || sh->hold[1] < 0)
		return -1;
	/* A stream, so that the queue is bounded by bytes (a few hundred
	 * sandboxes), not by net.unix.max_dgram_qlen (10).  Never blocks: a
	 * full queue only means this one is torn down by its sandbox. */
	return lc_send_fd(sh->hold[1], "", 1, fd, MSG_DONTWAIT);
}

int lc_run_shared_trash(const lc_run_shared_t *sh, const char *sbdir, const char *id)
{
	if (!sh || !sh->trash)
		return -1;
	_cleanup_free_ char *dst = lc_strdup_printf("%s/%s", sh->trash, id);
	return rename(sbdir, dst);
}

void lc_run_shared_free(lc_run_shared_t *sh)
{
	if (!sh)
		return;
	if (sh->hold[1] >= 0)
		close(sh->hold[1]);
	if (sh->trash && sh->owner == getpid()) {
		/* One remover for the batch, at the lowest priority: it must not
		 * take the CPU from sandboxes being started meanwhile (nice 19
		 * rather than SCHED_IDLE: on a busy machine it still gets on).
		 * Threaded (or no fork possible): here and now. */
		if (lc_single_threaded())
			lc_sb_remove_detached(sh->trash, sh->trash_fd, sh->hold[0], 19, true);
		else
			lc_sb_remove_batch_now(sh->trash);
	}
	if (sh->hold[0] >= 0)
		close(sh->hold[0]);
	if (sh->trash_fd >= 0)
		close(sh->trash_fd);
	free(sh->trash);
	free(sh->skel);
	free(sh->etc);
	lc_image_resolved_free(sh->img);
	lc_seccomp_prog_free(&sh->prog);
	if (sh->idmap_userns_fd >= 0)
		close(sh->idmap_userns_fd);
	free(sh);
}
