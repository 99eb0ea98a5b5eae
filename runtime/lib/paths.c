/* paths.c — where lcrun keeps its files.  Each can be moved with an
 * environment variable so tests and rootless users need no /var access.
 * A rootless caller defaults to $XDG_DATA_HOME/lcrun (or
 * ~/.local/share/lcrun) and $XDG_RUNTIME_DIR/lcrun (or /tmp/lcrun-UID).
 *
 * Both directories are the caller's own and closed to other users: the
 * store (lc_lib_dir) holds what sandboxes wrote, setuid files and all, as
 * the sandboxes' host ids or as root (an unpacked layer keeps a snapshot's
 * setuid-root file as one); the state directory holds what lcrun later
 * signals and removes.  lc_lib_dir_hold and lc_run_dir_hold make a missing
 * one private (0700 and 0711: the operator's lcd.sock is reached through
 * the state directory), put a default one that others can reach back to
 * that mode, and refuse one set with LCRUN_ROOT / LCRUN_STATE_DIR that
 * others can reach (a root others may read or enter, a state directory
 * others may write: lcrun never changes the mode of a directory it was
 * given, which may be anything) or that belongs to another user (who
 * could change what lcrun runs and removes).  Once per process: a stat,
 * then the same answer. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lcrun.h"
#include "paths.h"
#include "util.h"

static char lib_dir[4096], run_dir[4096];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_dirs(void)
{
	const char *v = getenv("LCRUN_ROOT");
	if (v && *v)
		snprintf(lib_dir, sizeof(lib_dir), "%s", v);
	else if (geteuid() == 0)
		snprintf(lib_dir, sizeof(lib_dir), "/var/lib/lcrun");
	else if ((v = getenv("XDG_DATA_HOME")) && *v)
		snprintf(lib_dir, sizeof(lib_dir), "%s/lcrun", v);
	else if ((v = getenv("HOME")) && *v && access(v, W_OK) == 0)
		snprintf(lib_dir, sizeof(lib_dir), "%s/.local/share/lcrun", v);
	else
		snprintf(lib_dir, sizeof(lib_dir), "/tmp/lcrun-data-%u", (unsigned)geteuid());

	v = getenv("LCRUN_STATE_DIR");
	if (v && *v)
		snprintf(run_dir, sizeof(run_dir), "%s", v);
	else if (geteuid() == 0)
		snprintf(run_dir, sizeof(run_dir), "/run/lcrun");
	else if ((v = getenv("XDG_RUNTIME_DIR")) && *v)
		snprintf(run_dir, sizeof(run_dir), "%s/lcrun", v);
	else
		snprintf(run_dir, sizeof(run_dir), "/tmp/lcrun-%u", (unsigned)geteuid());
}

const char *lc_lib_dir(void)
{
	pthread_once(&once, init_dirs);
	return lib_dir;
}

const char *lc_run_dir(void)
{
	pthread_once(&once, init_dirs);
	return run_dir;
}

const char *lc_policy_dir(void)
{
	const char *v = getenv("LCRUN_POLICY_DIR");
	if (v && *v)
		return v;
	if (access(LC_PKGDATADIR "/policies/default.json", R_OK) == 0)
		return LC_PKGDATADIR "/policies";
	return LC_SRCDIR "/policies";
}

struct held {
	pthread_once_t once;
	int code, errnum;
	char msg[1024];
};

static struct held lib_held = { PTHREAD_ONCE_INIT, 0, 0, "" }, run_held = { PTHREAD_ONCE_INIT, 0, 0, "" };

static int __attribute__((format(printf, 4, 5))) refuse(struct held *h, int code, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->msg, sizeof(h->msg), fmt, ap);
	va_end(ap);
	h->code = code;
	h->errnum = errnum;
	return -1;
}

/* dir (var names it when set): made with mode if missing (its parents
 * 0755); else it must be a directory of this user's: a default one with a
 * bit of open set gets mode back, a given one with a bit of refused is
 * refused (risk says why).  0, or the refusal in h. */
