/* images.h — the images lcd's sandboxes are snapshotted and forked into:
 * each has an owner (an app, or the operator) and, forks always and
 * snapshots when lcd.json says so, an end, after which lcd removes it
 * (unless a sandbox still uses it).  Table images in lcd.db. */
#ifndef LCD_IMAGES_H
#define LCD_IMAGES_H

#include "access.h"
#include "lcd.h"

#define LCD_FORK_IMAGE_TTL_DEFAULT (7 * 86400)

/* Record image name (kind "snapshot" or "fork", of sandbox) as who's. */
int lcd_image_record(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		     lc_error_t **err);
/* With lcd.json "registry" (REGISTRY/REPOSITORY): the images lcd makes
 * are pushed there, tagged by name, when made (lcd_image_record), and a
 * node that is asked for one it lacks, made elsewhere in the cluster,
 * pulls it by the digest its record names (lcd_image_fetch: 0 when the
 * image is here after it, or lcd knows nothing to fetch). */
int lcd_image_fetch(lcd_t *lcd, const char *name, lc_error_t **err);
/* The registry reference of image name (malloc'd), or NULL: none set. */
char *lcd_image_ref(lcd_t *lcd, const char *name, const char *digest);
/* The same before the image is made (its digest still unknown), so that a
 * crash while it is made leaves its owner and end recorded; fails
 * (LC_EXIT_BUSY) when the store has an image of that name.  Made:
 * lcd_image_record; not made: lcd_image_unreserve. */
int lcd_image_reserve(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *kind, const char *sandbox,
		      lc_error_t **err);
void lcd_image_unreserve(lcd_t *lcd, const char *name);
/* At start: a reservation whose image was made gets its digest; one whose
 * image was not, goes. */
void lcd_images_recover(lcd_t *lcd);
/* Remove image name, from the store and from lcd's records, if who may
 * see it (lcd_images_list's rule); LC_EXIT_UNKNOWN when it may not or the
 * image is not there. */
int lcd_image_delete(lcd_t *lcd, const lcd_caller_t *who, const char *name, lc_error_t **err);
/* Remove the images whose end has come and that no sandbox uses. */
void lcd_images_collect(lcd_t *lcd);
/* [{"name", "digest", "size", "created", "owner", "kind", "expires"}]: the
 * store's images with what lcd knows of them (owner "operator" for an
 * image lcd did not make); a task sees its app's own only. */
json_t *lcd_images_list(lcd_t *lcd, const lcd_caller_t *who, lc_error_t **err);

#endif
