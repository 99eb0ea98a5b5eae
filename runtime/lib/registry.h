/* registry.h — images to and from an OCI registry (the distribution
 * spec, HTTP over libcurl): what `lcrun image push|pull NAME REF` does.
 *
 * REF is REGISTRY/REPOSITORY[:TAG|@sha256:HEX] (TAG: latest).  The
 * registry is spoken to over HTTPS, or plain HTTP when REF starts with
 * http:// or the registry is this host (localhost, 127.0.0.0/8, [::1]).
 * No credentials: a registry that asks for them is refused with a line
 * that says so.
 *
 * Every blob is checked against its digest, both ways; a blob the
 * registry has (push) or the store has (pull) is not sent again. */
#ifndef LC_REGISTRY_H
#define LC_REGISTRY_H

#include <stddef.h>

#include "error.h"

typedef struct lc_registry_stats {
	size_t blobs;      /* the image's blobs (config and layers) */
	size_t moved;      /* of them sent (push) or fetched (pull) */
	char digest[80];   /* the manifest's, sha256:HEX */
} lc_registry_stats_t;

/* Parse REF: malloc'd base URL (scheme://host[:port]), repository and
 * tag or digest.  LC_EXIT_USAGE on a malformed one. */
int lc_registry_ref(const char *ref, char **base, char **repo, char **tag, lc_error_t **err);
/* Send image name to ref. */
int lc_image_push(const char *name, const char *ref, lc_registry_stats_t *st, lc_error_t **err);
/* Fetch ref into the store as image name (which must not exist);
 * flags as for lc_image_import (LC_LAYER_TRUSTED). */
int lc_image_pull(const char *name, const char *ref, unsigned flags, lc_registry_stats_t *st, lc_error_t **err);

#endif
