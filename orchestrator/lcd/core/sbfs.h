/* sbfs.h — a sandbox's files as the E2B listener's envd sees them
 * (filesystem.Filesystem, GET and POST /files): plain system calls made by
 * a child of lcd's runner that has joined the sandbox's user and mount
 * namespaces as its root (lc_sandbox_join_here), so that every path, and
 * every symlink on it, resolves in the sandbox's own root.  Nothing runs
 * inside the sandbox for it.  lcd reaches them through lcd_runner_fs and
 * lcd_runner_watch (runner.c). */
#ifndef LCD_SBFS_H
#define LCD_SBFS_H

#include <jansson.h>

#include "lcrun.h"

/* One operation, op["op"] being one of (paths absolute):
 *   stat   {path, follow}          -> {"entry": ENTRY} (a symlink itself unless follow)
 *   list   {path, depth}           -> {"entries": [ENTRY…]} (depth levels below path, 1: its own entries)
 *   mkdir  {path, uid, gid}        -> {"entry": ENTRY} (its parents made too, all given to uid:gid)
 *   move   {path, to, uid, gid}    -> {"entry": ENTRY of to} (to's parents made as mkdir does)
 *   remove {path}                  -> {} (a directory with everything in it; nothing there: no error)
 *   write  {path, uid, gid, mode, metadata}
 *                                  -> {"name", "path", "metadata"} and *fd, open for writing
 *                                     (created or truncated, its parents made, given to uid:gid,
 *                                     its metadata replaced by the object metadata)
 *   read   {path}                  -> {"size"} and *fd, a regular file open for reading
 *   user   {name}                  -> {"uid", "gid", "home"} from the sandbox's /etc/passwd
 * ENTRY is {name, type: "file"|"dir"|"symlink"|"other", path, size, mode (permission bits),
 * permissions ("-rw-r--r--"), owner, group (names from the sandbox's /etc/passwd and
 * /etc/group, else the numbers), mtime_ns, symlink_target (symlinks only), metadata (the
 * user.e2b.* extended attributes, as envd keeps a file's metadata)}.  Errors keep
 * the errno that says what happened in err->errnum (ENOENT, EEXIST, ENOTDIR, EISDIR, …). */
int lcd_sbfs_op(json_t *op, const lc_spec_t *spec, json_t **out, int *fd, lc_error_t **err);

/* A watch of op {path, recursive, include_entry}: the inotify fd in *fd once path is a
 * directory being watched (with every directory below it when recursive). */
int lcd_sbfs_watch_start(json_t *op, const lc_spec_t *spec, int *fd, lc_error_t **err);
/* Write the watch's events to out, one line each, {"name": path relative
 * to the watched directory, "type": "create"|"write"|"remove"|"rename"|
 * "chmod", "entry": ENTRY when include_entry and it is still there}, until
 * out hangs up.  Directories made under a recursive watch are watched
 * from then on. */
void lcd_sbfs_watch_run(int fd, int out, json_t *op);

#endif
