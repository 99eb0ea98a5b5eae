/* paths.c — where lcrun keeps its files.  Each can be moved with an
 * environment variable so tests and rootless users need no /var access.
 * A rootless caller defaults to $XDG_DATA_HOME/lcrun (or
 * ~/.local/share/lcrun) and $XDG_RUNTIME_DIR/lcrun (or /tmp/lcrun-UID). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lcrun.h"

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
