/* devbox_def.h — devboxes: sandboxes you SSH into, on a persistent disk.
 *
 * The pure part (devbox_def.c, in liblcd): a devbox's definition, as a
 * manifest's "devboxes" entry or `lcctl devbox create` gives it.  The
 * service's part is core/devbox.h (devbox.c, disk.c); the routes are
 * http/routes_devboxes.c. */
#ifndef LCD_DEVBOX_DEF_H
#define LCD_DEVBOX_DEF_H

#include <stdbool.h>
#include <jansson.h>

#include "error.h"

#define LCD_DEVBOX_IMAGE_DEFAULT "agent-box"
#define LCD_DEVBOX_DISK_DEFAULT (50LL << 30)
#define LCD_DEVBOX_DISK_MIN (32LL << 20)
#define LCD_DEVBOX_DISK_MAX (16LL << 40)
#define LCD_DEVBOX_KEEP_WARM_DEFAULT 3600
#define LCD_DEVBOX_KEEP_WARM_MAX (30 * 86400)
#define LCD_DEVBOX_USER_DEFAULT "agent"
#define LCD_DEVBOX_KEYS_MAX 64

typedef struct lcd_devbox_def {
	char *name;
	char *image;            /* "host" or a stored image */
	long long disk;         /* the disk's apparent size, bytes */
	double cpus;            /* 0: no limit */
	long long memory;       /* bytes; -1: no limit */
	int keep_warm;          /* seconds it runs after the last session closed */
	char **secrets;         /* names: environment of every login */
	char *net;              /* "open" (default), "none", or a policy name */
	char *user;             /* the login user (made in the box if missing) */
	char **authorized_keys; /* public key lines */
} lcd_devbox_def_t;

/* Validate one devbox definition (v: its JSON object) named name; errors
 * name path ("devboxes.agent-box.disk: …").  d is filled with defaults for
 * what v leaves out. */
int lcd_devbox_def_parse(const char *path, const char *name, json_t *v, lcd_devbox_def_t *d, lc_error_t **err);
/* The definition as JSON with every key but the name (what lcd stores,
 * and parses again with lcd_devbox_def_parse). */
json_t *lcd_devbox_def_json(const lcd_devbox_def_t *d);
void lcd_devbox_def_clear(lcd_devbox_def_t *d);
/* A login user name: [a-z_][a-z0-9_-]{0,31}, not root. */
bool lcd_devbox_user_valid(const char *s);

#endif
