/* seccomp.h — seccomp profiles: parse (OCI/moby JSON), compile with
 * libseccomp, cache the BPF by the profile's hash, install it.
 *
 * The parent calls lc_seccomp_prepare() before the sandbox starts (it may
 * fail with a message naming the file and the position); the sandbox child
 * calls lc_seccomp_install() right before execve, after
 * prctl(PR_SET_NO_NEW_PRIVS, 1). */
/* This header shares its name with libseccomp's <seccomp.h>, and -I runtime
 * comes first in the search path; seccomp.c defines LC_SECCOMP_WANT_LIBSECCOMP
 * and includes <seccomp.h>, which lands here and continues to libseccomp's. */
#if defined(LC_SECCOMP_WANT_LIBSECCOMP) && !defined(LC_SECCOMP_HAVE_LIBSECCOMP)
#define LC_SECCOMP_HAVE_LIBSECCOMP
#include_next <seccomp.h>
#endif

#ifndef LC_SECCOMP_H
#define LC_SECCOMP_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/filter.h>

#include "error.h"

typedef struct lc_seccomp_prog {
	struct sock_filter *filter;
	unsigned short len;
	bool unconfined;
} lc_seccomp_prog_t;

/* profile: NULL → lc_policy_dir()/default.json; "unconfined" →
 * prog->unconfined = true and no filter.  Loads the BPF from the cache
 * (lc_lib_dir()/seccomp/<index>.bpf, holding the whole key: see seccomp.c)
 * or compiles it and writes the cache.
 * Profile rules with "includes"/"excludes" "caps" are judged as if the
 * sandbox held no capability (use lc_seccomp_prepare_caps to pass them).
 * Errors: LC_EXIT_NOENT (missing file), LC_EXIT_INVALID (bad content),
 * LC_EXIT_RUNTIME (libseccomp/host failure).  Leaves nothing behind on error. */
int lc_seccomp_prepare(const char *profile, lc_seccomp_prog_t *prog, lc_error_t **err);
/* Same, with the sandbox's capability bitmask (bit N = capability N) for the
 * profile's "includes"/"excludes" "caps" conditions; part of the cache key. */
int lc_seccomp_prepare_caps(const char *profile, uint64_t caps, lc_seccomp_prog_t *prog, lc_error_t **err);

/* Same, for a profile held in memory (text of len bytes; name is used in
 * messages).  flags: LC_SECCOMP_SKIP_UNKNOWN skips syscall names libseccomp
 * does not know instead of refusing them (what OCI runtimes do with the
 * profile a container engine wrote); it is part of the cache key. */
enum { LC_SECCOMP_SKIP_UNKNOWN = 1 };
int lc_seccomp_prepare_buf(const char *name, const char *text, size_t len, uint64_t caps, unsigned flags,
			   lc_seccomp_prog_t *prog, lc_error_t **err);

/* In the sandbox child: seccomp(SECCOMP_SET_MODE_FILTER, 0, prog).  Needs
 * no_new_privs (or CAP_SYS_ADMIN).  A no-op for an unconfined prog. */
int lc_seccomp_install(const lc_seccomp_prog_t *prog, lc_error_t **err);

void lc_seccomp_prog_free(lc_seccomp_prog_t *prog);

/* Parse and compile a profile file without the cache (unit tests and
 * `lcrun seccomp check`).  caps as for lc_seccomp_prepare (none). */
int lc_seccomp_compile_file(const char *path, lc_seccomp_prog_t *prog, lc_error_t **err);

/* Path of the cache file lc_seccomp_prepare_caps would use for the profile
 * bytes buf[0..len) and caps (malloc'd; tests and diagnostics). */
char *lc_seccomp_cache_path(const void *buf, size_t len, uint64_t caps, lc_error_t **err);

/* A sandbox's own copy of the program it was created with (its execs use
 * it): lc_seccomp_save writes prog (unconfined included) to path, mode
 * 0600, atomically; lc_seccomp_load_saved reads it back without hashing:
 * 1 (prog filled), or 0 when path holds no such file of ours (an older
 * sandbox: prepare from the profile instead). */
int lc_seccomp_save(const lc_seccomp_prog_t *prog, const char *path, lc_error_t **err);
int lc_seccomp_load_saved(const char *path, lc_seccomp_prog_t *prog);
/* The same copy in a memfd (its fd, or -1), for a process that does not
 * share lcrun's memory (a run's pid 1, sent on its sync socket), and read
 * back from such an fd (1 prog filled, 0 not a well-formed copy; no owner
 * check: the fd comes from lcrun). */
int lc_seccomp_memfd(const lc_seccomp_prog_t *prog, lc_error_t **err);
int lc_seccomp_load_fd(int fd, lc_seccomp_prog_t *prog);

/* The `lcrun seccomp` verb (cli_seccomp.c): `check FILE…`. */
int lc_cmd_seccomp(int argc, char **argv);

#endif
