/* runner.h — the task runner (runner.c): a process forked before lcd reads
 * a secret or starts a thread, whose children make the sandboxes. */
#ifndef LCD_RUNNER_H
#define LCD_RUNNER_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcd.h"

/* Fork the task runner: before the database, the sockets and any thread. */
int lcd_runner_start(lcd_t *lcd, lc_error_t **err);
/* lc_run(spec) at nice value nice, in a child of the task runner (in lcd
 * itself if the runner is gone); spec's stdio fds stay the caller's. */
int lcd_runner_run(lcd_t *lcd, const lc_spec_t *spec, int nice, lc_result_t *res, lc_error_t **err);
/* lc_sandbox_create(spec), its monitor forked in a child of the runner. */
int lcd_runner_create(lcd_t *lcd, const lc_spec_t *spec, char id[LC_ID_LEN + 1], lc_error_t **err);
/* lc_sandbox_exec(id, opts), its helper forked in a child of the runner. */
int lcd_runner_exec(lcd_t *lcd, const char *id, const lc_exec_opts_t *opts, lc_result_t *res, lc_error_t **err);
/* lc_sandbox_start(id), its monitor forked in a child of the runner. */
int lcd_runner_start_sandbox(lcd_t *lcd, const char *id, lc_error_t **err);
/* lc_sandbox_open_file(id, …), in a child of the runner: the fd comes
 * back to the caller. */
struct stat;
int lcd_runner_open_file(lcd_t *lcd, const char *id, const char *path, int flags, mode_t mode, struct stat *st,
			 lc_error_t **err);
/* lc_sandbox_tar_start and _finish (the same contract), in a child of the
 * runner that holds the stream's job until lcd finishes it. */
typedef struct lcd_tar lcd_tar_t;
int lcd_runner_tar_start(lcd_t *lcd, const char *id, const char *path, bool in, int *fd, lcd_tar_t **job,
			 lc_error_t **err);
int lcd_runner_tar_finish(lcd_tar_t *job, bool abort, lc_error_t **err);
/* An upload's file: *fd to write path's new content to, made under a
 * temporary name beside it in the sandbox; lcd_runner_tar_finish then
 * puts it in place whole (abort false: synced, renamed over path) or
 * removes it.  Until then path keeps what it had. */
int lcd_runner_upload_start(lcd_t *lcd, const char *id, const char *path, mode_t mode, int *fd, lcd_tar_t **job,
			    lc_error_t **err);
/* An operation on a sandbox's files (sbfs.h says which: op's "op"), in a
 * child of the runner that joins the sandbox for it; its result in *out,
 * the file of "read" and "write" in *fd (NULL: closed).  Errors keep the
 * errno that says what failed in errnum. */
int lcd_runner_fs(lcd_t *lcd, const char *id, json_t *op, json_t **out, int *fd, lc_error_t **err);
/* A watch of a directory (op: {path, recursive}), by such a child, which
 * writes its events to *fd, a JSON text a line, until lcd closes it. */
int lcd_runner_watch(lcd_t *lcd, const char *id, json_t *op, int *fd, lc_error_t **err);

#endif
