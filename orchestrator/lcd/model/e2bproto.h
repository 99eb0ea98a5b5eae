/* e2bproto.h — the pure parts of lcd's E2B-compatible listener (http/e2b.c,
 * http/e2b_envd.c): sandboxes' access tokens and the signatures of file
 * URLs, the Connect protocol's envelopes and error codes, times as the
 * E2B API writes them, and the list's cursor and metadata filter. */
#ifndef LCD_E2BPROTO_H
#define LCD_E2BPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define LCD_E2B_KEY_LEN 32     /* bytes of the listener's secret key */
#define LCD_E2B_TOKEN_LEN 64   /* hex chars of a sandbox's access token */

/* The access token of sandbox id (what envd calls want in X-Access-Token):
 * HMAC-SHA256 of "envd:ID" under the listener's key, in hex.  Nothing is
 * stored per sandbox: the same key gives the same token after a restart. */
void lcd_e2b_token(const unsigned char key[LCD_E2B_KEY_LEN], const char *id, char out[LCD_E2B_TOKEN_LEN + 1]);
/* got equals want, in a time that does not depend on where they differ. */
bool lcd_e2b_same(const char *got, const char *want);

/* The signature of a file URL, as the SDK makes it for a sandbox with an
 * access token: "v1_" + base64 (no padding) of SHA-256 of
 * "PATH:OPERATION:USER:TOKEN" (":EXPIRATION" appended when it has one).
 * operation is "read" or "write"; user may be "" (none); expiration 0:
 * none.  out holds 3 + 43 + 1 bytes. */
void lcd_e2b_signature(const char *path, const char *operation, const char *user, const char *token,
		       long long expiration, char out[48]);
/* Does the query's signature allow operation on path as user now (s)?
 * expiration_s is the query's signature_expiration (NULL: none). */
bool lcd_e2b_signature_ok(const char *signature, const char *expiration_s, const char *path, const char *operation,
			  const char *user, const char *token, long long now_s);

/* ---- the Connect protocol (JSON) ---- */

/* A message as a stream carries it: a flags byte (0, or 2 for the end of
 * the stream), the length (4 bytes, big-endian), the JSON text.  *len gets
 * the whole envelope's size; free the result. */
#define LCD_CONNECT_END 0x02
char *lcd_connect_envelope(uint8_t flags, json_t *msg, size_t *len);
/* The first envelope of a streaming request's body: its message (parsed),
 * or NULL with *why set (a static string). */
json_t *lcd_connect_unwrap(const void *body, size_t len, const char **why);
/* A Connect error code's name ("not_found", …) and the HTTP status of a
 * unary call that fails with it. */
unsigned lcd_connect_http_status(const char *code);
/* The end of a stream: {} or {"error": {"code", "message"}}. */
json_t *lcd_connect_end(const char *code, const char *message);

/* ---- times, lists ---- */

/* ms since the epoch as RFC 3339 in UTC with milliseconds
 * ("2025-01-02T03:04:05.678Z"); ns: the same with nanoseconds. */
void lcd_e2b_time_ms(long long ms, char out[32]);
void lcd_e2b_time_ns(long long ns, char out[40]);

/* The list's cursor: the last listed sandbox's creation time and id, as
 * "MS_ID"; parse gives false for anything else. */
void lcd_e2b_cursor(long long created_ms, const char *id, char *out, size_t len);
bool lcd_e2b_cursor_parse(const char *s, long long *created_ms, char *id, size_t id_len);

/* The metadata filter of GET /v2/sandboxes ("k=v&k2=v2", each key and
 * value URL-encoded): an object of the pairs, or NULL when malformed. */
json_t *lcd_e2b_metadata_query(const char *q);

#endif
