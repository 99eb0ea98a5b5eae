/* oci_spec.c — lcrun-oci spec [--bundle DIR]: write a default config.json. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "oci.h"
#include "util.h"

json_t *oci_default_config(bool rootless)
{
	(void)rootless;
	static const char *caps[] = { "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", NULL };
	json_t *capl = json_array();
	for (size_t i = 0; caps[i]; i++)
		json_array_append_new(capl, json_string(caps[i]));
	json_t *proc = json_pack("{s:b, s:{s:i, s:i}, s:[s], s:[s, s], s:s, s:{s:O, s:O, s:O}, s:[{s:s, s:i, s:i}], s:b}",
				 "terminal", 1, "user", "uid", 0, "gid", 0, "args", "sh", "env",
				 "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm",
				 "cwd", "/", "capabilities", "bounding", capl, "effective", capl, "permitted", capl,
				 "rlimits", "type", "RLIMIT_NOFILE", "hard", 1024, "soft", 1024, "noNewPrivileges", 1);
	json_decref(capl);
	json_t *mounts = json_pack(
		"[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s, s, s, s]}, {s:s, s:s, s:s, s:[s, s, s, s, s, s]},"
		" {s:s, s:s, s:s, s:[s, s, s, s]}, {s:s, s:s, s:s, s:[s, s, s]}, {s:s, s:s, s:s, s:[s, s, s, s]},"
		" {s:s, s:s, s:s, s:[s, s, s, s, s]}]",
		"destination", "/proc", "type", "proc", "source", "proc",
		"destination", "/dev", "type", "tmpfs", "source", "tmpfs", "options", "nosuid", "strictatime", "mode=755",
		"size=65536k",
		"destination", "/dev/pts", "type", "devpts", "source", "devpts", "options", "nosuid", "noexec",
		"newinstance", "ptmxmode=0666", "mode=0620", "gid=5",
		"destination", "/dev/shm", "type", "tmpfs", "source", "shm", "options", "nosuid", "noexec", "nodev",
		"mode=1777",
		"destination", "/dev/mqueue", "type", "mqueue", "source", "mqueue", "options", "nosuid", "noexec",
		"nodev",
		"destination", "/sys", "type", "sysfs", "source", "sysfs", "options", "nosuid", "noexec", "nodev", "ro",
		"destination", "/sys/fs/cgroup", "type", "cgroup", "source", "cgroup", "options", "nosuid", "noexec",
		"nodev", "relatime", "ro");
	json_t *lx = json_pack(
		"{s:{s:[{s:b, s:s}]}, s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}],"
		" s:[s, s, s, s, s, s, s, s, s, s, s], s:[s, s, s, s, s, s]}",
		"resources", "devices", "allow", 0, "access", "rwm",
		"namespaces", "type", "pid", "type", "network", "type", "ipc", "type", "uts", "type", "mount", "type",
		"cgroup",
		"maskedPaths", "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
		"/sys/devices/virtual/powercap",
		"readonlyPaths", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/proc/bus");
	json_array_remove(json_object_get(lx, "readonlyPaths"), 5);
	return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.1.0", "process", proc, "root",
			 "path", "rootfs", "readonly", 1, "hostname", "lcrun-oci", "mounts", mounts, "linux", lx);
}

int oci_cmd_spec(int argc, char **argv)
{
	const char *bundle = ".";
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "--bundle") || !strcmp(argv[i], "-b")) && i + 1 < argc)
			bundle = argv[++i];
		else if (!strncmp(argv[i], "--bundle=", 9))
			bundle = argv[i] + 9;
		else if (strcmp(argv[i], "--rootless"))
			return oci_failf("spec: unknown option '%s'", argv[i]);
	}
	_cleanup_free_ char *path = lc_strdup_printf("%s/config.json", bundle);
	_cleanup_json_ json_t *j = oci_default_config(false);
	_cleanup_free_ char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno == EEXIST)
			return oci_failf("File %s exists. Remove it first", path);
		return oci_failf("cannot write %s: %s", path, strerror(errno));
	}
	int r = lc_write_all(fd, s, strlen(s)) < 0 || lc_write_all(fd, "\n", 1) < 0;
	close(fd);
	return r ? oci_failf("cannot write %s", path) : 0;
}
