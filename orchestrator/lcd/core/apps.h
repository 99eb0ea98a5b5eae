/* apps.h — the deployed apps (apps.c): loaded, deployed, removed, and
 * what a function may bind and which network policy it gets. */
#ifndef LCD_APPS_H
#define LCD_APPS_H

#include <stdbool.h>
#include <jansson.h>

#include "lcd.h"
#include "net.h"

int lcd_apps_load(lcd_t *lcd, lc_error_t **err);
/* The channel on which a deploy or a delete is told to the other nodes,
 * and what they do then: take the apps as the store has them now. */
#define LCD_APPS_CHANNEL "lcd_apps"
void lcd_apps_sync(lcd_t *lcd);
void lcd_apps_free(lcd_t *lcd);
/* A counted reference (lcd_app_unref it) or NULL. */
lcd_app_t *lcd_app_get(lcd_t *lcd, const char *name);
/* All apps, each referenced; free with lcd_apps_release. */
lcd_app_t **lcd_apps_snapshot(lcd_t *lcd, size_t *n);
void lcd_apps_release(lcd_app_t **apps, size_t n);
int lcd_deploy(lcd_t *lcd, json_t *manifest, bool *replaced, lcd_app_t **out, lc_error_t **err);
/* A function's mount source, checked against lcd->bind_roots (LC_EXIT_PERM
 * outside them).  resolve: follow symlinks (the source must exist; *out
 * gets the resolved path) -- when a task starts; at deploy the path as
 * written must lie under a root. */
int lcd_bind_source(const lcd_t *lcd, const char *source, bool resolve, char **out, lc_error_t **err);
int lcd_app_remove(lcd_t *lcd, const char *name, lc_error_t **err);
/* Fill spec with the named policy ("none": nothing to do). */
int lcd_net_policy(const char *function, const char *policy, lc_net_spec_t *spec, lc_error_t **err);

#endif
