/* image.h — the image store: one OCI image layout under lc_lib_dir()/images,
 * layers unpacked once under lc_lib_dir()/layers/<diff_id hex>/.
 *
 * Names are `org.opencontainers.image.ref.name` annotations in index.json,
 * so skopeo/umoci read the store as it is.  An image that runs on the host's
 * own /usr (a snapshot of a host-image sandbox) carries the manifest
 * annotation `org.lcrun.base: host` and only its own layers. */
#ifndef LC_IMAGE_H
#define LC_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include "error.h"
#include "layer.h"

#define LC_IMAGE_HOST "host" /* the implicit host image; not a stored name */

typedef struct lc_image_config {
	char **env;        /* K=V, NULL-terminated (or NULL) */
	char *workdir;     /* NULL: not set */
	char *user;        /* NULL: not set */
	char **entrypoint; /* NULL: not set */
	char **cmd;        /* NULL: not set */
} lc_image_config_t;

typedef struct lc_image_resolved {
	char *name;
	char *manifest_digest; /* "sha256:…" */
	bool base_host;        /* runs on the host image, these layers above it */
	char **layer_dirs;     /* unpacked lower dirs, BOTTOM first */
	size_t n_layers;
	char **diff_ids;       /* "sha256:…" per layer, same order */
	lc_image_config_t config;
} lc_image_resolved_t;

/* Look NAME up (a name, or a manifest digest "sha256:…") and unpack any
 * layer not unpacked yet.  Concurrent callers unpack a layer once. */
int lc_image_resolve(const char *name, lc_image_resolved_t **out, lc_error_t **err);
void lc_image_resolved_free(lc_image_resolved_t *img);

struct lc_spec;
/* Apply an image's config to a spec: env (the spec's own entries win),
 * workdir and user when the spec sets none (user must be numeric
 * UID[:GID]), argv = entrypoint + (spec argv, else cmd).  Call once, on
 * the spec lc_run will use. */
int lc_image_apply_config(struct lc_spec *spec, const lc_image_resolved_t *img, lc_error_t **err);
/* Lower directories for the sandbox's overlays, TOP first: every layer for
 * the root overlay; for a host-based image also each layer's usr/ (where
 * it has one) to stack above the host's /usr in the /usr overlay. */
int lc_image_lowers(const lc_image_resolved_t *img, char ***root_lowers, char ***usr_lowers, lc_error_t **err);

/* Write uppers as a new layer and record image new_name = parent's layers
 * (or the host base) + it.  parent_name: the image the sandbox ran on, or
 * NULL for a --rootfs/host sandbox (base_host decides).  new_name must not
 * exist yet (LC_EXIT_BUSY). */
int lc_image_commit(const char *parent_name, bool base_host, const lc_upper_t *uppers, size_t n,
		    uid_t uid_base, gid_t gid_base, const char *new_name, lc_error_t **err);
/* Same, plus: rootfs_dir (a --rootfs sandbox's lower directory, ids as on
 * disk) becomes the bottom layer when there is no parent and no host base;
 * the config is changed by a JSON object of OCI config fields ({"Env": [...],
 * "WorkingDir", "User", "Entrypoint", "Cmd"}; NULL: the parent's); a history
 * line (NULL: "lcrun snapshot"); extra manifest annotations (NULL: none). */
int lc_image_commit_ex(const char *parent_name, bool base_host, const char *rootfs_dir, const lc_upper_t *uppers,
		       size_t n, uid_t uid_base, gid_t gid_base, const char *new_name, json_t *config_changes,
		       const char *created_by, json_t *annotations, lc_error_t **err);

/* lcrun image build FILE.json (see build.c for the format): each step is
 * cached as an image build-cache/<key>; the result is named name_override,
 * else the definition's "name", else the file's base name (replacing an
 * older image of that name).  secrets: K=V for run steps' environment only.
 * Progress lines go to log.  Returns 1 when a step ran, 0 when everything
 * came from the cache, negative on error. */
int lc_image_build(const char *file, const char *name_override, char **secrets, unsigned flags, FILE *log,
		   char **out_name, lc_error_t **err);
