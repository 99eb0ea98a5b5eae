/* images.c — owners and ends of the images lcd makes, and their way
 * between the nodes of a cluster through a registry (images.h). */
#include <ctype.h>
#include <string.h>

#include "access.h"
#include "image.h"
#include "images.h"
#include "json.h"
#include "registry.h"
#include "util.h"

/* A tag for an image name: the characters a tag takes ([A-Za-z0-9_.-],
 * the others as '-'), and 8 hex of the name's hash (two names never
 * share one). */
static char *tag_of(const char *name)
{
	char hex[LC_HEX_LEN + 1];
	lc_sha256_buf(name, strlen(name), hex);
	char t[100];
	size_t n = 0;
	for (const char *p = name; *p && n < 80; p++)
		t[n++] = (isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == '-') ? *p : '-';
	t[n] = '\0';
	return lc_strdup_printf("%s%s-%.8s", isalnum((unsigned char)t[0]) ? "" : "x", t, hex);
}

char *lcd_image_ref(lcd_t *lcd, const char *name, const char *digest)
{
	if (!lcd->registry)
		return NULL;
	if (digest)
		return lc_strdup_printf("%s@%s", lcd->registry, digest);
	_cleanup_free_ char *tag = tag_of(name);
	return lc_strdup_printf("%s:%s", lcd->registry, tag);
}

/* Push an image lcd made, for the other nodes; a failure is said, and
 * the image stays this node's only. */
static void share(lcd_t *lcd, const char *name)
{
	_cleanup_free_ char *ref = lcd_image_ref(lcd, name, NULL);
	if (!ref)
		return;
	lc_registry_stats_t st;
	lc_error_t *err = NULL;
	if (lc_image_push(name, ref, &st, &err) < 0) {
		lcd_log("image %s: cannot push it to %s (other nodes cannot use it): %s", name, ref, err->msg);
		lc_error_free(err);
		return;
	}
	lcd_log("image %s: pushed to %s (%s, %zu of %zu blobs sent)", name, ref, st.digest, st.moved, st.blobs);
}

int lcd_image_fetch(lcd_t *lcd, const char *name, lc_error_t **err)
{
	if (!lcd->registry || !strcmp(name, LC_IMAGE_HOST) || !strncmp(name, "sha256:", 7))
		return 0;
	int have = lc_image_exists(name, err);
	if (have != 0)
		return have < 0 ? -1 : 0;
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, err, "SELECT digest FROM images WHERE name = ?", "s", name);
	if (!rows)
		return -1;
	const char *digest = lc_json_str(json_array_get(rows, 0), "digest");
	if (!digest)
		return 0; /* not one lcd made: as before, "no image" */
	_cleanup_free_ char *ref = lcd_image_ref(lcd, name, digest);
	lc_registry_stats_t st;
	lc_error_t *e = NULL;
	if (lc_image_pull(name, ref, 0, &st, &e) < 0) {
		/* a create beside this one pulled it meanwhile */
		if (e->exit_code == LC_EXIT_BUSY && lc_image_exists(name, NULL) > 0) {
			lc_error_free(e);
			return 0;
		}
		*err = e;
		return lc_error_wrap(err, "image %s (made on another node)", name);
	}
	lcd_log("image %s: pulled from %s (%zu of %zu blobs fetched)", name, ref, st.moved, st.blobs);
	return 0;
}

static int record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *digest, const char *kind,
		  const char *sandbox, lc_error_t **err)
{
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

int lcd_image_record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		     lc_error_t **err)
{
	_cleanup_json_ json_t *info = NULL;
	lc_error_t *e = NULL;
	const char *digest = NULL;
	if (lc_image_inspect(name, &info, &e) == 0)
		digest = lc_json_str(info, "digest");
	lc_error_free(e);
	if (record(lcd, who, name, digest, kind, sandbox, err) < 0)
		return -1;
	share(lcd, name);
	return 0;
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
	/* this node's only: another's may be making one now (in a cluster the
	 * sandbox's record names its node; alone, node is NULL) */
	const char *node = lcd_db_node(lcd->db);
	_cleanup_json_ json_t *rows =
		node ? lcd_db_query(lcd->db, NULL,
				    "SELECT i.name AS name FROM images i LEFT JOIN sandboxes s ON s.id = i.sandbox_id "
				    "WHERE i.digest IS NULL AND (s.node IS NULL OR s.node = ?)",
				    "s", node)
		     : lcd_db_query(lcd->db, NULL, "SELECT name FROM images WHERE digest IS NULL", "");
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *name = lc_json_str(row, "name");
		_cleanup_json_ json_t *info = NULL;
		lc_error_t *e = NULL;
		if (lc_image_inspect(name, &info, &e) == 0) {
			lcd_db_exec(lcd->db, NULL, "UPDATE images SET digest = ? WHERE name = ?", "ss",
				    lc_json_str(info, "digest"), name);
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
	size_t i, removed = 0;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *name = lc_json_str(row, "name");
		lc_error_t *e = NULL;
		if (lc_image_remove(name, &e) < 0 && e->exit_code != LC_EXIT_UNKNOWN) {
			lcd_log("images: cannot remove %s, whose time is up: %s", name, e->msg);
			lc_error_free(e);
			continue;
		}
		lc_error_free(e);
		lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ?", "s", name);
		lcd_log("images: %s removed (its time was up)", name);
		removed++;
	}
	if (!removed)
		return;
	/* a removed name frees nothing by itself: its blobs and unpacked
	 * layers stay until a prune, so a store under churn would only grow
	 * (the prune takes the store's gc lock: a snapshot or an import
	 * under way holds it shared and is waited for) */
	lc_prune_stats_t st;
	lc_error_t *e = NULL;
	if (lc_image_prune(&st, &e) < 0) {
		lcd_log("images: cannot prune the store: %s", e->msg);
		lc_error_free(e);
		return;
	}
	if (st.blobs || st.layers)
		lcd_log("images: pruned %zu blobs and %zu layers (%llu bytes)", st.blobs, st.layers,
			(unsigned long long)st.bytes);
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
		const char *name = lc_json_str(img, "name");
		json_t *rec = NULL;
		json_array_foreach(rows, k, row)
			if (!strcmp(lc_json_str(row, "name"), name))
				rec = row;
		const char *app = rec ? lc_json_str(rec, "app") : NULL;
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
		seen |= !strcmp(lc_json_str(img, "name"), name);
	if (!seen)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no image %s", name);
	if (lc_image_remove(name, err) < 0)
		return -1;
	lcd_db_exec(lcd->db, NULL, "DELETE FROM images WHERE name = ?", "s", name);
	lcd_log("image %s removed", name);
	return 0;
}
