/* Unit tests for layer.c: safe unpacking, whiteouts, the upper writer.
 * Unpacking needs root (owners, whiteouts, trusted.* xattrs). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "archivelib.h"
#include "layer.h"
#include "util.h"

/* A scratch directory holding target/ (where we unpack) and outside/ (a
 * stand-in for the host that must stay untouched). */
static char scratch[256], target[300], outside[300];

static void setup(void)
{
	snprintf(scratch, sizeof(scratch), "/var/tmp/lc-test-layer-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
	snprintf(target, sizeof(target), "%s/target", scratch);
	snprintf(outside, sizeof(outside), "%s/outside", scratch);
	ck_assert_int_eq(mkdir(target, 0755), 0);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	char p[400];
	snprintf(p, sizeof(p), "%s/secret", outside);
	FILE *f = fopen(p, "w");
	fputs("host data\n", f);
	fclose(f);
}

static void teardown(void)
{
	lc_rm_rf(scratch, NULL);
}

struct ent {
	const char *name;
	mode_t type;
	mode_t perm;
	const char *data;     /* regular files */
	const char *link;     /* symlink target */
	const char *hardlink; /* hardlink target */
	dev_t rdev;
};

/* Write a tar of the entries to scratch/NAME and return an fd on it. */
static int make_tar(const char *name, const struct ent *ents, size_t n)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_filetype(e, ents[i].type);
		archive_entry_set_perm(e, ents[i].perm);
		archive_entry_set_mtime(e, 1600000000, 0);
		size_t len = ents[i].data ? strlen(ents[i].data) : 0;
		archive_entry_set_size(e, (la_int64_t)len);
		if (ents[i].link)
			archive_entry_set_symlink(e, ents[i].link);
		if (ents[i].hardlink) {
			archive_entry_set_hardlink(e, ents[i].hardlink);
			archive_entry_set_size(e, 0);
		}
		if (ents[i].rdev)
			archive_entry_set_rdev(e, ents[i].rdev);
		ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
		if (len)
			archive_write_data(a, ents[i].data, len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int extract(const struct ent *ents, size_t n, unsigned flags, lc_error_t **err)
{
	int fd = make_tar("in.tar", ents, n);
	int r = lc_layer_extract(fd, target, flags, NULL, NULL, err);
	close(fd);
	return r;
}

/* The stand-in host directory holds exactly its one untouched file. */
static void assert_outside_untouched(void)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/secret", outside);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_nlink, 1);
	ck_assert_int_eq(st.st_size, 10);
	_cleanup_free_ char *data = NULL;
	ck_assert_int_eq(lc_read_file(p, &data, NULL, NULL), 0);
	ck_assert_str_eq(data, "host data\n");
	DIR *d = opendir(outside);
	struct dirent *de;
	int count = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			count++;
	closedir(d);
	ck_assert_int_eq(count, 1);
	/* and nothing appeared beside target/ and outside/ */
	snprintf(p, sizeof(p), "%s/x", scratch);
	ck_assert_int_ne(access(p, F_OK), 0);
}

static void assert_refused(const struct ent *ents, size_t n, const char *needle)
{
	lc_error_t *err = NULL;
	ck_assert_int_lt(extract(ents, n, 0, &err), 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err->msg, needle) != NULL, "error '%s' does not name '%s'", err->msg, needle);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	lc_error_free(err);
	assert_outside_untouched();
}

