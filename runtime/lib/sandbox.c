/* sandbox.c — the lifecycle of one sandbox: lc_run.
 *
 * Three processes take part.  lcrun (the caller of lc_run, possibly a
 * thread of lcd) forks the STAGING process.  Staging, still root on the
 * host, takes a mount namespace and a network namespace of its own (so the
 * network namespace is owned by the host's user namespace: root in the
 * sandbox cannot reconfigure it), builds the overlay root there, then
 * enters a new user namespace whose maps lcrun writes, unshares mount, pid,
 * uts, ipc and cgroup namespaces and clones PID 1 with CLONE_PARENT, so that
 * pid 1 is lcrun's own child, and CLONE_VM: pid 1 takes over the staging
 * process's memory, which exits at once.  Pid 1 finishes the root
 * (proc, dev, binds, masks, pivot_root) and becomes the init (init.c).
 *
 * Nothing is mounted in the host's mount namespace: the staging mounts live
 * in namespaces that die with the sandbox.  The cgroup, the sandbox
 * directory, the state and the network are removed by lcrun at the end. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "console.h"
#include "disk.h"
#include "idmap.h"
#include "image.h"
#include "init.h"
#include "mounts.h"
#include "net.h"
#include "netpool.h"
#include "netspare.h"
#include "paths.h"
#include "proctitle.h"
#include "sandbox_priv.h"
#include "seccomp.h"
#include "shared.h"
#include "state.h"
#include "sync.h"
#include "trash.h"
#include "util.h"



#define trace lc_trace

/* ---- the user namespace used to idmap lower layers ---------------------- */

static pthread_mutex_t idmap_lock = PTHREAD_MUTEX_INITIALIZER;
static int idmap_fd = -1;
static pid_t idmap_pid; /* the process that made idmap_fd: a forked child
			   (lcd's sandbox monitors) may have closed it */

static int write_maps(pid_t pid, uid_t base, unsigned count, lc_error_t **err)
{
	char path[64], map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, count);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	if (lc_write_file(path, map, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	return lc_write_file(path, map, err);
}

/* A user namespace with the sandboxes' mapping, kept for the process's
 * lifetime: mount_setattr(MOUNT_ATTR_IDMAP) takes its fd. */
static int idmap_userns(lc_error_t **err)
{
	pthread_mutex_lock(&idmap_lock);
	if (idmap_fd < 0 || idmap_pid != getpid()) {
		idmap_fd = lc_idmap_userns(0, lc_uid_base(), 0, (gid_t)lc_uid_base(), lc_uid_count(), err);
		idmap_pid = getpid();
	}
	int fd = idmap_fd;
	pthread_mutex_unlock(&idmap_lock);
	return fd;
}

/* ---- environment --------------------------------------------------------- */

char **lc_build_env(const lc_spec_t *spec)
{
	char **env = NULL;
	const char *term = getenv("TERM"), *lang = getenv("LANG");
	lc_strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	/* HOME (USER, LOGNAME) unless given: lc_exec_command reads them from
	 * the sandbox's /etc/passwd. */
	_cleanup_free_ char *t = lc_strdup_printf("TERM=%s", term && *term ? term : "xterm");
	lc_strv_push(&env, t);
	_cleanup_free_ char *l = lc_strdup_printf("LANG=%s", lang && *lang ? lang : "C.UTF-8");
	lc_strv_push(&env, l);
	char **lists[2] = { spec->env, spec->secret_env };
	for (int li = 0; li < 2; li++) {
		for (size_t i = 0; lists[li] && lists[li][i]; i++) {
			const char *kv = lists[li][i];
			const char *eq = strchr(kv, '=');
			size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
			bool replaced = false;
			for (size_t j = 0; env[j]; j++) {
				if (!strncmp(env[j], kv, klen) && env[j][klen] == '=') {
					explicit_bzero(env[j], strlen(env[j])); /* a secret's, maybe */
					free(env[j]);
					env[j] = strdup(kv);
					replaced = true;
					break;
				}
			}
			if (!replaced)
				lc_strv_push(&env, kv);
		}
	}
	return env;
}

/* ---- the staging process and pid 1 --------------------------------------- */

static void staging_fail(lc_sb_t *c, lc_error_t *e)
{
	lc_msg_send_error(c->sp[1], e);
	_exit(LC_EXIT_RUNTIME);
}

/* A namespace the kernel refused (errno e): the limit that refused it,
 * when it is one (ENOSPC: the sysctl user.max_*_namespaces of this or
 * an enclosing user namespace), else what may help. */
static void ns_fail(lc_sb_t *c, int e, const char *what, const char *limits, const char *otherwise)
{
	lc_error_t *err = NULL;
	if (e == ENOSPC)
		lc_error_set(&err, LC_EXIT_RUNTIME, e, "cannot create %s: the kernel's limit of them is reached (sysctl %s)",
			     what, limits);
	else
		lc_error_set(&err, LC_EXIT_RUNTIME, e, "cannot create %s%s", what, otherwise);
	staging_fail(c, err);
}

static void pid1_main(lc_sb_t *c)
{
	lc_error_t *e = NULL;
	if (c->stage_ns >= 0) /* the staging process's, its alone */
		close(c->stage_ns);
	if (lc_mounts_finish(&c->plan, c->spec, &e) < 0)
		staging_fail(c, e);
	trace("pid 1: root finished");
	const char *wd = c->spec->workdir ? c->spec->workdir : "/";
	struct stat st;
	if (stat(wd, &st) < 0) {
		lc_error_set(&e, LC_EXIT_NOENT, errno, "workdir %s does not exist in the sandbox", wd);
		staging_fail(c, e);
	}
	if (!S_ISDIR(st.st_mode)) {
		lc_error_set(&e, LC_EXIT_NOENT, ENOTDIR, "workdir %s", wd);
		staging_fail(c, e);
	}
	/* The network, set up meanwhile (lc_sb_start): nothing of the
	 * command runs before its veth and its chains are in place.  Without
	 * one, in a joined user namespace nothing waited for lcrun since the
	 * first GO: the word that its state and name were written (a name
	 * taken ends the start, and no command of it may run). */
	lc_msg_t m;
	int pfd = -1;
	if ((c->spec->net.mode != LC_NET_NONE || c->joined) && (lc_msg_recv_fd(c->sp[1], &m, &pfd) != 1 || m.type != LC_MSG_GO))
		_exit(LC_EXIT_RUNTIME);
	/* Its seccomp program, made by lcrun meanwhile (prog_later). */
	if (c->prog_later) {
		bool got = pfd >= 0 && lc_seccomp_load_fd(pfd, &c->prog);
		if (!got) {
			lc_error_set(&e, LC_EXIT_RUNTIME, 0, "the seccomp filter did not come with the last GO");
			staging_fail(c, e);
		}
	}
	if (pfd >= 0)
		close(pfd);
	lc_msg_send(c->sp[1], LC_MSG_READY, 0, 0, NULL);
	lc_init_main(c->spec, &c->prog, c->envp, c->sp[1]);
}

static int pid1_entry(void *arg)
{
	pid1_main(arg);
	return LC_EXIT_RUNTIME; /* not reached: it becomes the init or fails */
}

/* "net.KEY=VALUE": a key of the network namespace's own, a value of one
 * line. */
int lc_sysctl_check(const char *kv, lc_error_t **err)
{
	const char *eq = strchr(kv, '=');
	size_t n = eq ? (size_t)(eq - kv) : 0;
	bool ok = eq && n > 4 && n < 128 && !strncmp(kv, "net.", 4) && kv[n - 1] != '.' && strlen(eq + 1) < 256 &&
		  !strchr(eq + 1, '\n') && eq[1];
	for (size_t i = 0; ok && i < n; i++)
		ok = (kv[i] >= 'a' && kv[i] <= 'z') || (kv[i] >= '0' && kv[i] <= '9') || kv[i] == '_' || kv[i] == '-' ||
		     (kv[i] == '.' && kv[i + 1] != '.');
	if (!ok)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "sysctl '%s': expected net.KEY=VALUE (a key of the sandbox's "
				    "network namespace, a value of one line)", kv);
	return 0;
}

static int write_sysctl(const char *kv, lc_error_t **err)
{
	const char *eq = strchr(kv, '=');
	_cleanup_free_ char *path = lc_strdup_printf("/proc/sys/%.*s", (int)(eq - kv), kv);
	for (char *p = path + 10; *p; p++)
		if (*p == '.')
			*p = '/';
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || lc_write_all(fd, eq + 1, strlen(eq + 1)) < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_USAGE : LC_EXIT_RUNTIME, errno,
				    "sysctl %.*s in the sandbox's network namespace", (int)(eq - kv), kv);
	return 0;
}

