/* disk.c — a devbox's disk: a sparse file (apparent size the disk's, real
 * size what is used) with an ext4 filesystem, attached to a loop device and
 * mounted on the host at lcd/disks/NAME (nosuid, nodev, noexec: nothing on
 * it runs or opens a device on the host's side).  The box's overlay keeps
 * its upper and work directories there, so everything written anywhere in
 * the box lands on the disk, and a full disk is ENOSPC inside the box,
 * never the host's disk filling up.
 *
 * The disk stays mounted from the box's first start until the disk is
 * deleted (stop and start reuse the mount; after a host reboot the next
 * start mounts it again).  A disk is never attached twice: a loop device
 * that still holds its file is mounted again instead of a second one. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devbox.h"
#include "devbox_def.h"
#include "lcd.h"
#include "util.h"

extern char **environ;

static char *disks_dir(lcd_t *lcd)
{
	return lc_strdup_printf("%s/disks", lcd->state_dir);
}

static char *img_path(lcd_t *lcd, const char *name)
{
	return lc_strdup_printf("%s/disks/%s.img", lcd->state_dir, name);
}

static char *mnt_path(lcd_t *lcd, const char *name)
{
	return lc_strdup_printf("%s/disks/%s", lcd->state_dir, name);
}

bool lcd_disk_exists(lcd_t *lcd, const char *name)
{
	_cleanup_free_ char *img = img_path(lcd, name);
	return access(img, F_OK) == 0;
}

/* Is dir a mount point in lcd's mount namespace?  (mountinfo's field 5,
 * with its octal escapes.) */
static bool is_mounted(const char *dir)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool hit = false;
	while (!hit && getline(&line, &cap, f) > 0) {
		char *save = NULL, *t = strtok_r(line, " ", &save);
		for (int i = 1; t && i < 5; i++)
			t = strtok_r(NULL, " ", &save);
		if (!t)
			continue;
		char *o = t;
		for (char *p = t; *p; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				*o++ = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
				p += 3;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		hit = !strcmp(t, dir);
	}
	free(line);
	return hit;
}

/* The loop device backed by img, by its inode ("/dev/loopN"), or NULL. */
static char *loop_of(const char *img)
{
	struct stat st;
	_cleanup_dir_ DIR *d = opendir("/sys/block");
	if (stat(img, &st) < 0 || !d)
		return NULL;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4))
			continue;
		_cleanup_free_ char *dev = lc_strdup_printf("/dev/%s", de->d_name);
		_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
		struct loop_info64 li;
		if (fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && li.lo_inode == st.st_ino &&
		    li.lo_device == st.st_dev)
			return lc_steal(dev);
	}
	return NULL;
}

/* mkfs.ext4 on img; its output (for the error) in a memfd. */
static int make_fs(const char *img, lc_error_t **err)
{
	_cleanup_close_ int out = memfd_create("mkfs", MFD_CLOEXEC);
	if (out < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "memfd");
	/* -m 0: the box has all of it; lazy init and no discard: a large
	 * sparse file is ready in a moment and stays sparse. */
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "lcrun-devbox", "-E",
			 "lazy_itable_init=1,lazy_journal_init=1,nodiscard", (char *)img, NULL };
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
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "cannot run mkfs.ext4 (e2fsprogs)");
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	char buf[512] = "";
	ssize_t n = pread(out, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return lc_error_set(err, LC_EXIT_RUNTIME, 0, "mkfs.ext4 %s failed: %s", img, *buf ? buf : "no message");
}

static int create(const char *name, const char *img, long long size, lc_error_t **err)
{
	_cleanup_free_ char *dir = strdup(img);
	*strrchr(dir, '/') = '\0';
	struct statvfs sv;
	/* Sparse: the file grows as the box writes.  A disk larger than what
	 * the host has free now could not be filled; refuse it. */
	if (statvfs(dir, &sv) == 0 && (unsigned long long)size > (unsigned long long)sv.f_bavail * sv.f_frsize)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOSPC, "disk %s: %lld MiB asked, %llu MiB free on %s", name,
				    size >> 20, (unsigned long long)sv.f_bavail * sv.f_frsize >> 20, dir);
	_cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", img);
	if (ftruncate(fd, size) < 0) {
		int e = errno;
		unlink(img);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot size %s", img);
	}
	if (make_fs(img, err) < 0) {
		unlink(img);
		return -1;
	}
	lcd_log("disk %s: made (%lld MiB, ext4, sparse)", name, size >> 20);
	return 0;
}

/* Attach img to a free loop device (detached again by the kernel once
 * nothing holds it).  *hold is an open fd of the device: with autoclear,
 * closing the last one before the mount holds the device detaches it, so
 * the caller closes it only once mounted. */
static char *attach(const char *img, int *hold, lc_error_t **err)
{
	_cleanup_close_ int ifd = open(img, O_RDWR | O_CLOEXEC);
	if (ifd < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", img);
		return NULL;
	}
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /dev/loop-control (is the loop module loaded?)");
		return NULL;
	}
	for (int tries = 0;; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "no free loop device");
			return NULL;
		}
		char *dev = lc_strdup_printf("/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		struct loop_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)ifd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", img);
		if (lfd >= 0 && ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			*hold = lc_steal_fd(lfd);
			return dev;
		}
		int e = errno;
		free(dev);
		if (lfd >= 0 && e == EBUSY && tries < 20) /* another process took it first */
			continue;
		lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot attach %s to a loop device", img);
		return NULL;
	}
}

