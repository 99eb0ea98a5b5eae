/* caps.c — the capability set a sandbox keeps (Docker's default list). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "caps.h"
#include "lcrun.h"

static const int default_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD, CAP_NET_RAW,
	CAP_SETGID, CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP, CAP_NET_BIND_SERVICE,
	CAP_SYS_CHROOT, CAP_KILL, CAP_AUDIT_WRITE,
};

uint64_t lc_caps_default(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(default_caps) / sizeof(default_caps[0]); i++)
		m |= 1ULL << default_caps[i];
	return m;
}

int lc_cap_from_name(const char *name)
{
	if (!strcasecmp(name, "all"))
		return 64;
	cap_value_t v;
	char buf[64];
	if (strncasecmp(name, "cap_", 4) != 0) {
		snprintf(buf, sizeof(buf), "cap_%s", name);
		name = buf;
	}
	char low[64];
	size_t i;
	for (i = 0; name[i] && i < sizeof(low) - 1; i++)
		low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
	low[i] = '\0';
	if (cap_from_name(low, &v) < 0)
		return -1;
	return (int)v;
}

/* In the command's process, before changing uid: shrink the bounding set. */
int lc_caps_drop_bounding(uint64_t keep, lc_error_t **err)
{
	int last = (int)cap_max_bits() - 1;
	for (int c = 0; c <= last; c++) {
		if (keep & (1ULL << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot drop capability %d from the bounding set", c);
	}
	return 0;
}

static int set_flag(cap_t caps, cap_flag_t flag, uint64_t mask)
{
	int last = (int)cap_max_bits() - 1;
	cap_value_t list[64];
	int n = 0;
	for (int c = 0; c <= last && c < 64; c++)
		if (mask & (1ULL << c))
			list[n++] = c;
	return n ? cap_set_flag(caps, flag, n, list, CAP_SET) : 0;
}

/* After the uid change: set permitted/effective/inheritable to keep (root)
 * or to nothing (any other uid, as Docker does), and clear ambient. */
int lc_caps_apply(uint64_t keep, bool is_root, lc_error_t **err)
{
	uint64_t k = is_root ? keep : 0;
	return lc_caps_apply_sets(k, k, k, 0, err);
}

int lc_caps_apply_sets(uint64_t effective, uint64_t permitted, uint64_t inheritable, uint64_t ambient,
		       lc_error_t **err)
{
	cap_t caps = cap_init();
	if (!caps)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot allocate capability state");
	/* The kernel refuses effective outside permitted, and ambient outside
	 * permitted ∩ inheritable: such a config fails here, as with runc. */
	if (set_flag(caps, CAP_PERMITTED, permitted) < 0 || set_flag(caps, CAP_EFFECTIVE, effective) < 0 ||
	    set_flag(caps, CAP_INHERITABLE, inheritable) < 0) {
		cap_free(caps);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot build the capability set");
	}
	int r = cap_set_proc(caps);
	int e = errno;
	cap_free(caps);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot set capabilities");
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int c = 0; c < 64; c++)
		if ((ambient & (1ULL << c)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0 && errno != EINVAL)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot raise ambient capability %d", c);
	return 0;
}

/* "CAP_NET_RAW" for 13; -1 when the kernel's set has no such number. */
int lc_cap_name(int cap, char *buf, size_t len)
{
	if (cap < 0 || cap >= (int)cap_max_bits())
		return -1;
	char *n = cap_to_name((cap_value_t)cap);
	if (!n)
		return -1;
	int r = -1;
	if (!strncmp(n, "cap_", 4)) {
		snprintf(buf, len, "CAP_%s", n + 4);
		for (char *p = buf; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 32);
		r = 0;
	}
	cap_free(n);
	return r;
}
