/* devbox.h — devboxes: sandboxes you SSH into, on a persistent disk.
 *
 * The pure part (devbox_def.c, in liblcd): a devbox's definition, as a
 * manifest's "devboxes" entry or `lcctl devbox create` gives it.  The
 * service's part: the disk (disk.c), the lifecycle, sessions and keep_warm
 * (devbox.c) and the routes (api_devbox.c). */
#ifndef LCD_DEVBOX_H
#define LCD_DEVBOX_H

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

/* ---- the service (lcd only) ---- */
struct lcd;
struct lcd_app;

/* Start the keep_warm thread; at start, boxes whose sandbox is gone (a
 * host reboot) are recorded as stopped. */
int lcd_devboxes_start(struct lcd *lcd, lc_error_t **err);
/* Close every session (lcd is stopping); the boxes keep running. */
void lcd_devboxes_stop(struct lcd *lcd);

/* Deploy: an app's devboxes may not take names other apps or `lcctl
 * devbox create` hold (LC_EXIT_BUSY); each policy they name must load. */
int lcd_devboxes_check_app(struct lcd *lcd, const struct lcd_app *app, lc_error_t **err);
/* After the app is stored: its devboxes are recorded (a changed definition
 * applies from the next start), those it no longer declares are stopped
 * and forgotten (their disks are kept). */
void lcd_devboxes_sync_app(struct lcd *lcd, const struct lcd_app *app);
/* The app is being deleted: stop and forget its devboxes (disks kept). */
void lcd_devboxes_drop_app(struct lcd *lcd, const char *app);

/* lcctl devbox create: req is {"name", …the definition's keys…}. */
int lcd_devbox_create(struct lcd *lcd, json_t *req, json_t **out, lc_error_t **err);
/* Stop (if running) and forget a devbox made with create; its disk stays. */
int lcd_devbox_remove(struct lcd *lcd, const char *name, lc_error_t **err);
/* {name, app, state, image, disk, …} of one box / of all. */
json_t *lcd_devbox_show(struct lcd *lcd, const char *name, lc_error_t **err);
json_t *lcd_devbox_list(struct lcd *lcd, lc_error_t **err);
/* Make it run with sshd answering (disk made and mounted, sandbox made,
 * sshd configured and started) and return its view. */
int lcd_devbox_start(struct lcd *lcd, const char *name, json_t **out, lc_error_t **err);
int lcd_devbox_stop(struct lcd *lcd, const char *name, const char *reason, lc_error_t **err);
/* A connection to port 22 inside the running box (started if needed):
 * *fd is a connected TCP socket of its network namespace, *host_key its
 * public host key line.  The session counts from lcd_devbox_session_begin
 * to lcd_devbox_session_end. */
int lcd_devbox_connect(struct lcd *lcd, const char *name, int *fd, char **host_key, lc_error_t **err);
void lcd_devbox_session_begin(struct lcd *lcd, const char *name, int fd);
void lcd_devbox_session_end(struct lcd *lcd, const char *name, int fd);

/* Remove a disk whose box does not run (LC_EXIT_STATE when it does). */
int lcd_disk_delete(struct lcd *lcd, const char *name, lc_error_t **err);
/* [{name, size, allocated, mounted, fs_size, fs_used, devbox, state}] */
json_t *lcd_disks_json(struct lcd *lcd, lc_error_t **err);

/* ---- disk.c ---- */
/* [{name, size, allocated, mounted, fs_size, fs_used}] */
json_t *lcd_disk_list(struct lcd *lcd, lc_error_t **err);
/* Unmount (waiting for the loop device to go) and remove the file. */
int lcd_disk_remove_files(struct lcd *lcd, const char *name, lc_error_t **err);
/* Create the disk if missing (sparse file, ext4) and mount it; *dir gets
 * the mount point. */
int lcd_disk_ready(struct lcd *lcd, const char *name, long long size, char **dir, lc_error_t **err);
int lcd_disk_unmount(struct lcd *lcd, const char *name, lc_error_t **err);
bool lcd_disk_exists(struct lcd *lcd, const char *name);
json_t *lcd_disk_info(struct lcd *lcd, const char *name);

#endif
