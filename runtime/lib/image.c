/* image.c — the image store: an OCI image layout plus unpacked layers.
 *
 * Locks (files beside the layout, so OCI tools never see them):
 *   lc_lib_dir()/.gc.lock     shared by everything that writes or reads
 *                             blobs and layers, exclusive for prune;
 *   lc_lib_dir()/.index.lock  exclusive around each index.json update;
 *   layers/.lock-<hex>        one unpacker per layer at a time. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "archivelib.h"
#include "image.h"
#include "json.h"
#include "lcrun.h"
#include "state.h"
#include "util.h"

#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define ANN_REF "org.opencontainers.image.ref.name"
#define ANN_BASE "org.lcrun.base"
#define ANN_TRUSTED "org.lcrun.trusted"

/* ---- paths and locks ------------------------------------------------------ */

char *lc_image_store_dir(void)
{
	return lc_strdup_printf("%s/images", lc_lib_dir());
}

char *lc_image_layers_dir(void)
{
	return lc_strdup_printf("%s/layers", lc_lib_dir());
}

static char *blob_path(const char *hex)
{
	return lc_strdup_printf("%s/images/blobs/sha256/%s", lc_lib_dir(), hex);
}

static char *tmp_dir(void)
{
	return lc_strdup_printf("%s/tmp", lc_lib_dir());
}

static int lock_named(const char *which, int op, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/.%s.lock", lc_lib_dir(), which);
	return lc_lock_file(p, op, err);
}

static int store_init(lc_error_t **err);

/* The store, made if missing, held against prune: returns the lock fd. */
static int store_hold(lc_error_t **err)
{
	if (store_init(err) < 0)
		return -1;
	return lock_named("gc", LOCK_SH, err);
}