static void staging_main(lc_sb_t *c)
{
	lc_error_t *e = NULL;
	close(c->sp[0]);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (c->claim_fd >= 0) /* the claim is its maker's to hold */
		close(c->claim_fd);
	for (size_t i = 0; i < c->n_foreign_fds; i++)
		close(c->foreign_fds[i]);
	if (!c->single_threaded) /* only another thread can hold the pool's lock now */
		lc_netpool_drop_inherited();
	/* Pid 1 is cloned from here: it shows "lcrun-init", never the
	 * command line of lcrun (or lcd).  While still host root. */
	lc_proc_title("lcrun-init");
	if (c->rootless) {
		uid_t uid = geteuid();
		gid_t gid = getegid();
		char map[64];
		if (unshare(CLONE_NEWUSER) < 0)
			ns_fail(c, errno, "a user namespace", "user.max_user_namespaces",
				" (are unprivileged user namespaces enabled?)");
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
		if (lc_write_file("/proc/self/uid_map", map, &e) < 0 ||
		    lc_write_file("/proc/self/setgroups", "deny", &e) < 0)
			staging_fail(c, e);
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
		if (lc_write_file("/proc/self/gid_map", map, &e) < 0)
			staging_fail(c, e);
	}
	/* A spare network namespace, made after an earlier run (netspare.h):
	 * unshare(CLONE_NEWNET) is 0.76 ms here.  Before the mount namespace,
	 * which would copy the host's mounts for nothing. */
	int spare = c->rootless ? -1 : lc_netspare_claim();
	if (spare >= 0) {
		int r = setns(spare, CLONE_NEWNET);
		close(spare);
		spare = r; /* refused: made here as without one */
		if (r == 0)
			trace("staging: a spare network namespace");
	}
	if (unshare(CLONE_NEWNS | (spare >= 0 ? 0 : CLONE_NEWNET)) < 0)
		ns_fail(c, errno, "mount and network namespaces", "user.max_mnt_namespaces or user.max_net_namespaces", "");
	if (spare < 0 && lc_loopback_up() < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot bring up the loopback interface");
		staging_fail(c, e);
	}
	trace("staging: mount and network namespaces");
	/* /proc/sys/net is the network namespace of the task that opens it:
	 * the sandbox's own, from here on. */
	for (size_t i = 0; c->spec->sysctls && c->spec->sysctls[i]; i++)
		if (write_sysctl(c->spec->sysctls[i], &e) < 0)
			staging_fail(c, e);
	/* lcrun makes the sandbox directory meanwhile (make_dirs), and, for
	 * its own single sandbox, the sandbox's user namespace, which comes
	 * with the GO: the lowers are idmapped with it, and this process
	 * joins it below. */
	lc_msg_t go;
	int own = -1;
	if (c->spec->limits.disk > 0 && !c->spec->upper_dir &&
	    (lc_msg_recv_fd(c->sp[1], &go, &c->plan.disk_fd) != 1 || go.type != LC_MSG_DISK || c->plan.disk_fd < 0))
		_exit(LC_EXIT_RUNTIME);
	if (lc_msg_recv_fd(c->sp[1], &go, &own) != 1 || go.type != LC_MSG_GO)
		_exit(LC_EXIT_RUNTIME);
	c->joined = own >= 0; /* as lcrun's c->joined; pid 1 reads it (pid1_main) */
	if (c->joined)
		c->plan.idmap_userns_fd = own;
	if (lc_mounts_stage(&c->plan, &e) < 0 || lc_mounts_stage_targets(&c->plan, &e) < 0 ||
	    lc_mounts_stage_binds(&c->plan, c->spec, &e) < 0)
		staging_fail(c, e);
	trace("staging: overlays mounted");
	if (c->joined) {
		/* its maps written already */
		if (setns(own, CLONE_NEWUSER) < 0) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot enter the sandbox's user namespace");
			staging_fail(c, e);
		}
		close(own);
		c->plan.idmap_userns_fd = -1;
	} else if (!c->rootless && unshare(CLONE_NEWUSER) < 0) {
		ns_fail(c, errno, "the sandbox's user namespace", "user.max_user_namespaces", "");
	}
	/* This mount namespace (the host's mounts and the overlays) is left
	 * for pid 1's below, and the last reference to a mount namespace
	 * unmounts its tree and waits for an RCU grace period: 0.05 ms
	 * alone, milliseconds with ten sandboxes starting at once, on the
	 * way to pid 1.  Where pid 1's is held for a remover, this one is
	 * let go off the sandbox's way: a run's goes to lcrun, whose remover
	 * closes it as it starts; a batch's stays with this process until
	 * it exits, right after pid 1's clone. */
	int stage_ns = c->hold_mntns ? open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC) : -1;
	if (stage_ns >= 0 && c->shared) {
		/* A batch's: kept by this process, whose exit lets it go;
		 * nobody waits for that exit (lc_sb_step). */
		c->stage_ns = stage_ns;
		lc_msg_send(c->sp[1], LC_MSG_USERNS, c->plan.idmap_ok, 0, NULL);
	} else if (stage_ns >= 0) {
		lc_msg_send_fd(c->sp[1], LC_MSG_USERNS, c->plan.idmap_ok, stage_ns);
		close(stage_ns);
	} else {
		lc_msg_send(c->sp[1], LC_MSG_USERNS, c->plan.idmap_ok, 0, NULL);
	}
	lc_msg_t m;
	/* With a network, lcrun opens this process's network namespace
	 * first (/proc/PID/ns/net): wait for it either way. */
	if ((!c->joined || c->spec->net.mode != LC_NET_NONE) && (lc_msg_recv(c->sp[1], &m) != 1 || m.type != LC_MSG_GO))
		_exit(LC_EXIT_RUNTIME);
	if (!c->rootless && (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot become root in the sandbox's user namespace");
		staging_fail(c, e);
	}
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC;
	if (!c->rootless)
		flags |= CLONE_NEWCGROUP;
	if (unshare(flags) < 0)
		ns_fail(c, errno, "the sandbox's namespaces",
			"user.max_mnt_namespaces, max_pid_namespaces, max_uts_namespaces, max_ipc_namespaces or "
			"max_cgroup_namespaces", "");
	if (lc_mounts_open_staged(&c->plan, &e) < 0)
		staging_fail(c, e);
	/* pid 1's mount namespace, for the remover to hold (remover_start). */
	int mntns = c->hold_mntns ? open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC) : -1;
	trace("staging: sandbox namespaces");
	/* CLONE_PARENT: pid 1 becomes lcrun's child, and staging can go.
	 * CLONE_VM: pid 1 takes over this process's memory, on a stack of
	 * its own, instead of a copy of it: a fork would copy the page tables
	 * and fault in a copy of every page pid 1 then writes (1 ms here),
	 * for memory this process leaves at once.  From the clone on, this
	 * process only sends pid 1's pid (no errno, no heap) and exits; its
	 * exit takes nothing from the memory (exit_group ends this thread
	 * group only: pid 1 is a process of its own), nor does it touch it:
	 * no tid to clear and wake (glibc's fork set it to its thread's tid
	 * field), no robust futex list to walk. */
	syscall(SYS_set_tid_address, NULL);
	syscall(SYS_set_robust_list, NULL, sizeof(struct robust_list_head));
	const size_t stack_size = 8 << 20;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE,
			   -1, 0);
	if (stack == MAP_FAILED || mprotect(stack, 4096, PROT_NONE) < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot map a stack for the sandbox's pid 1");
		staging_fail(c, e);
	}
	pid_t pid = clone(pid1_entry, stack + stack_size, CLONE_VM | CLONE_PARENT | SIGCHLD, c);
	if (pid < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot start the sandbox's pid 1%s",
			     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
		staging_fail(c, e);
	}
	if (mntns >= 0)
		lc_msg_send_fd(c->sp[1], LC_MSG_PID, pid, mntns);
	else
		lc_msg_send(c->sp[1], LC_MSG_PID, pid, 0, NULL);
	_exit(0);
}

/* ---- preparation in lcrun ------------------------------------------------ */

/* mkdir with exactly this mode, whatever the caller's umask. */
static int mkdir_mode(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		return -1;
	return chmod(path, mode);
}

static int write_files(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	/* In the sandbox directory itself (0711): a directory of their own
	 * cost a mkdir, 0.13 ms on this ext4. */
	const char *dir = c->sbdir;
	const char *hn = s->hostname ? s->hostname : "lcrun";
	_cleanup_free_ char *hosts = lc_strdup_printf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
						      "127.0.1.1\t%s\n", hn);
	for (size_t i = 0; i < s->net.n_hosts; i++) {
		char *n = lc_strdup_printf("%s%s\t%s\n", hosts, s->net.hosts[i].ip, s->net.hosts[i].name);
		free(hosts);
		hosts = n;
	}
	_cleanup_free_ char *resolv = NULL;
	if (s->net.dns)
		resolv = lc_strdup_printf("nameserver %s\n", s->net.dns);
	else if (s->net.mode == LC_NET_OPEN)
		lc_read_file("/etc/resolv.conf", &resolv, NULL, NULL);
	if (!resolv)
		resolv = strdup("# no resolver: names this sandbox may use are pinned in /etc/hosts\n");
	_cleanup_free_ char *hnl = lc_strdup_printf("%s\n", hn);
	struct { const char *name, *content; } f[] = { { "hosts", hosts }, { "hostname", hnl }, { "resolv.conf", resolv } };
	for (int i = 0; i < 3; i++) {
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s", dir, f[i].name);
		_cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || fchmod(fd, 0644) < 0 || lc_write_all(fd, f[i].content, strlen(f[i].content)) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s", p);
	}
	return 0;
}

