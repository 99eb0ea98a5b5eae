/* trash.h — removing sandbox directories in the background: trash.c.
 * Not part of the stable API. */
#ifndef LC_TRASH_H
#define LC_TRASH_H

#include <stdbool.h>

/* Where teardown moves a sandbox directory to remove it in the background
 * (sandbox.c); lcrun gc removes entries nobody holds a flock on. */
char *lc_trash_dir(void);
/* A fresh name for sandbox id's directory in trash/ (made if need be), or
 * NULL when there is no trash/ to move it to (sandbox.c's remover). */
char *lc_trash_entry(const char *id);
/* Where a run's state directory waits for its remover (sandbox.c); with
 * id NULL, the directory of those. */
char *lc_state_trash(const char *id);
/* Remove trash-state/NAME for every entry NAME of dir that is a sandbox
 * id: the state directories of a batch's sandboxes, whose directories
 * are dir's entries (shared.c). */
void lc_state_trash_rm_ids(const char *dir);
/* The name of a batch's trash in lc_trash_dir(): this, then a random tag
 * (shared.c makes it, gc.c knows it by it). */
#define LC_BATCH_TRASH_PREFIX "batch-"
/* Move the sandbox directory dir (of sandbox id) into trash/ and remove it
 * there in the background (a detached process, or a detached thread from
 * a threaded caller), flocked meanwhile for gc: 0, or -1 when it could not
 * be moved (remove it now). */
int lc_sb_remove_later(const char *dir, const char *id);
/* Remove dir, retrying while an overlay in a dying namespace holds it. */
void lc_sb_remove_now(const char *dir);
/* Remove dir in a detached lcrun-rm that holds lock_fd (its flock on dir
 * tells gc it is at work), closes hold_fd (-1: none) first, and runs at
 * nice (0: the caller's); here and
 * now when none can be forked.  Single-threaded callers only; lock_fd
 * stays open in the caller.  batch: dir is a batch's trash (shared.c),
 * and lc_sb_remove_batch_now removes it. */
void lc_sb_remove_detached(const char *dir, int lock_fd, int hold_fd, int nice, bool batch);
/* A batch's trash, whose entries are named by sandbox id: first the state
 * directories of those ids in trash-state, then dir. */
void lc_sb_remove_batch_now(const char *dir);

#endif