/* Make the layout if it is missing. */
static int store_init(lc_error_t **err)
{
	_cleanup_free_ char *blobs = lc_strdup_printf("%s/images/blobs/sha256", lc_lib_dir());
	_cleanup_free_ char *layers = lc_image_layers_dir();
	_cleanup_free_ char *tmp = tmp_dir();
	/* Private, as the store around them (lc_lib_dir_hold): an unpacked
	 * layer keeps a snapshot's setuid-root files as they were. */
	if (lc_lib_dir_hold(err) < 0 || lc_mkdir_p(blobs, 0700, err) < 0 || lc_mkdir_p(layers, 0700, err) < 0 ||
	    lc_mkdir_p(tmp, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *layout = lc_strdup_printf("%s/images/oci-layout", lc_lib_dir());
	_cleanup_free_ char *index = lc_strdup_printf("%s/images/index.json", lc_lib_dir());
	if (access(layout, F_OK) == 0 && access(index, F_OK) == 0)
		return 0;
	_cleanup_close_ int lk = lock_named("index", LOCK_EX, err);
	if (lk < 0)
		return -1;
	static const char lay[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	if (access(layout, F_OK) < 0 && lc_write_file_atomic(layout, lay, sizeof(lay) - 1, 0644, err) < 0)
		return -1;
	static const char idx[] = "{\"schemaVersion\":2,\"mediaType\":\"" MT_INDEX "\",\"manifests\":[]}";
	if (access(index, F_OK) < 0 && lc_write_file_atomic(index, idx, sizeof(idx) - 1, 0644, err) < 0)
		return -1;
	return 0;
}

/* ---- digests and blobs ---------------------------------------------------- */

static bool hex_valid(const char *s)
{
	if (strlen(s) != LC_HEX_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
			return false;
	return true;
}

/* "sha256:HEX" → HEX (borrowed), NULL when malformed. */
static const char *digest_hex(const char *digest)
{
	if (!digest || strncmp(digest, "sha256:", 7) || !hex_valid(digest + 7))
		return NULL;
	return digest + 7;
}

static const char *desc_hex(json_t *desc, lc_error_t **err)
{
	const char *d = lc_json_str(desc, "digest");
	const char *hex = digest_hex(d);
	if (!hex)
		lc_error_set(err, LC_EXIT_INVALID, 0, "descriptor with a bad digest '%s'", d ? d : "(none)");
	return hex;
}

/* Store a small blob (manifest/config) by content. */
static int put_blob_buf(const char *data, size_t len, char *hex, lc_error_t **err)
{
	lc_sha256_buf(data, len, hex);
	_cleanup_free_ char *p = blob_path(hex);
	if (access(p, F_OK) == 0)
		return 0;
	return lc_write_file_atomic(p, data, len, 0644, err);
}

static int put_blob_json(json_t *j, char *hex, size_t *len, lc_error_t **err)
{
	_cleanup_free_ char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!s)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot serialize JSON");
	*len = strlen(s);
	return put_blob_buf(s, *len, hex, err);
}

/* Move a finished temp file into blobs/sha256/HEX. */
static int put_blob_file(const char *tmp, const char *hex, bool *created, lc_error_t **err)
{
	_cleanup_free_ char *p = blob_path(hex);
	if (created)
		*created = false;
	if (access(p, F_OK) == 0) {
		unlink(tmp);
		return 0;
	}
	chmod(tmp, 0644);
	if (rename(tmp, p) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot store blob %s", p);
	if (created)
		*created = true;
	/* on the disk before an index names it */
	return lc_fsync_parent(p, err);
}

/* A JSON blob whose digest was checked carries this xattr: its digest and
 * its file as it was then (inode, size, modification time).  While they
 * still hold, a run does not hash it again: SHA-256 means loading
 * libcrypto, 1.1-1.3 ms of every `run --image` here, more than all the
 * rest of resolving the image.  A blob whose file was written since is
 * hashed again (and refused if it changed). */
#define BLOB_CHECKED_XATTR "user.lcrun.checked"

static void blob_mark(const char *hex, const struct stat *st, char *buf, size_t n)
{
	snprintf(buf, n, "sha256:%s %llu %lld %lld.%09ld", hex, (unsigned long long)st->st_ino,
		 (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* Load a JSON blob and check it is what its digest says. */
static int load_blob_json(const char *hex, json_t **out, lc_error_t **err)
{
	_cleanup_free_ char *p = blob_path(hex);
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "cannot open %s", p);
		return lc_error_wrap(err, "image store is missing blob sha256:%s", hex);
	}
	/* the mark of the file as it is before its bytes are read: a write
	 * meanwhile leaves a newer mtime, and the next run hashes it again */
	struct stat st;
	char mark[160] = "", had[160];
	if (fstat(fd, &st) == 0)
		blob_mark(hex, &st, mark, sizeof(mark));
	ssize_t n = *mark ? fgetxattr(fd, BLOB_CHECKED_XATTR, had, sizeof(had)) : -1;
	bool checked = n > 0 && (size_t)n == strlen(mark) && !memcmp(had, mark, (size_t)n);
	if (lc_read_fd(fd, p, &data, &len, err) < 0)
		return lc_error_wrap(err, "image store is missing blob sha256:%s", hex);
	if (!checked) {
		char got[LC_HEX_LEN + 1];
		lc_sha256_buf(data, len, got);
		if (strcmp(got, hex))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "blob sha256:%s is corrupt (content hashes to %s)",
					    hex, got);
		/* best effort: a read-only store, or a filesystem without
		 * user xattrs, is hashed at every run */
		if (*mark && fsetxattr(fd, BLOB_CHECKED_XATTR, mark, strlen(mark), 0) < 0) {
			/* hashed again next time */
		}
	}
	json_error_t je;
	*out = json_loadb(data, len, 0, &je);
	if (!*out)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "blob sha256:%s: invalid JSON: %s", hex, je.text);
	return 0;
}

char *lc_image_tmp_name(const char *dir, const char *prefix)
{
	pid_t me = getpid();
	return lc_strdup_printf("%s/%s-%d.%llu-XXXXXX", dir, prefix, (int)me, lc_proc_starttime(me));
}

static int make_tmp_file(char **path, lc_error_t **err)
{
	_cleanup_free_ char *d = tmp_dir();
	char *p = lc_image_tmp_name(d, "blob");
	int fd = mkostemp(p, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(p);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot create a temporary file in %s", d);
	}
	*path = p;
	return fd;
}

/* ---- index ---------------------------------------------------------------- */

/* index.json as it is now; the store must exist (store_init). */
static int index_read(json_t **out, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/images/index.json", lc_lib_dir());
	json_error_t je;
	json_t *j = json_load_file(p, 0, &je);
	if (!j)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s", p, je.text);
	if (!json_is_array(json_object_get(j, "manifests")))
		json_object_set_new(j, "manifests", json_array());
	*out = j;
	return 0;
}

/* The store made if missing, and its index.  Not under the index lock:
 * store_init takes it (flock locks are per open file, so a second lock
 * taken by this process would wait for the first for ever). */
static int index_load(json_t **out, lc_error_t **err)
{
	if (store_init(err) < 0)
		return -1;
	return index_read(out, err);
}

/* The index lock, taken once the store exists. */
static int index_lock(lc_error_t **err)
{
	if (store_init(err) < 0)
		return -1;
	return lock_named("index", LOCK_EX, err);
}

static int index_save(json_t *idx, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/images/index.json", lc_lib_dir());
	_cleanup_free_ char *s = json_dumps(idx, JSON_INDENT(2));
	if (!s)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot serialize %s", p);
	return lc_write_file_atomic(p, s, strlen(s), 0644, err);
}

static const char *desc_name(json_t *desc)
{
	return lc_json_str(json_object_get(desc, "annotations"), ANN_REF);
}

/* The index entry for a name (or a manifest digest); borrowed; -1 if none. */
static ssize_t index_find(json_t *idx, const char *name)
{
	json_t *ms = json_object_get(idx, "manifests");
	size_t i;
	json_t *d;
	json_array_foreach(ms, i, d) {
		const char *n = desc_name(d);
		if (n && !strcmp(n, name))
			return (ssize_t)i;
	}
	if (digest_hex(name)) {
		json_array_foreach(ms, i, d) {
			const char *dg = lc_json_str(d, "digest");
			if (dg && !strcmp(dg, name))
				return (ssize_t)i;
		}
	}
	return -1;
}

bool lc_image_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > 128 || !isalnum((unsigned char)name[0]) || !strcmp(name, LC_IMAGE_HOST))
		return false;
	if (strstr(name, ".."))
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._:/-", *p))
			return false;
	return true;
}

static int check_new_name(const char *name, lc_error_t **err)
{
	if (!lc_image_name_valid(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0,
				    "invalid image name '%s' (letters, digits and ._:/- , at most 128, not 'host')",
				    name ? name : "");
	int r = lc_image_exists(name, err);
	if (r < 0)
		return -1;
	if (r > 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "image %s exists already (remove it first)", name);
	return 0;
}

/* Add a named manifest descriptor to index.json (under the index lock). */
static int index_add(const char *name, const char *manifest_hex, size_t manifest_len, lc_error_t **err)
{
	_cleanup_close_ int lk = index_lock(err);
	if (lk < 0)
		return -1;
	_cleanup_json_ json_t *idx = NULL;
	if (index_read(&idx, err) < 0)
		return -1;
	if (index_find(idx, name) >= 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "image %s exists already (remove it first)", name);
	json_t *d = json_pack("{s:s, s:s+, s:I, s:{s:s}}", "mediaType", MT_MANIFEST, "digest", "sha256:",
			      manifest_hex, "size", (json_int_t)manifest_len, "annotations", ANN_REF, name);
	json_array_append_new(json_object_get(idx, "manifests"), d);
	return index_save(idx, err);
}

int lc_image_exists(const char *name, lc_error_t **err)
{
	_cleanup_json_ json_t *idx = NULL;
	if (index_load(&idx, err) < 0)
		return -1;
	return index_find(idx, name) >= 0;
}

/* ---- loading an image ----------------------------------------------------- */

struct img {
	char *name;
	char manifest_hex[LC_HEX_LEN + 1];
	json_t *desc;     /* copy of the index entry */
	json_t *manifest;
	json_t *config;
	bool base_host;
};

static void img_clear(struct img *im)
{
	free(im->name);
	if (im->desc)
		json_decref(im->desc);
	if (im->manifest)
		json_decref(im->manifest);
	if (im->config)
		json_decref(im->config);
	memset(im, 0, sizeof(*im));
}

static int img_load_manifest(struct img *im, lc_error_t **err)
{
	const char *mhex = desc_hex(im->desc, err);
	if (!mhex)
		return -1;
	strcpy(im->manifest_hex, mhex);
	if (load_blob_json(mhex, &im->manifest, err) < 0)
		return -1;
	json_t *cfg = json_object_get(im->manifest, "config");
	const char *chex = desc_hex(cfg, err);
	if (!chex || load_blob_json(chex, &im->config, err) < 0)
		return lc_error_wrap(err, "image %s: config", im->name);
	json_t *layers = json_object_get(im->manifest, "layers");
	json_t *diffs = json_object_get(json_object_get(im->config, "rootfs"), "diff_ids");
	if (!json_is_array(layers) || !json_is_array(diffs) || json_array_size(layers) != json_array_size(diffs))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "image %s: manifest layers and config diff_ids do not match", im->name);
	const char *base = lc_json_str(json_object_get(im->manifest, "annotations"), ANN_BASE);
	im->base_host = base && !strcmp(base, LC_IMAGE_HOST);
	return 0;
}

/* Load a named image; on failure *im is left empty. */
static int img_load(const char *name, struct img *im, lc_error_t **err)
{
	memset(im, 0, sizeof(*im));
	_cleanup_json_ json_t *idx = NULL;
	if (index_load(&idx, err) < 0)
		return -1;
	ssize_t i = index_find(idx, name);
	if (i < 0)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no image named %s (see lcrun image ls)", name);
	im->desc = json_deep_copy(json_array_get(json_object_get(idx, "manifests"), (size_t)i));
	im->name = strdup(name);
	const char *mt = lc_json_str(im->desc, "mediaType");
	if (mt && strcmp(mt, MT_MANIFEST) && strcmp(mt, MT_DOCKER_MANIFEST)) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "image %s is a %s, not an image manifest", name, mt);
		img_clear(im);
		return -1;
	}
	if (img_load_manifest(im, err) < 0) {
		lc_error_wrap(err, "image %s", name);
		img_clear(im);
		return -1;
	}
	return 0;
}

/* ---- unpacking ------------------------------------------------------------ */

/* Unpack blob into layers/<diff_hex>: into a temp dir, then renamed, so
 * nobody sees half a layer. */
