/* disk.c — a sandbox's upper layer on a sized filesystem of its own (see
 * disk.h).
 *
 * Why a filesystem image and not a project quota: a quota needs the
 * filesystem under LCRUN_ROOT to have project quotas on (ext4's `project`
 * feature and `prjquota`, or XFS's `pquota`), which the usual ext4 root of
 * a Debian host does not, and turning them on is a reformat or a remount.
 * A size-limited tmpfs costs nothing to make but holds the upper in
 * memory (charged to the sandbox's memory cgroup) and loses it at a stop.
 * An ext4 image works on any host with loop devices, keeps the upper on
 * disk across stop and start, and its cost at start-up is a copy of an
 * empty filesystem's few hundred KiB of metadata, a loop device and a
 * mount (contrib/bench/startup --disk; docs/design/sandbox.md).
 *
 * The template for a size is made once, by mkfs.ext4 (lazy inode tables
 * and journal, nothing reserved for root), under a lock, and renamed into
 * place whole.  A sandbox's image is a sparse copy of its data (a reflink
 * where the filesystem has them).  The loop device is configured with
 * LO_FLAGS_AUTOCLEAR (it lets go of the file when the filesystem's last
 * mount goes) and direct I/O where the file allows (its pages are not
 * cached twice); the filesystem is mounted with noinit_itable, so that the
 * kernel never fills the sparse inode tables with zeroes.
 *
 * A disk that goes with its run (lcrun run, fork, a task's sandbox) has no
 * journal: a crash loses nothing that would have been kept, and its mount
 * starts no journal thread, its unmount waits for no commit.  A created
 * sandbox's, which a start may mount again after a host crash, has one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk.h"
#include "lcrun.h"
#include "util.h"

extern char **environ;

int lc_disk_check(long long size, const char *dir, lc_error_t **err)
{
	if (size < LC_DISK_MIN)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--disk %lld MiB: at least %lld MiB", size >> 20,
				    LC_DISK_MIN >> 20);
	struct statvfs sv;
	if (statvfs(dir, &sv) == 0 && (unsigned long long)size > (unsigned long long)sv.f_bavail * sv.f_frsize)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOSPC, "--disk %lld MiB: only %llu MiB free on %s",
				    size >> 20, (unsigned long long)sv.f_bavail * sv.f_frsize >> 20, dir);
	return 0;
}

/* mkfs.ext4 on path; its first line of output in the error. */
static int make_fs(const char *path, bool journal, lc_error_t **err)
{
	_cleanup_close_ int out = memfd_create("mkfs", MFD_CLOEXEC);
	if (out < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "memfd");
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096", "-L", "lcrun-sandbox", "-E",
			 "lazy_itable_init=1,lazy_journal_init=1,nodiscard", "-O", journal ? "has_journal" : "^has_journal",
			 (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_adddup2(&fa, out, 2);
	char *envp[] = { "PATH=/usr/sbin:/sbin:/usr/bin:/bin", "LANG=C", NULL };
	pid_t pid;
	int r = posix_spawnp(&pid, "mkfs.ext4", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "--disk needs mkfs.ext4 (e2fsprogs)");
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	char buf[512] = "";
	ssize_t n = pread(out, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return lc_error_set(err, LC_EXIT_RUNTIME, 0, "mkfs.ext4 %s failed: %s", path, *buf ? buf : "no message");
}

/* The empty filesystem at path, made under the lock of its directory
 * (another process may have made it meanwhile) and renamed into place. */
static int template_make(const char *dir, const char *path, long long size, bool journal, lc_error_t **err)
{
	_cleanup_free_ char *lockp = lc_strdup_printf("%s/.lock", dir);
	_cleanup_free_ char *tmp = lc_strdup_printf("%s/.%s.%d", dir, strrchr(path, '/') + 1, (int)getpid());
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_close_ int lk = lc_lock_file(lockp, LOCK_EX, err);
	if (lk < 0)
		return -1;
	if (access(path, F_OK) == 0)
		return 0;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, size) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (make_fs(tmp, journal, err) < 0) {
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot store %s", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The empty filesystem of size bytes, made once: its path. */
static char *template_for(long long size, bool journal, lc_error_t **err)
{
	_cleanup_free_ char *dir = lc_strdup_printf("%s/disks", lc_lib_dir());
	char *path = lc_strdup_printf("%s/ext4-%lld%s.img", dir, size, journal ? "" : "-nojournal");
	if (access(path, F_OK) == 0 || template_make(dir, path, size, journal, err) == 0)
		return path;
	free(path);
	return NULL;
}

/* The data of in (holes stay holes) into out, size bytes long. */
static int copy_sparse(int in, int out, long long size)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	if (ftruncate(out, size) < 0)
		return -1;
	off_t pos = 0;
	for (;;) {
		off_t d = lseek(in, pos, SEEK_DATA);
		if (d < 0)
			return errno == ENXIO ? 0 : -1;
		off_t h = lseek(in, d, SEEK_HOLE);
		if (h < 0)
			return -1;
		loff_t a = d, b = d;
		while (a < h) {
			ssize_t n = copy_file_range(in, &a, out, &b, (size_t)(h - a), 0);
			if (n <= 0)
				return -1;
		}
		pos = h;
	}
}

static int make_image(const char *img, long long size, bool journal, lc_error_t **err)
{
	_cleanup_free_ char *tpl = template_for(size, journal, err);
	if (!tpl)
		return -1;
	_cleanup_close_ int in = open(tpl, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (in < 0 || out < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s", img);
	if (copy_sparse(in, out, size) < 0) {
		int e = errno;
		unlink(img);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot copy %s to %s", tpl, img);
	}
	return 0;
}

/* Is dev a loop device backed by the file st describes? */
static bool loop_holds(const char *dev, const struct stat *st)
{
	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
	struct loop_info64 li;
	return fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && li.lo_inode == st->st_ino &&
	       li.lo_device == st->st_dev;
}

/* The bound loop device backed by the file st describes, or NULL. */
static char *loop_of(const struct stat *st)
{
	_cleanup_dir_ DIR *d = opendir("/sys/block");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4))
			continue;
		char bound[300];
		snprintf(bound, sizeof(bound), "/sys/block/%s/loop", de->d_name);
		if (access(bound, F_OK) < 0)
			continue;
		char *dev = lc_strdup_printf("/dev/%s", de->d_name);
		if (loop_holds(dev, st))
			return dev;
		free(dev);
	}
	return NULL;
}

/* Attach the file ifd to a free loop device that lets go of it with its
 * last user: its path, and in *hold an fd of it (the caller closes it once
 * something else holds the device). */
static char *attach(int ifd, const char *img, int *hold, lc_error_t **err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "--disk: cannot open /dev/loop-control (is the loop module loaded?)");
		return NULL;
	}
	for (int tries = 0;; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "--disk: no free loop device");
			return NULL;
		}
		char *dev = lc_strdup_printf("/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		struct loop_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)ifd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
		snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", img);
		int r = lfd >= 0 ? ioctl(lfd, LOOP_CONFIGURE, &cfg) : -1;
		if (r < 0 && lfd >= 0 && errno == EINVAL) { /* no direct I/O on this file */
			cfg.info.lo_flags &= ~(unsigned)LO_FLAGS_DIRECT_IO;
			r = ioctl(lfd, LOOP_CONFIGURE, &cfg);
		}
		if (r == 0) {
			*hold = lc_steal_fd(lfd);
			return dev;
		}
		int e = errno;
		free(dev);
		if (lfd >= 0 && e == EBUSY && tries < 20) /* another process took it first */
			continue;
		lc_error_set(err, LC_EXIT_RUNTIME, e, "--disk: cannot attach %s to a loop device", img);
		return NULL;
	}
}

