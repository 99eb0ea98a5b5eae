/* util.h — cleanup helpers and small file utilities shared by liblcrun. */
#ifndef LC_UTIL_H
#define LC_UTIL_H

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>
#include <jansson.h>

#include "error.h"
#include "fault.h" /* LC_FAULT(step): test builds only */

static inline void lc_freep(void *p) { free(*(void **)p); }
static inline void lc_closep(int *fd) { if (*fd >= 0) close(*fd); }
static inline void lc_fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void lc_closedirp(DIR **d) { if (*d) closedir(*d); }
static inline void lc_json_decrefp(json_t **j) { if (*j) json_decref(*j); }
static inline void lc_errorp(lc_error_t **e) { if (*e) lc_error_free(*e); }
void lc_strvfreep(char ***v);

#define _cleanup_free_ __attribute__((cleanup(lc_freep)))
#define _cleanup_close_ __attribute__((cleanup(lc_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(lc_fclosep)))
#define _cleanup_dir_ __attribute__((cleanup(lc_closedirp)))
#define _cleanup_json_ __attribute__((cleanup(lc_json_decrefp)))
#define _cleanup_error_ __attribute__((cleanup(lc_errorp)))
#define _cleanup_strv_ __attribute__((cleanup(lc_strvfreep)))

/* Move ownership out of a cleanup variable. */
#define lc_steal(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define lc_steal_fd(fd) ({ int _t = (fd); (fd) = -1; _t; })

char *lc_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *lc_xmalloc0(size_t n);
/* s in single quotes for a POSIX shell ('\'' for each '), a new string. */
char *lc_shell_quote(const char *s);
/* NULL-terminated string vectors. */
size_t lc_strv_len(char *const *v);
int lc_strv_push(char ***v, const char *s);
/* In strcmp order, in place (NULL is fine). */
void lc_strv_sort(char **v);
void lc_strv_free(char **v);
/* A string vector as a JSON array and back (NULL when arr is no array). */
json_t *lc_strv_to_json(char *const *v);
char **lc_json_to_strv(json_t *arr);

/* Write a whole buffer to a file atomically and durably (tmp + fsync +
 * rename + fsync of the directory): once it returns, the new content
 * survives a power cut. */
int lc_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode, lc_error_t **err);
/* fsync the directory that holds path: a name made, renamed or removed in
 * it survives a power cut (an fsync of the file alone does not say so on
 * every filesystem). */
int lc_fsync_parent(const char *path, lc_error_t **err);
/* The same without the fsync: readers see the old or the new content,
 * never a mix, but it need not survive a crash (state that a reboot
 * voids anyway).  An fsync costs 0.3-0.5 ms when /run is not a tmpfs. */
int lc_write_file_replace(const char *path, const void *buf, size_t len, mode_t mode, lc_error_t **err);
/* Write a string to an existing file (sysfs/procfs/cgroupfs knobs). */
int lc_write_file(const char *path, const char *s, lc_error_t **err);
/* Read a whole small file (NUL-terminated); *len optional. */
int lc_read_file(const char *path, char **out, size_t *len, lc_error_t **err);
/* The same from an open fd (path only names it in errors). */
int lc_read_fd(int fd, const char *path, char **out, size_t *len, lc_error_t **err);
/* A small file read into buf (NUL-terminated) with no allocation and no
 * fstat: its length, size - 1 when it may not have fitted (read it
 * another way), -1 with errno when it cannot be opened or read.
 * one_record: the file's whole text comes in one read, so a read shorter
 * than asked is its end (regular files; the kernel's files of one record:
 * /proc/PID/stat, statm, a cgroup's cpu.stat or memory.current; not
 * cgroup.procs, a record per process, which comes a page at a time). */
ssize_t lc_read_small(int dirfd, const char *path, char *buf, size_t size, bool one_record);
int lc_mkdir_p(const char *path, mode_t mode, lc_error_t **err);
/* A hint to ext2/3/4 to spread the directories made in path over the disk
 * (FS_TOPDIR_FL), or with spread false not to (the flag cleared); nothing
 * elsewhere. */
void lc_dir_spread(const char *path, bool spread);
/* rm -rf that never crosses into another mount. */
int lc_rm_rf(const char *path, lc_error_t **err);
/* Open (creating, 0600) and flock(op) a lock file, retrying on EINTR;
 * returns the fd that holds the lock. */
int lc_lock_file(const char *path, int op, lc_error_t **err);
int lc_write_all(int fd, const void *buf, size_t len);
/* Close every fd >= 3 but those in keep (n of them): a child forked from a
 * threaded program (lcd) must not hold on to the other threads' pipes. */
void lc_close_fds_except(const int *keep, size_t n);
ssize_t lc_read_all(int fd, void *buf, size_t len);
/* The signals lcrun passes on to what it runs (run, exec, lcrun-oci). */
#define LC_FORWARD_SIGNALS { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH }
/* Block the n signals of sigs in the calling thread (*old gets the mask
 * before) and return a signalfd that reads them, -1 when none can be
 * made (they stay blocked: put *old back either way). */
