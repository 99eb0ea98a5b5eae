/* archivelib.h — libarchive, loaded when archive code first runs rather
 * than when lcrun starts.
 *
 * Only image import and export, layers (snapshots, commits, builds) and
 * `lcrun cp` read or write tar.  Linked in (even statically), libarchive
 * made every lcrun process map and relocate its compression libraries
 * (libacl, liblzma, libzstd, liblz4, libbz2, libz): about 0.3 ms of every
 * start.  layer.c, image.c and copy.c include this header after
 * libarchive's own: each function they call is then a pointer in
 * lc_archivelib, filled from the shared library (LC_LIBARCHIVE) by
 * lc_archivelib_load(); the types come from the headers, so a changed
 * signature fails to build as before.
 *
 * Every libarchive object comes from one of the constructors below
 * (LC_ARCHIVELIB_NEW), which load the library first and return NULL with
 * errno ELIBACC when it cannot be loaded; a caller reports a NULL with
 * lc_archivelib_error().  The other functions take such an object, so the
 * library is loaded by the time they run.  The *_free functions accept
 * NULL without the library, as libarchive's own do.
 *
 * RTLD_LAZY: the shared library pulls libxml2, ICU and libstdc++ (formats
 * lcrun never uses); on this 2-core VM dlopen() takes about 2.1 ms with
 * lazy binding and 2.45 ms with RTLD_NOW (medians of 200), paid once by
 * the first archive operation of a process.  Lazy binding resolves from
 * objects already mapped, so it reads no file later: a child that entered
 * a sandbox's mount namespace (lcrun cp) must only use a library its
 * parent loaded (lc_sandbox_copy loads it before it forks).  A threaded
 * caller loads it before its threads fork, as for lc_netlibs_load(). */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "error.h"

/* The soname of the ABI these headers describe (Debian's libarchive13). */
#define LC_LIBARCHIVE "libarchive.so.13"

/* The constructors: they load the library. */
#define LC_ARCHIVELIB_NEW(X) \
	X(archive_entry_linkresolver_new) \
	X(archive_entry_new) \
	X(archive_read_disk_new) \
	X(archive_read_new) \
	X(archive_write_disk_new) \
	X(archive_write_new)

/* Destructors: NULL-safe without the library. */
#define LC_ARCHIVELIB_FREE(X) \
	X(archive_entry_free) \
	X(archive_entry_linkresolver_free) \
	X(archive_read_free) \
	X(archive_write_free)

/* Everything else, called with an object from a constructor. */
#define LC_ARCHIVELIB_CALLS(X) \
	X(archive_entry_atime) \
	X(archive_entry_atime_is_set) \
	X(archive_entry_atime_nsec) \
	X(archive_entry_clear) \
	X(archive_entry_copy_pathname) \
	X(archive_entry_copy_stat) \
	X(archive_entry_copy_symlink) \
	X(archive_entry_filetype) \
	X(archive_entry_gid) \
	X(archive_entry_hardlink) \
	X(archive_entry_linkify) \
	X(archive_entry_linkresolver_set_strategy) \
	X(archive_entry_mode) \
	X(archive_entry_mtime) \
	X(archive_entry_mtime_nsec) \
	X(archive_entry_pathname) \
	X(archive_entry_perm) \
	X(archive_entry_rdev) \
	X(archive_entry_set_filetype) \
	X(archive_entry_set_gid) \
	X(archive_entry_set_gname) \
	X(archive_entry_set_hardlink) \
	X(archive_entry_set_mtime) \
	X(archive_entry_set_pathname) \
	X(archive_entry_set_perm) \
	X(archive_entry_set_rdev) \
	X(archive_entry_set_size) \
	X(archive_entry_set_symlink) \
	X(archive_entry_set_uid) \
	X(archive_entry_set_uname) \
	X(archive_entry_size) \
	X(archive_entry_size_is_set) \
	X(archive_entry_sparse_add_entry) \
	X(archive_entry_sparse_clear) \
	X(archive_entry_sparse_count) \
	X(archive_entry_sparse_next) \
	X(archive_entry_sparse_reset) \
	X(archive_entry_symlink) \
	X(archive_entry_uid) \
	X(archive_entry_unset_atime) \
	X(archive_entry_unset_birthtime) \
	X(archive_entry_unset_ctime) \
	X(archive_entry_xattr_add_entry) \
	X(archive_entry_xattr_next) \
	X(archive_entry_xattr_reset) \
	X(archive_errno) \
	X(archive_error_string) \
	X(archive_filter_code) \
	X(archive_filter_count) \
	X(archive_format) \
	X(archive_read_data) \
	X(archive_read_data_block) \
	X(archive_read_disk_descend) \
	X(archive_read_disk_open) \
	X(archive_read_disk_set_symlink_hybrid) \
	X(archive_read_next_header) \
	X(archive_read_next_header2) \
	X(archive_read_open) \
	X(archive_read_open_fd) \
	X(archive_read_open_filename) \
	X(archive_read_support_filter_all) \
	X(archive_read_support_format_empty) \
	X(archive_read_support_format_gnutar) \
	X(archive_read_support_format_raw) \
	X(archive_read_support_format_tar) \
	X(archive_set_error) \
	X(archive_write_add_filter_none) \
	X(archive_write_close) \
	X(archive_write_data) \
	X(archive_write_data_block) \
	X(archive_write_disk_set_options) \
	X(archive_write_finish_entry) \
	X(archive_write_header) \
	X(archive_write_open) \
	X(archive_write_open_fd) \
	X(archive_write_open_filename) \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_bytes_per_block) \
	X(archive_write_set_format_pax_restricted)

