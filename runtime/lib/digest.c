/* digest.c — SHA-256 for the start-up path, from a libcrypto loaded on
 * first use.
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
#include <stdio.h>
#include <stdlib.h>
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

void lc_sha256_hex(const unsigned char md[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
