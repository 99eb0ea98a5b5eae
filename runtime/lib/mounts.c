/* mounts.c — the sandbox's root filesystem.
 *
 * Two stages.  lc_mounts_stage runs in the staging process, which has a
 * mount namespace of its own and (as root) is still privileged on the host:
 * it makes the idmapped lower layers, the overlay(s), the sysfs of the
 * sandbox's network namespace, /tmp and the binds.  lc_mounts_finish runs
 * in pid 1, inside the sandbox's user namespace: proc, a minimal /dev,
 * --tmpfs mounts, the masked /proc paths, then pivot_root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "idmap.h"
#include "mounts.h"
#include "util.h"

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags)
{
	return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

/* Attach src at dst (a fresh directory), idmapped to the sandbox's range
 * when possible, read-only.  Returns 1 if idmapped, 0 if a plain bind. */
static int attach_lower(const char *src, const char *dst, int userns_fd, lc_error_t **err)
{
	if (mkdir(dst, 0700) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dst);
	if (userns_fd >= 0) {
		_cleanup_close_ int fd = sys_open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open a mount of %s", src);
		struct mount_attr attr = {
			.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
			.userns_fd = (unsigned long long)userns_fd,
		};
		if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &attr) == 0) {
			if (sys_move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot attach %s at %s", src, dst);
			return 1;
		}
		/* EINVAL/EPERM: the filesystem cannot be idmapped (9p, older
		 * tmpfs); fall back to a plain read-only bind. */
	}
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot bind %s at %s", src, dst);
	if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NODEV, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s read-only", dst);
	return 0;
}

/* volatile: for uppers that are removed with the sandbox.  Without it the
 * overlay's unmount, when pid 1's namespace goes, syncs the whole
 * filesystem the upper is on (sync_filesystem of the upper's superblock),
 * on the way out of every run and behind whatever else writes there. */
static int mount_overlay(const char *target, const char *lowers, const char *upper, const char *work,
			 const lc_rootfs_plan_t *plan, lc_error_t **err)
{
	_cleanup_free_ char *opts = lc_strdup_printf("lowerdir=%s,upperdir=%s,workdir=%s%s%s", lowers, upper, work,
						     plan->rootless ? ",userxattr" : "",
						     plan->volatile_upper ? ",volatile" : "");
	if (strlen(opts) >= 4000)
		return lc_error_set(err, LC_EXIT_RUNTIME, E2BIG, "too many layers for one overlay mount");
	int r = mount("overlay", target, "overlay", MS_NODEV, opts);
	if (r < 0 && errno == EINVAL && plan->volatile_upper) { /* a kernel before 5.10 */
		opts[strlen(opts) - strlen(",volatile")] = '\0';
		r = mount("overlay", target, "overlay", MS_NODEV, opts);
	}
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot mount the overlay root at %s", target);
	return 0;
}

/* The path the overlay uses for lower src: src itself when rootless, else
 * src attached at dst (idmapped where the filesystem allows; plan->idmap_ok
 * notes where it did not).  NULL on error. */
static const char *use_lower(lc_rootfs_plan_t *plan, const char *src, const char *dst, lc_error_t **err)
{
	if (plan->rootless)
		return src;
	int r = attach_lower(src, dst, plan->idmap_userns_fd, err);
	if (r < 0)
		return NULL;
	if (r == 0)
		plan->idmap_ok = false;
	return dst;
}

/* lc_lib_dir()/mnt from the staging process's cwd, sbdir/private (sbdir
 * is lc_lib_dir()/sandboxes/ID): short in the overlay's option string. */
#define LOWER_MNT "../../../mnt"