int lc_signals_to_fd(const int *sigs, size_t n, sigset_t *old);
/* Is the calling process single-threaded (raw clone3 is safe)? */
bool lc_single_threaded(void);
/* Fork a grandchild that outlives the caller (init reaps it): stdio on
 * /dev/null, every other fd closed but the n in keep, a session of its
 * own, no signal blocked.  0 in the grandchild, 1 in the caller (the middle process already
 * reaped), -1 when fork failed.  Only from a single-threaded process: the
 * grandchild runs ordinary library code. */
int lc_fork_detached(const int *keep, size_t n);
/* The caller ends soon after it started its heir (lcrun run, lcrun fork:
 * once their sandboxes are done), which then takes over its memory:
 * without this, lc_heir_start refuses. */
void lc_heir_allow(void);
/* A helper that shares the caller's memory (CLONE_VM: no copy of the page
 * tables, no copy-on-write fault in either process afterwards, one
 * teardown of the memory instead of two) and outlives it, as
 * lc_fork_detached's does: stdio on /dev/null, every other fd closed but
 * the n (<= 8) in keep, a session of its own, no signal blocked.  It runs
 * fn(arg, pidfd) on a stack of its own, pidfd the caller's.  Until
 * lc_heir_wait(pidfd) returned, the caller runs in the same memory: fn
 * may only make system calls that do not fail (no malloc, no stdio, no
 * errno, no lc_proc_title), on memory the caller no longer writes (arg).
 * From then on the memory is the heir's alone (the secrets noted below
 * zeroed), as the caller left it.  One per process, after lc_heir_allow,
 * and only from a single-threaded one (the caller's to know: the heir's
 * code is ordinary library code): the pid (> 0), or -1 (use
 * lc_fork_detached). */
pid_t lc_heir_start(int (*fn)(void *arg, int pidfd), void *arg, const int *keep, size_t n);
/* In the heir: until the caller has exited. */
void lc_heir_wait(int pidfd);
/* Secrets the process holds in memory (NUL-terminated strings: a
 * sandbox's secret_env and environment, a build's --secret list, the
 * argument or environment string it came from).  A helper forked with
 * lc_fork_detached may outlive the caller by seconds (the remover,
 * lcrun-net, the spare namespaces' holder one of them becomes) and needs
 * none of them: it zeroes every string noted here before anything else.
 * Note a string while it is in use, unnote it before it is freed (a
 * string noted twice is unnoted twice). */
void lc_secret_note(char *s);
void lc_secret_unnote(char *s);
/* Both for each string of a NULL-terminated list. */
void lc_secrets_note(char **v);
void lc_secrets_unnote(char **v);
/* memfd_create(name, MFD_CLOEXEC | MFD_NOEXEC_SEAL): a memfd for data,
 * never to be executed (kernels from 6.3 warn about one made without
 * saying, and refuse it under vm.memfd_noexec=2); MFD_CLOEXEC alone on a
 * kernel that does not know the seal. */
int lc_memfd_noexec(const char *name);
/* stdin, stdout and stderr on /dev/null (a reader of the caller's output
 * waits for every writer; the caller's stdin is not ours to read). */
void lc_stdio_to_null(void);
/* Copy what is readable from `from` to `to` (terminals, pipes); false on
 * EOF or error. */
bool lc_pump(int from, int to);
/* Random lowercase hex id of n chars (n even, <= 64). */
void lc_random_hex(char *out, size_t n);
/* Milliseconds from CLOCK_MONOTONIC / CLOCK_REALTIME. */
void lc_trace(const char *what);
long long lc_now_ms(void);
long long lc_wall_ms(void);
/* Parse "512M", "2G", "1048576" into bytes; -1 on bad input. */
int lc_parse_size(const char *s, long long *out);

/* SHA-256 (digest.c), without libcrypto's per-process provider set-up. */
typedef struct lc_sha256 lc_sha256_t;
/* Load libcrypto now (it is otherwise loaded by the first hash): a
 * threaded caller does it before any fork, see lc_netlibs_load(). */
void lc_crypto_load(void);
lc_sha256_t *lc_sha256_new(void);
void lc_sha256_update(lc_sha256_t *h, const void *buf, size_t len);
void lc_sha256_final(lc_sha256_t *h, unsigned char out[32]); /* frees h */
void lc_sha256_hex(const unsigned char md[32], char hex[65]);
/* The n bytes at buf as lowercase hex, in hex (2n + 1 chars, with the NUL). */
void lc_hex(const void *buf, size_t n, char *hex);
/* A fast 64-bit hash (digest.c), not cryptographic: an index for caches
 * that keep their full key and compare it byte for byte on a hit, and a
 * check against torn or damaged files, never an identity. */
uint64_t lc_hash64(const void *buf, size_t len, uint64_t seed);

/* For a single-threaded process about to allocate much and briefly
 * (libnftables' caches: 128 KiB hash tables, mmap'd and faulted in a page
 * at a time): the next size bytes of malloc come from heap pages faulted
 * in at once (MADV_POPULATE_WRITE), a page fault each no more.  Changes
 * malloc's thresholds for the process's life.  False when the pages
 * could not be faulted in (kernels before 5.14): nothing else changes
 * then but the thresholds. */
bool lc_heap_prefault(size_t size);

#endif
