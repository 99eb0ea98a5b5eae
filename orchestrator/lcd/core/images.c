/* images.c — owners and ends of the images lcd makes (images.h). */
#include <string.h>

#include "image.h"
#include "images.h"
#include "util.h"

static int record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *digest, const char *kind,
		  const char *sandbox, lc_error_t **err)
{
	long long now = lc_wall_ms();
	long long ttl = !strcmp(kind, "fork") ? lcd->fork_image_ttl : lcd->snapshot_image_ttl;
	return lcd_db_exec(lcd->db, err,
			   "INSERT OR REPLACE INTO images (name, digest, app, task_id, kind, sandbox_id, created_at, expires_at) "
			   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			   "ssssssii", name, digest, who->operator ? NULL : who->app, who->operator ? NULL : who->task, kind,
			   sandbox, now, ttl > 0 ? now + ttl * 1000 : 0) < 0
		       ? -1
		       : 0;
}

int lcd_image_record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		     lc_error_t **err)
{
	_cleanup_json_ json_t *info = NULL;
	lc_error_t *e = NULL;
	const char *digest = NULL;
	if (lc_image_inspect(name, &info, &e) == 0)
		digest = json_string_value(json_object_get(info, "digest"));
	lc_error_free(e);
	return record(lcd, who, name, digest, kind, sandbox, err);
}

int lcd_image_reserve(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		      lc_error_t **err)
{
	int have = lc_image_exists(name, err);
	if (have < 0)
		return -1;
	if (have > 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "image %s exists already (remove it first)", name);
	return record(lcd, who, name, NULL, kind, sandbox, err);
}

void lcd_image_unreserve(lcd_t *lcd, const char *name)
{
	if (lc_image_exists(name, NULL) == 0)
		lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ? AND digest IS NULL", "s", name);
}

void lcd_images_recover(lcd_t *lcd)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT name FROM images WHERE digest IS NULL", "");
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *name = json_string_value(json_object_get(row, "name"));
		_cleanup_json_ json_t *info = NULL;
		lc_error_t *e = NULL;
		if (lc_image_inspect(name, &info, &e) == 0) {
			lcd_db_exec(lcd->db, NULL, "UPDATE images SET digest = ? WHERE name = ?", "ss",
				    json_string_value(json_object_get(info, "digest")), name);
			lcd_log("images: %s was made before lcd stopped: recorded", name);
		} else if (e->exit_code == LC_EXIT_UNKNOWN) {
			lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ? AND digest IS NULL", "s", name);
			lcd_log("images: %s was not made before lcd stopped: its record goes", name);
		}
		lc_error_free(e);
	}
}

void lcd_images_collect(lcd_t *lcd)
{
	_cleanup_json_ json_t *rows = lcd_db_query(
		lcd->db, NULL,
		"SELECT name FROM images WHERE expires_at > 0 AND expires_at <= ? AND name NOT IN "
		"(SELECT image FROM sandboxes)",
		"i", lc_wall_ms());
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *name = json_string_value(json_object_get(row, "name"));
		lc_error_t *e = NULL;
		if (lc_image_remove(name, &e) < 0 && e->exit_code != LC_EXIT_UNKNOWN) {
			lcd_log("images: cannot remove %s, whose time is up: %s", name, e->msg);
			lc_error_free(e);
			continue;
		}
		lc_error_free(e);
		lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ?", "s", name);
		lcd_log("images: %s removed (its time was up)", name);
	}
}

json_t *lcd_images_list(lcd_t *lcd, const lcd_caller_t *who, lc_error_t **err)
{
	_cleanup_json_ json_t *store = NULL;
	if (lc_image_list(&store, err) < 0)
		return NULL;
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, err, "SELECT name, app, kind, expires_at FROM images", "");
	if (!rows)
		return NULL;
	json_t *out = json_array();
	size_t i, k;
	json_t *img, *row;
	json_array_foreach(store, i, img) {
		const char *name = json_string_value(json_object_get(img, "name"));
		json_t *rec = NULL;
		json_array_foreach(rows, k, row)
			if (!strcmp(json_string_value(json_object_get(row, "name")), name))
				rec = row;
		const char *app = rec ? json_string_value(json_object_get(rec, "app")) : NULL;
		if (!who->operator && (!app || strcmp(app, who->app)))
			continue;
		long long exp = rec ? json_integer_value(json_object_get(rec, "expires_at")) : 0;
		json_t *e = json_pack("{s:O, s:O, s:O, s:O, s:s, s:O, s:o}", "name", json_object_get(img, "name"), "digest",
				      json_object_get(img, "digest"), "size", json_object_get(img, "size") ?: json_null(),
				      "created", json_object_get(img, "created") ?: json_null(), "owner", app ? app : "operator",
				      "kind", rec ? json_object_get(rec, "kind") : json_null(),
				      "expires", exp > 0 ? json_integer(exp / 1000) : json_null());
		json_array_append_new(out, e);
	}
	return out;
}

int lcd_image_delete(lcd_t *lcd, const lcd_caller_t *who, const char *name, lc_error_t **err)
{
	_cleanup_json_ json_t *all = lcd_images_list(lcd, who, err);
	if (!all)
		return -1;
	bool seen = false;
	size_t i;
	json_t *img;
	json_array_foreach(all, i, img)
		seen |= !strcmp(json_string_value(json_object_get(img, "name")), name);
	if (!seen)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no image %s", name);
	if (lc_image_remove(name, err) < 0)
		return -1;
	lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ?", "s", name);
	lcd_log("image %s removed", name);
	return 0;
}