static int unpack_layer_locked(const char *blob_hex, const char *diff_hex, const char *final, unsigned flags,
			       lc_error_t **err)
{
	_cleanup_free_ char *layers = lc_image_layers_dir();
	_cleanup_free_ char *pfx = lc_strdup_printf(".tmp-%s", diff_hex);
	_cleanup_free_ char *tmp = lc_image_tmp_name(layers, pfx);
	if (!mkdtemp(tmp))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", tmp);
	_cleanup_free_ char *bp = blob_path(blob_hex);
	_cleanup_close_ int fd = open(bp, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		lc_rm_rf(tmp, NULL);
		return lc_error_set(err, LC_EXIT_INVALID, errno, "layer blob sha256:%s", blob_hex);
	}
	char got_blob[LC_HEX_LEN + 1], got_diff[LC_HEX_LEN + 1];
	if (lc_layer_extract(fd, tmp, flags, got_blob, got_diff, err) < 0) {
		lc_rm_rf(tmp, NULL);
		return lc_error_wrap(err, "layer sha256:%.12s", blob_hex);
	}
	if (strcmp(got_blob, blob_hex) || (got_diff[0] && strcmp(got_diff, diff_hex))) {
		lc_rm_rf(tmp, NULL);
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer blob sha256:%s is corrupt (hashes to %s)",
				    blob_hex, got_blob);
	}
	LC_FAULT("image-layer-unpacked");
	/* Its files on the disk before its name is: after a power cut a layer
	 * is there whole or not at all (then unpacked again), never with
	 * files that lost their data. */
	_cleanup_close_ int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || syncfs(dfd) < 0) {
		int e = errno;
		lc_rm_rf(tmp, NULL);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot sync %s", tmp);
	}
	struct stat st;
	if (chmod(tmp, 0755) < 0 || rename(tmp, final) < 0) {
		int e = errno;
		lc_rm_rf(tmp, NULL);
		if (stat(final, &st) == 0)
			return 0; /* another unpacker won */
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot move layer into %s", final);
	}
	return 0;
}

/* Unpack a layer unless it is there; one unpacker per layer at a time. */
static int unpack_layer(const char *blob_hex, const char *diff_hex, unsigned flags, lc_error_t **err)
{
	_cleanup_free_ char *layers = lc_image_layers_dir();
	_cleanup_free_ char *final = lc_strdup_printf("%s/%s", layers, diff_hex);
	struct stat st;
	if (stat(final, &st) == 0)
		return 0;
	_cleanup_free_ char *lpath = lc_strdup_printf("%s/.lock-%s", layers, diff_hex);
	_cleanup_close_ int lk = lc_lock_file(lpath, LOCK_EX, err);
	if (lk < 0)
		return -1;
	int r = stat(final, &st) == 0 ? 0 : unpack_layer_locked(blob_hex, diff_hex, final, flags, err);
	unlink(lpath);
	return r;
}

static bool desc_trusted(json_t *desc)
{
	const char *t = lc_json_str(json_object_get(desc, "annotations"), ANN_TRUSTED);
	return t && !strcmp(t, "true");
}

static char *str_or_null(json_t *s)
{
	const char *v = json_string_value(s);
	return v && *v ? strdup(v) : NULL;
}

int lc_image_resolve(const char *name, lc_image_resolved_t **out, lc_error_t **err)
{
	if (!name || !*name)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "empty image name");
	_cleanup_close_ int gc = store_hold(err);
	if (gc < 0)
		return -1;
	struct img im;
	if (img_load(name, &im, err) < 0)
		return -1;
	lc_image_resolved_t *r = lc_xmalloc0(sizeof(*r));
	r->name = strdup(name);
	r->manifest_digest = lc_strdup_printf("sha256:%s", im.manifest_hex);
	r->base_host = im.base_host;
	json_t *layers = json_object_get(im.manifest, "layers");
	json_t *diffs = json_object_get(json_object_get(im.config, "rootfs"), "diff_ids");
	r->n_layers = json_array_size(layers);
	r->layer_dirs = lc_xmalloc0((r->n_layers + 1) * sizeof(char *));
	r->diff_ids = lc_xmalloc0((r->n_layers + 1) * sizeof(char *));
	_cleanup_free_ char *ldir = lc_image_layers_dir();
	for (size_t i = 0; i < r->n_layers; i++) {
		json_t *d = json_array_get(layers, i);
		const char *diff = json_string_value(json_array_get(diffs, i));
		const char *dhex = digest_hex(diff);
		const char *bhex = desc_hex(d, err);
		if (!bhex || !dhex) {
			if (!dhex)
				lc_error_set(err, LC_EXIT_INVALID, 0, "bad diff_id '%s'", diff ? diff : "");
			goto fail;
		}
		if (unpack_layer(bhex, dhex, desc_trusted(d) ? LC_LAYER_TRUSTED : 0, err) < 0)
			goto fail;
		r->layer_dirs[i] = lc_strdup_printf("%s/%s", ldir, dhex);
		r->diff_ids[i] = strdup(diff);
	}
	json_t *c = json_object_get(im.config, "config");
	r->config.env = lc_json_to_strv(json_object_get(c, "Env"));
	r->config.workdir = str_or_null(json_object_get(c, "WorkingDir"));
	r->config.user = str_or_null(json_object_get(c, "User"));
	r->config.entrypoint = lc_json_to_strv(json_object_get(c, "Entrypoint"));
	r->config.cmd = lc_json_to_strv(json_object_get(c, "Cmd"));
	img_clear(&im);
	*out = r;
	return 0;
fail:
	lc_error_wrap(err, "image %s", name);
	img_clear(&im);
	lc_image_resolved_free(r);
	return -1;
}

void lc_image_resolved_free(lc_image_resolved_t *img)
{
	if (!img)
		return;
	free(img->name);
	free(img->manifest_digest);
	for (size_t i = 0; i < img->n_layers; i++) {
		if (img->layer_dirs)
			free(img->layer_dirs[i]);
		if (img->diff_ids)
			free(img->diff_ids[i]);
	}
	free(img->layer_dirs);
	free(img->diff_ids);
	lc_strv_free(img->config.env);
	free(img->config.workdir);
	free(img->config.user);
	lc_strv_free(img->config.entrypoint);
	lc_strv_free(img->config.cmd);
	free(img);
}

/* Is the image's env variable K (from "K=V") set by the spec already? */
static bool env_has(char **env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t kl = eq ? (size_t)(eq - kv) : strlen(kv);
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], kv, kl) && (env[i][kl] == '=' || env[i][kl] == '\0'))
			return true;
	return false;
}

int lc_image_apply_config(lc_spec_t *spec, const lc_image_resolved_t *img, lc_error_t **err)
{
	const lc_image_config_t *c = &img->config;
	/* env: the image's, then the spec's on top */
	char **env = NULL;
	for (size_t i = 0; c->env && c->env[i]; i++)
		if (!env_has(spec->env, c->env[i]))
			lc_strv_push(&env, c->env[i]);
	for (size_t i = 0; spec->env && spec->env[i]; i++)
		lc_strv_push(&env, spec->env[i]);
	lc_strv_free(spec->env);
	spec->env = env;
	if (!spec->workdir && c->workdir)
		spec->workdir = strdup(c->workdir);
	if (!spec->user_set && c->user && *c->user) {
		char *end;
		errno = 0;
		unsigned long uid = strtoul(c->user, &end, 10), gid = uid;
		if (!errno && end != c->user && *end == ':') {
			char *g = end + 1;
			gid = strtoul(g, &end, 10);
			if (end == g)
				end = g - 1; /* makes the check below fail */
		}
		if (errno || end == c->user || *end || uid > 65535 || gid > 65535)
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "image %s: user '%s' is not UID[:GID] in numbers (give --user)", img->name,
					    c->user);
		spec->uid = (uid_t)uid;
		spec->gid = (gid_t)gid;
		spec->user_set = true;
	}
	/* command: entrypoint + (the given command, else the image's cmd) */
	char **argv = NULL;
	for (size_t i = 0; c->entrypoint && c->entrypoint[i]; i++)
		lc_strv_push(&argv, c->entrypoint[i]);
	char **rest = spec->argv && spec->argv[0] ? spec->argv : c->cmd;
	for (size_t i = 0; rest && rest[i]; i++)
		lc_strv_push(&argv, rest[i]);
	lc_strv_free(spec->argv);
	spec->argv = argv;
	return 0;
}

int lc_image_lowers(const lc_image_resolved_t *img, char ***root_lowers, char ***usr_lowers, lc_error_t **err)
{
	*root_lowers = NULL;
	*usr_lowers = NULL;
	for (size_t i = img->n_layers; i-- > 0;) {
		lc_strv_push(root_lowers, img->layer_dirs[i]);
		if (!img->base_host)
			continue;
		_cleanup_free_ char *u = lc_strdup_printf("%s/usr", img->layer_dirs[i]);
		struct stat st;
		if (lstat(u, &st) == 0 && S_ISDIR(st.st_mode))
			lc_strv_push(usr_lowers, u);
	}
	return 0;
}

