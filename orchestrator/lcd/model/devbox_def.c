/* devbox_def.c — a devbox's definition: validated whole, every error
 * naming its JSON path, defaults filled in.  Pure (no I/O): the manifest's
 * "devboxes" and `lcctl devbox create` share it. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "devbox_def.h"
#include "manifest.h"
#include "util.h"

static int bad(lc_error_t **err, const char *path, const char *key, const char *what)
{
	return lc_error_set(err, LC_EXIT_INVALID, 0, "%s%s%s: %s", path, *path && key ? "." : "", key ? key : "", what);
}

bool lcd_devbox_user_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 32 || !strcmp(s, "root"))
		return false;
	if (!islower((unsigned char)s[0]) && s[0] != '_')
		return false;
	for (const char *p = s; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '_' && *p != '-')
			return false;
	return true;
}

/* "ssh-ed25519 AAAA… comment" (options before the type are refused: a
 * devbox's keys are plain keys). */
static bool key_line_ok(const char *s, size_t len)
{
	if (len < 16 || len > 16384 || strlen(s) != len || strpbrk(s, "\r\n"))
		return false;
	static const char *const types[] = { "ssh-", "ecdsa-sha2-", "sk-", NULL };
	bool typed = false;
	for (size_t i = 0; types[i]; i++)
		typed |= !strncmp(s, types[i], strlen(types[i]));
	const char *sp = strchr(s, ' ');
	return typed && sp && sp[1] && sp[1] != ' ';
}

static int parse_keys(const char *path, json_t *v, char ***out, lc_error_t **err)
{
	/* A string holds one key per line (an authorized_keys file); an array
	 * one key per element. */
	_cleanup_json_ json_t *arr = NULL;
	if (json_is_string(v)) {
		arr = json_array();
		_cleanup_free_ char *copy = strdup(json_string_value(v));
		char *save = NULL;
		for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			size_t n = strlen(l);
			if (n && l[n - 1] == '\r')
				l[--n] = '\0';
			while (*l == ' ' || *l == '\t')
				l++;
			if (*l && *l != '#')
				json_array_append_new(arr, json_string(l));
		}
	} else if (json_is_array(v)) {
		arr = json_incref(v);
	} else {
		return bad(err, path, "authorized_keys", "expected an array of public keys or a string of lines");
	}
	if (json_array_size(arr) == 0)
		return bad(err, path, "authorized_keys", "no public key (lcctl puts the caller's ~/.ssh/*.pub here)");
	if (json_array_size(arr) > LCD_DEVBOX_KEYS_MAX)
		return bad(err, path, "authorized_keys", "at most 64 keys");
	size_t i;
	json_t *k;
	json_array_foreach(arr, i, k) {
		if (!json_is_string(k) || !key_line_ok(json_string_value(k), json_string_length(k))) {
			_cleanup_free_ char *p = lc_strdup_printf("authorized_keys[%zu]", i);
			return bad(err, path, p, "expected a public key line \"TYPE BASE64 [COMMENT]\" (ssh-ed25519, ssh-rsa, ecdsa-sha2-…)");
		}
		lc_strv_push(out, json_string_value(k));
	}
	return 0;
}

static int parse_size(const char *path, const char *key, json_t *v, long long min, long long max, long long *out,
		      lc_error_t **err)
{
	long long n = -1;
	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (!json_is_string(v) || lc_parse_size(json_string_value(v), &n) < 0)
		n = -1;
	if (n < min || n > max) {
		_cleanup_free_ char *m = lc_strdup_printf("expected a size like \"50G\" or bytes, %lld MiB to %lld GiB",
							  min >> 20, max >> 30);
		return bad(err, path, key, m);
	}
	*out = n;
	return 0;
}

