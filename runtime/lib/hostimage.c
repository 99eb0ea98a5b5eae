/* hostimage.c — the `host` image: the host's /usr read-only (with the
 * merged-usr links) and a small generated /etc.  Nothing else of the host
 * is visible: no /root, /home, /var, /etc/shadow, /etc/ssh.
 *
 * The skeleton is built once into lc_lib_dir()/host/<index>/root, where the
 * key covers the host files it copies (their names, modes, sizes and
 * modification times), so a changed host gets a new skeleton.  The index is
 * a fast 64-bit hash of the key; <index>/key holds the key itself and is
 * compared byte for byte, so another key with the same index (or a
 * directory of an older layout) moves on to the next index instead of
 * using a wrong skeleton.  No libcrypto is loaded for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "hostimage.h"
#include "util.h"

/* What of the host's /etc programs need, and nothing secret. */
static const char *etc_allow[] = {
	"alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache",
	"ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "os-release", "debian_version",
	"localtime", "timezone", "profile", "profile.d", "bash.bashrc", "mime.types",
	"protocols", "services", "inputrc", "gai.conf", "host.conf", "terminfo", "magic",
	"magic.mime", "xattr.conf", "shells", "networks", "rpc", "login.defs", "environment",
	"gitconfig", "npmrc", "java-17-openjdk", "perl", "python3", "python3.11", "vim",
	"locale.alias", "manpath.config", "mke2fs.conf", "ethertypes", "iproute2", NULL,
};

static const char *root_links[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL };
static const char *root_dirs[] = { "usr", "proc", "sys", "dev", "tmp", "run", "etc", "home",
				   "mnt", "opt", "srv", "media", "var", "var/tmp", "var/lib",
				   "var/cache", "var/log", "var/spool", NULL };

/* The key's line for path (none when it does not exist). */
static void key_entry(FILE *key, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return;
	fprintf(key, "%s %o %lld %lld.%09ld\n", path, st.st_mode, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
		st.st_mtim.tv_nsec);
}

static int copy_tree(const char *src, int dst_dirfd, const char *name, uid_t uid, gid_t gid, int depth);

static int copy_file(const char *src, int dfd, const char *name, const struct stat *st, uid_t uid, gid_t gid)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return 0; /* unreadable: skip */
	_cleanup_close_ int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 0755);
	if (out < 0)
		return -1;
	char buf[65536];
	ssize_t r;
	while ((r = read(in, buf, sizeof(buf))) > 0)
		if (lc_write_all(out, buf, (size_t)r) < 0)
			return -1;
	if (fchown(out, uid, gid) < 0)
		return -1;
	return r < 0 ? -1 : 0;
}

static int copy_tree(const char *src, int dfd, const char *name, uid_t uid, gid_t gid, int depth)
{
	struct stat st;
	if (lstat(src, &st) < 0 || depth > 8)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		if (symlinkat(target, dfd, name) < 0)
			return -1;
		return fchownat(dfd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
	}
	if (S_ISREG(st.st_mode))
		return copy_file(src, dfd, name, &st, uid, gid);
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mkdirat(dfd, name, st.st_mode & 0755) < 0)
		return -1;
	if (fchownat(dfd, name, uid, gid, 0) < 0)
		return -1;
	_cleanup_close_ int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_dir_ DIR *d = opendir(src);
	if (sub < 0 || !d)
		return sub < 0 ? -1 : 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *s = lc_strdup_printf("%s/%s", src, de->d_name);
		if (copy_tree(s, sub, de->d_name, uid, gid, depth + 1) < 0)
			return -1;
	}
	return 0;
}

static int write_owned(int dfd, const char *name, const char *content, mode_t mode, uid_t uid, gid_t gid)
{
	_cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || lc_write_all(fd, content, strlen(content)) < 0 || fchown(fd, uid, gid) < 0)
		return -1;
	return 0;
}