static int mkdir_owned(const char *path, uid_t uid, gid_t gid, mode_t mode, lc_error_t **err)
{
	if (mkdir_mode(path, mode) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", path);
	if (chown(path, uid, gid) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot chown %s", path);
	return 0;
}

/* mkdir_owned (uid 0: left to root), or, with keep, an existing directory
 * as it is. */
static int keep_or_mkdir(const char *path, uid_t uid, gid_t gid, mode_t mode, bool keep, lc_error_t **err)
{
	struct stat st;
	if (keep && stat(path, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return lc_error_set(err, LC_EXIT_RUNTIME, ENOTDIR, "%s", path);
		return 0;
	}
	if (uid == 0 && gid == 0)
		return mkdir_mode(path, mode) < 0 ? lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", path) : 0;
	return mkdir_owned(path, uid, gid, mode, err);
}

/* The sandbox directory's paths (uppers in ovl/, or on the directory the
 * spec names: a disk that outlives the sandbox, where they may be already). */
typedef struct {
	char *priv0, *priv, *upper, *work, *rootfs, *usr_upper, *usr_work, *empty;
} sb_paths_t;

static void sb_paths(const lc_sb_t *c, sb_paths_t *p)
{
	/* private/ is searchable (0711) so that the staging process, once in
	 * the sandbox's user namespace, can open ../rootfs from it; the layers
	 * sit one level lower in ovl/ (0700). */
	p->priv0 = lc_strdup_printf("%s/private", c->sbdir);
	p->priv = lc_strdup_printf("%s/private/ovl", c->sbdir);
	const char *ud = c->spec->upper_dir ? c->spec->upper_dir : p->priv;
	p->upper = lc_strdup_printf("%s/upper", ud);
	p->work = lc_strdup_printf("%s/work", ud);
	p->rootfs = lc_strdup_printf("%s/rootfs", c->sbdir);
	p->usr_upper = lc_strdup_printf("%s/usr-upper", ud);
	p->usr_work = lc_strdup_printf("%s/usr-work", ud);
	p->empty = lc_strdup_printf("%s/empty", p->priv);
}

static void sb_paths_free(sb_paths_t *p)
{
	char **all[] = { &p->priv0, &p->priv, &p->upper, &p->work, &p->rootfs, &p->usr_upper, &p->usr_work, &p->empty };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		free(*all[i]);
		*all[i] = NULL;
	}
}

/* What the staging process mounts, decided before it is forked: the
 * lower layers, the idmap user namespace (unless lcrun's own comes with
 * the GO), the binds' detached trees.
 * Nothing on disk yet: make_dirs, in lcrun, makes the directories while
 * the staging process makes its namespaces. */
static int plan_root(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	uid_t ou = c->rootless ? geteuid() : lc_uid_base();
	gid_t og = c->rootless ? getegid() : (gid_t)lc_uid_base();
	if (!c->sbdir)
		c->sbdir = lc_sandbox_dir(c->id);
	__attribute__((cleanup(sb_paths_free))) sb_paths_t p = { 0 };
	sb_paths(c, &p);
	c->plan.sbdir = strdup(c->sbdir);
	c->plan.upper_dir = s->upper_dir ? strdup(s->upper_dir) : NULL;
	c->plan.rootfs = strdup(p.rootfs);
	c->plan.rootless = c->rootless;
	c->plan.volatile_upper = c->throwaway && !s->upper_dir;
	c->plan.idmap_userns_fd = -1;
	c->plan.disk_fd = -1;
	c->plan.rootfs_fd = c->plan.files_fd = -1;
	/* Ids as the staging process sees them: rootless, it works inside its
	 * own user namespace, where the caller is 0. */
	c->plan.owner_uid = c->rootless ? 0 : ou;
	c->plan.owner_gid = c->rootless ? 0 : og;
	bool host = !s->rootfs;
	if (s->image) {
		if (c->shared && c->shared->img)
			c->img = c->shared->img;
		else if (lc_image_resolve(s->image, &c->img, err) < 0)
			return -1;
		if (lc_image_lowers(c->img, &c->plan.lowers, &c->plan.usr_lowers, err) < 0)
			return -1;
		host = c->img->base_host;
		if (!host && !c->img->n_layers) { /* an image of config only */
			c->empty_lower = true;
			lc_strv_push(&c->plan.lowers, p.empty);
		}
	} else if (s->rootfs) {
		lc_strv_push(&c->plan.lowers, s->rootfs);
	}
	size_t n_img = lc_strv_len(c->plan.lowers);
	c->plan.lower_idmap = lc_xmalloc0((n_img + 2) * sizeof(bool));
	for (size_t i = 0; i < n_img; i++)
		c->plan.lower_idmap[i] = true;
	if (host) {
		c->host_image = true;
		_cleanup_free_ char *skel = NULL, *etc = NULL;
		if (lc_run_shared_host_layers(c->shared, s, c->rootless, &skel, &etc, err) < 0)
			return -1;
		lc_strv_push(&c->plan.lowers, etc);
		lc_strv_push(&c->plan.lowers, skel);
		c->plan.usr_overlay = true;
	}
	if (!c->rootless) {
		/* Single-threaded (lcrun's own sandbox), none here: the
		 * sandbox's own user namespace, which lcrun makes after
		 * make_dirs, serves for it (lc_sb_start).  Otherwise one kept
		 * for the process's life: lcd makes many sandboxes. */
		if (c->shared)
			c->plan.idmap_userns_fd = c->shared->idmap_userns_fd;
		else if (!c->single_threaded && (c->plan.idmap_userns_fd = idmap_userns(err)) < 0)
			return -1;
	}
	return lc_mounts_open_binds(&c->plan, s, err);
}

/* A new sandbox's directories under sbdir, its uppers under upper_dir if
 * given (kept if there), with usr-upper/usr-work for a host image; a
 * spare without the uppers (upper, usr-upper), made when it is taken; with
 * a disk, none of them (they are on the disk, disk_ready). */
static int make_tree(const char *sbdir, const char *upper_dir, bool host, bool uppers, bool disk, uid_t ou, gid_t og,
		     lc_error_t **err)
{
	_cleanup_free_ char *priv0 = lc_strdup_printf("%s/private", sbdir);
	_cleanup_free_ char *priv = lc_strdup_printf("%s/private/ovl", sbdir);
	_cleanup_free_ char *rootfs = lc_strdup_printf("%s/rootfs", sbdir);
	const char *ud = upper_dir ? upper_dir : priv;
	bool keep = upper_dir != NULL;
	if (mkdir_mode(sbdir, 0711) < 0)
		return lc_error_set(err, errno == EEXIST ? LC_EXIT_BUSY : LC_EXIT_RUNTIME, errno, "cannot create %s", sbdir);
	if (mkdir_mode(priv0, 0711) < 0 || mkdir_mode(priv, 0700) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", priv);
	static const char *const names[] = { "upper", "work", "usr-upper", "usr-work" };
	for (size_t i = 0; i < (disk ? 0u : host ? 4u : 2u); i++) {
		_cleanup_free_ char *d = lc_strdup_printf("%s/%s", ud, names[i]);
		bool owned = i % 2 == 0; /* the uppers are the sandbox's root's; the work dirs host root's */
		if (owned && !uppers)
			continue;
		if (keep_or_mkdir(d, owned ? ou : 0, owned ? og : 0, owned ? 0755 : 0700, keep, err) < 0)
			return -1;
	}
	if (mkdir_mode(rootfs, 0755) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", rootfs);
	return 0;
}

/* ---- spare sandbox directories --------------------------------------------
 *
 * A new sandbox directory is eight directories, 0.5-0.8 ms on this ext4
 * (the first pays for the spreading of top directories), on lcrun's side
 * of the start.  The remover of a run (after `run` returned) makes up to
 * SPARE_DIRS of its run's shape ahead, in lc_lib_dir()/spare/ (0700,
 * host root's), each a rename away from being a sandbox's; a start of
 * that shape takes one.  They are what make_tree makes but the uppers,
 * nothing of any sandbox in them: the uppers are made when a spare is
 * taken, since the sandbox's / and /usr show their times (their birth
 * time, which nothing can set, included).  The name carries the tree's
 * layout (v1): a later lcrun with another leaves these alone.  `lcrun gc
 * --spares` removes them. */
#define SPARE_DIRS 4

static char *spare_slot(bool host, uid_t ou, gid_t og, int k)
{
	_cleanup_free_ char *dir = lc_spare_dir();
	return lc_strdup_printf("%s/%s-v1-%u-%u.%d", dir, host ? "host" : "image", (unsigned)ou, (unsigned)og, k);
}

/* Host root's sandboxes with their uppers in their own directory. */
static bool spare_shape(const lc_sb_t *c)
{
	return !c->rootless && !c->spec->upper_dir && !c->reuse_dir && c->spec->limits.disk <= 0;
}

static bool spare_claim(lc_sb_t *c, uid_t ou, gid_t og)
{
	for (int k = SPARE_DIRS - 1; k >= 0; k--) {
		_cleanup_free_ char *slot = spare_slot(c->host_image, ou, og, k);
		/* A look first (lock-free): a rename between two directories
		 * takes the filesystem's one rename mutex even when the name
		 * is not there, and overlayfs takes it at every mount; ten
		 * sandboxes starting at once queued on it for nothing. */
		if (faccessat(AT_FDCWD, slot, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return false;
			continue;
		}
		if (rename(slot, c->sbdir) == 0)
			return true;
		if (errno != ENOENT)
			return false;
	}
	return false;
}

/* In the remover, for the next run of its shape (spare_shape), on the
 * host image or another. */
static void spare_refill(bool host_image)
{
	uid_t ou = lc_uid_base();
	gid_t og = (gid_t)lc_uid_base();
	_cleanup_free_ char *dir = lc_spare_dir();
	_cleanup_free_ char *sbs = lc_strdup_printf("%s/sandboxes", lc_lib_dir());
	if (mkdir(dir, 0700) == 0)
		lc_dir_spread(dir, true); /* as sandboxes/ */
	struct stat a, b;
	if (stat(dir, &a) < 0 || stat(sbs, &b) < 0 || a.st_dev != b.st_dev)
		return; /* sandboxes/ on a filesystem of its own: no rename reaches it */
	for (int k = 0; k < SPARE_DIRS; k++) {
		_cleanup_free_ char *slot = spare_slot(host_image, ou, og, k);
		if (access(slot, F_OK) == 0)
			continue;
		char tag[9];
		lc_random_hex(tag, 8);
		_cleanup_free_ char *tmp = lc_strdup_printf("%s/tmp.%s", dir, tag);
		lc_error_t *e = NULL;
		if (make_tree(tmp, NULL, host_image, false, false, ou, og, &e) < 0) {
			lc_error_free(e);
			lc_rm_rf(tmp, NULL);
			return;
		}
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, slot, RENAME_NOREPLACE) < 0)
			lc_rm_rf(tmp, NULL);
	}
}

static char *disk_image(const char *sbdir)
{
	return lc_strdup_printf("%s/private/disk.img", sbdir);
}

/* The sandbox's disk (--disk): its image made (kept, at a start) and
 * mounted detached, with the uppers and work directories on it, as
 * make_tree makes them elsewhere; the mount goes to the staging process
 * (LC_MSG_DISK), which puts it on ovl/ in its own namespace. */
static int disk_ready(lc_sb_t *c, uid_t ou, gid_t og, lc_error_t **err)
{
	_cleanup_free_ char *img = disk_image(c->sbdir);
	bool create = !c->reuse_dir;
	unsigned flags = (create ? LC_DISK_CREATE : 0) | (c->throwaway ? LC_DISK_NO_JOURNAL : 0);
	if (lc_disk_mount(img, c->spec->limits.disk, flags, &c->plan.disk_fd, err) < 0)
		return lc_error_wrap(err, "sandbox %s", c->id);
	static const char *const names[] = { "upper", "work", "usr-upper", "usr-work" };
	for (size_t i = 0; i < (c->host_image ? 4u : 2u); i++) {
		bool owned = i % 2 == 0; /* as make_tree's */
		if (mkdirat(c->plan.disk_fd, names[i], 0700) < 0) {
			if (errno == EEXIST && !create)
				continue;
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s on %s", names[i], img);
		}
		if (owned && (fchmodat(c->plan.disk_fd, names[i], 0755, 0) < 0 ||
			      fchownat(c->plan.disk_fd, names[i], ou, og, 0) < 0))
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot give %s on %s to the sandbox", names[i], img);
	}
	return 0;
}

/* The sandbox directory and its files, while the staging process makes
 * its namespaces (plan_root decided the paths). */
static int make_dirs(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	uid_t ou = c->rootless ? geteuid() : lc_uid_base();
	gid_t og = c->rootless ? getegid() : (gid_t)lc_uid_base();
	/* Host root only: pid 1 reaches rootfs/ and the files beside it through fds the
	 * staging process opened, never through this path. */
	_cleanup_free_ char *parent = lc_strdup_printf("%s/sandboxes", lc_lib_dir());
	if (lc_sandboxes_parent_make(parent, err) < 0)
		return -1;
	lc_dir_spread(parent, true);
	__attribute__((cleanup(sb_paths_free))) sb_paths_t p = { 0 };
	sb_paths(c, &p);
	bool disk = s->limits.disk > 0;
	if (c->reuse_dir) {
		/* start of a stopped sandbox: keep the uppers, remake the rest. */
		struct stat st;
		if (!disk && stat(p.upper, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "upper layer %s", p.upper);
		/* files/ and etc-layer/: what an older lcrun made per sandbox */
		_cleanup_free_ char *files = lc_strdup_printf("%s/files", c->sbdir);
		_cleanup_free_ char *etc = lc_strdup_printf("%s/etc-layer", p.priv);
		if (lc_rm_rf(files, err) < 0 || lc_rm_rf(etc, err) < 0)
			return -1;
		if (!disk && c->host_image && (keep_or_mkdir(p.usr_upper, ou, og, 0755, true, err) < 0 ||
					       keep_or_mkdir(p.usr_work, 0, 0, 0700, true, err) < 0))
			return -1;
	} else if (spare_shape(c) && spare_claim(c, ou, og)) {
		/* its uppers, made now (spare_refill) */
		if (keep_or_mkdir(p.upper, ou, og, 0755, false, err) < 0 ||
		    (c->host_image && keep_or_mkdir(p.usr_upper, ou, og, 0755, false, err) < 0))
			return -1;
	} else if (make_tree(c->sbdir, s->upper_dir, c->host_image, true, disk, ou, og, err) < 0) {
		return -1;
	}
	if (disk && disk_ready(c, ou, og, err) < 0)
		return -1;
	if (write_files(c, err) < 0)
		return -1;
	if (c->empty_lower && mkdir(p.empty, 0755) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", p.empty);
	return 0;
}

json_t *lc_sb_state_json(lc_sb_t *c, const char *status)
{
	const lc_spec_t *s = c->spec;
	json_t *uppers = json_array();
	_cleanup_free_ char *ud = s->upper_dir ? strdup(s->upper_dir) : lc_strdup_printf("%s/private/ovl", c->sbdir);
	json_array_append_new(uppers, json_pack("{s:s+,s:s}", "path", ud, "/upper", "prefix", ""));
	if (c->host_image)
		json_array_append_new(uppers, json_pack("{s:s+,s:s}", "path", ud, "/usr-upper", "prefix", "usr"));
	json_t *argv = json_array();
	for (size_t i = 0; s->argv && s->argv[i]; i++)
		json_array_append_new(argv, json_string(s->argv[i]));
	static const char *modes[] = { "none", "allow", "open" };
	json_t *j = json_pack("{s:s, s:s, s:I, s:i, s:o, s:o, s:b, s:b, s:I, s:I, s:I, s:s, s:s}",
			      "id", c->id, "status", status, "created", (json_int_t)c->created_ms,
			      "pid", (int)c->init, "uppers", uppers, "argv", argv,
			      "host_image", c->host_image, "rootless", c->rootless,
			      "uid_base", (json_int_t)(c->rootless ? geteuid() : lc_uid_base()),
			      "gid_base", (json_int_t)(c->rootless ? getegid() : lc_uid_base()),
			      "uid_count", (json_int_t)(c->rootless ? 1 : lc_uid_count()),
			      "sandbox_dir", c->sbdir, "net", modes[s->net.mode]);
	json_object_set_new(j, "name", s->name ? json_string(s->name) : json_null());
	json_object_set_new(j, "cgroup", c->cg.path ? json_string(c->cg.path) : json_null());
	if (c->cg.not_applied) /* best effort: what this host could not enforce */
		json_object_set_new(j, "limits_not_applied", json_string(c->cg.not_applied));
	json_object_set_new(j, "image", s->image ? json_string(s->image) : json_null());
	json_object_set_new(j, "rootfs", s->rootfs ? json_string(s->rootfs) : json_null());
	json_t *layers = json_array();
	for (size_t i = 0; c->img && i < c->img->n_layers; i++)
		json_array_append_new(layers, json_string(c->img->diff_ids[i]));
	json_object_set_new(j, "layers", layers);
	if (c->img)
		json_object_set_new(j, "image_digest", json_string(c->img->manifest_digest));
	json_object_set_new(j, "keep", json_boolean(s->keep));
	if (s->limits.disk > 0) { /* the uppers' paths are on it, as the sandbox's namespaces see them */
		_cleanup_free_ char *img = disk_image(c->sbdir);
		json_object_set_new(j, "disk", json_pack("{s:s, s:I}", "image", img, "size", (json_int_t)s->limits.disk));
	}
	/* false where the lower layers' filesystem cannot be idmapped (9p,
	 * tmpfs before 6.3): root inside then cannot write over them. */
	json_object_set_new(j, "idmapped", json_boolean(c->idmapped));
	json_object_set_new(j, "lcrun_pid", json_integer(getpid()));
	json_object_set_new(j, "spec", lc_spec_to_json(s));
	return j;
}

int lc_sb_save_state(lc_sb_t *c, const char *status, lc_error_t **err)
{
	json_t *j = lc_sb_state_json(c, status);
	int r = lc_state_write(c->id, j, err);
	json_decref(j);
	if (r == 0) {
		c->state_written = true;
		if (c->claim_fd >= 0) {
			close(c->claim_fd);
			c->claim_fd = -1;
		}
	}
	return r;
}

static int link_name(lc_sb_t *c, lc_error_t **err)
{
	if (!c->spec->name)
		return 0;
	int r = lc_name_link(c->id, c->spec->name, err);
	if (r > 0)
		c->name_linked = true;
	return r < 0 ? -1 : 0;
}

static int validate(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	struct stat st;
	if (!c->no_command && (!s->argv || !s->argv[0]))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "no command given");
	if (s->rootfs) {
		if (stat(s->rootfs, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "rootfs %s", s->rootfs);
		if (!S_ISDIR(st.st_mode))
			return lc_error_set(err, LC_EXIT_NOENT, ENOTDIR, "rootfs %s", s->rootfs);
	}
	for (size_t i = 0; i < s->n_mounts; i++) {
		const lc_mount_t *m = &s->mounts[i];
		if (!m->dst || m->dst[0] != '/')
			return lc_error_set(err, LC_EXIT_USAGE, 0, "mount destination '%s' must be an absolute path",
					    m->dst ? m->dst : "");
		if (!m->tmpfs && stat(m->src, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "bind source %s", m->src);
	}
	if (s->limits.disk > 0) {
		if (s->upper_dir)
			return lc_error_set(err, LC_EXIT_USAGE, 0,
					    "--disk with --upper-dir: the upper layer is on its own disk or on %s, not both",
					    s->upper_dir);
		if (!c->rootless && lc_disk_check(s->limits.disk, lc_lib_dir(), err) < 0)
			return -1;
	}
	if (s->upper_dir) {
		if (s->upper_dir[0] != '/' || strpbrk(s->upper_dir, ",:\\"))
			return lc_error_set(err, LC_EXIT_USAGE, 0, "upper directory '%s': expected an absolute path without ',' ':' '\\'",
					    s->upper_dir);
		if (stat(s->upper_dir, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "upper directory %s", s->upper_dir);
		if (!S_ISDIR(st.st_mode))
			return lc_error_set(err, LC_EXIT_NOENT, ENOTDIR, "upper directory %s", s->upper_dir);
	}
	for (size_t i = 0; s->sysctls && s->sysctls[i]; i++)
		if (lc_sysctl_check(s->sysctls[i], err) < 0)
			return -1;
	if (s->workdir && s->workdir[0] != '/')
		return lc_error_set(err, LC_EXIT_USAGE, 0, "workdir '%s' must be an absolute path", s->workdir);
	if (s->id && !lc_id_valid(s->id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "invalid sandbox id '%s' (12 lowercase hex digits)", s->id);
	if (c->rootless) {
		const char *need = NULL;
		if (s->net.mode != LC_NET_NONE)
			need = "--net allow/open";
		else if (s->limits.memory >= 0 || s->limits.memory_swap >= 0 || s->limits.pids >= 0 ||
			 s->limits.cpus > 0 || s->limits.cpu_weight > 0 || s->limits.io_weight > 0)
			need = "cgroup limits (--memory, --pids, --cpus, ...)";
		else if (s->uid != 0 || s->gid != 0)
			need = "--user other than 0 (a rootless sandbox maps a single id)";
		else if (s->limits.disk > 0)
			need = "--disk (a loop device and a mount)";
		if (need)
			return lc_error_set(err, LC_EXIT_PERM, 0, "%s needs root; this sandbox is rootless", need);
	}
	for (size_t i = 0; c->rootless && i < s->n_mounts; i++)
		if (!s->mounts[i].tmpfs && s->mounts[i].idmap == LC_IDMAP_ON)
			return lc_error_set(err, LC_EXIT_PERM, 0, "--bind %s:%s:idmap needs root; this sandbox is rootless",
					    s->mounts[i].src, s->mounts[i].dst);
	if (s->uid >= lc_uid_count() || s->gid >= lc_uid_count())
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--user %u:%u is outside the sandbox's %u ids",
				    (unsigned)s->uid, (unsigned)s->gid, lc_uid_count());
	if (!c->rootless && lc_cgroup_check_limits(&s->limits, err) < 0)
		return -1;
	if (lc_net_validate(&s->net, err) < 0)
		return -1;
	return 0;
}

/* ---- teardown ------------------------------------------------------------- */

/* What the remover needs of its run, in memory lcrun never writes again:
 * the remover may share lcrun's (lc_heir_start). */
typedef struct {
	char id[LC_ID_LEN + 1];
	char *dst;         /* the sandbox directory's entry in trash/ */
	int sock;          /* lcrun's words */
	int held[2];       /* pid 1's and the staging process's mount namespaces, or -1 */
	bool locked;       /* its copy of the directory's fd holds the flock */
	bool rootless;
	bool spares;       /* spare_shape: spares of this shape for the next run */
	bool host_image;
} remover_t;

/* The remover's work.  pidfd >= 0: it shares lcrun's memory until lcrun
 * has exited (lc_heir_start): system calls only until lc_heir_wait. */
static int remover_main(void *arg, int pidfd)
{
	remover_t *r = arg;
	prctl(PR_SET_NAME, "lcrun-rm", 0, 0, 0);
	if (pidfd < 0)
		lc_proc_title("lcrun-rm");
	/* This process may outlive the run (it may become the spares'
	 * holder): the spec's secrets and the command's environment, which
	 * has them too, are zeroed in a fork as it is made, in an heir once
	 * lcrun is gone (lc_secret_note, lc_sb_begin). */
	/* The staging process's goes at once, while the command runs: it
	 * holds a copy of the host's mounts, which must not stay pinned for
	 * the sandbox's life. */
	if (r->held[LC_HELD_STAGING] >= 0)
		close(r->held[LC_HELD_STAGING]);
	/* lcrun's words until its end (the socket's end closed): 'N' with
	 * the pending file of the network's remainder (remover_net), 'y'
	 * when the directory is in trash/.  Nothing is done before that
	 * end: lcrun still has work to do on its way out, and the CPU. */
	int slot = -1;
	bool go = false;
	for (;;) {
		char b;
		int f = -1;
		ssize_t n = lc_recv_fd(r->sock, &b, 1, &f, 0);
		if (n <= 0)
			break; /* no handler runs in this process: no EINTR */
		if (b == 'N' && f >= 0 && slot < 0) {
			slot = f;
			prctl(PR_SET_NAME, "lcrun-net", 0, 0, 0); /* whoever holds a remainder */
			continue;
		}
		if (f >= 0)
			close(f);
		go = go || b == 'y';
	}
	/* The held namespaces go first: pid 1's mount namespace holds the
	 * sandbox's sysfs, which on some kernels holds its network
	 * namespace, and the veth goes only with that. */
	if (r->held[LC_HELD_PID1] >= 0)
		close(r->held[LC_HELD_PID1]);
	if (pidfd >= 0) {
		/* lcrun's memory is this process's alone from here */
		lc_heir_wait(pidfd);
		lc_proc_title(slot >= 0 ? "lcrun-net" : "lcrun-rm");
	}
	/* Then the network: its lease may be what the next run of this
	 * sandbox waits for. */
	if (slot >= 0) {
		lc_net_remainder(r->id, slot);
		close(slot);
		lc_proc_title("lcrun-rm");
	}
	if (!go || !r->locked)
		return 0;
	/* state_to_trash's first: while the sandbox directory's locked
	 * entry is there, gc --wait waits for both. */
	_cleanup_free_ char *st = lc_state_trash(r->id);
	lc_rm_rf(st, NULL);
	/* Spares for the next run (netspare.h, spare_refill): made before
	 * this run's directory goes, so that whoever waits for the trash
	 * (gc --wait, the benchmark) waits for them too. */
	lc_netspare_t ns = { 0 };
	if (!r->rootless) {
		lc_netspare_refill(&ns);
		if (r->spares)
			spare_refill(r->host_image);
	}
	lc_sb_remove_now(r->dst);
	lc_netspare_hold(&ns);
	return 0;
}

/* The remover of remove_later, started ahead: while the command runs,
 * lcrun only waits, and the start then costs nothing on the way out.
 * lcrun takes remove_later's flock on the sandbox directory first, for
 * the remover to hold (it follows the directory into trash/, so gc sees
 * the entry busy from its first moment there); at the end it moves the
 * directory to trash/ and says so with a byte.  The socket's end without
 * the byte (kept, or lcrun gone) ends the remover with nothing removed.
 * Where lcrun ends after the run (lc_heir_allow), the remover is its
 * heir, in its memory: no copy of lcrun's page tables, no copy-on-write
 * fault in lcrun after it, and lcrun's exit tears nothing down (the
 * remover's does, once).  Otherwise a detached fork. */
static void remover_start(lc_sb_t *c)
{
	if (!c->sbdir || !c->single_threaded)
		return;
	_cleanup_free_ char *dst = lc_trash_entry(c->id);
	if (!dst)
		return;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	_cleanup_close_ int dfd = open(c->sbdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Never freed: an heir reads it after lcrun's end. */
	remover_t *r = lc_xmalloc0(sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", c->id);
	r->dst = strdup(dst);
	r->sock = sv[1];
	r->locked = dfd >= 0 && flock(dfd, LOCK_EX | LOCK_NB) == 0;
	r->rootless = c->rootless;
	r->spares = spare_shape(c);
	r->host_image = c->host_image;
	/* The sandbox's mount namespace (the staging process sent it with
	 * pid 1's pid), held by the remover until the removal starts: pid 1's
	 * exit then only drops a reference, and the unmounting of its root
	 * (0.3 ms here) happens after lcrun returned.  The staging process's
	 * only passes through: the remover lets it go as it starts. */
	int keep[4] = { sv[1], dfd }, nkeep = 2;
	for (int i = 0; i < 2; i++) {
		r->held[i] = c->held_ns[i];
		if (c->held_ns[i] >= 0)
			keep[nkeep++] = c->held_ns[i];
	}
	pid_t heir = lc_heir_start(remover_main, r, keep, (size_t)nkeep);
	int f = heir > 0 ? 1 : lc_fork_detached(keep, (size_t)nkeep);
	if (f == 0)
		_exit(remover_main(r, -1));
	for (int i = 0; i < 2; i++)
		if (c->held_ns[i] >= 0) {
			close(c->held_ns[i]);
			c->held_ns[i] = -1;
		}
	close(sv[1]);
	bool locked = r->locked;
	if (heir <= 0) { /* the fork has its copy */
		free(r->dst);
		free(r);
	}
	if (f < 0) {
		close(sv[0]);
		return;
	}
	c->rm_pipe = sv[0];
	c->rm_locked = locked;
	c->rm_dst = lc_steal(dst);
}

/* The state directory, for the remover as well: its unlinks free disk
 * blocks, and where /run is an ext4 mounted with discard and no journal
 * (this machine), each unlink waits for the disk's discard, 0.3-1.2 ms.
 * A rename into lc_run_dir()/trash-state is not.  The name goes now. */
static int state_to_trash(lc_sb_t *c)
{
	if (c->spec->name)
		lc_name_unlink(c->id, c->spec->name);
	_cleanup_free_ char *sd = lc_state_dir(c->id), *dst = lc_state_trash(c->id);
	if (rename(sd, dst) < 0) {
		_cleanup_free_ char *trash = lc_state_trash(NULL);
		if (errno != ENOENT || mkdir(trash, 0700) < 0 || rename(sd, dst) < 0)
			return -1;
	}
	/* Its mtime is its last state write, maybe long ago: gc judges an
	 * entry's age by it (gc_state_trash_entry). */
	utimensat(AT_FDCWD, dst, NULL, 0);
	return 0;
}

/* The network's remainder for the remover (forked while the command ran)
 * instead of an lcrun-net helper forked now: that fork copied lcrun's
 * page tables, its network libraries among them, on the way out (1 ms
 * here, and the cgroup's removal after it waited for the CPU).  True:
 * the remover has it. */
static bool remover_net(lc_sb_t *c)
{
	if (c->rm_pipe < 0)
		return false;
	int slot = lc_net_pending_take(c->id);
	if (slot < 0)
		return false;
	bool sent = lc_send_fd(c->rm_pipe, "N", 1, slot, 0) == 0;
	close(slot); /* sent: the lock stays with the remover */
	return sent;
}

/* 0: the directory is in trash/, locked, and its remover at work. */
static int remover_go(lc_sb_t *c)
{
	if (c->rm_pipe < 0)
		return -1;
	if (c->rm_locked && rename(c->sbdir, c->rm_dst) == 0) {
		if (send(c->rm_pipe, "y", 1, MSG_NOSIGNAL) != 1)
			lc_sb_remove_now(c->rm_dst); /* the remover is gone */
		else
			c->rm_went = true;
		return 0; /* rm_pipe stays open: its end (lc_sb_free) starts the removal */
	}
	close(c->rm_pipe);
	c->rm_pipe = -1;
	return -1;
}

/* lc_userns_new's child, killed when the maps were written: dead by the
 * time the staging process reports (or at teardown). */
static void reap_userns_child(lc_sb_t *c)
{
	if (c->userns_child > 0) {
		while (waitpid(c->userns_child, NULL, 0) < 0 && errno == EINTR)
			;
		c->userns_child = 0;
	}
}

void lc_sb_teardown(lc_sb_t *c, bool keep)
{
	if (c->init > 0) {
		if (c->cg.path)
			lc_cgroup_kill(c->cg.path);
		kill(c->init, SIGKILL);
		waitpid(c->init, NULL, 0);
		c->init = 0;
	}
	if (c->staging > 0) {
		kill(c->staging, SIGKILL);
		waitpid(c->staging, NULL, 0);
		c->staging = 0;
	}
	reap_userns_child(c);
	trace("teardown");
	LC_FAULT("teardown-killed");
	if (c->net_up) {
		lc_error_t *e = NULL;
		if (!remover_net(c) && lc_net_teardown_exited(c->id, &e) < 0) {
			lc_error_print(e, "lcrun: warning");
			lc_error_free(e);
		}
		c->net_up = false;
		trace("network removed");
		LC_FAULT("teardown-net");
	}
	if (c->cg.path) {
		lc_error_t *e = NULL;
		if (lc_cgroup_destroy(c->cg.path, &e) < 0) {
			lc_error_print(e, "lcrun: warning");
			lc_error_free(e);
		}
		trace("cgroup removed");
		LC_FAULT("teardown-cgroup");
	}
	/* In a batch's trash, the batch's remover removes the state too
	 * (lc_sb_remove_detached). */
	bool batched = !keep && c->sbdir && lc_run_shared_trash(c->shared, c->sbdir, c->id) == 0;
	if (!keep && c->sbdir && !batched && remover_go(c) < 0 && lc_sb_remove_later(c->sbdir, c->id) < 0)
		lc_sb_remove_now(c->sbdir);
	trace("dirs removed");
	LC_FAULT("teardown-dirs");
	if (!keep && c->state_written) {
		if ((!c->rm_went && !batched) || state_to_trash(c) < 0)
			lc_state_remove(c->id);
	} else if (!keep) {
		if (c->name_linked)
			lc_name_unlink(c->id, c->spec->name);
		if (c->state_dir_made) { /* a failure before the first state write */
			_cleanup_free_ char *sd = lc_state_dir(c->id);
			rmdir(sd);
		}
	}
}

void lc_sb_free(lc_sb_t *c)
{
	if (c->claim_fd >= 0) {
		close(c->claim_fd);
		c->claim_fd = -1;
	}
	lc_cgroup_clear(&c->cg);
	lc_seccomp_prog_free(&c->prog);
	free(c->lease);
	c->lease = NULL;
	if (c->secrets_noted) {
		lc_secrets_unnote(c->spec->secret_env);
		lc_secrets_unnote(c->envp);
	}
	/* freed, not zeroed, they would still be in the next fork's copy */
	for (char **e = c->envp; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	lc_strv_free(c->envp);
	lc_strv_free(c->plan.lowers);
	lc_strv_free(c->plan.usr_lowers);
	free(c->plan.lower_idmap);
	lc_mounts_close_binds(&c->plan);
	if (c->plan.disk_fd >= 0)
		close(c->plan.disk_fd);
	if (!c->shared || c->img != c->shared->img)
		lc_image_resolved_free(c->img);
	free(c->plan.sbdir);
	free(c->plan.upper_dir);
	free(c->plan.rootfs);
	free(c->sbdir);
	if (c->sp[0] >= 0)
		close(c->sp[0]);
	if (c->sp[1] >= 0)
		close(c->sp[1]);
	if (c->pidfd >= 0)
		close(c->pidfd);
	for (int i = 0; i < 2; i++)
		if (c->held_ns[i] >= 0)
			close(c->held_ns[i]);
	if (c->rm_pipe >= 0)
		close(c->rm_pipe); /* moved to trash/: the remover starts; kept: it goes without a word */
	free(c->rm_dst);
}

/* ---- lc_run ---------------------------------------------------------------- */

void lc_sb_init(lc_sb_t *c, const lc_spec_t *spec)
{
	memset(c, 0, sizeof(*c));
	c->spec = spec;
	c->sp[0] = c->sp[1] = -1;
	c->pidfd = -1;
	c->rm_pipe = -1;
	c->held_ns[0] = c->held_ns[1] = -1;
	c->stage_ns = -1;
	c->claim_fd = -1;
	c->rootless = geteuid() != 0;
	c->start_ms = lc_now_ms();
	c->created_ms = lc_wall_ms();
	c->single_threaded = lc_single_threaded();
}

static const int fwd_signals[] = LC_FORWARD_SIGNALS;

/* After pid 1 reported an error before the staging process said its pid:
 * wait a moment for that word, so that teardown can reap pid 1. */
static void learn_pid1(lc_sb_t *c)
{
	for (int i = 0; i < 4; i++) {
		struct pollfd p = { c->sp[0], POLLIN, 0 };
		lc_msg_t m;
		if (poll(&p, 1, 500) <= 0 || lc_msg_recv(c->sp[0], &m) != 1)
			return;
		if (m.type == LC_MSG_PID) {
			c->init = m.a;
			waitpid(c->staging, NULL, 0);
			c->staging = 0;
			return;
		}
	}
}

/* lcrun makes the sandbox's user namespace itself (after make_dirs) and
 * the staging process joins it: root, and no idmap namespace from the
 * caller (lcd) or a batch. */
static bool own_userns(const lc_sb_t *c)
{
	return !c->rootless && c->plan.idmap_userns_fd < 0;
}

static int prepare_prog(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	if (c->shared ? lc_run_shared_seccomp(c->shared, &c->prog) < 0
		      : lc_seccomp_prepare_caps(s->seccomp, s->caps, &c->prog, err) < 0)
		return -1;
	trace("seccomp ready");
	return 0;
}

int lc_sb_begin(lc_sb_t *c, lc_error_t **err)
{
	const lc_spec_t *s = c->spec;
	if (validate(c, err) < 0 || lc_run_dir_hold(err) < 0 || lc_lib_dir_hold(err) < 0 ||
	    lc_sandboxes_pair_check(err) < 0)
		return -1;
	trace("validated");
	if (s->id)
		snprintf(c->id, sizeof(c->id), "%s", s->id);
	else
		lc_random_hex(c->id, LC_ID_LEN);
	if (!c->reuse_dir) {
		/* Claim the id: its state directory exists before anything
		 * else, so lcrun gc never takes a starting sandbox for debris. */
		_cleanup_free_ char *sd = lc_state_dir(c->id);
		lc_dir_spread(lc_run_dir(), false);
		for (int tries = 0;; tries++) {
			if (mkdir(sd, 0700) < 0) {
				if (errno == EEXIST)
					return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox id %s is in use", c->id);
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", sd);
			}
			/* Held until the first state is written, so that a
			 * claim a killed start left is debris for lcrun gc
			 * at once.  gc may take this one for debris before
			 * the flock (its link count is 0 then): claim again. */
			struct stat cst;
			c->claim_fd = open(sd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (c->claim_fd < 0 || flock(c->claim_fd, LOCK_SH) < 0 || fstat(c->claim_fd, &cst) < 0 ||
			    cst.st_nlink > 0 || tries == 2)
				break;
			close(c->claim_fd);
			c->claim_fd = -1;
		}
		c->state_dir_made = true;
		LC_FAULT("sandbox-claimed");
	}
	c->sbdir = lc_sandbox_dir(c->id);
	c->envp = lc_build_env(s);
	/* Zeroed in every helper forked from here on (the remover, which may
	 * stay as the spares' holder, lcrun-net): the secrets are in both. */
	lc_secrets_note(s->secret_env);
	lc_secrets_note(c->envp);
	c->secrets_noted = true;
	/* The cgroup first, so that the state says it from its first
	 * writing on (one write of state.json fewer). */
	if (!c->rootless && lc_cgroup_create(c->id, &s->limits, &c->cg, err) < 0)
		return -1;
	trace("cgroup made");
	LC_FAULT("sandbox-cgroup");
	if (plan_root(c, err) < 0)
		return -1;
	trace("root planned");
	/* The seccomp program (the cache's file read and checked, 0.5 ms
	 * here) only pid 1 needs, for the command.  Where lcrun makes the
	 * user namespace and no network follows, pid 1 waits for a last GO
	 * from lcrun, sent while the staging process and pid 1 make the
	 * root: the program is made after the fork, meanwhile, and comes
	 * with that GO.  Otherwise pid 1 inherits it from here. */
	c->prog_later = own_userns(c) && s->net.mode == LC_NET_NONE;
	if (!c->prog_later && prepare_prog(c, err) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c->sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");

	/* pid 1's mount namespace held by the remover: not with an upper
	 * directory the next run may mount at once (its overlay would still
	 * be mounted there), nor in a batch with a network (the batch's held
	 * namespaces would keep every veth past its lcrun-net's wait). */
	c->hold_mntns = c->throwaway && !s->upper_dir && c->single_threaded &&
			(!c->shared || (c->shared->hold[1] >= 0 && s->net.mode == LC_NET_NONE));
	/* Moving a process into a cgroup afterwards costs an RCU grace period
	 * (about 10 ms here); clone3(CLONE_INTO_CGROUP) does not.  A raw clone3
	 * skips glibc's fork handling, which only matters when other threads
	 * may hold libc locks (lcd): those take fork() and move the child. */
	bool moved = false;
	if (c->cg.dirfd >= 0 && c->single_threaded) {
		struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD,
					 .cgroup = (uint64_t)c->cg.dirfd };
		c->staging = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		moved = c->staging >= 0;
	}
	bool forked = false;
	if (!moved) {
		c->staging = fork();
		forked = c->staging >= 0;
	}
	if (c->staging < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
	if (c->staging == 0 && forked && c->cg.dirfd >= 0) {
		/* Forked from a threaded caller (lcd), single-threaded now:
		 * clone the staging process into the cgroup from here (a move
		 * with cgroup.procs would wait for an RCU grace period, 5-10
		 * ms, on nearly every task lcd starts), as the caller's child
		 * (CLONE_PARENT), say its pid and go. */
		struct clone_args ca = { .flags = CLONE_INTO_CGROUP | CLONE_PARENT, .cgroup = (uint64_t)c->cg.dirfd };
		pid_t p = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (p == 0)
			staging_main(c);
		lc_msg_send(c->sp[1], LC_MSG_STAGING, p > 0 ? p : -1, 0, NULL);
		if (p > 0)
			_exit(0);
		/* refused: this process is the staging one, moved by the caller */
	}
	if (c->staging == 0)
		staging_main(c);
	close(c->sp[1]);
	c->sp[1] = -1;
	if (forked && c->cg.dirfd >= 0) {
		/* The staging process may fail (ERROR) before its parent said
		 * its pid: keep that error, and still learn the pid to reap. */
		lc_msg_t m;
		_cleanup_free_ char *early = NULL;
		int r;
		while ((r = lc_msg_recv(c->sp[0], &m)) == 1 && m.type == LC_MSG_ERROR && !early)
			early = strdup(m.text);
		if (r == 1 && m.type == LC_MSG_STAGING && m.a > 0) {
			while (waitpid(c->staging, NULL, 0) < 0 && errno == EINTR)
				;
			c->staging = m.a;
			moved = true;
		}
		if (early) {
			lc_error_from_buf(err, early, strlen(early));
			return -1;
		}
		if (r != 1 || m.type != LC_MSG_STAGING)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the staging process did not start", c->id);
	}
	lc_mounts_close_binds(&c->plan); /* the staging process has its own */
	if (c->cg.path && !moved) {
		char pid[32];
		snprintf(pid, sizeof(pid), "%d", c->staging);
		_cleanup_free_ char *procs = lc_strdup_printf("%s/cgroup.procs", c->cg.path);
		if (lc_write_file(procs, pid, err) < 0)
			return -1;
	}
	/* The staging process makes its namespaces meanwhile, and waits for
	 * this GO before it mounts anything from the directory; the state and
	 * the name are written while it mounts (the state directory, made
	 * first, already keeps gc away; a name taken ends the start there). */
	if (make_dirs(c, err) < 0)
		return -1;
	LC_FAULT("sandbox-dirs");
	if (c->plan.disk_fd >= 0) {
		lc_msg_send_fd(c->sp[0], LC_MSG_DISK, 0, c->plan.disk_fd);
		close(c->plan.disk_fd);
		c->plan.disk_fd = -1;
	}
	/* Single-threaded, this process's only sandbox: its user namespace,
	 * maps written, for the staging process to idmap with and join (no
	 * round trip for the maps).  Otherwise one idmap namespace serves
	 * many sandboxes (lcd, a batch), and each makes its own. */
	int own = -1;
	if (own_userns(c) &&
	    (own = lc_userns_new(lc_uid_base(), lc_uid_count(), &c->userns_child, err)) < 0)
		return -1;
	c->joined = own >= 0;
	trace("root prepared");
	/* A send that fails means the staging process is gone: its ERROR, or
	 * its silence, is read below. */
	if (c->joined) {
		lc_msg_send_fd(c->sp[0], LC_MSG_GO, 0, own);
		close(own);
	} else {
		lc_msg_send(c->sp[0], LC_MSG_GO, 0, 0, NULL);
	}
	if (lc_sb_save_state(c, "creating", err) < 0 || link_name(c, err) < 0)
		return -1;
	LC_FAULT("sandbox-state");
	/* Joined, no network: pid 1 waits for this word, the only one after
	 * the first GO (with a network, the GOs after USERNS come later and
	 * gate it the same way), and its seccomp program with it: where
	 * lcrun made the user namespace and there is no network, the
	 * program is always made here (prog_later). */
	if (c->prog_later) { /* joined: own_userns made it so */
		int pfd = prepare_prog(c, err) < 0 ? -1 : lc_seccomp_memfd(&c->prog, err);
		if (pfd < 0) {
			/* pid 1 may be cloned already, waiting for this GO:
			 * its pid, for teardown to end it */
			learn_pid1(c);
			return -1;
		}
		lc_msg_send_fd(c->sp[0], LC_MSG_GO, 0, pfd);
		close(pfd);
	}
	/* The network's lease and chains (its libraries loaded, 10 ms and
	 * more here) while the staging process makes its namespaces and
	 * mounts; its veth once that process says where (USERNS). */
	if (c->spec->net.mode != LC_NET_NONE) {
		if (lc_net_prepare(c->id, &c->spec->net, &c->lease, err) < 0)
			return -1;
		c->net_up = true;
		LC_FAULT("sandbox-net-prepared");
	}
	return 0;
}

int lc_sb_step(lc_sb_t *c, lc_error_t **err)
{
	lc_msg_t m;
	int fd;
	int r = lc_msg_recv_fd(c->sp[0], &m, &fd);
	int held = r != 1 ? -1 : m.type == LC_MSG_PID ? LC_HELD_PID1 : m.type == LC_MSG_USERNS ? LC_HELD_STAGING : -1;
	if (fd >= 0 && held >= 0 && c->held_ns[held] < 0)
		c->held_ns[held] = fd;
	else if (fd >= 0)
		close(fd);
	if (r <= 0) {
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: setup ended without a word", c->id);
	}
	switch (m.type) {
	case LC_MSG_ERROR:
		lc_error_from_buf(err, m.text, strlen(m.text));
		if (!c->got_pid)
			learn_pid1(c);
		return -1;
	case LC_MSG_USERNS: {
		trace("staged");
		reap_userns_child(c);
		c->idmapped = m.a != 0;
		if (!c->rootless && !c->joined && write_maps(c->staging, lc_uid_base(), lc_uid_count(), err) < 0)
			return lc_error_wrap(err, "sandbox %s: user namespace maps", c->id);
		if (c->spec->net.mode == LC_NET_NONE) {
			if (!c->joined)
				lc_msg_send(c->sp[0], LC_MSG_GO, 0, 0, NULL);
			break;
		}
		/* The network is set up while the staging process and
		 * pid 1 make the rest: pid 1 waits for a second GO
		 * before the command (pid1_main), sent only once the
		 * veth, its addresses and its chains are in place. */
		char nsp[64];
		snprintf(nsp, sizeof(nsp), "/proc/%d/ns/net", (int)c->staging);
		_cleanup_close_ int nsfd = open(nsp, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "sandbox %s: cannot open %s", c->id, nsp);
		lc_msg_send(c->sp[0], LC_MSG_GO, 0, 0, NULL);
		/* the lease and the chains are there (lc_sb_begin); if the
		 * veth cannot be made they go now, and teardown leaves the
		 * network alone: an interface of that name it did not make
		 * (lc_net_attach's EEXIST) is not its to delete */
		if (lc_net_attach(c->id, c->lease, nsfd, err) < 0) {
			lc_net_unprepare(c->id);
			c->net_up = false;
			learn_pid1(c);
			return -1;
		}
		trace("network set up");
		LC_FAULT("sandbox-net-attached");
		lc_msg_send(c->sp[0], LC_MSG_GO, 0, 0, NULL);
		break;
	}
	case LC_MSG_PID:
		/* pid 1's READY may come first: staging sends this after
		 * clone returns, pid 1 runs meanwhile.  Both are needed. */
		trace("pid 1 cloned");
		c->init = m.a;
		/* In a batch the staging process is reaped later (as it
		 * finishes, batch.c, or at teardown): its exit lets go of
		 * its mount namespace (a copy of the host's mounts),
		 * which may wait for an RCU grace period, and nobody
		 * waits for that. */
		if (!c->shared) {
			waitpid(c->staging, NULL, 0);
			c->staging = 0;
		}
		c->pidfd = (int)syscall(SYS_pidfd_open, c->init, 0);
		c->got_pid = true;
		if (c->got_ready)
			return lc_sb_save_state(c, "running", err) < 0 ? -1 : 1;
		break;
	case LC_MSG_READY:
		trace("pid 1 ready");
		c->got_ready = true;
		if (c->got_pid)
			return lc_sb_save_state(c, "running", err) < 0 ? -1 : 1;
		break;
	case LC_MSG_EXIT:
		/* A quick command can end (after READY) before the
		 * staging process, descheduled, says pid 1's pid: kept
		 * for lc_sb_wait. */
		c->got_exit = true;
		c->exit_code = m.a;
		c->exit_signal = m.b;
		break;
	default:
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: unexpected message %d", c->id, m.type);
	}
	return 0;
}

int lc_sb_start(lc_sb_t *c, lc_error_t **err)
{
	if (lc_sb_begin(c, err) < 0)
		return -1;
	int r;
	while ((r = lc_sb_step(c, err)) == 0)
		;
	if (r > 0)
		LC_FAULT("sandbox-running");
	return r < 0 ? -1 : 0;
}

long long lc_sb_deadline(const lc_sb_t *c)
{
	return c->spec->timeout > 0 ? c->start_ms + (long long)c->spec->timeout * 1000 : -1;
}

void lc_sb_signal(lc_sb_t *c, int sig)
{
	if (c->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0);
	else if (c->init > 0)
		kill(c->init, sig);
}

void lc_sb_expire(lc_sb_t *c)
{
	c->timed_out = true;
	if (c->cg.path)
		lc_cgroup_kill(c->cg.path);
	lc_sb_signal(c, SIGKILL);
}

bool lc_sb_sync_read(lc_sb_t *c)
{
	lc_msg_t m;
	if (lc_msg_recv(c->sp[0], &m) != 1)
		return false;
	if (m.type == LC_MSG_EXIT) {
		c->got_exit = true;
		c->exit_code = m.a;
		c->exit_signal = m.b;
	} else if (m.type == LC_MSG_ERROR) {
		/* pid 1 was ready, then could not start the command (out of
		 * processes): its exit status alone would not say why */
		lc_error_t *e = NULL;
		/* (it returns -1 as lc_error_set does, with *e filled) */
		lc_error_from_buf(&e, m.text, strnlen(m.text, sizeof(m.text)));
		if (e && e->msg)
			snprintf(c->start_error, sizeof(c->start_error), "%s", e->msg);
		lc_error_free(e);
	}
	return true;
}

bool lc_sb_exited(lc_sb_t *c)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	return waitid(P_PID, (id_t)c->init, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == c->init;
}

void lc_sb_reap(lc_sb_t *c, lc_result_t *res)
{
	trace("pid 1 exited");
	int status = 0;
	while (waitpid(c->init, &status, 0) < 0 && errno == EINTR)
		;
	c->init = 0;
	int code = c->exit_code, sig = c->exit_signal;
	if (!c->got_exit) {
		/* pid 1 itself died: killed (timeout, OOM, lc_sandbox_kill). */
		if (WIFSIGNALED(status)) {
			sig = WTERMSIG(status);
			code = 128 + sig;
		} else {
			code = WEXITSTATUS(status);
		}
	}
	res->exit_code = code;
	res->signal = sig;
	res->timed_out = c->timed_out;
	snprintf(res->start_error, sizeof(res->start_error), "%s", c->start_error);
	if (res->timed_out)
		res->exit_code = LC_EXIT_TIMEOUT;
}

void lc_sb_wait(lc_sb_t *c, lc_result_t *res, int sigfd)
{
	long long deadline = lc_sb_deadline(c);
	int sync_fd = c->sp[0];
	for (;;) {
		/* Without a pidfd (pidfd_open refused), poll for pid 1 with waitid. */
		struct pollfd p[3] = { { c->pidfd, POLLIN, 0 }, { sync_fd, POLLIN, 0 }, { sigfd, POLLIN, 0 } };
		int timeout = c->pidfd < 0 ? 10 : -1;
		if (deadline >= 0 && !c->timed_out) {
			long long left = deadline - lc_now_ms();
			if (timeout < 0 || left < timeout)
				timeout = left > 0 ? (int)left : 0;
		}
		int n = poll(p, sigfd >= 0 ? 3 : 2, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		if (deadline >= 0 && !c->timed_out && lc_now_ms() >= deadline) {
			lc_sb_expire(c);
			continue;
		}
		/* pid 1 hung up: only its exit is left to see */
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !lc_sb_sync_read(c))
			sync_fd = -1;
		if (sigfd >= 0 && (p[2].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sigfd, &si, sizeof(si)) == sizeof(si))
				lc_sb_signal(c, (int)si.ssi_signo);
		}
		if (c->pidfd >= 0 ? (p[0].revents & POLLIN) != 0 : lc_sb_exited(c))
			break;
	}
	/* pid 1's last words (its command's EXIT, or why it could not start
	 * it) may still wait on the socket when its exit came first */
	struct pollfd q = { sync_fd, POLLIN, 0 };
	while (sync_fd >= 0 && poll(&q, 1, 0) == 1 && lc_sb_sync_read(c))
		;
	lc_sb_reap(c, res);
}

void lc_sb_run_prepare(lc_sb_t *c, const lc_spec_t *spec, const lc_run_shared_t *sh, lc_result_t *res)
{
	lc_sb_init(c, spec);
	c->shared = sh;
	c->throwaway = !spec->keep;
	memset(res, 0, sizeof(*res));
	res->cpu_user_us = res->cpu_system_us = res->memory_peak = res->pids_peak = -1;
}

void lc_sb_run_started(lc_sb_t *c, lc_result_t *res)
{
	snprintf(res->id, sizeof(res->id), "%s", c->id);
	if (c->cg.not_applied)
		snprintf(res->limits_not_applied, sizeof(res->limits_not_applied), "%s", c->cg.not_applied);
	if (!c->spec->keep && !c->shared)
		remover_start(c);
	/* pid 1's mount namespace waits for the batch's remover. */
	if (c->shared && c->held_ns[LC_HELD_PID1] >= 0 && lc_run_shared_hold(c->shared, c->held_ns[LC_HELD_PID1]) == 0) {
		close(c->held_ns[LC_HELD_PID1]);
		c->held_ns[LC_HELD_PID1] = -1;
	}
}

void lc_sb_run_finish(lc_sb_t *c, lc_result_t *res, bool started)
{
	const lc_spec_t *spec = c->spec;
	if (started) {
		lc_cgroup_stats(c->cg.path, res);
		if (res->oom_killed && res->signal == SIGKILL && !res->timed_out)
			res->exit_code = 137;
	}
	res->wall_us = (lc_now_ms() - c->start_ms) * 1000;
	if (started && spec->keep && c->state_written) {
		json_t *j = lc_sb_state_json(c, "exited");
		json_object_set_new(j, "exit_code", json_integer(res->exit_code));
		lc_state_write(c->id, j, NULL);
		json_decref(j);
	}
	lc_sb_teardown(c, started && spec->keep);
	lc_sb_free(c);
}

int lc_run(const lc_spec_t *spec, lc_result_t *res, lc_error_t **err)
{
	lc_sb_t c;
	lc_sb_run_prepare(&c, spec, NULL, res);
	sigset_t old;
	int sigfd = -1;
	if (spec->forward_signals)
		sigfd = lc_signals_to_fd(fwd_signals, sizeof(fwd_signals) / sizeof(fwd_signals[0]), &old);
	int r = lc_sb_start(&c, err);
	if (r == 0) {
		lc_sb_run_started(&c, res);
		lc_sb_wait(&c, res, sigfd);
	}
	lc_sb_run_finish(&c, res, r == 0);
	if (sigfd >= 0) {
		close(sigfd);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return r;
}

json_t *lc_result_to_json(const lc_result_t *res)
{
	json_t *j = json_pack("{s:s, s:i, s:b, s:b, s:f}", "id", res->id, "exit_code", res->exit_code,
			      "timed_out", res->timed_out, "oom_killed", res->oom_killed,
			      "wall_time_s", (double)res->wall_us / 1e6);
	json_object_set_new(j, "signal", res->signal ? json_integer(res->signal) : json_null());
#define OPT(k, v) json_object_set_new(j, k, (v) >= 0 ? json_integer(v) : json_null())
	OPT("cpu_user_us", res->cpu_user_us);
	OPT("cpu_system_us", res->cpu_system_us);
	OPT("memory_peak_bytes", res->memory_peak);
	OPT("pids_peak", res->pids_peak);
#undef OPT
	if (res->limits_not_applied[0])
		json_object_set_new(j, "limits_not_applied", json_string(res->limits_not_applied));
	return j;
}

int lc_sandbox_kill(const char *id_or_name, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *st = lc_state_open(id_or_name, &id, err);
	if (!st)
		return -1;
	const char *cg = json_string_value(json_object_get(st, "cgroup"));
	if (cg)
		lc_cgroup_kill(cg);
	int pid = (int)json_integer_value(json_object_get(st, "pid"));
	if (pid > 0) {
		/* Only if that pid is still our sandbox's pid 1. */
		_cleanup_free_ char *cgpath = lc_strdup_printf("/proc/%d/cgroup", pid);
		_cleanup_free_ char *content = NULL;
		if (!cg || (lc_read_file(cgpath, &content, NULL, NULL) == 0 && strstr(content, id)))
			kill(pid, SIGKILL);
	}
	return 0;
}