START_TEST(test_refuse_traversal)
{
	struct ent e[] = { { "ok", AE_IFREG, 0644, "fine", NULL, NULL, 0 },
			   { "../x", AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e, 2, "'../x'");
	struct ent e2[] = { { "a/../../outside/secret", AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e2, 1, "a/../../outside/secret");
}
END_TEST

START_TEST(test_refuse_absolute)
{
	char name[400];
	snprintf(name, sizeof(name), "%s/secret", outside);
	struct ent e[] = { { name, AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e, 1, name);
	struct ent e2[] = { { "/etc/x", AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e2, 1, "/etc/x");
	ck_assert_int_ne(access("/etc/x", F_OK), 0);
}
END_TEST

START_TEST(test_refuse_symlink_then_write)
{
	/* An absolute link is fine as a link (the sandbox reads it against its
	 * own root), but nothing may be written through it. */
	struct ent e[] = { { "link", AE_IFLNK, 0777, NULL, outside, NULL, 0 },
			   { "link/secret", AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e, 2, "link/secret");
	struct ent e2[] = { { "d", AE_IFDIR, 0755, NULL, NULL, NULL, 0 },
			    { "d/up", AE_IFLNK, 0777, NULL, "../../outside", NULL, 0 },
			    { "d/up/new", AE_IFREG, 0644, "evil", NULL, NULL, 0 } };
	assert_refused(e2, 3, "d/up");
	/* a link inside the tree is still not followed for a write */
	struct ent e3[] = { { "real", AE_IFDIR, 0755, NULL, NULL, NULL, 0 },
			    { "alias", AE_IFLNK, 0777, NULL, "real", NULL, 0 },
			    { "alias/f", AE_IFREG, 0644, "x", NULL, NULL, 0 } };
	assert_refused(e3, 3, "alias/f");
}
END_TEST

START_TEST(test_refuse_hardlink_out)
{
	char abs[400];
	snprintf(abs, sizeof(abs), "%s/secret", outside);
	struct ent e[] = { { "h", AE_IFREG, 0644, NULL, NULL, "../outside/secret", 0 } };
	assert_refused(e, 1, "'h'");
	struct ent e2[] = { { "h2", AE_IFREG, 0644, NULL, NULL, abs, 0 } };
	assert_refused(e2, 1, "'h2'");
	/* through a symlink placed first */
	struct ent e3[] = { { "l", AE_IFLNK, 0777, NULL, outside, NULL, 0 },
			    { "h3", AE_IFREG, 0644, NULL, NULL, "l/secret", 0 } };
	assert_refused(e3, 2, "'h3'");
}
END_TEST

START_TEST(test_refuse_device_and_setuid)
{
	struct ent e[] = { { "mem", AE_IFCHR, 0600, NULL, NULL, NULL, makedev(1, 1) } };
	assert_refused(e, 1, "'mem'");
	char p[400];
	snprintf(p, sizeof(p), "%s/mem", target);
	ck_assert_int_ne(access(p, F_OK), 0);
	struct ent e2[] = { { "bin/su", AE_IFREG, 04755, "#!/bin/sh\n", NULL, NULL, 0 } };
	assert_refused(e2, 1, "'bin/su'");
	struct ent e3[] = { { "bin/sg", AE_IFREG, 02755, "#!/bin/sh\n", NULL, NULL, 0 } };
	assert_refused(e3, 1, "'bin/sg'");
	/* trusted: allowed, bit kept */
	lc_error_t *err = NULL;
	ck_assert_int_eq(extract(e2, 1, LC_LAYER_TRUSTED, &err), 0);
	snprintf(p, sizeof(p), "%s/bin/su", target);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 04755);
}
END_TEST

START_TEST(test_whiteouts_unpack)
{
	if (geteuid() != 0)
		return;
	struct ent e[] = { { "d", AE_IFDIR, 0755, NULL, NULL, NULL, 0 },
			   { "d/.wh.gone", AE_IFREG, 0, "", NULL, NULL, 0 },
			   { "o", AE_IFDIR, 0750, NULL, NULL, NULL, 0 },
			   { "o/.wh..wh..opq", AE_IFREG, 0, "", NULL, NULL, 0 },
			   { "o/kept", AE_IFREG, 0644, "k", NULL, NULL, 0 } };
	lc_error_t *err = NULL;
	ck_assert_int_eq(extract(e, 5, 0, &err), 0);
	char p[400];
	struct stat st;
	snprintf(p, sizeof(p), "%s/d/gone", target);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	ck_assert_int_eq(st.st_rdev, makedev(0, 0));
	snprintf(p, sizeof(p), "%s/d/.wh.gone", target);
	ck_assert_int_ne(lstat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/o", target);
	char v[8] = { 0 };
	ck_assert_int_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "y");
	snprintf(p, sizeof(p), "%s/o/.wh..wh..opq", target);
	ck_assert_int_ne(lstat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/o", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(st.st_mtime, 1600000000);
}
END_TEST

/* ---- the writer ---- */

struct tar_item {
	char name[256];
	mode_t mode;
	long uid, gid;
	char link[256];
	char hardlink[256];
	bool has_user_x, has_overlay_x;
};

static size_t read_tar(int fd, struct tar_item *items, size_t max)
{
	lseek(fd, 0, SEEK_SET);
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_fd(a, fd, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK && n < max) {
		struct tar_item *it = &items[n++];
		memset(it, 0, sizeof(*it));
		snprintf(it->name, sizeof(it->name), "%s", archive_entry_pathname(e));
		it->mode = archive_entry_mode(e);
		it->uid = archive_entry_uid(e);
		it->gid = archive_entry_gid(e);
		if (archive_entry_symlink(e))
			snprintf(it->link, sizeof(it->link), "%s", archive_entry_symlink(e));
		if (archive_entry_hardlink(e))
			snprintf(it->hardlink, sizeof(it->hardlink), "%s", archive_entry_hardlink(e));
		const char *xn;
		const void *xv;
		size_t xs;
		archive_entry_xattr_reset(e);
		while (archive_entry_xattr_next(e, &xn, &xv, &xs) == ARCHIVE_OK) {
			if (!strcmp(xn, "user.note"))
				it->has_user_x = true;
			if (strstr(xn, "overlay"))
				it->has_overlay_x = true;
		}
	}
	archive_read_free(a);
	return n;
}

static struct tar_item *find_item(struct tar_item *items, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(items[i].name, name))
			return &items[i];
	return NULL;
}

static void write_file(const char *dir, const char *name, const char *data, uid_t uid, gid_t gid, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(data, f);
	fclose(f);
	ck_assert_int_eq(chown(p, uid, gid), 0);
	ck_assert_int_eq(chmod(p, mode), 0);
}

START_TEST(test_upper_to_layer)
{
	if (geteuid() != 0)
		return;
	const uid_t B = 1000000000;
	char up[400], usr[400], p[512];
	snprintf(up, sizeof(up), "%s/upper", scratch);
	snprintf(usr, sizeof(usr), "%s/usr-upper", scratch);
	ck_assert_int_eq(mkdir(up, 0755), 0);
	ck_assert_int_eq(mkdir(usr, 0755), 0);
	ck_assert_int_eq(chown(up, B, B), 0);
	ck_assert_int_eq(chown(usr, B, B), 0);
	write_file(up, "owned", "data", B + 1000, B + 100, 0640);
	snprintf(p, sizeof(p), "%s/owned", up);
	ck_assert_int_eq(setxattr(p, "user.note", "hi", 2, 0), 0);
	ck_assert_int_eq(setxattr(p, "trusted.overlay.origin", "zz", 2, 0), 0);
	snprintf(p, sizeof(p), "%s/gone", up);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/opq", up);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(chown(p, B, B), 0);
	ck_assert_int_eq(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
	write_file(p, "inner", "i", B, B, 0644);
	snprintf(p, sizeof(p), "%s/usr", up); /* the mount point of the /usr overlay */
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(chown(p, B, B), 0);
	write_file(usr, "lib.so", "elf", B, B, 0755);

	lc_upper_t uppers[] = { { up, "" }, { usr, "usr" } };
	char tpath[512];
	snprintf(tpath, sizeof(tpath), "%s/layer.tar", scratch);
	int fd = open(tpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char hex[LC_HEX_LEN + 1];
	uint64_t size = 0;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_layer_write(uppers, 2, B, B, 0, fd, hex, &size, &err), 0);
	ck_assert_int_eq(strlen(hex), 64);
	char fhex[LC_HEX_LEN + 1];
	uint64_t fsize;
	ck_assert_int_eq(lc_sha256_file(tpath, fhex, &fsize, NULL), 0);
	ck_assert_str_eq(hex, fhex);
	ck_assert_int_eq(size, fsize);

	struct tar_item items[32];
	size_t n = read_tar(fd, items, 32);
	struct tar_item *it = find_item(items, n, "owned");
	ck_assert_ptr_nonnull(it);
	ck_assert_int_eq(it->uid, 1000);
	ck_assert_int_eq(it->gid, 100);
	ck_assert_int_eq(it->mode & 07777, 0640);
	ck_assert(it->has_user_x);
	ck_assert(!it->has_overlay_x);
	it = find_item(items, n, ".wh.gone");
	ck_assert_ptr_nonnull(it);
	ck_assert(S_ISREG(it->mode));
	ck_assert_ptr_null(find_item(items, n, "gone"));
	ck_assert_ptr_nonnull(find_item(items, n, "opq/"));
	ck_assert_ptr_nonnull(find_item(items, n, "opq/.wh..wh..opq"));
	ck_assert_ptr_nonnull(find_item(items, n, "opq/inner"));
	ck_assert_ptr_nonnull(find_item(items, n, "usr/lib.so"));
	/* the usr upper's root appears once, as usr/, from the usr upper */
	size_t usr_dirs = 0;
	for (size_t i = 0; i < n; i++)
		usr_dirs += !strcmp(items[i].name, "usr/");
	ck_assert_int_eq(usr_dirs, 1);
	close(fd);

	/* and back: the layer unpacks into whiteouts and an opaque dir */
	fd = open(tpath, O_RDONLY);
	ck_assert_int_eq(lc_layer_extract(fd, target, 0, NULL, NULL, &err), 0);
	close(fd);
	struct stat st;
	snprintf(p, sizeof(p), "%s/gone", target);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
	snprintf(p, sizeof(p), "%s/opq", target);
	char v[4] = { 0 };
	ck_assert_int_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	snprintf(p, sizeof(p), "%s/owned", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 1000);
	ck_assert_int_eq(st.st_gid, 100);
	ck_assert_int_lt(getxattr(p, "trusted.overlay.origin", v, sizeof(v)), 0);
	snprintf(p, sizeof(p), "%s/usr/lib.so", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 0);
}
END_TEST

START_TEST(test_upper_foreign_owner)
{
	if (geteuid() != 0)
		return;
	/* a file of host uid 1234 appears in the sandbox as the overflow id */
	char up[400];
	snprintf(up, sizeof(up), "%s/upper", scratch);
	ck_assert_int_eq(mkdir(up, 0755), 0);
	write_file(up, "intruder", "x", 1234, 1234, 0644);
	write_file(up, "mine", "y", 1000000000 + 5, 1000000000 + 6, 0644);
	lc_upper_t u = { up, "" };
	char tpath[512];
	snprintf(tpath, sizeof(tpath), "%s/layer.tar", scratch);
	int fd = open(tpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char hex[LC_HEX_LEN + 1];
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_layer_write(&u, 1, 1000000000, 1000000000, 0, fd, hex, NULL, &err), 0);
	struct tar_item items[8];
	size_t n = read_tar(fd, items, 8);
	struct tar_item *it = find_item(items, n, "intruder");
	ck_assert_ptr_nonnull(it);
	ck_assert_int_eq(it->uid, 65534);
	ck_assert_int_eq(it->gid, 65534);
	it = find_item(items, n, "mine");
	ck_assert_ptr_nonnull(it);
	ck_assert_int_eq(it->uid, 5);
	ck_assert_int_eq(it->gid, 6);
	/* raw ids: as on disk */
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	lseek(fd, 0, SEEK_SET);
	ck_assert_int_eq(lc_layer_write(&u, 1, 0, 0, LC_LAYER_RAW_IDS, fd, hex, NULL, &err), 0);
	n = read_tar(fd, items, 8);
	ck_assert_int_eq(find_item(items, n, "intruder")->uid, 1234);
	ck_assert_int_eq(find_item(items, n, "mine")->uid, 1000000005);
	close(fd);
}
END_TEST

/* Full round trip of a tree: modes, owners, times, hardlinks, symlinks,
 * a sparse file, xattrs. */
static void check_same(const char *a_dir, const char *b_dir, const char *name, uid_t shift)
{
	char a[512], b[512];
	snprintf(a, sizeof(a), "%s/%s", a_dir, name);
	snprintf(b, sizeof(b), "%s/%s", b_dir, name);
	struct stat sa, sb;
	ck_assert_int_eq(lstat(a, &sa), 0);
	ck_assert_msg(lstat(b, &sb) == 0, "%s missing", name);
	ck_assert_int_eq(sa.st_mode, sb.st_mode);
	ck_assert_int_eq(sa.st_uid - shift, sb.st_uid);
	ck_assert_int_eq(sa.st_gid - shift, sb.st_gid);
	if (!S_ISDIR(sa.st_mode))
		ck_assert_int_eq(sa.st_size, sb.st_size);
	if (!S_ISLNK(sa.st_mode)) {
		/* whole seconds: a restricted pax tar keeps no fraction
		 * unless an entry needs a pax header anyway */
		ck_assert_int_eq(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
	}
	if (S_ISREG(sa.st_mode)) {
		char ha[65], hb[65];
		ck_assert_int_eq(lc_sha256_file(a, ha, NULL, NULL), 0);
		ck_assert_int_eq(lc_sha256_file(b, hb, NULL, NULL), 0);
		ck_assert_str_eq(ha, hb);
		ck_assert_int_eq(sa.st_nlink, sb.st_nlink);
	}
	if (S_ISLNK(sa.st_mode)) {
		char la[256] = { 0 }, lb[256] = { 0 };
		ck_assert_int_gt(readlink(a, la, sizeof(la) - 1), 0);
		ck_assert_int_gt(readlink(b, lb, sizeof(lb) - 1), 0);
		ck_assert_str_eq(la, lb);
	}
}

START_TEST(test_round_trip)
{
	if (geteuid() != 0)
		return;
	const uid_t B = 1000000000;
	char src[400], p[512], q[512];
	snprintf(src, sizeof(src), "%s/src", scratch);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(chown(src, B, B), 0);
	snprintf(p, sizeof(p), "%s/dir", src);
	ck_assert_int_eq(mkdir(p, 0710), 0);
	ck_assert_int_eq(chown(p, B + 7, B + 8), 0);
	ck_assert_int_eq(chmod(p, 01770), 0);
	write_file(p, "x", "in dir", B + 7, B + 8, 0600);
	write_file(src, "exec", "#!/bin/sh\necho hi\n", B, B, 0755);
	write_file(src, "ro", "read only", B + 65535, B + 65535, 0444);
	snprintf(p, sizeof(p), "%s/exec", src);
	snprintf(q, sizeof(q), "%s/dir/exec-link", src);
	ck_assert_int_eq(link(p, q), 0);
	snprintf(p, sizeof(p), "%s/sym", src);
	ck_assert_int_eq(symlink("dir/x", p), 0);
	ck_assert_int_eq(lchown(p, B + 3, B + 3), 0);
	snprintf(p, sizeof(p), "%s/abs", src);
	ck_assert_int_eq(symlink("/usr/bin/env", p), 0);
	ck_assert_int_eq(lchown(p, B, B), 0);
	snprintf(p, sizeof(p), "%s/fifo", src);
	ck_assert_int_eq(mkfifo(p, 0620), 0);
	ck_assert_int_eq(chown(p, B + 1, B + 2), 0);
	/* sparse: 64 MiB with data at 1 MiB and at the end */
	snprintf(p, sizeof(p), "%s/sparse", src);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(pwrite(fd, "middle", 6, 1 << 20), 6);
	ck_assert_int_eq(pwrite(fd, "tail", 4, (64 << 20) - 4), 4);
	close(fd);
	ck_assert_int_eq(chown(p, B, B), 0);
	snprintf(p, sizeof(p), "%s/holey-end", src);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(pwrite(fd, "head", 4, 0), 4);
	ck_assert_int_eq(ftruncate(fd, 32 << 20), 0);
	close(fd);
	ck_assert_int_eq(chown(p, B, B), 0);
	snprintf(p, sizeof(p), "%s/exec", src);
	ck_assert_int_eq(setxattr(p, "user.note", "round trip", 10, 0), 0);
	/* times last */
	const char *names[] = { "dir/x", "exec", "ro", "sparse", "holey-end", "fifo", "dir" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", src, names[i]);
		struct timespec ts[2] = { { 1500000000, 123456789 }, { 1500000000 + (time_t)i, 987654321 } };
		ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
	}

	lc_upper_t u = { src, "" };
	char tpath[512];
	snprintf(tpath, sizeof(tpath), "%s/layer.tar", scratch);
	fd = open(tpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char hex[LC_HEX_LEN + 1];
	uint64_t size;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_layer_write(&u, 1, B, B, 0, fd, hex, &size, &err), 0);
	ck_assert_int_lt(size, 1 << 20); /* holes are not written out */
	lseek(fd, 0, SEEK_SET);
	char bhex[LC_HEX_LEN + 1], dhex[LC_HEX_LEN + 1];
	ck_assert_int_eq(lc_layer_extract(fd, target, 0, bhex, dhex, &err), 0);
	close(fd);
	ck_assert_str_eq(bhex, hex);
	ck_assert_str_eq(dhex, hex);

	const char *all[] = { "dir", "dir/x", "dir/exec-link", "exec", "ro", "sym", "abs", "fifo", "sparse",
			      "holey-end" };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		check_same(src, target, all[i], B);
	struct stat s1, s2;
	snprintf(p, sizeof(p), "%s/exec", target);
	snprintf(q, sizeof(q), "%s/dir/exec-link", target);
	ck_assert_int_eq(stat(p, &s1), 0);
	ck_assert_int_eq(stat(q, &s2), 0);
	ck_assert_int_eq(s1.st_ino, s2.st_ino);
	char v[32] = { 0 };
	ck_assert_int_eq(getxattr(p, "user.note", v, sizeof(v)), 10);
	ck_assert_str_eq(v, "round trip");
	snprintf(p, sizeof(p), "%s/sparse", target);
	ck_assert_int_eq(stat(p, &s1), 0);
	ck_assert_int_lt(s1.st_blocks * 512, 1 << 20);
	snprintf(p, sizeof(p), "%s/holey-end", target);
	ck_assert_int_eq(stat(p, &s1), 0);
	ck_assert_int_eq(s1.st_size, 32 << 20);
	ck_assert_int_lt(s1.st_blocks * 512, 1 << 20);
}
END_TEST

START_TEST(test_decompress_gzip)
{
	struct ent e[] = { { "f", AE_IFREG, 0644, "payload", NULL, NULL, 0 } };
	int fd = make_tar("plain.tar", e, 1);
	close(fd);
	char plain[512], gz[512], cmd[1200];
	snprintf(plain, sizeof(plain), "%s/plain.tar", scratch);
	snprintf(gz, sizeof(gz), "%s/plain.tar.gz", scratch);
	snprintf(cmd, sizeof(cmd), "gzip -c %s > %s", plain, gz);
	ck_assert_int_eq(system(cmd), 0);
	char h1[65], h2[65], h3[65];
	const char *mt1, *mt2;
	ck_assert_int_eq(lc_layer_decompress(plain, -1, h1, NULL, &mt1, NULL), 0);
	ck_assert_int_eq(lc_layer_decompress(gz, -1, h2, NULL, &mt2, NULL), 0);
	ck_assert_int_eq(lc_sha256_file(plain, h3, NULL, NULL), 0);
	ck_assert_str_eq(h1, h3);
	ck_assert_str_eq(h2, h3);
	ck_assert_str_eq(mt1, "application/vnd.oci.image.layer.v1.tar");
	ck_assert_str_eq(mt2, "application/vnd.oci.image.layer.v1.tar+gzip");
	/* a compressed stream unpacks too; its diff_id is left to decompress */
	fd = open(gz, O_RDONLY);
	char bhex[65], dhex[65];
	ck_assert_int_eq(lc_layer_extract(fd, target, 0, bhex, dhex, NULL), 0);
	close(fd);
	ck_assert_str_eq(dhex, "");
	ck_assert_int_eq(lc_sha256_file(gz, h3, NULL, NULL), 0);
	ck_assert_str_eq(bhex, h3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("layer");
	TCase *tc = tcase_create("extract");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_refuse_traversal);
	tcase_add_test(tc, test_refuse_absolute);
	tcase_add_test(tc, test_refuse_symlink_then_write);
	tcase_add_test(tc, test_refuse_hardlink_out);
	tcase_add_test(tc, test_refuse_device_and_setuid);
	tcase_add_test(tc, test_whiteouts_unpack);
	tcase_add_test(tc, test_upper_to_layer);
	tcase_add_test(tc, test_upper_foreign_owner);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_decompress_gzip);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
