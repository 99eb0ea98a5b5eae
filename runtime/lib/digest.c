/* digest.c — SHA-256 from a libcrypto loaded on first use, and a fast
 * non-cryptographic hash for cache indexes (at the end).
 *
 * libcrypto's EVP interface fetches its provider on first use, which costs
 * about half a millisecond per process; the low-level SHA-256 functions of
 * the same libcrypto compute the same digest without that set-up.  And
 * mapping, relocating and initialising libcrypto itself costs every process
 * that links it another ~0.7 ms at start-up, though most lcrun verbs (exec,
 * ps, inspect, kill, rm…) hash nothing.  So liblcrun does not link it: the
 * first lc_sha256_new() loads it (as netlibs.c does for libnl/libnftables)
 * and every later one reuses it.  A libcrypto that cannot be loaded is a
 * broken installation, the same as when the dynamic loader could not find
 * it at start-up: the process ends with a one-line message. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dlfcn.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The soname of the ABI these headers describe. */
#define LC_STR_(x) #x
#define LC_STR(x) LC_STR_(x)
#if OPENSSL_VERSION_MAJOR >= 3
#define LC_LIBCRYPTO "libcrypto.so." LC_STR(OPENSSL_SHLIB_VERSION)
#else
#define LC_LIBCRYPTO "libcrypto.so.1.1"
#endif

#define LC_CRYPTO_SYMS(X) \
	X(OPENSSL_init_crypto) \
	X(SHA256_Init) \
	X(SHA256_Update) \
	X(SHA256_Final)

#define LC_CRYPTO_FIELD(name) __typeof__(name) *name;
static struct {
	LC_CRYPTO_SYMS(LC_CRYPTO_FIELD)
} crypto;
#undef LC_CRYPTO_FIELD

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void __attribute__((noreturn)) load_failed(const char *what, const char *detail)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "lcrun: cannot %s: %s\n", what, detail);
	if (n > 0 && write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0) {
		/* nothing more to say */
	}
	abort();
}

static void load(void)
{
	/* RTLD_NODELETE: the functions live as long as the process. */
	void *h = dlopen(LC_LIBCRYPTO, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h)
		load_failed("load " LC_LIBCRYPTO, dlerror());
#define LC_CRYPTO_GET(name) \
	if (!(*(void **)&crypto.name = dlsym(h, #name))) \
		load_failed("find " #name " in " LC_LIBCRYPTO, "missing symbol");
	LC_CRYPTO_SYMS(LC_CRYPTO_GET)
#undef LC_CRYPTO_GET
	/* Only hashing here: no openssl.cnf to read. */
	crypto.OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
}

struct lc_sha256 {
	SHA256_CTX c;
};

void lc_crypto_load(void)
{
	pthread_once(&once, load);
}

lc_sha256_t *lc_sha256_new(void)
{
	lc_crypto_load();
	lc_sha256_t *h = lc_xmalloc0(sizeof(*h));
	crypto.SHA256_Init(&h->c);
	return h;
}

void lc_sha256_update(lc_sha256_t *h, const void *buf, size_t len)
{
	crypto.SHA256_Update(&h->c, buf, len);
}

void lc_sha256_final(lc_sha256_t *h, unsigned char out[32])
{
	crypto.SHA256_Final(out, &h->c);
	free(h);
}

void lc_hex(const void *buf, size_t n, char *hex)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	hex[2 * n] = '\0';
}

void lc_sha256_hex(const unsigned char md[32], char hex[65])
{
	lc_hex(md, 32, hex);
}

/* ---- a fast non-cryptographic hash ---------------------------------------
 *
 * For the start-up path's cache indexes (seccomp programs, the host
 * skeleton), whose entries hold their whole key and are compared byte for
 * byte: a collision costs a rebuild, never a wrong entry, so there is no
 * reason to load libcrypto (0.7 ms and more per process) for them.  Eight
 * bytes a round with MurmurHash3's 64-bit mixing constants and finaliser. */

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t mix_word(uint64_t k)
{
	k *= 0x87c37b91114253d5ULL;
	k = rotl64(k, 31);
	return k * 0x4cf5ad432745937fULL;
}

uint64_t lc_hash64(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *p = buf;
	uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ULL);
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t k;
		memcpy(&k, p, 8);
		h ^= mix_word(k);
		h = rotl64(h, 27) * 5 + 0x52dce729;
	}
	if (len) {
		uint64_t k = 0;
		memcpy(&k, p, len);
		h ^= mix_word(k);
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}
