/* layer.h — one image layer: a tar stream ⇄ a directory tree.
 *
 * Unpacking (lc_layer_extract) turns an OCI layer tarball into a directory
 * that overlayfs can use as a lower layer: `.wh.NAME` entries become
 * whiteouts (0/0 character devices), `.wh..wh..opq` marks its directory
 * opaque (trusted.overlay.opaque=y).  Owners are kept as the tar says (0 stays
 * 0); the sandbox mounts lower layers idmapped.  Extraction refuses anything
 * that could write outside the target or smuggle privileges in.
 *
 * Writing (lc_layer_write) does the reverse for a sandbox's overlay upper
 * directories: host ids are shifted back by uid_base/gid_base, whiteouts and
 * opaque directories become `.wh.` entries, and modes, owners, times,
 * xattrs, hardlinks, symlinks and sparse files are kept. */
#ifndef LC_LAYER_H
#define LC_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define LC_HEX_LEN 64 /* sha256 in hex */

/* Host id that root inside a sandbox maps to (1000000000 unless
 * /etc/lcrun/lcrun.json, or the file named by LCRUN_CONFIG, says "uid_base"),
 * and how many ids a sandbox gets (65536, or "uid_count").  In config.c. */
uid_t lc_uid_base(void);
unsigned lc_uid_count(void);

typedef struct lc_upper {
	const char *dir;    /* overlay upper directory on the host */
	const char *prefix; /* where it appears in the sandbox: "" or "usr" */
} lc_upper_t;

enum {
	/* Allow setuid/setgid bits, file capabilities, device nodes and
	 * trusted. / security. xattrs (an image the operator vouches for). */
	LC_LAYER_TRUSTED = 1 << 0,
	/* lc_layer_write: keep ids as they are on disk (importing a plain
	 * directory) instead of subtracting the sandbox's id base. */
	LC_LAYER_RAW_IDS = 1 << 1,
};

/* Unpack the tar stream read from fd (plain, gzip, zstd, xz: whatever
 * libarchive reads) into dir, an existing empty directory.
 * blob_hex (optional, LC_HEX_LEN+1 chars) receives the sha256 of every byte
 * read from fd; diff_hex (optional) the sha256 of the uncompressed tar when
 * the stream was not compressed, else "" (see lc_layer_decompress).
 * On failure the error names the offending entry; dir may hold a partial
 * tree that the caller removes. */
int lc_layer_extract(int fd, const char *dir, unsigned flags, char *blob_hex, char *diff_hex,
		     lc_error_t **err);

/* Decompress a (possibly compressed) tar file: hex receives the sha256 of
 * the uncompressed stream (its diff_id), size its length, media_type (optional) the
 * OCI layer media type that fits the file's own compression, or NULL when
 * OCI has none for it (xz, bzip2).  out_fd >= 0 also receives the stream. */
int lc_layer_decompress(const char *path, int out_fd, char *hex, uint64_t *size,
			const char **media_type, lc_error_t **err);

#define LC_OVERFLOW_ID 65534

/* Write the uppers (in order) as one uncompressed POSIX (pax) tar to fd.
 * hex receives the sha256 of the written stream (also its diff_id), size
 * its length.  Ids in [base, base + lc_uid_count()) are shifted down by
 * base; ids outside it (files the runtime made as host root, mount points)
 * become LC_OVERFLOW_ID, as the sandbox saw them.  LC_LAYER_RAW_IDS keeps
 * ids as they are on disk. */
int lc_layer_write(const lc_upper_t *uppers, size_t n, uid_t uid_base, gid_t gid_base,
		   unsigned flags, int fd, char *hex, uint64_t *size, lc_error_t **err);

/* sha256 of a whole file (hex). */
int lc_sha256_file(const char *path, char *hex, uint64_t *size, lc_error_t **err);
/* sha256 of a buffer (hex). */
void lc_sha256_buf(const void *buf, size_t len, char *hex);

#endif