/* The filesystem on dev, mounted detached. */
static int mount_dev(const char *dev, int *mfd, lc_error_t **err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "--disk: cannot mount ext4 (fsopen)");
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "--disk: cannot mount %s", dev);
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOATIME);
	if (m < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "--disk: cannot mount %s", dev);
	*mfd = m;
	return 0;
}

int lc_disk_mount(const char *img, long long size, unsigned flags, int *mfd, lc_error_t **err)
{
	*mfd = -1;
	size = (size + 4095) & ~4095LL; /* whole blocks */
	bool create = flags & LC_DISK_CREATE;
	if (create && make_image(img, size, !(flags & LC_DISK_NO_JOURNAL), err) < 0)
		return -1;
	lc_trace("disk: image made");
	/* One process at a time finds or attaches its loop device: two
	 * devices over one file would be two filesystems writing it.  The
	 * lock is taken on an open file of its own: the one a loop device is
	 * given stays open in the device (and a lock on it with it). */
	_cleanup_close_ int lk = open(img, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int ifd = open(img, O_RDWR | O_CLOEXEC);
	struct stat st;
	if (lk < 0 || ifd < 0 || fstat(ifd, &st) < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "disk %s", img);
	if (flock(lk, LOCK_EX) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot lock %s", img);
	/* Held by a loop device already (the sandbox runs, or its
	 * namespaces are going): the same filesystem, mounted once more.
	 * One letting go of the file this instant is waited for. */
	for (int i = 0; !create && i < 50; i++) {
		_cleanup_free_ char *was = loop_of(&st);
		if (!was)
			break;
		lc_error_t *e = NULL;
		if (mount_dev(was, mfd, &e) == 0)
			return 0;
		if (i == 49) {
			*err = e;
			return lc_error_wrap(err, "disk %s", img);
		}
		lc_error_free(e);
		usleep(10000);
	}
	_cleanup_close_ int hold = -1;
	_cleanup_free_ char *dev = attach(ifd, img, &hold, err);
	if (!dev)
		return -1;
	lc_trace("disk: loop device attached");
	int r = mount_dev(dev, mfd, err); /* hold's close leaves the device to the mount, or lets it go */
	lc_trace("disk: mounted");
	return r;
}