/* ---- writing images ------------------------------------------------------- */

static const char *oci_arch(void)
{
	static struct utsname u;
	if (uname(&u) < 0)
		return "amd64";
	if (!strcmp(u.machine, "x86_64"))
		return "amd64";
	if (!strcmp(u.machine, "aarch64"))
		return "arm64";
	if (!strncmp(u.machine, "arm", 3))
		return "arm";
	return u.machine;
}

static char *now_rfc3339(void)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char buf[64];
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return strdup(buf);
}

static json_t *new_config(void)
{
	return json_pack("{s:s, s:s, s:{s:[s]}, s:{s:s, s:[]}, s:[]}", "architecture", oci_arch(), "os", "linux",
			 "config", "Env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			 "rootfs", "type", "layers", "diff_ids", "history");
}

/* Write config + manifest blobs and name them.  layers: descriptors,
 * config: complete OCI config (its diff_ids must match). */
static int record_image(const char *name, json_t *config, json_t *layers, json_t *annotations,
			lc_error_t **err)
{
	char chex[LC_HEX_LEN + 1], mhex[LC_HEX_LEN + 1];
	size_t clen, mlen;
	if (put_blob_json(config, chex, &clen, err) < 0)
		return -1;
	_cleanup_json_ json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s+, s:I}, s:O}", "schemaVersion", 2,
					     "mediaType", MT_MANIFEST, "config", "mediaType", MT_CONFIG, "digest",
					     "sha256:", chex, "size", (json_int_t)clen, "layers", layers);
	if (annotations && json_object_size(annotations))
		json_object_set(m, "annotations", annotations);
	if (put_blob_json(m, mhex, &mlen, err) < 0)
		return -1;
	LC_FAULT("image-manifest-stored");
	return index_add(name, mhex, mlen, err);
}

static json_t *layer_desc(const char *media_type, const char *hex, uint64_t size, bool trusted)
{
	json_t *d = json_pack("{s:s, s:s+, s:I}", "mediaType", media_type, "digest", "sha256:", hex, "size",
			      (json_int_t)size);
	if (trusted)
		json_object_set_new(d, "annotations", json_pack("{s:s}", ANN_TRUSTED, "true"));
	return d;
}

static void config_add_layer(json_t *config, const char *diff_hex, const char *created_by)
{
	json_t *rootfs = json_object_get(config, "rootfs");
	if (!json_is_object(rootfs)) {
		rootfs = json_pack("{s:s, s:[]}", "type", "layers", "diff_ids");
		json_object_set_new(config, "rootfs", rootfs);
	}
	json_t *diffs = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(diffs)) {
		diffs = json_array();
		json_object_set_new(rootfs, "diff_ids", diffs);
	}
	json_array_append_new(diffs, json_pack("s+", "sha256:", diff_hex));
	_cleanup_free_ char *now = now_rfc3339();
	json_object_set_new(config, "created", json_string(now));
	json_t *hist = json_object_get(config, "history");
	if (!json_is_array(hist)) {
		hist = json_array();
		json_object_set_new(config, "history", hist);
	}
	json_array_append_new(hist, json_pack("{s:s, s:s}", "created", now, "created_by", created_by));
}

/* Write a tree as a layer blob; its descriptor is appended to layers and
 * its diff_id to config.  *created: the blob is new (the caller removes it
 * if the image is not recorded after all). */
static int add_layer(const lc_upper_t *uppers, size_t n, uid_t uid_base, gid_t gid_base, unsigned flags,
		     json_t *layers, json_t *config, const char *created_by, char *hex, bool *created,
		     lc_error_t **err)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = make_tmp_file(&tmp, err);
	*created = false;
	if (fd < 0)
		return -1;
	uint64_t size = 0;
	if (lc_layer_write(uppers, n, uid_base, gid_base, flags, fd, hex, &size, err) < 0 || fsync(fd) < 0) {
		if (!err || !*err)
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s", tmp);
		unlink(tmp);
		return -1;
	}
	LC_FAULT("image-layer-written");
	if (put_blob_file(tmp, hex, created, err) < 0) {
		unlink(tmp);
		return -1;
	}
	LC_FAULT("image-layer-stored");
	json_array_append_new(layers, layer_desc(MT_LAYER, hex, size, true));
	config_add_layer(config, hex, created_by);
	return 0;
}

static void drop_blob(const char *hex, bool created)
{
	if (created) {
		_cleanup_free_ char *bp = blob_path(hex);
		unlink(bp);
	}
}

int lc_image_commit_ex(const char *parent_name, bool base_host, const char *rootfs_dir, const lc_upper_t *uppers,
		       size_t n, uid_t uid_base, gid_t gid_base, const char *new_name, json_t *config_changes,
		       const char *created_by, json_t *annotations, lc_error_t **err)
{
	if (check_new_name(new_name, err) < 0)
		return -1;
	_cleanup_close_ int gc = lock_named("gc", LOCK_SH, err);
	if (gc < 0)
		return -1;
	struct img parent = { 0 };
	_cleanup_json_ json_t *config = NULL, *layers = NULL, *ann = json_object();
	if (parent_name) {
		if (img_load(parent_name, &parent, err) < 0)
			return -1;
		config = json_deep_copy(parent.config);
		layers = json_deep_copy(json_object_get(parent.manifest, "layers"));
		base_host = parent.base_host;
		img_clear(&parent);
	} else {
		config = new_config();
		layers = json_array();
	}
	if (base_host)
		json_object_set_new(ann, ANN_BASE, json_string(LC_IMAGE_HOST));
	if (annotations)
		json_object_update(ann, annotations);
	if (config_changes) {
		json_t *c = json_object_get(config, "config");
		if (!json_is_object(c)) {
			c = json_object();
			json_object_set_new(config, "config", c);
		}
		json_object_update(c, config_changes);
	}
	char rhex[LC_HEX_LEN + 1] = "", hex[LC_HEX_LEN + 1];
	bool rcreated = false, created = false;
	if (rootfs_dir && !parent_name && !base_host) {
		lc_upper_t r = { .dir = rootfs_dir, .prefix = "" };
		if (add_layer(&r, 1, 0, 0, LC_LAYER_RAW_IDS, layers, config, "lcrun snapshot: --rootfs", rhex,
			      &rcreated, err) < 0)
			return lc_error_wrap(err, "cannot write the rootfs layer of %s", new_name);
	}
	if (n == 0 && !uppers) {
		/* a config change only */
		_cleanup_free_ char *now = now_rfc3339();
		json_object_set_new(config, "created", json_string(now));
		json_t *hist = json_object_get(config, "history");
		if (!json_is_array(hist)) {
			hist = json_array();
			json_object_set_new(config, "history", hist);
		}
		json_array_append_new(hist, json_pack("{s:s, s:s, s:b}", "created", now, "created_by",
						      created_by ? created_by : "lcrun", "empty_layer", 1));
		hex[0] = '\0';
	} else if (add_layer(uppers, n, uid_base, gid_base, 0, layers, config,
			     created_by ? created_by : "lcrun snapshot", hex, &created, err) < 0) {
		drop_blob(rhex, rcreated);
		return lc_error_wrap(err, "cannot write the layer of %s", new_name);
	}
	if (record_image(new_name, config, layers, ann, err) < 0) {
		drop_blob(hex, created);
		drop_blob(rhex, rcreated);
		return -1;
	}
	return 0;
}