int lcd_devbox_def_parse(const char *path, const char *name, json_t *v, lcd_devbox_def_t *d, lc_error_t **err)
{
	static const char *const keys[] = { "image", "disk", "cpus", "memory", "keep_warm", "secrets", "net", "user",
		"authorized_keys", "description", NULL };
	memset(d, 0, sizeof(*d));
	d->memory = -1;
	d->disk = LCD_DEVBOX_DISK_DEFAULT;
	d->keep_warm = LCD_DEVBOX_KEEP_WARM_DEFAULT;
	d->name = strdup(name ? name : "");
	if (!lcd_name_valid(name))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: bad devbox name (lowercase letters, digits, '-', '_'; at most 63)",
				    *path ? path : "name");
	if (!json_is_object(v))
		return bad(err, *path ? path : "request body", NULL, "expected an object");
	if (lcd_check_keys(v, path, keys, err) < 0)
		return -1;
	json_t *x;
	if ((x = json_object_get(v, "image"))) {
		if (!json_is_string(x) || !*json_string_value(x) || json_string_length(x) > 128)
			return bad(err, path, "image", "expected an image name or \"host\"");
		d->image = strdup(json_string_value(x));
	} else {
		d->image = strdup(LCD_DEVBOX_IMAGE_DEFAULT);
	}
	if ((x = json_object_get(v, "disk")) &&
	    parse_size(path, "disk", x, LCD_DEVBOX_DISK_MIN, LCD_DEVBOX_DISK_MAX, &d->disk, err) < 0)
		return -1;
	/* null: no limit (as lcd_devbox_def_json writes it) */
	if ((x = json_object_get(v, "memory")) && !json_is_null(x) && parse_size(path, "memory", x, 16LL << 20, 1LL << 50, &d->memory, err) < 0)
		return -1;
	if ((x = json_object_get(v, "cpus")) && !json_is_null(x)) {
		if (!json_is_number(x) || json_number_value(x) < 0.01 || json_number_value(x) > 1024)
			return bad(err, path, "cpus", "expected a number of CPUs like 0.5 or 2");
		d->cpus = json_number_value(x);
	}
	if ((x = json_object_get(v, "keep_warm"))) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > LCD_DEVBOX_KEEP_WARM_MAX)
			return bad(err, path, "keep_warm", "expected seconds, 0 to 2592000 (30 days)");
		d->keep_warm = (int)json_integer_value(x);
	}
	if ((x = json_object_get(v, "secrets"))) {
		if (!json_is_array(x))
			return bad(err, path, "secrets", "expected an array of secret names");
		size_t i;
		json_t *s;
		json_array_foreach(x, i, s) {
			if (!json_is_string(s) || !lcd_secret_name_valid(json_string_value(s))) {
				_cleanup_free_ char *p = lc_strdup_printf("secrets[%zu]", i);
				return bad(err, path, p, "bad secret name (letters, digits, '_'; not starting with a digit)");
			}
			lc_strv_push(&d->secrets, json_string_value(s));
		}
	}
	if ((x = json_object_get(v, "net"))) {
		const char *n = json_string_value(x);
		if (!n || !lcd_name_valid(n))
			return bad(err, path, "net", "expected \"open\", \"none\" or a network policy name");
		d->net = strdup(n);
	} else {
		d->net = strdup("open");
	}
	if ((x = json_object_get(v, "user"))) {
		if (!lcd_devbox_user_valid(json_string_value(x)))
			return bad(err, path, "user", "expected a user name ([a-z_][a-z0-9_-], at most 32; not root)");
		d->user = strdup(json_string_value(x));
	} else {
		d->user = strdup(LCD_DEVBOX_USER_DEFAULT);
	}
	if ((x = json_object_get(v, "description")) && !json_is_string(x))
		return bad(err, path, "description", "expected a string");
	_cleanup_json_ json_t *none = json_array();
	x = json_object_get(v, "authorized_keys");
	return parse_keys(path, x ? x : none, &d->authorized_keys, err);
}

json_t *lcd_devbox_def_json(const lcd_devbox_def_t *d)
{
	json_t *j = json_pack("{s:s, s:I, s:i, s:o, s:s, s:s, s:o}", "image", d->image, "disk",
			      (json_int_t)d->disk, "keep_warm", d->keep_warm, "secrets", lc_strv_to_json(d->secrets),
			      "net", d->net, "user", d->user, "authorized_keys", lc_strv_to_json(d->authorized_keys));
	json_object_set_new(j, "cpus", d->cpus > 0 ? json_real(d->cpus) : json_null());
	json_object_set_new(j, "memory", d->memory > 0 ? json_integer(d->memory) : json_null());
	return j;
}

void lcd_devbox_def_clear(lcd_devbox_def_t *d)
{
	free(d->name);
	free(d->image);
	lc_strv_free(d->secrets);
	free(d->net);
	free(d->user);
	lc_strv_free(d->authorized_keys);
	memset(d, 0, sizeof(*d));
}
