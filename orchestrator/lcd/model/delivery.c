/* delivery.c — webhook signatures and the delivery-id record. */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "delivery.h"
#include "json.h"
#include "util.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool lcd_delivery_signature_ok(const char *secret, size_t secret_len, const void *body, size_t len,
			       const char *header)
{
	if (!secret || !secret_len || !header || strncmp(header, "sha256=", 7) != 0)
		return false;
	const char *hex = header + 7;
	if (strlen(hex) != 64)
		return false;
	unsigned char got[32];
	for (size_t i = 0; i < 32; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		got[i] = (unsigned char)(hi << 4 | lo);
	}
	unsigned char want[EVP_MAX_MD_SIZE];
	unsigned int want_len = 0;
	static const unsigned char empty[1];
	if (!HMAC(EVP_sha256(), secret, (int)secret_len, len ? body : empty, len, want, &want_len) || want_len != 32)
		return false;
	bool ok = CRYPTO_memcmp(got, want, 32) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

static bool chars_ok(const char *s, size_t max, const char *extra, bool upper)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > max)
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (upper && c >= 'A' && c <= 'Z') ||
		      strchr(extra, c)))
			return false;
	}
	return true;
}

bool lcd_delivery_id_valid(const char *s)
{
	return chars_ok(s, 128, "._:-", true);
}

bool lcd_delivery_event_valid(const char *s)
{
	return chars_ok(s, 64, "_.-", false);
}

int lcd_delivery_claim(lcd_db_t *db, const char *app, const char *hook, const char *delivery, const char *body_sha,
		       const char *event, long long now_ms, char **task_id, lc_error_t **err)
{
	/* One statement: of any number of concurrent claims exactly one
	 * inserts; a delivery id or a body (its SHA-256) seen before is a
	 * duplicate (a body replayed under fresh ids is one). */
	int n = lcd_db_exec(db, err,
			    "INSERT INTO webhook_deliveries (app, hook, delivery, body_sha256, event, received_at) "
			    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
			    "sssssi", app, hook, delivery, body_sha, event, now_ms);
	if (n < 0)
		return -1;
	if (n == 1)
		return 1;
	if (task_id) {
		_cleanup_json_ json_t *rows = lcd_db_query(db, err,
			"SELECT task_id FROM webhook_deliveries WHERE app = ? AND hook = ? AND (delivery = ? OR body_sha256 = ?) "
			"ORDER BY delivery = ? DESC", "sssss", app, hook, delivery, body_sha, delivery);
		if (!rows)
			return -1;
		const char *t = lc_json_str(json_array_get(rows, 0), "task_id");
		*task_id = t ? strdup(t) : NULL;
	}
	return 0;
}

int lcd_delivery_set_task(lcd_db_t *db, const char *app, const char *hook, const char *delivery,
			  const char *task_id, lc_error_t **err)
{
	return lcd_db_exec(db, err, "UPDATE webhook_deliveries SET task_id = ? WHERE app = ? AND hook = ? AND delivery = ?",
			   "ssss", task_id, app, hook, delivery);
}

int lcd_delivery_forget(lcd_db_t *db, const char *app, const char *hook, const char *delivery, lc_error_t **err)
{
	return lcd_db_exec(db, err, "DELETE FROM webhook_deliveries WHERE app = ? AND hook = ? AND delivery = ?", "sss",
			   app, hook, delivery);
}

int lcd_delivery_gc(lcd_db_t *db, long long cutoff_ms, lc_error_t **err)
{
	return lcd_db_exec(db, err, "DELETE FROM webhook_deliveries WHERE received_at < ?", "i", cutoff_ms);
}

/* What a payload of GitHub's events always carries (a key of an object,
 * "action" a string where the event has actions). */
static const struct {
	const char *event;
	const char *keys[3];
	bool action;
} shapes[] = {
	{ "issues", { "issue", "repository" }, true },
	{ "issue_comment", { "issue", "comment" }, true },
	{ "pull_request", { "pull_request", "repository" }, true },
	{ "pull_request_review", { "review", "pull_request" }, true },
	{ "pull_request_review_comment", { "comment", "pull_request" }, true },
	{ "push", { "repository" }, false },
	{ "release", { "release", "repository" }, true },
};

bool lcd_delivery_shape_ok(const char *event, json_t *payload, const char **missing)
{
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		if (strcmp(shapes[i].event, event))
			continue;
		for (size_t k = 0; k < 3 && shapes[i].keys[k]; k++)
			if (!json_is_object(json_object_get(payload, shapes[i].keys[k]))) {
				*missing = shapes[i].keys[k];
				return false;
			}
		if (shapes[i].action && !json_is_string(json_object_get(payload, "action"))) {
			*missing = "action";
			return false;
		}
		if (!strcmp(event, "push") && !json_is_string(json_object_get(payload, "ref"))) {
			*missing = "ref";
			return false;
		}
		return true;
	}
	return true;
}