int lc_image_commit(const char *parent_name, bool base_host, const lc_upper_t *uppers, size_t n, uid_t uid_base,
		    gid_t gid_base, const char *new_name, lc_error_t **err)
{
	return lc_image_commit_ex(parent_name, base_host, NULL, uppers, n, uid_base, gid_base, new_name, NULL, NULL,
				  NULL, err);
}

/* ---- listing -------------------------------------------------------------- */

static json_int_t layers_size(json_t *manifest)
{
	json_int_t total = 0;
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(manifest, "layers"), i, l)
		total += json_integer_value(json_object_get(l, "size"));
	return total;
}

static int cmp_name(const void *a, const void *b)
{
	json_t *const *x = a, *const *y = b;
	return strcmp(lc_json_str(*x, "name"), lc_json_str(*y, "name"));
}

int lc_image_list(json_t **out, lc_error_t **err)
{
	_cleanup_json_ json_t *idx = NULL;
	if (index_load(&idx, err) < 0)
		return -1;
	size_t i, n = 0;
	json_t *d;
	json_t **rows = lc_xmalloc0((json_array_size(json_object_get(idx, "manifests")) + 1) * sizeof(json_t *));
	json_array_foreach(json_object_get(idx, "manifests"), i, d) {
		const char *name = desc_name(d);
		if (!name)
			continue;
		struct img im = { .name = strdup(name), .desc = json_incref(d) };
		lc_error_t *e = NULL;
		json_t *row = json_pack("{s:s, s:O}", "name", name, "digest", json_object_get(d, "digest"));
		if (img_load_manifest(&im, &e) == 0) {
			json_object_set_new(row, "layers", json_integer((json_int_t)json_array_size(
								   json_object_get(im.manifest, "layers"))));
			json_object_set_new(row, "size", json_integer(layers_size(im.manifest)));
			json_object_set_new(row, "base", im.base_host ? json_string(LC_IMAGE_HOST) : json_null());
			json_t *created = json_object_get(im.config, "created");
			json_object_set(row, "created", created ? created : json_null());
		} else {
			json_object_set_new(row, "error", json_string(e->msg));
			lc_error_free(e);
		}
		img_clear(&im);
		rows[n++] = row;
	}
	qsort(rows, n, sizeof(json_t *), cmp_name);
	json_t *arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, rows[i]);
	free(rows);
	*out = arr;
	return 0;
}

int lc_image_inspect(const char *name, json_t **out, lc_error_t **err)
{
	struct img im;
	if (img_load(name, &im, err) < 0)
		return -1;
	json_t *layers = json_array();
	json_t *diffs = json_object_get(json_object_get(im.config, "rootfs"), "diff_ids");
	_cleanup_free_ char *ldir = lc_image_layers_dir();
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(im.manifest, "layers"), i, l) {
		json_t *diff = json_array_get(diffs, i);
		const char *dhex = digest_hex(json_string_value(diff));
		_cleanup_free_ char *p = dhex ? lc_strdup_printf("%s/%s", ldir, dhex) : NULL;
		json_array_append_new(layers, json_pack("{s:O, s:O, s:O, s:O, s:b}", "digest",
							json_object_get(l, "digest"), "diff_id", diff, "size",
							json_object_get(l, "size"), "media_type",
							json_object_get(l, "mediaType"), "unpacked",
							p && access(p, F_OK) == 0));
	}
	json_t *created = json_object_get(im.config, "created");
	json_t *ann = json_object_get(im.manifest, "annotations");
	json_t *cfg = json_object_get(im.config, "config");
	*out = json_pack("{s:s, s:s+, s:o, s:O, s:O, s:o, s:I, s:O, s:s, s:s}", "name", name, "digest", "sha256:",
			 im.manifest_hex, "base", im.base_host ? json_string(LC_IMAGE_HOST) : json_null(), "created",
			 created ? created : json_null(), "config", cfg ? cfg : json_object(), "layers", layers,
			 "size", layers_size(im.manifest), "annotations", ann ? ann : json_object(), "architecture",
			 lc_json_str(im.config, "architecture") ?: "", "os", lc_json_str(im.config, "os") ?: "");
	img_clear(&im);
	if (!*out)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot describe image %s", name);
	return 0;
}

/* Lock the index, load it, find name; *lk and *idx are the caller's to
 * release.  Returns the entry's position. */
static ssize_t index_edit(const char *name, int *lk, json_t **idx, lc_error_t **err)
{
	*idx = NULL;
	*lk = index_lock(err);
	if (*lk < 0 || index_read(idx, err) < 0)
		return -1;
	ssize_t i = index_find(*idx, name);
	if (i < 0)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no image named %s (see lcrun image ls)", name);
	return i;
}

int lc_image_remove(const char *name, lc_error_t **err)
{
	_cleanup_close_ int lk = -1;
	_cleanup_json_ json_t *idx = NULL;
	ssize_t i = index_edit(name, &lk, &idx, err);
	if (i < 0)
		return -1;
	json_array_remove(json_object_get(idx, "manifests"), (size_t)i);
	return index_save(idx, err);
}

static int tag(const char *src, const char *dst, bool replace, lc_error_t **err)
{
	if (!lc_image_name_valid(dst))
		return check_new_name(dst, err);
	_cleanup_close_ int lk = -1;
	_cleanup_json_ json_t *idx = NULL;
	ssize_t i = index_edit(src, &lk, &idx, err);
	if (i < 0)
		return -1;
	ssize_t old = index_find(idx, dst);
	if (old >= 0 && !replace)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "image %s exists already (remove it first)", dst);
	json_t *ms = json_object_get(idx, "manifests");
	json_t *d = json_deep_copy(json_array_get(ms, (size_t)i));
	json_t *ann = json_object_get(d, "annotations");
	if (!json_is_object(ann)) {
		ann = json_object();
		json_object_set_new(d, "annotations", ann);
	}
	json_object_set_new(ann, ANN_REF, json_string(dst));
	if (old >= 0)
		json_array_set_new(ms, (size_t)old, d);
	else
		json_array_append_new(ms, d);
	return index_save(idx, err);
}

int lc_image_tag(const char *src, const char *dst, lc_error_t **err)
{
	return tag(src, dst, false, err);
}

int lc_image_tag_replace(const char *src, const char *dst, lc_error_t **err)
{
	return tag(src, dst, true, err);
}

/* ---- import --------------------------------------------------------------- */

/* Store a layer file (any compression) as a blob, check it unpacks safely.
 * Rootfs tarballs are stored uncompressed; OCI layers as they are. */
