/* pool.h — the warm pool of sandboxes (pool.c); see docs/design/pool.md. */
#ifndef LCD_POOL_H
#define LCD_POOL_H

#include <stdbool.h>
#include <jansson.h>

#include "lcrun.h"

typedef struct lcd lcd_t;

/* lcd.json "sandbox_pool": [{"image": "host" | NAME, "size": 1-64}], each
 * image once; errors name the key.  *out holds the checked array. */
int lcd_pool_config(json_t *v, const char *path, json_t **out, lc_error_t **err);
/* Remove what an earlier lcd left in the pool, then (cfg non-empty) start
 * the thread that keeps each image's members at its size. */
int lcd_pool_start(lcd_t *lcd, json_t *cfg, lc_error_t **err);
/* Stop filling and remove every member. */
void lcd_pool_stop(lcd_t *lcd);
/* Take a member made from image at digest (NULL: the host image), with a
 * disk of disk bytes (0: none), out of the pool; false when there is none
 * (the filler then looks; after a take it looks once the member is claimed
 * or discarded). */
bool lcd_pool_take(lcd_t *lcd, const char *image, const char *digest, long long disk, char id[LC_ID_LEN + 1]);
/* A taken member that was not handed out after all (the request was
 * refused before it was touched): back into the pool. */
void lcd_pool_put_back(lcd_t *lcd, const char *image, const char *digest, const char *id);
/* The taken member is a sandbox of a caller now: the pool forgets it. */
void lcd_pool_claimed(lcd_t *lcd, const char *id);
/* The taken member could not be claimed: remove it. */
void lcd_pool_discard(lcd_t *lcd, const char *id);

#endif
