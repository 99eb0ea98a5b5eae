/* archive_compat.c — lets lcrun link libarchive statically without its
 * format dispatch table.
 *
 * libarchive's pax writer calls one helper that lives in the same object
 * file as the table of every writer format (archive_write_set_format.o);
 * pulling that object in drags the xar writer, and with it libxml2, ICU
 * and libstdc++, into every lcrun start (about a millisecond of
 * relocations).  lcrun only writes pax, so it provides the helper itself,
 * with the same behaviour: reject the entry with a message. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>

/* libarchive's ARCHIVE_ERRNO_FILE_FORMAT (private header): EFTYPE, else EINVAL */
#define EFTYPE_LCRUN EINVAL

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry, const char *format);

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry, const char *format)
{
	const char *name = archive_entry_pathname(entry);
	archive_set_error(a, EFTYPE_LCRUN, "%s: unsupported file type for the %s format",
			  name ? name : "(unnamed)", format);
}