static int import_layer_file(const char *path, bool keep_as_is, unsigned flags, char *blob_hex, char *diff_hex,
			     const char **media_type, uint64_t *size, bool *created, lc_error_t **err)
{
	*created = false;
	if (!keep_as_is) {
		_cleanup_free_ char *tmp = NULL;
		_cleanup_close_ int fd = make_tmp_file(&tmp, err);
		if (fd < 0)
			return -1;
		if (lc_layer_decompress(path, fd, diff_hex, size, NULL, err) < 0 || fsync(fd) < 0) {
			if (!err || !*err)
				lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s", tmp);
			unlink(tmp);
			return -1;
		}
		strcpy(blob_hex, diff_hex);
		*media_type = MT_LAYER;
		if (put_blob_file(tmp, blob_hex, created, err) < 0) {
			unlink(tmp);
			return -1;
		}
	} else {
		if (lc_layer_decompress(path, -1, diff_hex, NULL, media_type, err) < 0)
			return -1;
		if (lc_sha256_file(path, blob_hex, size, err) < 0)
			return -1;
		if (!*media_type)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: compression OCI does not define", path);
		_cleanup_free_ char *bp = blob_path(blob_hex);
		if (access(bp, F_OK) < 0) {
			/* (unpacked from the archive, not yet on the disk) */
			_cleanup_close_ int lfd = open(path, O_RDONLY | O_CLOEXEC);
			if (lfd < 0 || fsync(lfd) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot sync %s", path);
			if (rename(path, bp) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot store blob %s", bp);
			*created = true;
			if (lc_fsync_parent(bp, err) < 0)
				return -1;
		}
	}
	LC_FAULT("import-blob-stored");
	if (unpack_layer(blob_hex, diff_hex, flags, err) < 0) {
		if (*created) {
			_cleanup_free_ char *bp = blob_path(blob_hex);
			unlink(bp);
			*created = false;
		}
		return -1;
	}
	return 0;
}

static int import_rootfs(const char *path, const char *name, unsigned flags, lc_error_t **err)
{
	char blob[LC_HEX_LEN + 1], diff[LC_HEX_LEN + 1];
	const char *mt;
	uint64_t size;
	bool created;
	if (import_layer_file(path, false, flags, blob, diff, &mt, &size, &created, err) < 0)
		return -1;
	_cleanup_json_ json_t *config = new_config();
	_cleanup_free_ char *by = lc_strdup_printf("lcrun image import%s", flags & LC_LAYER_TRUSTED ? " --trusted" : "");
	config_add_layer(config, diff, by);
	_cleanup_json_ json_t *layers = json_pack("[o]", layer_desc(mt, blob, size, flags & LC_LAYER_TRUSTED));
	if (record_image(name, config, layers, NULL, err) < 0) {
		if (created) {
			_cleanup_free_ char *bp = blob_path(blob);
			unlink(bp);
		}
		return -1;
	}
	return 0;
}

static int import_dir(const char *dir, const char *name, unsigned flags, lc_error_t **err)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = make_tmp_file(&tmp, err);
	if (fd < 0)
		return -1;
	lc_upper_t up = { .dir = dir, .prefix = "" };
	char hex[LC_HEX_LEN + 1];
	uint64_t size;
	if (lc_layer_write(&up, 1, 0, 0, LC_LAYER_RAW_IDS, fd, hex, &size, err) < 0) {
		unlink(tmp);
		return lc_error_wrap(err, "cannot import %s", dir);
	}
	int r = import_rootfs(tmp, name, flags, err);
	unlink(tmp);
	return r;
}

/* Is this tar an OCI archive (has oci-layout at its top)? */
static int is_oci_archive(const char *path, lc_error_t **err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return lc_archivelib_error(err);
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	int found = 0;
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "%s is not a tar archive: %s", path, archive_error_string(a));
		archive_read_free(a);
		return -1;
	}
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *n = archive_entry_pathname(e);
		if (n && (!strcmp(n, "oci-layout") || !strcmp(n, "./oci-layout"))) {
			found = 1;
			break;
		}
	}
	if (r < ARCHIVE_WARN) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "%s is not a tar archive: %s", path, archive_error_string(a));
		found = -1;
	}
	archive_read_free(a);
	return found;
}

/* Pick this platform's manifest out of a nested index. */
static json_t *pick_platform(json_t *index)
{
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(index, "manifests"), i, d) {
		json_t *p = json_object_get(d, "platform");
		const char *os = lc_json_str(p, "os");
		const char *arch = lc_json_str(p, "architecture");
		if ((!os || !strcmp(os, "linux")) && (!arch || !strcmp(arch, oci_arch())))
			return d;
	}
	return NULL;
}

/* A JSON blob of an unpacked OCI layout, checked against its digest and
 * copied into the store verbatim (so digests that name it stay valid). */
static int take_layout_json(const char *layout, const char *hex, const char *what, json_t **out,
			    lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/blobs/sha256/%s", layout, hex);
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (lc_read_file(p, &data, &len, err) < 0)
		return lc_error_wrap(err, "OCI archive: %s", what);
	char got[LC_HEX_LEN + 1];
	lc_sha256_buf(data, len, got);
	if (strcmp(got, hex))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: %s sha256:%s is corrupt", what, hex);
	*out = json_loadb(data, len, 0, NULL);
	if (!*out)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: %s sha256:%s is not JSON", what, hex);
	return put_blob_buf(data, len, got, err);
}

/* Copy one image (manifest descriptor desc) from an unpacked OCI layout. */
static int import_oci_image(const char *layout, json_t *desc, const char *name, unsigned flags, lc_error_t **err)
{
	_cleanup_json_ json_t *manifest = NULL, *config = NULL, *nested = NULL;
	json_t *d = desc;
	for (int depth = 0;; depth++) {
		const char *hex = desc_hex(d, err);
		json_t *j = NULL;
		if (!hex || take_layout_json(layout, hex, "manifest", &j, err) < 0) {
			if (j)
				json_decref(j);
			return -1;
		}
		const char *mt = lc_json_str(j, "mediaType");
		if (mt && !strcmp(mt, MT_INDEX) && depth < 2) {
			if (nested)
				json_decref(nested);
			nested = j;
			d = pick_platform(nested);
			if (!d)
				return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: no linux/%s image in it",
						    oci_arch());
			continue;
		}
		manifest = j;
		break;
	}
	const char *chex = desc_hex(json_object_get(manifest, "config"), err);
	if (!chex || take_layout_json(layout, chex, "config", &config, err) < 0)
		return -1;
	json_t *layers = json_object_get(manifest, "layers");
	json_t *diffs = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
	if (!json_is_array(layers) || json_array_size(layers) != json_array_size(diffs))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: layers and diff_ids do not match");
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l) {
		const char *bhex = desc_hex(l, err);
		const char *want = digest_hex(json_string_value(json_array_get(diffs, i)));
		if (!bhex)
			return -1;
		if (!want)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: bad diff_id for layer %zu", i);
		_cleanup_free_ char *p = lc_strdup_printf("%s/blobs/sha256/%s", layout, bhex);
		_cleanup_free_ char *bp = blob_path(bhex);
		if (access(p, F_OK) < 0) {
			if (access(bp, F_OK) == 0)
				continue; /* shared with an image we have */
			return lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive: missing layer sha256:%s", bhex);
		}
		char blob[LC_HEX_LEN + 1], diff[LC_HEX_LEN + 1];
		const char *mt;
		uint64_t size;
		bool created;
		if (import_layer_file(p, true, flags, blob, diff, &mt, &size, &created, err) < 0)
			return -1;
		if (strcmp(blob, bhex) || strcmp(diff, want))
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "OCI archive: layer sha256:%s does not match its digest or diff_id", bhex);
	}
	const char *mhex = desc_hex(d, err);
	json_int_t mlen = json_integer_value(json_object_get(d, "size"));
	_cleanup_free_ char *mp = blob_path(mhex);
	struct stat st;
	if (stat(mp, &st) == 0)
		mlen = st.st_size;
	return index_add(name, mhex, (size_t)mlen, err);
}

static int import_oci(const char *path, const char *name, unsigned flags, json_t *names, lc_error_t **err)
{
	_cleanup_free_ char *td = tmp_dir();
	_cleanup_free_ char *dir = lc_image_tmp_name(td, "oci");
	if (!mkdtemp(dir))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
	int ret = -1;
	_cleanup_json_ json_t *idx = NULL;
	_cleanup_free_ char *ip = lc_strdup_printf("%s/index.json", dir);
	{
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			lc_error_set(err, LC_EXIT_NOENT, errno, "cannot open %s", path);
			goto out;
		}
		if (lc_layer_extract(fd, dir, 0, NULL, NULL, err) < 0) {
			lc_error_wrap(err, "OCI archive %s", path);
			goto out;
		}
	}
	json_error_t je;
	idx = json_load_file(ip, 0, &je);
	if (!idx) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive %s: index.json: %s", path, je.text);
		goto out;
	}
	json_t *ms = json_object_get(idx, "manifests");
	if (!json_array_size(ms)) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "OCI archive %s holds no image", path);
		goto out;
	}
	if (name && json_array_size(ms) > 1) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "OCI archive %s holds %zu images; --name needs exactly one", path,
			     json_array_size(ms));
		goto out;
	}
	size_t i;
	json_t *d;
	/* check every name first, so a clash leaves nothing half imported */
	json_array_foreach(ms, i, d) {
		const char *n = name ? name : desc_name(d);
		if (!n) {
			lc_error_set(err, LC_EXIT_USAGE, 0, "OCI archive %s: image without a name (give --name)", path);
			goto out;
		}
		if (check_new_name(n, err) < 0)
			goto out;
	}
	json_array_foreach(ms, i, d) {
		const char *n = name ? name : desc_name(d);
		if (import_oci_image(dir, d, n, flags, err) < 0) {
			lc_error_wrap(err, "OCI archive %s", path);
			goto out;
		}
		json_array_append_new(names, json_string(n));
	}
	ret = 0;
