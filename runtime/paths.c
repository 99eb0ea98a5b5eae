/* paths.c — where lcrun keeps its files.  Each can be moved with an
 * environment variable so tests and rootless users need no /var access. */
#include <stdlib.h>
#include <unistd.h>

#include "lcrun.h"

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

const char *lc_lib_dir(void)
{
	return env_or("LCRUN_ROOT", "/var/lib/lcrun");
}

const char *lc_run_dir(void)
{
	return env_or("LCRUN_STATE_DIR", "/run/lcrun");
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
