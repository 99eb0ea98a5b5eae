/* e2bproto.c — tokens, signatures, Connect envelopes, times and list helpers of
 * the E2B listener (see e2bproto.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "e2bproto.h"
#include "util.h"

void lcd_e2b_token(const unsigned char key[LCD_E2B_KEY_LEN], const char *id, char out[LCD_E2B_TOKEN_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	_cleanup_free_ char *msg = lc_strdup_printf("envd:%s", id);
	if (!HMAC(EVP_sha256(), key, LCD_E2B_KEY_LEN, (const unsigned char *)msg, strlen(msg), md, &n) || n != 32) {
		/* never handed out: no request can match it */
		memset(out, 'x', LCD_E2B_TOKEN_LEN);
		out[LCD_E2B_TOKEN_LEN] = '\0';
		return;
	}
	lc_hex(md, 32, out);
	out[LCD_E2B_TOKEN_LEN] = '\0';
}

bool lcd_e2b_same(const char *got, const char *want)
{
	if (!got || !want)
		return false;
	size_t a = strlen(got), b = strlen(want);
	unsigned char diff = a != b;
	for (size_t i = 0; i < b; i++)
		diff |= (unsigned char)(got[i < a ? i : 0] ^ want[i]);
	return diff == 0;
}

void lcd_e2b_signature(const char *path, const char *operation, const char *user, const char *token,
		       long long expiration, char out[48])
{
	_cleanup_free_ char *raw = expiration > 0
		? lc_strdup_printf("%s:%s:%s:%s:%lld", path, operation, user ? user : "", token, expiration)
		: lc_strdup_printf("%s:%s:%s:%s", path, operation, user ? user : "", token);
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)raw, strlen(raw), md);
	explicit_bzero(raw, strlen(raw));
	unsigned char b64[48];
	int n = EVP_EncodeBlock(b64, md, sizeof(md));
	while (n > 0 && b64[n - 1] == '=')
		n--;
	snprintf(out, 48, "v1_%.*s", n, (const char *)b64);
}

bool lcd_e2b_signature_ok(const char *signature, const char *expiration_s, const char *path, const char *operation,
			  const char *user, const char *token, long long now_s)
{
	if (!signature || !path || !token)
		return false;
	long long exp = 0;
	if (expiration_s) {
		char *end = NULL;
		exp = strtoll(expiration_s, &end, 10);
		if (!*expiration_s || *end || exp <= 0 || exp < now_s)
			return false;
	}
	char want[48];
	lcd_e2b_signature(path, operation, user, token, exp, want);
	return lcd_e2b_same(signature, want);
}

/* ---- Connect ---- */

char *lcd_connect_envelope(uint8_t flags, json_t *msg, size_t *len)
{
	char *text = json_dumps(msg ? msg : json_object(), JSON_COMPACT);
	size_t n = strlen(text);
	char *out = lc_xmalloc0(n + 5);
	out[0] = (char)flags;
	out[1] = (char)((n >> 24) & 0xff);
	out[2] = (char)((n >> 16) & 0xff);
	out[3] = (char)((n >> 8) & 0xff);
	out[4] = (char)(n & 0xff);
	memcpy(out + 5, text, n);
	free(text);
	*len = n + 5;
	return out;
}

json_t *lcd_connect_unwrap(const void *body, size_t len, const char **why)
{
	const unsigned char *b = body;
	if (len < 5) {
		*why = "the request is not an enveloped message";
		return NULL;
	}
	if (b[0] & 0x01) {
		*why = "compressed messages are not supported";
		return NULL;
	}
	size_t n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (n > len - 5) {
		*why = "the request's message is cut short";
		return NULL;
	}
	json_t *j = json_loadb((const char *)b + 5, n, 0, NULL);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		*why = "the request's message is not a JSON object";
		return NULL;
	}
	return j;
}

unsigned lcd_connect_http_status(const char *code)
{
	static const struct {
		const char *code;
		unsigned status;
	} map[] = {
		{ "canceled", 499 },	      { "unknown", 500 },	      { "invalid_argument", 400 },
		{ "deadline_exceeded", 504 }, { "not_found", 404 },	      { "already_exists", 409 },
		{ "permission_denied", 403 }, { "resource_exhausted", 429 }, { "failed_precondition", 400 },
		{ "aborted", 409 },	      { "out_of_range", 400 },	      { "unimplemented", 501 },
		{ "internal", 500 },	      { "unavailable", 503 },	      { "data_loss", 500 },
		{ "unauthenticated", 401 },
	};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(map[i].code, code))
			return map[i].status;
	return 500;
}

json_t *lcd_connect_end(const char *code, const char *message)
{
	if (!code)
		return json_object();
	json_t *m = json_string(message ? message : code);
	return json_pack("{s:{s:s, s:o}}", "error", "code", code, "message", m ? m : json_string(code));
}

/* ---- times ---- */

void lcd_e2b_time_ms(long long ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03lldZ", ms % 1000);
}

void lcd_e2b_time_ns(long long ns, char out[40])
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 40 - n, ".%09lldZ", ns % 1000000000);
}

/* ---- lists ---- */

void lcd_e2b_cursor(long long created_ms, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%lld_%s", created_ms, id);
}

bool lcd_e2b_cursor_parse(const char *s, long long *created_ms, char *id, size_t id_len)
{
	if (!s)
		return false;
	char *end = NULL;
	long long ms = strtoll(s, &end, 10);
	if (end == s || *end != '_' || ms < 0)
		return false;
	const char *i = end + 1;
	size_t n = strlen(i);
	if (!n || n >= id_len)
		return false;
	for (const char *p = i; *p; p++)
		if (!isxdigit((unsigned char)*p))
			return false;
	*created_ms = ms;
	memcpy(id, i, n + 1);
	return true;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode s[0..n) into a new *out (plus: '+' is a space);
 * false on a malformed escape. */
static bool pct_decode(const char *s, size_t n, bool plus, char **out)
{
	char *o = lc_xmalloc0(n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
			int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				free(o);
				return false;
			}
			o[k++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			o[k++] = plus && s[i] == '+' ? ' ' : s[i];
		}
	}
	o[k] = '\0';
	if (strlen(o) != k) { /* a NUL inside */
		free(o);
		return false;
	}
	*out = o;
	return true;
}

json_t *lcd_e2b_metadata_query(const char *q)
{
	json_t *out = json_object();
	if (!q || !*q)
		return out;
	const char *p = q;
	while (*p) {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		if (n) {
			/* form-encoded (URLSearchParams), each part URL-encoded again */
			char *k1 = NULL, *v1 = NULL, *k = NULL, *v = NULL;
			size_t kn = eq ? (size_t)(eq - p) : n;
			bool ok = kn > 0 && pct_decode(p, kn, true, &k1) &&
				  pct_decode(eq ? eq + 1 : "", eq ? n - kn - 1 : 0, true, &v1) &&
				  pct_decode(k1, strlen(k1), false, &k) && pct_decode(v1, strlen(v1), false, &v);
			json_t *ks = ok ? json_string(k) : NULL, *vs = ok ? json_string(v) : NULL;
			if (ks && vs) {
				json_object_set_new(out, k, vs);
			} else {
				ok = false;
				json_decref(vs);
			}
			json_decref(ks);
			free(k1);
			free(v1);
			free(k);
			free(v);
			if (!ok) {
				json_decref(out);
				return NULL;
			}
		}
		p += n;
		if (*p == '&')
			p++;
	}
	return out;
}