out:
	lc_rm_rf(dir, NULL);
	return ret;
}

int lc_image_import_layout(const char *layout, json_t *desc, const char *name, unsigned flags, lc_error_t **err)
{
	_cleanup_close_ int gc = store_hold(err);
	if (gc < 0 || check_new_name(name, err) < 0)
		return -1;
	return import_oci_image(layout, desc, name, flags, err);
}

char *lc_image_blob_path(const char *hex)
{
	return blob_path(hex);
}

int lc_image_manifest(const char *name, char *hex, json_t **manifest, lc_error_t **err)
{
	struct img im;
	if (img_load(name, &im, err) < 0)
		return -1;
	strcpy(hex, im.manifest_hex);
	*manifest = json_incref(im.manifest);
	img_clear(&im);
	return 0;
}

int lc_image_store_hold(lc_error_t **err)
{
	return store_hold(err);
}

static char *default_name(const char *src)
{
	_cleanup_free_ char *copy = strdup(src);
	size_t n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	char *b = strdup(basename(copy));
	static const char *const ext[] = { ".tar.gz", ".tar.zst", ".tar.xz", ".tar.bz2", ".tgz", ".tar" };
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t bl = strlen(b), el = strlen(ext[i]);
		if (bl > el && !strcmp(b + bl - el, ext[i])) {
			b[bl - el] = '\0';
			break;
		}
	}
	return b;
}

int lc_image_import(const char *src, const char *name, unsigned flags, json_t **out_names, lc_error_t **err)
{
	if (name && !lc_image_name_valid(name))
		return check_new_name(name, err);
	_cleanup_close_ int gc = store_hold(err);
	if (gc < 0)
		return -1;
	_cleanup_free_ char *stdin_copy = NULL;
	const char *path = src;
	if (!strcmp(src, "-")) {
		_cleanup_close_ int fd = make_tmp_file(&stdin_copy, err);
		if (fd < 0)
			return -1;
		char buf[1 << 16];
		for (;;) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || (n > 0 && lc_write_all(fd, buf, (size_t)n) < 0)) {
				int e = errno;
				unlink(stdin_copy);
				return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot copy standard input");
			}
			if (n == 0)
				break;
		}
		LC_FAULT("import-stdin-copied");
		path = stdin_copy;
	}
	json_t *names = json_array();
	int ret = -1;
	_cleanup_free_ char *n = NULL;
	struct stat st;
	if (stat(path, &st) < 0) {
		lc_error_set(err, LC_EXIT_NOENT, errno, "cannot import %s", src);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		n = name ? strdup(name) : default_name(src);
		if (check_new_name(n, err) < 0 || import_dir(path, n, flags, err) < 0)
			goto out;
		json_array_append_new(names, json_string(n));
		ret = 0;
		goto out;
	}
	int oci = is_oci_archive(path, err);
	if (oci < 0)
		goto out;
	if (oci) {
		ret = import_oci(path, name, flags, names, err);
		goto out;
	}
	if (!name && stdin_copy) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "importing a rootfs from standard input needs --name");
		goto out;
	}
	n = name ? strdup(name) : default_name(src);
	if (check_new_name(n, err) < 0 || import_rootfs(path, n, flags, err) < 0) {
		lc_error_wrap(err, "cannot import %s", src);
		goto out;
	}
	json_array_append_new(names, json_string(n));
	ret = 0;
out:
	if (stdin_copy)
		unlink(stdin_copy);
	if (ret == 0 && out_names)
		*out_names = names;
	else
		json_decref(names);
	return ret;
}

/* ---- export --------------------------------------------------------------- */

static int tar_add_buf(struct archive *a, const char *path, const void *data, size_t len, lc_error_t **err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return lc_archivelib_error(err);
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, len == (size_t)-1 ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, len == (size_t)-1 ? 0755 : 0644);
	archive_entry_set_size(e, len == (size_t)-1 ? 0 : (la_int64_t)len);
	archive_entry_set_mtime(e, 0, 0); /* reproducible archives */
	int r = archive_write_header(a, e);
	archive_entry_free(e);
	if (r < ARCHIVE_WARN || (len != (size_t)-1 && len && archive_write_data(a, data, len) < 0))
		return lc_error_set(err, LC_EXIT_RUNTIME, archive_errno(a) > 0 ? archive_errno(a) : 0,
				    "cannot write %s to the archive: %s", path, archive_error_string(a));
	return 0;
}

static int tar_add_blob(struct archive *a, const char *hex, lc_error_t **err)
{
	_cleanup_free_ char *p = blob_path(hex);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return lc_error_set(err, LC_EXIT_INVALID, errno, "image store is missing blob sha256:%s", hex);
	_cleanup_free_ char *name = lc_strdup_printf("blobs/sha256/%s", hex);
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return lc_archivelib_error(err);
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_mtime(e, 0, 0);
	int r = archive_write_header(a, e);
	archive_entry_free(e);
	if (r < ARCHIVE_WARN)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot write %s: %s", name, archive_error_string(a));
	_cleanup_free_ char *buf = malloc(1 << 20);
	if (!buf)
		abort();
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", p);
		if (n == 0)
			break;
		if (archive_write_data(a, buf, (size_t)n) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, archive_errno(a) > 0 ? archive_errno(a) : 0,
					    "cannot write the archive: %s", archive_error_string(a));
	}
	return 0;
}

int lc_image_export(const char *name, int fd, lc_error_t **err)
{
	_cleanup_close_ int gc = store_hold(err);
	if (gc < 0)
		return -1;
	struct img im;
	if (img_load(name, &im, err) < 0)
		return -1;
	int ret = -1;
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	_cleanup_json_ json_t *desc = json_deep_copy(im.desc);
	json_t *ann = json_object_get(desc, "annotations");
	if (!json_is_object(ann)) {
		ann = json_object();
		json_object_set_new(desc, "annotations", ann);
	}
	json_object_set_new(ann, ANN_REF, json_string(name));
	_cleanup_json_ json_t *idx = json_pack("{s:i, s:s, s:[O]}", "schemaVersion", 2, "mediaType", MT_INDEX,
					       "manifests", desc);
	_cleanup_free_ char *idxs = json_dumps(idx, JSON_COMPACT);
	struct archive *a = archive_write_new();
	if (!a) {
		lc_archivelib_error(err);
		goto out;
	}
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_none(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot write the archive: %s", archive_error_string(a));
		goto out;
	}
	if (tar_add_buf(a, "oci-layout", layout, sizeof(layout) - 1, err) < 0 ||
	    tar_add_buf(a, "index.json", idxs, strlen(idxs), err) < 0 ||
	    tar_add_buf(a, "blobs", NULL, (size_t)-1, err) < 0 ||
	    tar_add_buf(a, "blobs/sha256", NULL, (size_t)-1, err) < 0 ||
	    tar_add_blob(a, im.manifest_hex, err) < 0)
		goto out;
	const char *chex = desc_hex(json_object_get(im.manifest, "config"), err);
	if (!chex || tar_add_blob(a, chex, err) < 0)
		goto out;
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(im.manifest, "layers"), i, l) {
		const char *hex = desc_hex(l, err);
		if (!hex || tar_add_blob(a, hex, err) < 0)
			goto out;
	}
	if (archive_write_close(a) != ARCHIVE_OK) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot finish the archive: %s", archive_error_string(a));
		goto out;
	}
	ret = 0;
