/* images.c — owners and ends of the images lcd makes (images.h). */
#include <string.h>

#include "image.h"
#include "images.h"
#include "util.h"

int lcd_image_record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		     lc_error_t **err)
{
	_cleanup_json_ json_t *info = NULL;
	lc_error_t *e = NULL;
	const char *digest = NULL;
	if (lc_image_inspect(name, &info, &e) == 0)
		digest = json_string_value(json_object_get(info, "digest"));
	lc_error_free(e);
	long long now = lc_wall_ms();
	long long ttl = !strcmp(kind, "fork") ? lcd->fork_image_ttl : lcd->snapshot_image_ttl;
	return lcd_db_exec(lcd->db, err,
			   "INSERT INTO images (name, digest, app, task_id, kind, sandbox_id, created_at, expires_at) "
			   "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET digest = excluded.digest, "
			   "app = excluded.app, task_id = excluded.task_id, kind = excluded.kind, sandbox_id = excluded.sandbox_id, "
			   "created_at = excluded.created_at, expires_at = excluded.expires_at",
			   "ssssssii", name, digest, who->operator ? NULL : who->app, who->operator ? NULL : who->task, kind,
			   sandbox, now, ttl > 0 ? now + ttl * 1000 : 0) < 0
		       ? -1
		       : 0;
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
