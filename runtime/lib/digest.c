/* digest.c — SHA-256 for the start-up path.
 *
 * libcrypto's EVP interface fetches its provider on first use, which costs
 * about half a millisecond per process; every lcrun run hashes a little (the
 * seccomp cache key, the host image's key).  The low-level SHA-256 functions
 * of the same libcrypto compute the same digest without that set-up. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdio.h>

#include "util.h"

struct lc_sha256 {
	SHA256_CTX c;
};

lc_sha256_t *lc_sha256_new(void)
{
	lc_sha256_t *h = lc_xmalloc0(sizeof(*h));
	SHA256_Init(&h->c);
	return h;
}

void lc_sha256_update(lc_sha256_t *h, const void *buf, size_t len)
{
	SHA256_Update(&h->c, buf, len);
}

void lc_sha256_final(lc_sha256_t *h, unsigned char out[32])
{
	SHA256_Final(out, &h->c);
	free(h);
}

void lc_sha256_hex(const unsigned char md[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