out:
	archive_write_free(a);
	img_clear(&im);
	if (ret < 0)
		lc_error_wrap(err, "cannot export image %s", name);
	return ret;
}

/* ---- leftovers of killed writers ------------------------------------------ */

/* 1: the process that NAME (lc_image_tmp_name's) says made it lives; 0: it
 * is gone; -1: NAME names no maker (an older lcrun's). */
static int maker_alive(const char *name)
{
	for (const char *p = strchr(name, '-'); p; p = strchr(p + 1, '-')) {
		int pid = 0, n = 0;
		unsigned long long start = 0;
		if (sscanf(p, "-%d.%llu-%n", &pid, &start, &n) == 2 && n > 0 && pid > 0 && start > 0)
			return lc_proc_starttime(pid) == start;
	}
	return -1;
}

/* NAME.tmp.PID (lc_write_file_atomic's copy) of a process that is gone. */
static bool dead_copy(const char *name)
{
	const char *t = NULL;
	for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
		t = p;
	if (!t || !t[5])
		return false;
	char *end;
	long pid = strtol(t + 5, &end, 10);
	return *end == '\0' && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

#define UNNAMED_TMP_AGE 3600 /* seconds: an older lcrun's entry, surely done */

/* In dir, the entries whose name starts with prefix ("" for all) and
 * whose maker is gone. */
static void gc_tmp_entries(const char *dir, const char *prefix, json_t *removed)
{
	_cleanup_dir_ DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		int alive = maker_alive(de->d_name);
		struct stat st;
		if (alive == 1 || (alive < 0 && (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
						 time(NULL) - st.st_mtime < UNNAMED_TMP_AGE)))
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s", dir, de->d_name);
		if (lc_rm_rf(p, NULL) == 0)
			json_array_append_new(removed, json_string(p));
	}
}

static void gc_dead_copies(const char *dir, json_t *removed)
{
	_cleanup_dir_ DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!dead_copy(de->d_name))
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s", dir, de->d_name);
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			json_array_append_new(removed, json_string(p));
	}
}

void lc_image_gc(json_t *removed)
{
	/* No lock: nobody else uses a dead process's names (a prune that
	 * removes one meanwhile only makes a removal here fail). */
	_cleanup_free_ char *td = tmp_dir();
	_cleanup_free_ char *ld = lc_image_layers_dir();
	_cleanup_free_ char *sd = lc_image_store_dir();
	_cleanup_free_ char *bd = lc_strdup_printf("%s/blobs/sha256", sd);
	gc_tmp_entries(td, "", removed);
	gc_tmp_entries(ld, ".tmp-", removed);
	gc_dead_copies(sd, removed);
	gc_dead_copies(bd, removed);
}

/* ---- prune ---------------------------------------------------------------- */

static void keep_digest(json_t *keep, const char *digest)
{
	const char *hex = digest_hex(digest);
	if (hex)
		json_object_set_new(keep, hex, json_true());
}

/* Blobs and diff_ids reachable from one descriptor (index or manifest). */
static void mark_desc(json_t *desc, json_t *blobs, json_t *diffs, int depth)
{
	const char *digest = lc_json_str(desc, "digest");
	const char *hex = digest_hex(digest);
	if (!hex || depth > 3)
		return;
	keep_digest(blobs, digest);
	_cleanup_json_ json_t *j = NULL;
	lc_error_t *e = NULL;
	if (load_blob_json(hex, &j, &e) < 0) {
		lc_error_free(e);
		return;
	}
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(j, "manifests"), i, d)
		mark_desc(d, blobs, diffs, depth + 1);
	json_t *cfg = json_object_get(j, "config");
	if (cfg) {
		const char *cd = lc_json_str(cfg, "digest");
		keep_digest(blobs, cd);
		_cleanup_json_ json_t *c = NULL;
		if (digest_hex(cd) && load_blob_json(digest_hex(cd), &c, &e) == 0) {
			json_array_foreach(json_object_get(json_object_get(c, "rootfs"), "diff_ids"), i, d)
				keep_digest(diffs, json_string_value(d));
		} else {
			lc_error_free(e);
		}
	}
	json_array_foreach(json_object_get(j, "layers"), i, d)
		keep_digest(blobs, lc_json_str(d, "digest"));
}

/* diff_ids that sandboxes record in lc_run_dir()/ID/state.json "layers". */
static void mark_sandboxes(json_t *diffs)
{
	_cleanup_dir_ DIR *d = opendir(lc_run_dir());
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s/state.json", lc_run_dir(), de->d_name);
		_cleanup_json_ json_t *st = json_load_file(p, 0, NULL);
		size_t i;
		json_t *l;
		json_array_foreach(json_object_get(st, "layers"), i, l)
			keep_digest(diffs, json_string_value(l));
	}
}

int lc_image_prune(lc_prune_stats_t *stats, lc_error_t **err)
{
	memset(stats, 0, sizeof(*stats));
	if (store_init(err) < 0)
		return -1;
	_cleanup_close_ int gc = lock_named("gc", LOCK_EX, err);
	if (gc < 0)
		return -1;
	_cleanup_close_ int lk = lock_named("index", LOCK_EX, err);
	if (lk < 0)
		return -1;
	_cleanup_json_ json_t *idx = NULL, *blobs = json_object(), *diffs = json_object();
	if (index_read(&idx, err) < 0)
		return -1;
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(idx, "manifests"), i, d)
		mark_desc(d, blobs, diffs, 0);
	mark_sandboxes(diffs);

	_cleanup_free_ char *bdir = lc_strdup_printf("%s/images/blobs/sha256", lc_lib_dir());
	{
		_cleanup_dir_ DIR *dir = opendir(bdir);
		struct dirent *de;
		while (dir && (de = readdir(dir))) {
			if (de->d_name[0] == '.' || json_object_get(blobs, de->d_name))
				continue;
			struct stat st;
			if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
				continue;
			if (unlinkat(dirfd(dir), de->d_name, 0) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove %s/%s", bdir, de->d_name);
			stats->blobs++;
			stats->bytes += (uint64_t)st.st_size;
		}
	}
	_cleanup_free_ char *ldir = lc_image_layers_dir();
	{
		_cleanup_dir_ DIR *dir = opendir(ldir);
		struct dirent *de;
		while (dir && (de = readdir(dir))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (hex_valid(de->d_name) && json_object_get(diffs, de->d_name))
				continue;
			bool leftover = de->d_name[0] == '.'; /* temp dirs and locks: we hold the gc lock */
			if (!leftover && !hex_valid(de->d_name))
				continue;
			_cleanup_free_ char *p = lc_strdup_printf("%s/%s", ldir, de->d_name);
			if (lc_rm_rf(p, err) < 0)
				return -1;
			if (!leftover)
				stats->layers++;
		}
	}
	_cleanup_free_ char *td = tmp_dir();
	{
		_cleanup_dir_ DIR *dir = opendir(td);
		struct dirent *de;
		while (dir && (de = readdir(dir))) {
			/* not what a live process makes there: a build's
			 * debootstrap or copy stage holds no lock */
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || maker_alive(de->d_name) == 1)
				continue;
			_cleanup_free_ char *p = lc_strdup_printf("%s/%s", td, de->d_name);
			lc_rm_rf(p, NULL);
		}
	}
	return 0;
}
