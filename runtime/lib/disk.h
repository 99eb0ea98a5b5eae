/* disk.h — a sandbox's upper layer on a filesystem of its own, of a fixed
 * size (spec->limits.disk, --disk SIZE): past it, ENOSPC inside the
 * sandbox, never the host's disk filling up under lcd.db.
 *
 * The filesystem is an ext4 in a sparse file in the sandbox's directory
 * (private/disk.img: apparent size SIZE, real size what is used), made by
 * copying the data of an empty one of that size (made once with mkfs.ext4,
 * kept in lc_lib_dir()/disks/; a run's without a journal), attached to a loop device that lets go
 * when the last mount of it goes, and mounted detached (fsmount): the
 * staging process moves that mount onto private/ovl in its own namespace,
 * so nothing is ever mounted in the host's.  It goes with the sandbox's
 * namespaces; the file goes with its directory. */
#ifndef LC_DISK_H
#define LC_DISK_H

#include <stdbool.h>

#include "error.h"

/* The smallest disk: room for ext4's own journal and tables. */
#define LC_DISK_MIN (16LL << 20)

/* A size lcrun accepts for a disk, and that the filesystem of dir has
 * room for (a sparse disk larger than what is free could not be filled,
 * and would not keep the host's disk from filling): LC_EXIT_USAGE /
 * LC_EXIT_RUNTIME with a line that says why. */
int lc_disk_check(long long size, const char *dir, lc_error_t **err);

/* The disk image at img, of size bytes (made from the template with
 * LC_DISK_CREATE, else kept: a stopped sandbox's), mounted detached: *mfd is a mount fd of its
 * root (nosuid, nodev, noexec), for move_mount or *at calls, the caller's
 * to close.  A loop device that holds img already (the sandbox runs) is
 * mounted again, which gives the same filesystem: never a second loop
 * device over the same file. */
enum {
	LC_DISK_CREATE = 1,     /* make the image (from the template of size) */
	LC_DISK_NO_JOURNAL = 2, /* ... with no journal: it goes with its run */
};
int lc_disk_mount(const char *img, long long size, unsigned flags, int *mfd, lc_error_t **err);

#endif