#define LC_IMAGE_CACHE_PREFIX "build-cache/"

/* lcrun snapshot: freeze the sandbox (if it runs and is not paused), sync,
 * write its uppers as a new layer on top of what it ran on, thaw it (also
 * on error), and record image new_name.  The sandbox keeps running. */
int lc_sandbox_snapshot(const char *id_or_name, const char *new_name, lc_error_t **err);

/* ---- store verbs ---------------------------------------------------------- */

/* A valid image name: [A-Za-z0-9][A-Za-z0-9._:/-]*, at most 128 chars, not "host". */
bool lc_image_name_valid(const char *name);
/* 1 if the image exists, 0 if not, negative on a store error. */
int lc_image_exists(const char *name, lc_error_t **err);
/* Array of {"name","digest","layers","size","base","created"}, sorted by name. */
int lc_image_list(json_t **out, lc_error_t **err);
/* {"name","digest","base","created","config":{OCI config},"layers":[{"digest","diff_id","size","media_type","unpacked"}],"annotations":{}} */
int lc_image_inspect(const char *name, json_t **out, lc_error_t **err);
int lc_image_remove(const char *name, lc_error_t **err);
int lc_image_tag(const char *src, const char *dst, lc_error_t **err);
/* The same, but dst may exist: it names src's manifest from then on, in
 * one write of the index (a crash leaves dst naming the old or the new). */
int lc_image_tag_replace(const char *src, const char *dst, lc_error_t **err);

/* Import a rootfs tarball (any compression), a directory, or an OCI archive
 * (a tar holding oci-layout and index.json); src "-" reads standard input.
 * name NULL: the archive's own name, else the file's base name.
 * flags: LC_LAYER_TRUSTED.  *out_name (optional) gets the names recorded,
 * as a JSON array. */
int lc_image_import(const char *src, const char *name, unsigned flags, json_t **out_names, lc_error_t **err);
/* Write image NAME as an OCI archive (tar) to fd. */
int lc_image_export(const char *name, int fd, lc_error_t **err);

typedef struct lc_prune_stats {
	size_t blobs;      /* blob files removed */
	uint64_t bytes;    /* their size */
	size_t layers;     /* unpacked layer directories removed */
} lc_prune_stats_t;
/* Remove blobs no image uses and unpacked layers that neither an image nor
 * a sandbox (lc_run_dir()/ID/state.json "layers") uses. */
int lc_image_prune(lc_prune_stats_t *stats, lc_error_t **err);

/* For registry.c.  The store held (the descriptor of the shared lock:
 * prune waits while it is open); a blob's path (HEX: sha256 in hex); an
 * image's manifest (its digest's hex, and the manifest); one image (the
 * manifest or index descriptor desc) of an unpacked OCI layout imported
 * as name, its blobs checked against their digests, those the store has
 * already left out of the layout. */
int lc_image_store_hold(lc_error_t **err);
char *lc_image_blob_path(const char *hex);
int lc_image_manifest(const char *name, char *hex, json_t **manifest, lc_error_t **err);
int lc_image_import_layout(const char *layout, json_t *desc, const char *name, unsigned flags, lc_error_t **err);

/* A name for a temporary file or directory of the store, DIR/PREFIX-
 * PID.START-XXXXXX (for mkostemp or mkdtemp; START: the process's start
 * time, in clock ticks after boot): the name says who makes it, so that
 * lc_image_gc() removes what a killed process left and nothing a live one
 * is writing. */
char *lc_image_tmp_name(const char *dir, const char *prefix);

/* Remove what killed writers left in the store: temporary files and
 * directories in tmp/ and layers/ whose maker is gone (entries of an
 * older lcrun, which names none, once untouched for an hour), and
 * half-written copies of the index and of small blobs (NAME.tmp.PID of a
 * dead PID).  Each path removed is appended to removed (strings). */
void lc_image_gc(json_t *removed);

/* Where the store lives (lc_lib_dir()/images) and unpacked layers
 * (lc_lib_dir()/layers). */
char *lc_image_store_dir(void);
char *lc_image_layers_dir(void);

#endif