#define LC_ARCHIVELIB_FIELD(name) __typeof__(name) *name;
struct lc_archivelib {
	LC_ARCHIVELIB_NEW(LC_ARCHIVELIB_FIELD)
	LC_ARCHIVELIB_FREE(LC_ARCHIVELIB_FIELD)
	LC_ARCHIVELIB_CALLS(LC_ARCHIVELIB_FIELD)
};
#undef LC_ARCHIVELIB_FIELD
extern struct lc_archivelib lc_archivelib;

/* The wrappers the constructors' and destructors' names map to. */
#define LC_ARCHIVELIB_DECL(name) __typeof__(name) lc_##name;
LC_ARCHIVELIB_NEW(LC_ARCHIVELIB_DECL)
LC_ARCHIVELIB_FREE(LC_ARCHIVELIB_DECL)
#undef LC_ARCHIVELIB_DECL

/* Loads the library once per process (thread-safe); 0, or -1 with an
 * error naming LC_LIBARCHIVE and why it could not be loaded. */
int lc_archivelib_load(lc_error_t **err);
/* Why the library could not be loaded; NULL if it was, or was not tried. */
const char *lc_archivelib_failure(void);
/* For a constructor's NULL: sets *err to the load failure, or to "out of
 * memory" when the library is loaded; returns -1. */
int lc_archivelib_error(lc_error_t **err);