static int hold(struct held *h, const char *dir, const char *var, const char *what, mode_t mode, mode_t open,
		mode_t refused, const char *risk)
{
	const char *v = getenv(var);
	bool given = v && *v;
	_cleanup_free_ char *name = given ? lc_strdup_printf("%s %s", var, dir) : lc_strdup_printf("%s %s", what, dir);
	struct stat st;
	if (stat(dir, &st) < 0) {
		if (errno != ENOENT)
			return refuse(h, LC_EXIT_RUNTIME, errno, "cannot reach %s", name);
		_cleanup_free_ char *parent = strdup(dir);
		char *slash = strrchr(parent, '/');
		lc_error_t *e = NULL;
		if (slash && slash != parent) {
			*slash = '\0';
			if (lc_mkdir_p(parent, 0755, &e) < 0) {
				refuse(h, e->exit_code, e->errnum, "%s", e->msg);
				lc_error_free(e);
				return -1;
			}
		}
		if (mkdir(dir, mode) == 0)
			return chmod(dir, mode) < 0 /* whatever the umask */
				       ? refuse(h, LC_EXIT_RUNTIME, errno, "cannot set the mode of %s", name)
				       : 0;
		if (errno != EEXIST || stat(dir, &st) < 0) /* EEXIST: made meanwhile, checked below */
			return refuse(h, LC_EXIT_RUNTIME, errno, "cannot create %s", name);
	}
	if (!S_ISDIR(st.st_mode))
		return refuse(h, LC_EXIT_NOENT, ENOTDIR, "%s", name);
	uid_t me = geteuid();
	if (st.st_uid != me)
		return refuse(h, LC_EXIT_PERM, 0,
			      "%s belongs to uid %u, not to uid %u: its owner could change what lcrun runs and removes; "
			      "use a directory of uid %u's own",
			      name, (unsigned)st.st_uid, (unsigned)me, (unsigned)me);
	if (given && (st.st_mode & refused))
		return refuse(h, LC_EXIT_PERM, 0, "%s is open to other users (mode %04o): %s; make it private: chmod %o %s",
			      name, (unsigned)(st.st_mode & 07777), risk, (unsigned)mode, dir);
	if (given || !(st.st_mode & open) || chmod(dir, mode) == 0)
		return 0;
	return refuse(h, LC_EXIT_RUNTIME, errno, "%s is open to other users (mode %04o) and cannot be made private",
		      name, (unsigned)(st.st_mode & 07777));
}

static void hold_lib(void)
{
	hold(&lib_held, lc_lib_dir(), "LCRUN_ROOT", "lcrun's store", 0700, 0077, 0077,
	     "they could reach what sandboxes leave there, setuid files among them");
}

static void hold_run(void)
{
	/* Others may list a given one (sandbox ids), not write to it. */
	hold(&run_held, lc_run_dir(), "LCRUN_STATE_DIR", "lcrun's state directory", 0711, 0066, 0022,
	     "they could change what lcrun signals and removes");
}

static int held_answer(const struct held *h, lc_error_t **err)
{
	if (!h->code)
		return 0;
	return lc_error_set(err, h->code, h->errnum, "%s", h->msg);
}

int lc_lib_dir_hold(lc_error_t **err)
{
	pthread_once(&lib_held.once, hold_lib);
	return held_answer(&lib_held, err);
}

int lc_run_dir_hold(lc_error_t **err)
{
	pthread_once(&run_held.once, hold_run);
	return held_answer(&run_held, err);
}

static char run_real[4096];
static pthread_once_t run_real_once = PTHREAD_ONCE_INIT;

static void find_run_real(void)
{
	_cleanup_free_ char *r = realpath(lc_run_dir(), NULL);
	snprintf(run_real, sizeof(run_real), "%s", r ? r : lc_run_dir());
}

const char *lc_run_dir_real(void)
{
	pthread_once(&run_real_once, find_run_real);
	return run_real;
}

char *lc_state_dir(const char *id)
{
	return lc_strdup_printf("%s/%s", lc_run_dir(), id);
}

char *lc_sandbox_dir(const char *id)
{
	return lc_strdup_printf("%s/sandboxes/%s", lc_lib_dir(), id);
}

char *lc_spare_dir(void)
{
	return lc_strdup_printf("%s/spare", lc_lib_dir());
}

#define PAIR_FILE ".state-dir"

static bool same_dir(const char *a, const char *b)
{
	_cleanup_free_ char *ra = realpath(a, NULL);
	_cleanup_free_ char *rb = realpath(b, NULL);
	return !strcmp(ra ? ra : a, rb ? rb : b);
}