int lc_mounts_stage(lc_rootfs_plan_t *plan, lc_error_t **err)
{
	/* The layers live in sbdir/private (0700, host root only); pid 1
	 * later needs only sbdir/rootfs and sbdir/files. */
	_cleanup_free_ char *priv = lc_strdup_printf("%s/private", plan->sbdir);
	if (chdir(priv) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot enter %s", priv);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make the staging mounts private");
	/* The lower layers are attached (idmapped) at lc_lib_dir()/mnt/NAME:
	 * mounts of this namespace alone, so every sandbox can use the same
	 * directories, made once rather than per run (a mkdir costs 0.13 ms
	 * on this ext4). */
	if (mkdir(LOWER_MNT, 0700) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s/mnt", lc_lib_dir());
	/* The sandbox's own disk (--disk) where its uppers are: in this
	 * namespace only, it goes with the sandbox's namespaces. */
	if (plan->disk_fd >= 0) {
		int r = sys_move_mount(plan->disk_fd, "", AT_FDCWD, "ovl", MOVE_MOUNT_F_EMPTY_PATH);
		int e = errno;
		close(plan->disk_fd);
		plan->disk_fd = -1;
		if (r < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot mount the sandbox's disk");
	}

	plan->idmap_ok = true;
	/* Relative paths keep the overlay option string short. */
	_cleanup_free_ char *lowers = strdup("");
	size_t n = lc_strv_len(plan->lowers);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *dst = lc_strdup_printf(LOWER_MNT "/%zu", i);
		const char *use = plan->lowers[i];
		if (plan->lower_idmap && plan->lower_idmap[i] && !(use = use_lower(plan, plan->lowers[i], dst, err)))
			return -1;
		char *nl = lc_strdup_printf("%s%s%s", lowers, i ? ":" : "", use);
		free(lowers);
		lowers = nl;
	}
	/* The uppers: in ovl/, or on the directory the spec names (a disk). */
	const char *ud = plan->upper_dir ? plan->upper_dir : "ovl";
	_cleanup_free_ char *upper = lc_strdup_printf("%s/upper", ud), *work = lc_strdup_printf("%s/work", ud);
	if (mount_overlay("../rootfs", lowers, upper, work, plan, err) < 0)
		return -1;
	if (plan->usr_overlay) {
		const char *usr_lower = use_lower(plan, "/usr", LOWER_MNT "/usr", err);
		if (!usr_lower)
			return -1;
		/* an image on the host base: its layers' usr/ above the host's */
		_cleanup_free_ char *ulowers = strdup("");
		for (size_t i = 0; plan->usr_lowers && plan->usr_lowers[i]; i++) {
			_cleanup_free_ char *dst = lc_strdup_printf(LOWER_MNT "/usr%zu", i);
			const char *use = use_lower(plan, plan->usr_lowers[i], dst, err);
			if (!use)
				return -1;
			char *nl = lc_strdup_printf("%s%s:", ulowers, use);
			free(ulowers);
			ulowers = nl;
		}
		_cleanup_free_ char *all = lc_strdup_printf("%s%s", ulowers, usr_lower);
		_cleanup_free_ char *uu = lc_strdup_printf("%s/usr-upper", ud), *uw = lc_strdup_printf("%s/usr-work", ud);
		if (mount_overlay("../rootfs/usr", all, uu, uw, plan, err) < 0)
			return lc_error_wrap(err, "/usr");
	}
	/* sysfs of the sandbox's own network namespace, read-only. */
	if (mkdir("../rootfs/sys", 0755) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /sys in the sandbox");
	if (mount("sysfs", "../rootfs/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot mount sysfs");
	return 0;
}

int lc_mounts_open_staged(lc_rootfs_plan_t *plan, lc_error_t **err)
{
	/* Relative to the staging cwd (sbdir/private, 0711), so that no host
	 * directory above has to be searchable by the sandbox's root. */
	plan->rootfs_fd = open("../rootfs", O_PATH | O_DIRECTORY | O_CLOEXEC);
	plan->files_fd = open("..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (plan->rootfs_fd < 0 || plan->files_fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open the staged root");
	return 0;
}

/* Open path inside the root at rootfd, never leaving it (symlinks planted
 * in an image resolve inside the sandbox, not on the host). */
static int open_in_root(int rootfd, const char *path, int flags)
{
	struct open_how how = { .flags = (unsigned long long)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* mkdir -p of path inside rootfd; returns an O_PATH fd of the last dir. */
static int mkdirs_in_root(int rootfd, const char *path, lc_error_t **err)
{
	_cleanup_free_ char *p = strdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		_cleanup_close_ int fd = open_in_root(rootfd, p, O_PATH | O_DIRECTORY);
		if (fd < 0) {
			char *slash = strrchr(p, '/');
			_cleanup_free_ char *parent = strndup(p, (size_t)(slash - p));
			_cleanup_close_ int pfd = open_in_root(rootfd, *parent ? parent : "/", O_PATH | O_DIRECTORY);
			if (pfd < 0 || (mkdirat(pfd, slash + 1, 0755) < 0 && errno != EEXIST))
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s in the sandbox", p);
		}
		*s = '/';
	}
	int fd = open_in_root(rootfd, p, O_PATH | O_DIRECTORY);
	if (fd < 0) {
		char *slash = strrchr(p, '/');
		_cleanup_free_ char *parent = strndup(p, (size_t)(slash - p));
		_cleanup_close_ int pfd = open_in_root(rootfd, *parent ? parent : "/", O_PATH | O_DIRECTORY);
		if (pfd < 0 || (mkdirat(pfd, slash + 1, 0755) < 0 && errno != EEXIST))
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s in the sandbox", p);
		fd = open_in_root(rootfd, p, O_PATH | O_DIRECTORY);
		if (fd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s in the sandbox", p);
	}
	return fd;
}

/* A mount target inside the sandbox: a directory, or a file when is_file. */
static int target_in_root(int rootfd, const char *path, bool is_file, lc_error_t **err)
{
	if (!is_file)
		return mkdirs_in_root(rootfd, path, err);
	int fd = open_in_root(rootfd, path, O_PATH);
	if (fd >= 0)
		return fd;
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *parent = strndup(path, (size_t)(slash - path));
	_cleanup_close_ int pfd = *parent ? mkdirs_in_root(rootfd, parent, err) : open_in_root(rootfd, "/", O_PATH);
	if (pfd < 0)
		return -1;
	_cleanup_free_ char *ppath = lc_strdup_printf("/proc/self/fd/%d", pfd);
	_cleanup_close_ int dfd = open(ppath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open the parent of %s", path);
	_cleanup_close_ int f = openat(dfd, slash + 1, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (f < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s in the sandbox", path);
	fd = open_in_root(rootfd, path, O_PATH);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s in the sandbox", path);
	return fd;
}

/* Remount a bind read-only, keeping the flags the kernel has locked on it
 * (a user namespace may not clear nosuid/nodev/noexec/atime flags). */
static int remount_ro(const char *t)
{
	struct statvfs sv;
	unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
	if (statvfs(t, &sv) == 0) {
		if (sv.f_flag & ST_NOSUID) flags |= MS_NOSUID;
		if (sv.f_flag & ST_NODEV) flags |= MS_NODEV;
		if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
		if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
		if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
		if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
	}
	return mount(NULL, t, NULL, flags, NULL);
}

static int bind_into(int rootfd, const char *src, const char *dst, bool ro, lc_error_t **err)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "bind source %s", src);
	_cleanup_close_ int fd = target_in_root(rootfd, dst, !S_ISDIR(st.st_mode), err);
	if (fd < 0)
		return -1;
	_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", fd);
	if (mount(src, t, NULL, MS_BIND | MS_REC, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot bind %s to %s", src, dst);
	if (ro) {
		/* The fd still names what lies under the new mount: look again. */
		_cleanup_close_ int top = open_in_root(rootfd, dst, O_PATH);
		_cleanup_free_ char *tt = lc_strdup_printf("/proc/self/fd/%d", top);
		if (top < 0 || remount_ro(tt) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s read-only", dst);
	}
	return 0;
}

static int mount_in(int rootfd, const char *dst, const char *fstype, unsigned long flags, const char *data,
		    lc_error_t **err)
{
	_cleanup_close_ int fd = mkdirs_in_root(rootfd, dst, err);
	if (fd < 0)
		return -1;
	_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", fd);
	if (mount(fstype, t, fstype, flags, data) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot mount %s on %s", fstype, dst);
	return 0;
}

static const char *masked_paths[] = {
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap", NULL,
};
static const char *readonly_paths[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

static int mask_path(int rootfd, const char *path, lc_error_t **err)
{
	_cleanup_close_ int fd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return 0;
	_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", fd);
	int r = S_ISDIR(st.st_mode) ? mount("tmpfs", t, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0")
				    : mount("/dev/null", t, NULL, MS_BIND, NULL);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot mask %s", path);
	return 0;
}

static int readonly_path(int rootfd, const char *path, lc_error_t **err)
{
	_cleanup_close_ int fd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", fd);
	if (mount(t, t, NULL, MS_BIND | MS_REC, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot bind %s", path);
	_cleanup_close_ int fd2 = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW);
	_cleanup_free_ char *t2 = lc_strdup_printf("/proc/self/fd/%d", fd2);
	if (remount_ro(t2) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s read-only", path);
	return 0;
}

static int setup_dev(int rootfd, bool rootless, lc_error_t **err)
{
	if (mount_in(rootfd, "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k", err) < 0)
		return -1;
	_cleanup_close_ int dev = open_in_root(rootfd, "/dev", O_RDONLY | O_DIRECTORY);
	if (dev < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /dev in the sandbox");
	static const char *nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };
	for (int i = 0; nodes[i]; i++) {
		_cleanup_close_ int f = openat(dev, nodes[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (f < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /dev/%s", nodes[i]);
		_cleanup_free_ char *src = lc_strdup_printf("/dev/%s", nodes[i]);
		_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d/%s", dev, nodes[i]);
		if (mount(src, t, NULL, MS_BIND, NULL) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot bind /dev/%s", nodes[i]);
	}
	const char *pts_opts = rootless ? "newinstance,ptmxmode=0666,mode=0620"
					: "newinstance,ptmxmode=0666,mode=0620,gid=5";
	if (mkdirat(dev, "pts", 0755) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /dev/pts");
	if (mount_in(rootfd, "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, pts_opts, err) < 0)
		return -1;
	if (mkdirat(dev, "shm", 01777) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /dev/shm");
	if (mount_in(rootfd, "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k", err) < 0)
		return -1;
	struct { const char *target, *name; } links[] = {
		{ "pts/ptmx", "ptmx" }, { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
	};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlinkat(links[i].target, dev, links[i].name) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /dev/%s", links[i].name);
	if (mkdirat(dev, "mqueue", 0755) == 0) {
		lc_error_t *e = NULL;
		if (mount_in(rootfd, "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, &e) < 0)
			lc_error_free(e); /* optional */
	}
	return 0;
}

/* The mount points pid 1 needs, made here while still privileged: an image
 * may lack them, and where its layers cannot be idmapped (tmpfs before 6.3,
 * 9p) root in the sandbox could not create them.  They belong to the
 * sandbox's root. */
int lc_mounts_stage_targets(const lc_rootfs_plan_t *plan, lc_error_t **err)
{
	_cleanup_close_ int rootfd = open("../rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open the staged root");
	static const char *dirs[] = { "/proc", "/dev", "/tmp", "/etc", "/sys/fs/cgroup", NULL };
	static const char *files[] = { "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", NULL };
	for (int i = 0; dirs[i]; i++) {
		_cleanup_close_ int fd = open_in_root(rootfd, dirs[i], O_PATH | O_DIRECTORY);
		if (fd >= 0 || !strncmp(dirs[i], "/sys/", 5))
			continue;
		fd = mkdirs_in_root(rootfd, dirs[i], err);
		if (fd < 0)
			return -1;
		_cleanup_free_ char *p = lc_strdup_printf("/proc/self/fd/%d", fd);
		if (chown(p, plan->owner_uid, plan->owner_gid) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot chown %s in the sandbox", dirs[i]);
	}
	for (int i = 0; files[i]; i++) {
		_cleanup_close_ int fd = open_in_root(rootfd, files[i], O_PATH);
		if (fd >= 0)
			continue;
		fd = target_in_root(rootfd, files[i], true, err);
		if (fd < 0)
			return -1;
		_cleanup_free_ char *p = lc_strdup_printf("/proc/self/fd/%d", fd);
		if (chown(p, plan->owner_uid, plan->owner_gid) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot chown %s in the sandbox", files[i]);
	}
	/* /tmp is mounted here, before the binds, so that a bind below it
	 * (--bind /tmp/x:/tmp/x) lands in the sandbox's /tmp, not under it;
	 * its root belongs to the sandbox's root. */
	_cleanup_free_ char *tmp_opts = lc_strdup_printf("mode=1777,uid=%u,gid=%u", (unsigned)plan->owner_uid,
							 (unsigned)plan->owner_gid);
	return mount_in(rootfd, "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts, err);
}

/* A name for the filesystem a refusal is about. */
static const char *fs_name(int fd, char buf[32])
{
	static const struct { unsigned long magic; const char *name; } names[] = {
		{ 0x01021997, "9p" }, { 0x794c7630, "overlay" }, { 0x01021994, "tmpfs" }, { 0x6969, "nfs" },
		{ 0x65735546, "fuse" }, { 0x9fa0, "proc" }, { 0x62656572, "sysfs" }, { 0x858458f6, "ramfs" },
		{ 0xff534d42, "cifs" }, { 0x73717368, "squashfs" }, { 0x9123683e, "btrfs" },
		{ 0xef53, "ext4" }, { 0x58465342, "xfs" },
	};
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return "unknown";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((unsigned long)sf.f_type == names[i].magic)
			return names[i].name;
	snprintf(buf, 32, "type 0x%lx", (unsigned long)sf.f_type);
	return buf;
}

int lc_mounts_open_binds(lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err)
{
	plan->n_bind_fds = spec->n_mounts;
	plan->bind_fds = lc_xmalloc0(spec->n_mounts * sizeof(int) + 1);
	for (size_t i = 0; i < spec->n_mounts; i++)
		plan->bind_fds[i] = -1;
	if (plan->rootless)
		return 0; /* LC_IDMAP_ON was refused; a rootless caller's own files are its root's already */
	for (size_t i = 0; i < spec->n_mounts; i++) {
		const lc_mount_t *m = &spec->mounts[i];
		if (m->tmpfs || m->idmap == LC_IDMAP_OFF || (m->idmap == LC_IDMAP_AUTO && m->ro))
			continue;
		/* A private copy of the tree: a peer of the host's mount
		 * would carry mounts made beneath it back to the host. */
		_cleanup_close_ int fd = sys_open_tree(AT_FDCWD, m->src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (fd < 0)
			return lc_error_set(err, errno == ENOENT || errno == ENOTDIR ? LC_EXIT_NOENT : LC_EXIT_RUNTIME,
					    errno, "bind source %s", m->src);
		struct mount_attr priv = { .propagation = MS_PRIVATE };
		if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &priv) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "--bind %s: cannot make its mount private", m->src);
		/* The owner of what is actually mounted, not of a path that
		 * may have changed since. */
		struct stat st;
		if (fstat(fd, &st) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "bind source %s", m->src);
		int uns = lc_idmap_userns(st.st_uid, plan->owner_uid + spec->uid, st.st_gid,
					  plan->owner_gid + spec->gid, 1, err);
		if (uns < 0)
			return lc_error_wrap(err, "--bind %s", m->src);
		struct mount_attr attr = {
			.attr_set = MOUNT_ATTR_IDMAP | (m->ro ? MOUNT_ATTR_RDONLY : 0),
			.userns_fd = (unsigned long long)uns,
		};
		int r = sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr);
		int e = errno;
		close(uns);
		if (r < 0) {
			if (m->idmap == LC_IDMAP_AUTO)
				continue; /* a plain bind, as without idmapping */
			char buf[32];
			if (e == EINVAL) /* the filesystem's answer; errno adds nothing */
				return lc_error_set(err, LC_EXIT_RUNTIME, 0,
						    "--bind %s:%s:idmap: its filesystem (%s) cannot be idmapped; "
						    "bind it with :noidmap", m->src, m->dst, fs_name(fd, buf));
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "--bind %s:%s:idmap: cannot idmap it (%s)", m->src,
					    m->dst, fs_name(fd, buf));
		}
		plan->bind_fds[i] = lc_steal_fd(fd);
	}
	return 0;
}

void lc_mounts_close_binds(lc_rootfs_plan_t *plan)
{
	for (size_t i = 0; plan->bind_fds && i < plan->n_bind_fds; i++)
		if (plan->bind_fds[i] >= 0)
			close(plan->bind_fds[i]);
	free(plan->bind_fds);
	plan->bind_fds = NULL;
	plan->n_bind_fds = 0;
}

/* Attach a detached mount (fd) at dst inside the root. */
static int attach_into(int rootfd, int fd, const char *dst, lc_error_t **err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot stat the mount for %s", dst);
	_cleanup_close_ int t = target_in_root(rootfd, dst, !S_ISDIR(st.st_mode), err);
	if (t < 0)
		return -1;
	if (sys_move_mount(fd, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot attach the bind at %s", dst);
	return 0;
}

int lc_mounts_stage_binds(const lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err)
{
	bool any = false;
	for (size_t i = 0; i < spec->n_mounts; i++)
		any |= !spec->mounts[i].tmpfs;
	if (!any)
		return 0;
	_cleanup_close_ int rootfd = open("../rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open the staged root");
	/* Mount points the binds need are made as the sandbox's root, so
	 * that they belong to it inside. */
	int r = 0;
	for (size_t i = 0; i < spec->n_mounts && r == 0; i++) {
		const lc_mount_t *m = &spec->mounts[i];
		if (m->tmpfs)
			continue;
		/* idmapped (and made read-only) in lcrun already, or a plain
		 * bind of the source opened here as host root */
		int mfd = plan->bind_fds && i < plan->n_bind_fds ? plan->bind_fds[i] : -1;
		_cleanup_close_ int sfd = mfd < 0 ? open(m->src, O_PATH | O_CLOEXEC) : -1;
		if (mfd < 0 && sfd < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "bind source %s", m->src);
		_cleanup_free_ char *via = lc_strdup_printf("/proc/self/fd/%d", sfd);
		uid_t ou = (uid_t)setfsuid(plan->owner_uid);
		gid_t og = (gid_t)setfsgid(plan->owner_gid);
		r = mfd >= 0 ? attach_into(rootfd, mfd, m->dst, err) : bind_into(rootfd, via, m->dst, m->ro, err);
		setfsuid(ou);
		setfsgid(og);
		if (r < 0)
			lc_error_wrap(err, "--bind %s", m->src);
	}
	return r;
}

int lc_mounts_finish(const lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make mounts private");
	/* A fresh copy of the staged tree, attached on top of it: pid 1 owns
	 * that mount, so it can pivot_root into it.  Everything goes through
	 * the fds the staging process opened; pid 1 need not be able to walk
	 * the host path to the sandbox directory. */
	_cleanup_close_ int rootfd = sys_open_tree(plan->rootfs_fd, "",
						   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (rootfd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot copy the root mount");
	if (sys_move_mount(rootfd, "", plan->rootfs_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot attach the root mount");

	if (mount_in(rootfd, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
		return -1;
	if (setup_dev(rootfd, plan->rootless, err) < 0)
		return -1;
	{
		/* The sandbox's own cgroup (its cgroup namespace root), read-only. */
		lc_error_t *e = NULL;
		_cleanup_close_ int cfd = open_in_root(rootfd, "/sys/fs/cgroup", O_PATH | O_DIRECTORY);
		if (cfd >= 0 && lc_cgroup_root(NULL)) {
			_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", cfd);
			if (mount("cgroup2", t, "cgroup2", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
				lc_error_set(&e, 0, errno, "cgroup2");
		}
		lc_error_free(e);
	}
	/* hosts, hostname and resolv.conf are pinned read-only. */
	static const char *files[] = { "hosts", "hostname", "resolv.conf" };
	for (int i = 0; i < 3; i++) {
		_cleanup_free_ char *src = lc_strdup_printf("/proc/self/fd/%d/%s", plan->files_fd, files[i]);
		_cleanup_free_ char *dst = lc_strdup_printf("/etc/%s", files[i]);
		if (bind_into(rootfd, src, dst, true, err) < 0)
			return -1;
	}
	for (size_t i = 0; i < spec->n_mounts; i++) {
		const lc_mount_t *m = &spec->mounts[i];
		if (m->tmpfs && mount_in(rootfd, m->dst, "tmpfs", MS_NOSUID | MS_NODEV | (m->ro ? MS_RDONLY : 0),
					 "mode=755", err) < 0)
			return -1;
	}
	for (int i = 0; masked_paths[i]; i++)
		if (mask_path(rootfd, masked_paths[i], err) < 0)
			return -1;
	for (int i = 0; readonly_paths[i]; i++)
		if (readonly_path(rootfd, readonly_paths[i], err) < 0)
			return -1;

	const char *hn = spec->hostname ? spec->hostname : "lcrun";
	if (sethostname(hn, strlen(hn)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot set the hostname");
	if (fchdir(rootfd) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot enter the root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pivot_root into %s", plan->rootfs);
	if (umount2(".", MNT_DETACH) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot detach the old root");
	if (chdir("/") < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot chdir to /");
	return 0;
}

/* ---- for lcrun-oci's containers (container.c) ---------------------------- */

int lc_open_in_root(int rootfd, const char *path, int flags)
{
	return open_in_root(rootfd, path, flags);
}

int lc_target_in_root(int rootfd, const char *path, bool is_file, lc_error_t **err)
{
	return target_in_root(rootfd, path, is_file, err);
}

int lc_remount_ro(const char *target)
{
	return remount_ro(target);
}

int lc_mask_path(int rootfd, const char *path, lc_error_t **err)
{
	return mask_path(rootfd, path, err);
}

int lc_readonly_path(int rootfd, const char *path, lc_error_t **err)
{
	return readonly_path(rootfd, path, err);
}
