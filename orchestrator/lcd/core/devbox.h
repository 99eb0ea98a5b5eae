/* devbox.h — the devbox service (devbox.c): the lifecycle, sessions and
 * keep_warm of devboxes, and their disks (disk.c). */
#ifndef LCD_DEVBOX_H
#define LCD_DEVBOX_H

#include <stdbool.h>
#include <jansson.h>

#include "devbox_def.h"
#include "error.h"

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
