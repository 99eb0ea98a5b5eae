/* seal.c — secrets at rest, AES-256-GCM with libcrypto (seal.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "seal.h"
#include "util.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX "v1:"

int lcd_seal_key_read(const char *path, unsigned char key[LCD_SEAL_KEY_LEN], lc_error_t **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "secret key file %s",
				    path);
	if (!S_ISREG(st.st_mode))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "secret key file %s: not a regular file", path);
	if (st.st_mode & 0077)
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "secret key file %s: group or others may read it (mode %04o): chmod 600 it", path,
				    (unsigned)(st.st_mode & 07777));
	char buf[256];
	ssize_t n = lc_read_all(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "secret key file %s", path);
	buf[n] = '\0';
	char *p = buf;
	while (isspace((unsigned char)*p))
		p++;
	size_t len = 0;
	while (isxdigit((unsigned char)p[len]))
		len++;
	const char *rest = p + len;
	while (isspace((unsigned char)*rest))
		rest++;
	int r = 0;
	if (len != 2 * LCD_SEAL_KEY_LEN || *rest)
		r = lc_error_set(err, LC_EXIT_INVALID, 0,
				 "secret key file %s: expected %d hex digits (openssl rand -hex %d makes such a key)", path,
				 2 * LCD_SEAL_KEY_LEN, LCD_SEAL_KEY_LEN);
	for (size_t i = 0; r == 0 && i < LCD_SEAL_KEY_LEN; i++) {
		char hex[3] = { p[2 * i], p[2 * i + 1], 0 };
		key[i] = (unsigned char)strtoul(hex, NULL, 16);
	}
	explicit_bzero(buf, sizeof(buf));
	return r;
}

int lcd_seal_key_create(const char *path, lc_error_t **err)
{
	unsigned char key[LCD_SEAL_KEY_LEN];
	char hex[2 * LCD_SEAL_KEY_LEN + 2];
	if (RAND_bytes(key, sizeof(key)) != 1)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "secret key file %s: no random bytes to make a key", path);
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	hex[2 * LCD_SEAL_KEY_LEN] = '\n';
	hex[2 * LCD_SEAL_KEY_LEN + 1] = '\0';
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = 0;
	if (fd < 0)
		r = lc_error_set(err, errno == EEXIST ? LC_EXIT_BUSY : LC_EXIT_RUNTIME, errno, "cannot make secret key file %s",
				 path);
	else if (lc_write_all(fd, hex, strlen(hex)) < 0 || fsync(fd) < 0)
		r = lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write secret key file %s", path);
	if (fd >= 0)
		close(fd);
	/* its name on the disk too: secrets sealed with it outlive a power
	 * cut (lcd.db syncs each commit), so must the key */
	if (r == 0)
		r = lc_fsync_parent(path, err);
	if (r < 0 && fd >= 0)
		unlink(path);
	explicit_bzero(key, sizeof(key));
	explicit_bzero(hex, sizeof(hex));
	return r;
}

char *lcd_seal(const unsigned char key[LCD_SEAL_KEY_LEN], const char *name, const char *plain, lc_error_t **err)
{
	size_t n = strlen(plain);
	size_t raw_len = NONCE_LEN + n + TAG_LEN;
	unsigned char *raw = lc_xmalloc0(raw_len);
	char *out = NULL;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int len = 0, fin = 0;
	if (!ctx || RAND_bytes(raw, NONCE_LEN) != 1 ||
	    EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    EVP_EncryptUpdate(ctx, NULL, &len, (const unsigned char *)name, (int)strlen(name)) != 1 ||
	    EVP_EncryptUpdate(ctx, raw + NONCE_LEN, &len, (const unsigned char *)plain, (int)n) != 1 ||
	    EVP_EncryptFinal_ex(ctx, raw + NONCE_LEN + len, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, raw + NONCE_LEN + n) != 1) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "secret %s: cannot seal it (libcrypto)", name);
	} else {
		size_t b64 = 4 * ((raw_len + 2) / 3);
		out = lc_xmalloc0(strlen(PREFIX) + b64 + 1);
		strcpy(out, PREFIX);
		EVP_EncodeBlock((unsigned char *)out + strlen(PREFIX), raw, (int)raw_len);
	}
	EVP_CIPHER_CTX_free(ctx);
	explicit_bzero(raw, raw_len);
	free(raw);
	return out;
}

char *lcd_unseal(const unsigned char key[LCD_SEAL_KEY_LEN], const char *name, const char *sealed, lc_error_t **err)
{
	size_t plen = strlen(PREFIX);
	size_t b64 = strlen(sealed);
	if (strncmp(sealed, PREFIX, plen) || (b64 - plen) % 4 || b64 - plen < 4 * ((NONCE_LEN + TAG_LEN + 2) / 3)) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "secret %s: not a sealed value", name);
		return NULL;
	}
	size_t cap = 3 * ((b64 - plen) / 4);
	unsigned char *raw = lc_xmalloc0(cap + 1);
	int got = EVP_DecodeBlock(raw, (const unsigned char *)sealed + plen, (int)(b64 - plen));
	/* EVP_DecodeBlock counts the padding's bytes as data */
	if (got >= 0 && b64 > plen && sealed[b64 - 1] == '=')
		got -= sealed[b64 - 2] == '=' ? 2 : 1;
	char *out = NULL;
	if (got < NONCE_LEN + TAG_LEN) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "secret %s: not a sealed value", name);
		free(raw);
		return NULL;
	}
	size_t n = (size_t)got - NONCE_LEN - TAG_LEN;
	out = lc_xmalloc0(n + 1);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int len = 0, fin = 0;
	if (!ctx || EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    EVP_DecryptUpdate(ctx, NULL, &len, (const unsigned char *)name, (int)strlen(name)) != 1 ||
	    EVP_DecryptUpdate(ctx, (unsigned char *)out, &len, raw + NONCE_LEN, (int)n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, raw + NONCE_LEN + n) != 1 ||
	    EVP_DecryptFinal_ex(ctx, (unsigned char *)out + len, &fin) != 1 || memchr(out, '\0', n)) {
		lc_error_set(err, LC_EXIT_INVALID, 0,
			     "secret %s: does not open with this lcd's secret key (every node needs the same secret_key_file)",
			     name);
		explicit_bzero(out, n);
		free(out);
		out = NULL;
	}
	EVP_CIPHER_CTX_free(ctx);
	explicit_bzero(raw, cap);
	free(raw);
	return out;
}