#ifndef LC_ARCHIVELIB_IMPL
#define archive_entry_linkresolver_new lc_archive_entry_linkresolver_new
#define archive_entry_new lc_archive_entry_new
#define archive_read_disk_new lc_archive_read_disk_new
#define archive_read_new lc_archive_read_new
#define archive_write_disk_new lc_archive_write_disk_new
#define archive_write_new lc_archive_write_new
#define archive_entry_free lc_archive_entry_free
#define archive_entry_linkresolver_free lc_archive_entry_linkresolver_free
#define archive_read_free lc_archive_read_free
#define archive_write_free lc_archive_write_free
#define archive_entry_atime (lc_archivelib.archive_entry_atime)
#define archive_entry_atime_is_set (lc_archivelib.archive_entry_atime_is_set)
#define archive_entry_atime_nsec (lc_archivelib.archive_entry_atime_nsec)
#define archive_entry_clear (lc_archivelib.archive_entry_clear)
#define archive_entry_copy_pathname (lc_archivelib.archive_entry_copy_pathname)
#define archive_entry_copy_stat (lc_archivelib.archive_entry_copy_stat)
#define archive_entry_copy_symlink (lc_archivelib.archive_entry_copy_symlink)
#define archive_entry_filetype (lc_archivelib.archive_entry_filetype)
#define archive_entry_gid (lc_archivelib.archive_entry_gid)
#define archive_entry_hardlink (lc_archivelib.archive_entry_hardlink)
#define archive_entry_linkify (lc_archivelib.archive_entry_linkify)
#define archive_entry_linkresolver_set_strategy (lc_archivelib.archive_entry_linkresolver_set_strategy)
#define archive_entry_mode (lc_archivelib.archive_entry_mode)
#define archive_entry_mtime (lc_archivelib.archive_entry_mtime)
#define archive_entry_mtime_nsec (lc_archivelib.archive_entry_mtime_nsec)
#define archive_entry_pathname (lc_archivelib.archive_entry_pathname)
#define archive_entry_perm (lc_archivelib.archive_entry_perm)
#define archive_entry_rdev (lc_archivelib.archive_entry_rdev)
#define archive_entry_set_filetype (lc_archivelib.archive_entry_set_filetype)
#define archive_entry_set_gid (lc_archivelib.archive_entry_set_gid)
#define archive_entry_set_gname (lc_archivelib.archive_entry_set_gname)
#define archive_entry_set_hardlink (lc_archivelib.archive_entry_set_hardlink)
#define archive_entry_set_mtime (lc_archivelib.archive_entry_set_mtime)
#define archive_entry_set_pathname (lc_archivelib.archive_entry_set_pathname)
#define archive_entry_set_perm (lc_archivelib.archive_entry_set_perm)
#define archive_entry_set_rdev (lc_archivelib.archive_entry_set_rdev)
#define archive_entry_set_size (lc_archivelib.archive_entry_set_size)
#define archive_entry_set_symlink (lc_archivelib.archive_entry_set_symlink)
#define archive_entry_set_uid (lc_archivelib.archive_entry_set_uid)
#define archive_entry_set_uname (lc_archivelib.archive_entry_set_uname)
#define archive_entry_size (lc_archivelib.archive_entry_size)
#define archive_entry_size_is_set (lc_archivelib.archive_entry_size_is_set)
#define archive_entry_sparse_add_entry (lc_archivelib.archive_entry_sparse_add_entry)
#define archive_entry_sparse_clear (lc_archivelib.archive_entry_sparse_clear)
#define archive_entry_sparse_count (lc_archivelib.archive_entry_sparse_count)
#define archive_entry_sparse_next (lc_archivelib.archive_entry_sparse_next)
#define archive_entry_sparse_reset (lc_archivelib.archive_entry_sparse_reset)
#define archive_entry_symlink (lc_archivelib.archive_entry_symlink)
#define archive_entry_uid (lc_archivelib.archive_entry_uid)
#define archive_entry_unset_atime (lc_archivelib.archive_entry_unset_atime)
#define archive_entry_unset_birthtime (lc_archivelib.archive_entry_unset_birthtime)
#define archive_entry_unset_ctime (lc_archivelib.archive_entry_unset_ctime)
#define archive_entry_xattr_add_entry (lc_archivelib.archive_entry_xattr_add_entry)
#define archive_entry_xattr_next (lc_archivelib.archive_entry_xattr_next)
#define archive_entry_xattr_reset (lc_archivelib.archive_entry_xattr_reset)
#define archive_errno (lc_archivelib.archive_errno)
#define archive_error_string (lc_archivelib.archive_error_string)
#define archive_filter_code (lc_archivelib.archive_filter_code)
#define archive_filter_count (lc_archivelib.archive_filter_count)
#define archive_format (lc_archivelib.archive_format)
#define archive_read_data (lc_archivelib.archive_read_data)
#define archive_read_data_block (lc_archivelib.archive_read_data_block)
#define archive_read_disk_descend (lc_archivelib.archive_read_disk_descend)
#define archive_read_disk_open (lc_archivelib.archive_read_disk_open)
#define archive_read_disk_set_symlink_hybrid (lc_archivelib.archive_read_disk_set_symlink_hybrid)
#define archive_read_next_header (lc_archivelib.archive_read_next_header)
#define archive_read_next_header2 (lc_archivelib.archive_read_next_header2)
#define archive_read_open (lc_archivelib.archive_read_open)
#define archive_read_open_fd (lc_archivelib.archive_read_open_fd)
#define archive_read_open_filename (lc_archivelib.archive_read_open_filename)
#define archive_read_support_filter_all (lc_archivelib.archive_read_support_filter_all)
#define archive_read_support_format_empty (lc_archivelib.archive_read_support_format_empty)
#define archive_read_support_format_gnutar (lc_archivelib.archive_read_support_format_gnutar)
#define archive_read_support_format_raw (lc_archivelib.archive_read_support_format_raw)
#define archive_read_support_format_tar (lc_archivelib.archive_read_support_format_tar)
#define archive_set_error (lc_archivelib.archive_set_error)
#define archive_write_add_filter_none (lc_archivelib.archive_write_add_filter_none)
#define archive_write_close (lc_archivelib.archive_write_close)
#define archive_write_data (lc_archivelib.archive_write_data)
#define archive_write_data_block (lc_archivelib.archive_write_data_block)
#define archive_write_disk_set_options (lc_archivelib.archive_write_disk_set_options)
#define archive_write_finish_entry (lc_archivelib.archive_write_finish_entry)
#define archive_write_header (lc_archivelib.archive_write_header)
#define archive_write_open (lc_archivelib.archive_write_open)
#define archive_write_open_fd (lc_archivelib.archive_write_open_fd)
#define archive_write_open_filename (lc_archivelib.archive_write_open_filename)
#define archive_write_set_bytes_in_last_block (lc_archivelib.archive_write_set_bytes_in_last_block)
#define archive_write_set_bytes_per_block (lc_archivelib.archive_write_set_bytes_per_block)
#define archive_write_set_format_pax_restricted (lc_archivelib.archive_write_set_format_pax_restricted)
#endif
