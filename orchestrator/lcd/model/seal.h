/* seal.h — secrets at rest: AES-256-GCM under a 32-byte key each lcd
 * holds in a file of its own (lcd.json "secret_key_file"; every node of
 * a cluster has the same key).  A sealed value is "v1:" followed by the
 * base64 of nonce (12 bytes) | ciphertext | tag (16 bytes); the secret's
 * name is authenticated with it, so a sealed value copied to another name
 * does not open. */
#ifndef LCD_SEAL_H
#define LCD_SEAL_H

#include "error.h"

#define LCD_SEAL_KEY_LEN 32

/* The key in path: 64 hex digits (blanks around them are ignored).  The
 * file must be a regular file that neither group nor others can read. */
int lcd_seal_key_read(const char *path, unsigned char key[LCD_SEAL_KEY_LEN], lc_error_t **err);
/* A fresh random key written to path (0600); LC_EXIT_BUSY if it exists. */
int lcd_seal_key_create(const char *path, lc_error_t **err);
/* malloc'd sealed text, or NULL with *err. */
char *lcd_seal(const unsigned char key[LCD_SEAL_KEY_LEN], const char *name, const char *plain, lc_error_t **err);
/* The plain text (malloc'd), or NULL with *err (LC_EXIT_INVALID) when it
 * does not open with this key and name. */
char *lcd_unseal(const unsigned char key[LCD_SEAL_KEY_LEN], const char *name, const char *sealed, lc_error_t **err);

#endif