/* The directory an environment variable sets, unless it is the default. */
static const char *set_apart(const char *var, const char *dir, const char *root_default)
{
	const char *v = getenv(var);
	if (!v || !*v || (geteuid() == 0 && same_dir(dir, root_default)))
		return NULL;
	return dir;
}

int lc_sandboxes_parent_make(const char *parent, lc_error_t **err)
{
	/* The usual case costs one failed mkdir. */
	if (mkdir(parent, 0700) < 0) {
		if (errno == EEXIST)
			return 0;
		if (errno != ENOENT)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create directory %s", parent);
		if (lc_mkdir_p(parent, 0700, err) < 0)
			return -1;
	}
	/* The default root goes with the default state directory, whoever
	 * made it first; a root set apart, with the state directory it is
	 * used with. */
	if (!set_apart("LCRUN_ROOT", lc_lib_dir(), "/var/lib/lcrun"))
		return 0;
	_cleanup_free_ char *pair = lc_strdup_printf("%s/" PAIR_FILE, parent);
	_cleanup_free_ char *text = lc_strdup_printf("%s\n", lc_run_dir());
	return lc_write_file_atomic(pair, text, strlen(text), 0600, err);
}

struct pair_answer {
	pthread_once_t once;
	char *msg; /* NULL: the pair holds */
};

static struct pair_answer pair = { PTHREAD_ONCE_INIT, NULL };

static void pair_find(void)
{
	const char *def = "the default state directory";
	if (!set_apart("LCRUN_ROOT", lc_lib_dir(), "/var/lib/lcrun")) {
		if (set_apart("LCRUN_STATE_DIR", lc_run_dir(), "/run/lcrun"))
			pair.msg = lc_strdup_printf("LCRUN_STATE_DIR %s with the default root %s, whose sandboxes %s records: "
						    "set LCRUN_ROOT to a root of its own as well", lc_run_dir(),
						    lc_lib_dir(), def);
		return;
	}
	_cleanup_free_ char *file = lc_strdup_printf("%s/sandboxes/" PAIR_FILE, lc_lib_dir());
	_cleanup_free_ char *owner = NULL;
	if (lc_read_file(file, &owner, NULL, NULL) < 0)
		return; /* none yet (or an older lcrun's root): this one's */
	owner[strcspn(owner, "\n")] = '\0';
	struct stat st;
	if (stat(owner, &st) < 0 && errno == ENOENT) {
		/* its state directory is gone, and the records of its
		 * sandboxes with it: the root goes with this one now */
		_cleanup_free_ char *text = lc_strdup_printf("%s\n", lc_run_dir());
		lc_error_t *e = NULL;
		if (lc_write_file_atomic(file, text, strlen(text), 0600, &e) < 0) {
			pair.msg = strdup(e->msg);
			lc_error_free(e);
		}
		return;
	}
	if (!same_dir(owner, lc_run_dir()))
		pair.msg = lc_strdup_printf("LCRUN_ROOT %s keeps the sandboxes that %s records, not LCRUN_STATE_DIR %s's: "
					    "use that state directory with it, or a root of its own", lc_lib_dir(), owner,
					    lc_run_dir());
}

int lc_sandboxes_pair_check(lc_error_t **err)
{
	pthread_once(&pair.once, pair_find);
	return pair.msg ? lc_error_set(err, LC_EXIT_USAGE, 0, "%s", pair.msg) : 0;
}

/* NULL when this state directory keeps the records of parent's sandbox
 * directories, else the one that does (to be freed).  The default root
 * has no .state-dir: it belongs to the default state directory.  A root
 * set apart that an older lcrun made has none either: it goes with the
 * state directory it is used with. */
char *lc_sandboxes_owner(const char *parent)
{
	_cleanup_free_ char *pair = lc_strdup_printf("%s/" PAIR_FILE, parent);
	char *owner = NULL;
	if (lc_read_file(pair, &owner, NULL, NULL) < 0) {
		if (set_apart("LCRUN_ROOT", lc_lib_dir(), "/var/lib/lcrun") ||
		    !set_apart("LCRUN_STATE_DIR", lc_run_dir(), "/run/lcrun"))
			return NULL;
		return strdup("the default state directory");
	}
	owner[strcspn(owner, "\n")] = '\0';
	if (same_dir(owner, lc_run_dir())) {
		free(owner);
		return NULL;
	}
	return owner;
}