/* Mount img at mnt.  If a loop device still holds it (a mount namespace
 * made elsewhere on the host while it was mounted keeps a copy of the
 * mount), that device is mounted again: the kernel hands back the one
 * filesystem it has, never a second one over the same file. */
static int attach_mount(const char *img, const char *mnt, lc_error_t **err)
{
	for (int tries = 0; tries < 3; tries++) {
		_cleanup_free_ char *dev = loop_of(img);
		_cleanup_close_ int hold = -1;
		bool fresh = !dev;
		if (fresh && !(dev = attach(img, &hold, err)))
			return -1;
		if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME, "errors=remount-ro") < 0) {
			int e = errno;
			if (!fresh)
				continue; /* it let go meanwhile: attach anew */
			ioctl(hold, LOOP_CLR_FD, 0);
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot mount %s (%s) at %s", img, dev, mnt);
		}
		/* Mounted, the device is held: is it still img's? */
		_cleanup_free_ char *now = loop_of(img);
		if (!now || strcmp(now, dev)) {
			umount2(mnt, MNT_DETACH);
			continue;
		}
		/* Shared: a mount namespace copied from the host's from now on
		 * and made a slave (ip netns exec, most services) lets go of it
		 * when it is unmounted here. */
		mount(NULL, mnt, NULL, MS_SHARED, NULL);
		return 0;
	}
	return lc_error_set(err, LC_EXIT_BUSY, 0, "cannot mount %s: its loop device keeps changing", img);
}

int lcd_disk_ready(lcd_t *lcd, const char *name, long long size, char **dir, lc_error_t **err)
{
	_cleanup_free_ char *dd = disks_dir(lcd), *img = img_path(lcd, name), *mnt = mnt_path(lcd, name);
	if (lc_mkdir_p(dd, 0700, err) < 0)
		return -1;
	if (access(img, F_OK) < 0 && create(name, img, size, err) < 0)
		return -1;
	if (!is_mounted(mnt)) {
		if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", mnt);
		if (attach_mount(img, mnt, err) < 0)
			return lc_error_wrap(err, "disk %s", name);
		chmod(mnt, 0700);
		lcd_log("disk %s: mounted at %s", name, mnt);
	}
	*dir = lc_steal(mnt);
	return 0;
}

int lcd_disk_unmount(lcd_t *lcd, const char *name, lc_error_t **err)
{
	_cleanup_free_ char *img = img_path(lcd, name), *mnt = mnt_path(lcd, name);
	if (is_mounted(mnt)) {
		if (umount2(mnt, 0) < 0 && (errno != EBUSY || umount2(mnt, MNT_DETACH) < 0))
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot unmount disk %s at %s", name, mnt);
		lcd_log("disk %s: unmounted", name);
	}
	_cleanup_free_ char *loop = loop_of(img);
	if (loop)
		lcd_log("disk %s: %s still holds it (a mount namespace made elsewhere on the host while it was mounted); "
			"it lets go when that namespace ends", name, loop);
	if (rmdir(mnt) < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove %s", mnt);
	return 0;
}

json_t *lcd_disk_info(lcd_t *lcd, const char *name)
{
	_cleanup_free_ char *img = img_path(lcd, name), *mnt = mnt_path(lcd, name);
	struct stat st;
	if (stat(img, &st) < 0)
		return NULL;
	bool mounted = is_mounted(mnt);
	json_t *j = json_pack("{s:s, s:I, s:I, s:b}", "name", name, "size", (json_int_t)st.st_size, "allocated",
			      (json_int_t)st.st_blocks * 512, "mounted", mounted);
	struct statvfs sv;
	if (mounted && statvfs(mnt, &sv) == 0) {
		json_object_set_new(j, "fs_size", json_integer((json_int_t)(sv.f_blocks * sv.f_frsize)));
		json_object_set_new(j, "fs_used", json_integer((json_int_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize)));
	} else {
		json_object_set_new(j, "fs_size", json_null());
		json_object_set_new(j, "fs_used", json_null());
	}
	return j;
}

json_t *lcd_disk_list(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_free_ char *dd = disks_dir(lcd);
	json_t *out = json_array();
	_cleanup_dir_ DIR *d = opendir(dd);
	if (!d) {
		if (errno == ENOENT)
			return out;
		json_decref(out);
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", dd);
		return NULL;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n < 5 || strcmp(de->d_name + n - 4, ".img"))
			continue;
		_cleanup_free_ char *name = strndup(de->d_name, n - 4);
		json_t *info = lcd_disk_info(lcd, name);
		if (info)
			json_array_append_new(out, info);
	}
	return out;
}

int lcd_disk_remove_files(lcd_t *lcd, const char *name, lc_error_t **err)
{
	_cleanup_free_ char *img = img_path(lcd, name);
	if (lcd_disk_unmount(lcd, name, err) < 0)
		return -1;
	if (unlink(img) < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove %s", img);
	lcd_log("disk %s: deleted", name);
	return 0;
}
