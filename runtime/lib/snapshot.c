/* snapshot.c — a sandbox's overlay uppers saved as a new image.
 *
 * The sandbox is frozen (cgroup.freeze) while its uppers are read, so the
 * layer is one consistent moment of its tree; it is thawed afterwards even
 * when writing fails, and left frozen only if it was paused before.  A
 * snapshot holds the sandbox's freeze.lock (state directory) from before
 * it freezes until after it thaws: a snapshot that is killed leaves a
 * frozen cgroup whose lock nobody holds, which the next snapshot and lcrun
 * gc thaw (lc_sandbox_thaw_left); snapshots of one sandbox take turns. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "disk.h"
#include "image.h"
#include "json.h"
#include "paths.h"
#include "snapshot.h"
#include "state.h"
#include "util.h"

/* The sandbox's freeze.lock, flocked (op: LOCK_EX, with LOCK_NB or not). */
static int freeze_lock(const char *id, int op)
{
	_cleanup_free_ char *sd = lc_state_dir(id);
	_cleanup_free_ char *p = lc_strdup_printf("%s/freeze.lock", sd);
	_cleanup_close_ int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	while (flock(fd, op) < 0)
		if (errno != EINTR)
			return -1;
	return lc_steal_fd(fd);
}

static bool cgroup_frozen(const char *cg)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.freeze", cg);
	_cleanup_free_ char *s = NULL;
	if (lc_read_file(p, &s, NULL, NULL) < 0)
		return false;
	return s[0] == '1';
}

static int sync_uppers(const lc_upper_t *uppers, size_t n, lc_error_t **err)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int fd = open(uppers[i].dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return lc_error_set(err, errno == ENOENT ? LC_EXIT_STATE : LC_EXIT_RUNTIME, errno,
					    "upper %s of the sandbox", uppers[i].dir);
		if (syncfs(fd) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot sync %s", uppers[i].dir);
	}
	return 0;
}

int lc_sandbox_snapshot(const char *id_or_name, const char *new_name, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *st = lc_state_open(id_or_name, &id, err);
	if (!st)
		return -1;
	json_t *ups = json_object_get(st, "uppers");
	size_t n = json_array_size(ups);
	if (!n)
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s has no upper layer to snapshot", id);
	/* Uppers on the sandbox's own disk: seen through a mount of it here
	 * (the same filesystem where the sandbox runs), never the host's. */
	json_t *disk = json_object_get(st, "disk");
	_cleanup_close_ int dfd = -1;
	if (disk && lc_disk_mount(lc_json_str(disk, "image"),
				  json_integer_value(json_object_get(disk, "size")), 0, &dfd, err) < 0)
		return lc_error_wrap(err, "cannot snapshot sandbox %s", id);
	_cleanup_strv_ char **on_disk = NULL;
	lc_upper_t *uppers = lc_xmalloc0(n * sizeof(*uppers));
	for (size_t i = 0; i < n; i++) {
		json_t *u = json_array_get(ups, i);
		uppers[i].dir = lc_json_str(u, "path");
		uppers[i].prefix = lc_json_str(u, "prefix");
		if (!uppers[i].prefix)
			uppers[i].prefix = "";
		if (!uppers[i].dir) {
			free(uppers);
			return lc_error_set(err, LC_EXIT_INVALID, 0, "state of sandbox %s: an upper without a path", id);
		}
		if (dfd >= 0) {
			_cleanup_free_ char *p = lc_strdup_printf("/proc/self/fd/%d/%s", dfd, strrchr(uppers[i].dir, '/') + 1);
			lc_strv_push(&on_disk, p);
		}
	}
	for (size_t i = 0; i < n && on_disk; i++)
		uppers[i].dir = on_disk[i];
	/* the manifest it ran on (a name may have moved since), else the name */
	const char *image = lc_json_str(st, "image_digest");
	if (!image)
		image = lc_json_str(st, "image");
	const char *rootfs = lc_json_str(st, "rootfs");
	bool host = json_is_true(json_object_get(st, "host_image"));
	json_t *ub = json_object_get(st, "uid_base"), *gb = json_object_get(st, "gid_base");
	uid_t uid_base = json_is_integer(ub) ? (uid_t)json_integer_value(ub) : lc_uid_base();
	gid_t gid_base = json_is_integer(gb) ? (gid_t)json_integer_value(gb) : (gid_t)uid_base;
	const char *status = lc_json_str(st, "status");
	const char *cg = lc_json_str(st, "cgroup");
	bool running = status && strcmp(status, "exited") && strcmp(status, "stopped");

	bool froze = false;
	int ret = -1;
	_cleanup_close_ int lk = -1;
	if (running && cg && access(cg, F_OK) == 0) {
		lk = freeze_lock(id, LOCK_EX);
		if (lk < 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot lock sandbox %s against another snapshot", id);
			goto out;
		}
		/* frozen while its state says running: a killed snapshot's */
		if (!cgroup_frozen(cg) || strcmp(status, "paused")) {
			if (lc_cgroup_freeze(cg, true, err) < 0) {
				lc_cgroup_freeze(cg, false, NULL);
				lc_error_wrap(err, "cannot freeze sandbox %s", id);
				goto out;
			}
			froze = true;
			LC_FAULT("snapshot-frozen");
		}
	} else if (running && cg) {
		/* the cgroup is gone: the sandbox ended while its state says running */
		running = false;
	} else if (running) {
		lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s runs without a cgroup to freeze; stop it first", id);
		goto out;
	}
	if (sync_uppers(uppers, n, err) < 0)
		goto out;
	ret = lc_image_commit_ex(image, host, rootfs, uppers, n, uid_base, gid_base, new_name, NULL, NULL, NULL, err);
	if (ret < 0)
		lc_error_wrap(err, "cannot snapshot sandbox %s", id);
	else
		LC_FAULT("snapshot-committed");
out:
	if (froze) {
		lc_error_t *e2 = NULL;
		if (lc_cgroup_freeze(cg, false, &e2) < 0) {
			if (ret == 0) {
				/* the image is made, but the sandbox stays stopped: say so */
				lc_error_wrap(&e2, "image %s made, but sandbox %s could not be thawed", new_name, id);
				if (err && !*err) {
					*err = e2;
					e2 = NULL;
				}
				ret = -1;
			}
			lc_error_free(e2);
		}
	}
	free(uppers);
	return ret;
}

int lc_sandbox_thaw_left(const char *id, json_t *st)
{
	const char *status = json_string_value(json_object_get(st, "status"));
	const char *cg = json_string_value(json_object_get(st, "cgroup"));
	if (!status || strcmp(status, "running") || !cg || !cgroup_frozen(cg))
		return 0;
	_cleanup_close_ int lk = freeze_lock(id, LOCK_EX | LOCK_NB);
	if (lk < 0)
		return 0; /* a snapshot is at it */
	return lc_cgroup_freeze(cg, false, NULL) == 0 ? 1 : 0;
}