static int build_skel(const char *dir, uid_t uid, gid_t gid, lc_error_t **err)
{
	if (mkdir(dir, 0755) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fchown(dfd, uid, gid) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot prepare %s", dir);
	for (int i = 0; root_dirs[i]; i++) {
		if (mkdirat(dfd, root_dirs[i], 0755) < 0 || fchownat(dfd, root_dirs[i], uid, gid, 0) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s/%s", dir, root_dirs[i]);
	}
	fchmodat(dfd, "tmp", 01777, 0);
	fchmodat(dfd, "var/tmp", 01777, 0);
	if (mkdirat(dfd, "root", 0700) < 0 || fchownat(dfd, "root", uid, gid, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s/root", dir);
	for (int i = 0; root_links[i]; i++) {
		_cleanup_free_ char *hp = lc_strdup_printf("/%s", root_links[i]);
		char target[256];
		ssize_t n = readlink(hp, target, sizeof(target) - 1);
		if (n <= 0)
			continue; /* not a merged-usr link on this host */
		target[n] = '\0';
		if (symlinkat(target, dfd, root_links[i]) < 0 ||
		    fchownat(dfd, root_links[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot link %s/%s", dir, root_links[i]);
	}
	_cleanup_close_ int etc = openat(dfd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (etc < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s/etc", dir);
	for (int i = 0; etc_allow[i]; i++) {
		_cleanup_free_ char *src = lc_strdup_printf("/etc/%s", etc_allow[i]);
		if (copy_tree(src, etc, etc_allow[i], uid, gid, 0) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot copy %s into the host image", src);
	}
	/* Where the sandbox's own hosts, hostname and resolv.conf are bound
	 * (mounts.c): found here, they are not made in every sandbox's upper
	 * layer (a copy-up of /etc and three files on the upper's disk). */
	static const char *targets[] = { "hosts", "hostname", "resolv.conf", NULL };
	for (int i = 0; targets[i]; i++)
		if (write_owned(etc, targets[i], "", 0644, uid, gid) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s/etc/%s", dir, targets[i]);
	return 0;
}

/* tmp, built in full, becomes dir; another process's copy that got
 * there first is as good (both are made from the same inputs). */
static int install(const char *tmp, const char *dir, lc_error_t **err)
{
	/* Its files on the disk before its name is: after a power cut the
	 * skeleton is whole or not there (then built again). */
	_cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0) {
		int e = errno;
		lc_rm_rf(tmp, NULL);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot sync %s", tmp);
	}
	if (rename(tmp, dir) < 0) {
		int e = errno;
		lc_rm_rf(tmp, NULL);
		if (e != EEXIST && e != ENOTEMPTY)
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot install %s", dir);
	}
	return 0;
}

/* 1 when dir is the skeleton for key, 0 when there is no dir, -1 when it
 * is another one (another key, unfinished, or an older layout). */
static int skel_matches(const char *dir, const char *key, size_t klen)
{
	_cleanup_free_ char *kp = lc_strdup_printf("%s/key", dir);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (lc_read_file(kp, &text, &len, NULL) < 0)
		return access(dir, F_OK) < 0 && errno == ENOENT ? 0 : -1;
	return len == klen && !memcmp(text, key, klen) ? 1 : -1;
}

/* tmp gets the skeleton (root/) and its key, then becomes dir. */
static int build_keyed(const char *tmp, const char *dir, const char *key, size_t klen, uid_t uid, gid_t gid,
		       lc_error_t **err)
{
	_cleanup_free_ char *root = lc_strdup_printf("%s/root", tmp);
	_cleanup_free_ char *kp = lc_strdup_printf("%s/key", tmp);
	if (mkdir(tmp, 0700) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", tmp);
	if (build_skel(root, uid, gid, err) < 0 || lc_write_file_atomic(kp, key, klen, 0600, err) < 0) {
		lc_rm_rf(tmp, NULL);
		return lc_error_wrap(err, "cannot build the host image");
	}
	return install(tmp, dir, err);
}

int lc_hostimage_skel(char **out, bool rootless, lc_error_t **err)
{
	uid_t uid = rootless ? getuid() : lc_uid_base();
	gid_t gid = rootless ? getgid() : (gid_t)lc_uid_base();
	_cleanup_free_ char *key = NULL;
	size_t klen = 0;
	FILE *kf = open_memstream(&key, &klen);
	if (!kf)
		abort();
	fprintf(kf, "skel-v3 %u %u\n", (unsigned)uid, (unsigned)gid);
	for (int i = 0; etc_allow[i]; i++) {
		_cleanup_free_ char *p = lc_strdup_printf("/etc/%s", etc_allow[i]);
		key_entry(kf, p);
	}
	for (int i = 0; root_links[i]; i++) {
		_cleanup_free_ char *p = lc_strdup_printf("/%s", root_links[i]);
		key_entry(kf, p);
	}
	if (fclose(kf) != 0)
		abort();
	uint64_t index = lc_hash64(key, klen, 0);

	_cleanup_free_ char *base = lc_strdup_printf("%s/host", lc_lib_dir());
	/* Open addressing: a taken index moves on to the next (a bounded
	 * number of times, though one 64-bit collision is already unheard of). */
	for (int probe = 0; probe < 8; probe++) {
		_cleanup_free_ char *dir = lc_strdup_printf("%s/%016llx", base, (unsigned long long)(index + probe));
		int m = skel_matches(dir, key, klen);
		if (m == 0) {
			if (lc_mkdir_p(base, 0700, err) < 0)
				return -1;
			/* One builder at a time: sandboxes that start together on a
			 * fresh root (lcd's first tasks, a fork) wait for the first
			 * one's skeleton instead of each building its own (0.7 s of
			 * CPU apiece, most of it ext4 allocating inodes). */
			_cleanup_free_ char *lockp = lc_strdup_printf("%s/.build.lock", base);
			_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (lock < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", lockp);
			while (flock(lock, LOCK_EX) < 0)
				if (errno != EINTR)
					return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot lock %s", lockp);
			if ((m = skel_matches(dir, key, klen)) == 0) {
				char rnd[9];
				lc_random_hex(rnd, 8);
				_cleanup_free_ char *tmp = lc_strdup_printf("%s/.tmp-%s", base, rnd);
				if (build_keyed(tmp, dir, key, klen, uid, gid, err) < 0)
					return -1;
				/* Ours, or another process's made from the same key. */
				m = skel_matches(dir, key, klen);
			}
		}
		if (m == 1) {
			*out = lc_strdup_printf("%s/root", dir);
			return 0;
		}
	}
	return lc_error_set(err, LC_EXIT_RUNTIME, EEXIST,
			    "cannot build the host image: the 8 places for its key in %s hold other skeletons", base);
}

static int build_etc(const char *dir, const lc_spec_t *spec, const char *shell, uid_t owner, gid_t gowner,
		     lc_error_t **err)
{
	if (mkdir(dir, 0755) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fchown(dfd, owner, gowner) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot prepare %s", dir);
	if (mkdirat(dfd, "etc", 0755) < 0 || fchownat(dfd, "etc", owner, gowner, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s/etc", dir);
	_cleanup_close_ int etc = openat(dfd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (etc < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s/etc", dir);
	unsigned uid = spec->uid, gid = spec->gid;
	_cleanup_free_ char *passwd = NULL, *group = NULL;
	if (uid == 0) {
		passwd = lc_strdup_printf("root:x:0:0:root:/root:%s\n"
					  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", shell);
	} else {
		passwd = lc_strdup_printf("root:x:0:0:root:/root:%s\n"
					  "user:x:%u:%u:sandbox user:/home/user:%s\n"
					  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
					  shell, uid, gid, shell);
		if (mkdirat(dfd, "home", 0755) < 0 || fchownat(dfd, "home", owner, gowner, 0) < 0 ||
		    mkdirat(dfd, "home/user", 0755) < 0 ||
		    fchownat(dfd, "home/user", owner + uid, gowner + gid, 0) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create the home directory in %s", dir);
	}
	if (gid == 0 || gid == 5 || gid == 100 || gid == 65534)
		group = strdup("root:x:0:\ntty:x:5:\nusers:x:100:\nnogroup:x:65534:\n");
	else
		group = lc_strdup_printf("root:x:0:\ntty:x:5:\nusers:x:100:\nuser:x:%u:\nnogroup:x:65534:\n", gid);
	if (write_owned(etc, "passwd", passwd, 0644, owner, gowner) < 0 ||
	    write_owned(etc, "group", group, 0644, owner, gowner) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write passwd/group in %s", dir);
	return 0;
}

/* The layer depends only on the ids and the shell: one per combination,
 * next to the skeleton it goes with, shared by every sandbox that runs
 * with them (a read-only lower layer, like the skeleton).  Making it in
 * each sandbox's directory cost four to six metadata writes per run. */
int lc_hostimage_etc(const char *skel, const lc_spec_t *spec, uid_t owner, gid_t gowner, char **out, lc_error_t **err)
{
	bool bash = access("/usr/bin/bash", X_OK) == 0;
	_cleanup_free_ char *dir = lc_strdup_printf("%s-etc-%u.%u-%u.%u-%s", skel, (unsigned)owner, (unsigned)gowner,
						    (unsigned)spec->uid, (unsigned)spec->gid, bash ? "bash" : "sh");
	if (access(dir, F_OK) == 0) {
		*out = lc_steal(dir);
		return 0;
	}
	char rnd[9];
	lc_random_hex(rnd, 8);
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp-%s", skel, rnd);
	if (build_etc(tmp, spec, bash ? "/bin/bash" : "/bin/sh", owner, gowner, err) < 0) {
		lc_rm_rf(tmp, NULL);
		return -1;
	}
	if (install(tmp, dir, err) < 0)
		return -1;
	*out = lc_steal(dir);
	return 0;
}
