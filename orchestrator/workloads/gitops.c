/* gitops.c — clones, and a patch committed and pushed from a fresh clone (gitops.h). */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "gitops.h"
#include "util.h"

#define GIT_MAX_OUT (64 << 20)

static void append(char **b, size_t *n, const char *d, size_t len)
{
	if (*n + len > GIT_MAX_OUT)
		return;
	char *p = realloc(*b, *n + len + 1);
	if (!p)
		return;
	memcpy(p + *n, d, len);
	*n += len;
	p[*n] = '\0';
	*b = p;
}

/* "protocol" and "host[:port]" of an http(s) URL, as git's credential
 * protocol names them; -1 for another kind of URL. */
static int url_parts(const char *url, char **proto, char **host)
{
	const char *p = url ? strstr(url, "://") : NULL;
	if (!p || (strncmp(url, "https://", 8) && strncmp(url, "http://", 7)))
		return -1;
	*proto = strndup(url, (size_t)(p - url));
	const char *h = p + 3;
	size_t n = strcspn(h, "/?#");
	const char *at = memchr(h, '@', n); /* user@ is not part of the host */
	if (at) {
		n -= (size_t)(at + 1 - h);
		h = at + 1;
	}
	*host = strndup(h, n);
	return 0;
}

static bool have_git_lfs(void)
{
	static int have = -1;
	if (have >= 0)
		return have;
	have = 0;
	const char *path = getenv("PATH");
	_cleanup_free_ char *copy = strdup(path ? path : "/usr/bin:/bin");
	char *save = NULL;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		_cleanup_free_ char *f = lc_strdup_printf("%s/git-lfs", d);
		if (access(f, X_OK) == 0) {
			have = 1;
			break;
		}
	}
	return have;
}

/* The child's environment: nothing of the function's (its secrets, its
 * lcd token) but PATH, HOME, the locale, a site's CA bundle and proxy;
 * git's own settings. */
static void git_child_env(const gitops_cred_t *cred, const char *token, const char *proto, const char *host)
{
	const char *keep[] = { "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
			       "SSL_CERT_FILE", "SSL_CERT_DIR", "https_proxy", "HTTPS_PROXY", "http_proxy", "no_proxy",
			       "NO_PROXY", NULL };
	char *saved[16] = { 0 };
	for (int i = 0; keep[i]; i++)
		saved[i] = getenv(keep[i]) ? strdup(getenv(keep[i])) : NULL;
	clearenv();
	for (int i = 0; keep[i]; i++)
		if (saved[i]) {
			setenv(keep[i], saved[i], 1);
			free(saved[i]);
		}
	if (!getenv("PATH"))
		setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
	setenv("GIT_TERMINAL_PROMPT", "0", 1);
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
	const char *cfg[16][2];
	int n = 0;
	/* http(s) only: a .gitmodules cannot reach ext::, file:// or ssh */
	cfg[n][0] = "protocol.allow", cfg[n++][1] = "never";
	cfg[n][0] = "protocol.https.allow", cfg[n++][1] = "always";
	cfg[n][0] = "protocol.http.allow", cfg[n++][1] = "always";
	cfg[n][0] = "advice.detachedHead", cfg[n++][1] = "false";
	if (token) {
		/* the helper answers for the remote's protocol and host only,
		 * with the token from its environment: no argv, URL or file */
		setenv("LC_GIT_TOKEN", token, 1);
		setenv("LC_GIT_PROTOCOL", proto, 1);
		setenv("LC_GIT_HOST", host, 1);
		cfg[n][0] = "credential.helper";
		cfg[n++][1] = "!f() { test \"$1\" = get || exit 0; ok=; while IFS= read -r l && test -n \"$l\"; do "
			      "case \"$l\" in \"protocol=$LC_GIT_PROTOCOL\"|\"host=$LC_GIT_HOST\") ok=\"$ok+\";; esac; done; "
			      "test \"$ok\" = ++ || exit 0; echo username=x-access-token; echo \"password=$LC_GIT_TOKEN\"; }; f";
	}
	if (cred && cred->lfs && have_git_lfs()) {
		cfg[n][0] = "filter.lfs.process", cfg[n++][1] = "git-lfs filter-process";
		cfg[n][0] = "filter.lfs.smudge", cfg[n++][1] = "git-lfs smudge -- %f";
		cfg[n][0] = "filter.lfs.clean", cfg[n++][1] = "git-lfs clean -- %f";
		cfg[n][0] = "filter.lfs.required", cfg[n++][1] = "true";
	}
	char b[32];
	snprintf(b, sizeof(b), "%d", n);
	setenv("GIT_CONFIG_COUNT", b, 1);
	for (int i = 0; i < n; i++) {
		char k[32], v[32];
		snprintf(k, sizeof(k), "GIT_CONFIG_KEY_%d", i);
		snprintf(v, sizeof(v), "GIT_CONFIG_VALUE_%d", i);
		setenv(k, cfg[i][0], 1);
		setenv(v, cfg[i][1], 1);
	}
}

int gitops_git(const char *dir, const char *const *args, const gitops_cred_t *cred, char **out, lc_error_t **err)
{
	/* the token as it is now (an App's renewed when near its end), and
	 * where it may go */
	const char *token = NULL;
	_cleanup_free_ char *proto = NULL, *host = NULL;
	if (cred && cred->auth && gh_auth_kind(cred->auth) != GH_AUTH_NONE) {
		if (url_parts(cred->url, &proto, &host) < 0)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "%s: a token is only sent to an http(s) remote",
					    cred->url ? cred->url : "(no URL)");
		if (gh_auth_token(cred->auth, &token, err) < 0)
			return -1;
	}
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pipe");
	if (pipe2(pe, O_CLOEXEC) < 0) {
		close(po[0]);
		close(po[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (dir && chdir(dir) < 0)
			_exit(127);
		git_child_env(cred, token, proto, host);
		size_t n = 0;
		while (args[n])
			n++;
		const char **argv = calloc(n + 2, sizeof(*argv));
		argv[0] = "git";
		for (size_t i = 0; i < n; i++)
			argv[i + 1] = args[i];
		execvp("git", (char *const *)argv);
		fprintf(stderr, "cannot run git: %s\n", strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	char *ob = NULL, *eb = NULL;
	size_t on = 0, en = 0;
	struct pollfd fds[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
	int open_fds = 2;
	while (open_fds > 0) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[65536];
			ssize_t r = read(fds[i].fd, buf, sizeof(buf));
			if (r <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
				continue;
			}
			if (i == 0)
				append(&ob, &on, buf, (size_t)r);
			else
				append(&eb, &en, buf, (size_t)r);
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	_cleanup_free_ char *errtext = eb;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(ob);
		_cleanup_free_ char *tail = agent_tail(errtext, en, 1);
		if (token && *tail) /* git never prints it; whatever prints it, it goes no further */
			for (char *q = tail; (q = strstr(q, token));)
				memset(q, '*', strlen(token));
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "git %s: %s", args[0],
				    *tail ? tail : WIFEXITED(st) ? "failed" : "killed");
	}
	if (out)
		*out = ob ? ob : strdup("");
	else
		free(ob);
	return 0;
}

static int git(const char *dir, const gitops_cred_t *cred, lc_error_t **err, ...)
{
	const char *args[32];
	size_t n = 0;
	va_list ap;
	va_start(ap, err);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 31)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	return gitops_git(dir, args, cred, NULL, err);
}

static char *git_out(const char *dir, const gitops_cred_t *cred, lc_error_t **err, const char *const *args)
{
	char *o = NULL;
	if (gitops_git(dir, args, cred, &o, err) < 0)
		return NULL;
	o[strcspn(o, "\n")] = '\0';
	return o;
}

/* A fresh repository in a new temporary directory with origin at url and
 * base (and branch, when given) fetched, commit there (fetched by id if
 * it left them).  *tmp: the directory to remove, *repo inside it. */
static int fresh_fetch(const gitops_cred_t *cred, const char *base, const char *branch, const char *commit, char **tmp,
		       char **repo, lc_error_t **err)
{
	char tmpl[] = "/tmp/lc-agents-git.XXXXXX";
	if (!mkdtemp(tmpl))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make a directory for the clone");
	*tmp = strdup(tmpl);
	*repo = lc_strdup_printf("%s/repo", tmpl);
	_cleanup_free_ char *baseref = lc_strdup_printf("+refs/heads/%s:refs/remotes/origin/%s", base, base);
	_cleanup_free_ char *brref = branch ? lc_strdup_printf("+refs/heads/%s:refs/remotes/origin/%s", branch, branch) : NULL;
	if (git(NULL, NULL, err, "init", "-q", *repo, NULL) < 0 ||
	    git(*repo, NULL, err, "remote", "add", "origin", cred->url, NULL) < 0)
		return -1;
	if (git(*repo, cred, err, "fetch", "-q", "--no-tags", "origin", baseref, brref, NULL) < 0)
		return lc_error_wrap(err, "cannot fetch %s%s%s from %s", base, branch ? " and " : "", branch ? branch : "",
				     cred->url);
	_cleanup_free_ char *want = lc_strdup_printf("%s^{commit}", commit);
	lc_error_t *e = NULL;
	if (git(*repo, NULL, &e, "cat-file", "-e", want, NULL) < 0) {
		/* the commit left the branch (a force push): fetch it by id */
		lc_error_free(e);
		if (git(*repo, cred, err, "fetch", "-q", "--no-tags", "origin", commit, NULL) < 0)
			return lc_error_wrap(err, "cannot fetch the snapshot's commit %s", commit);
	}
	return 0;
}

static void rm_tmp(char *tmp)
{
	lc_error_t *e2 = NULL;
	if (tmp && lc_rm_rf(tmp, &e2) < 0)
		lc_error_free(e2);
	free(tmp);
}

int gitops_push_patch(const gitops_push_t *p, char **sha, lc_error_t **err)
{
	gitops_cred_t cred = { .auth = p->auth, .url = p->url };
	char *tmp = NULL;
	_cleanup_free_ char *repo = NULL;
	_cleanup_free_ char *dst = lc_strdup_printf("HEAD:refs/heads/%s", p->branch);
	const char *name_end = strchr(p->author, '<');
	_cleanup_free_ char *aname = name_end ? strndup(p->author, (size_t)(name_end - p->author)) : strdup(p->author);
	for (size_t n = strlen(aname); n > 0 && aname[n - 1] == ' ';)
		aname[--n] = '\0';
	_cleanup_free_ char *amail = name_end ? strndup(name_end + 1, strcspn(name_end + 1, ">")) : strdup("");
	_cleanup_free_ char *cname = lc_strdup_printf("user.name=%s", aname);
	_cleanup_free_ char *cmail = lc_strdup_printf("user.email=%s", amail);
	_cleanup_free_ char *patch = NULL;
	int r = -1;
	if (fresh_fetch(&cred, p->base, p->follow_up ? p->branch : NULL, p->commit, &tmp, &repo, err) < 0)
		goto out;
	if (p->follow_up) {
		/* a follow-up commits on the branch as the agent saw it */
		_cleanup_free_ char *ref = lc_strdup_printf("refs/remotes/origin/%s", p->branch);
		const char *rp[] = { "rev-parse", "--verify", "-q", ref, NULL };
		_cleanup_free_ char *head = git_out(repo, NULL, err, rp);
		if (!head)
			goto out;
		if (strcmp(head, p->commit) != 0) {
			lc_error_set(err, LC_EXIT_STATE, 0,
				     "%s moved on the remote while the agent worked (now %.12s, the agent started from %.12s): "
				     "nothing pushed", p->branch, head, p->commit);
			goto out;
		}
	}
	patch = lc_strdup_printf("%s/agent.patch", tmp);
	if (lc_write_file_atomic(patch, p->patch, p->patch_len, 0600, err) < 0)
		goto out;
	if (git(repo, NULL, err, "checkout", "-q", "-b", p->branch, p->commit, NULL) < 0) {
		lc_error_wrap(err, "cannot check out %s", p->commit);
		goto out;
	}
	if (git(repo, NULL, err, "apply", "--index", "--whitespace=nowarn", patch, NULL) < 0) {
		lc_error_wrap(err, "the agent's patch does not apply to %s", p->commit);
		goto out;
	}
	if (git(repo, NULL, err, "-c", cname, "-c", cmail, "commit", "-q", "--no-verify", "-m", p->message, NULL) < 0)
		goto out;
	/* a first run replaces the branch; a follow-up adds to it, and a
	 * branch someone pushed to meanwhile refuses it */
	int pushed = p->follow_up ? git(repo, &cred, err, "push", "-q", "origin", dst, NULL)
				  : git(repo, &cred, err, "push", "-q", "--force", "origin", dst, NULL);
	if (pushed < 0) {
		lc_error_wrap(err, "cannot push %s", p->branch);
		goto out;
	}
	const char *rev[] = { "rev-parse", "HEAD", NULL };
	*sha = git_out(repo, NULL, err, rev);
	r = *sha ? 0 : -1;
out:
	rm_tmp(tmp);
	return r;
}

char *gitops_resolve_url(const char *remote, const char *rel)
{
	if (strncmp(rel, "./", 2) != 0 && strncmp(rel, "../", 3) != 0)
		return strdup(rel);
	_cleanup_free_ char *base = strdup(remote);
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		base[--n] = '\0';
	const char *host_end = strstr(base, "://");
	size_t floor = host_end ? (size_t)(host_end + 3 - base) + strcspn(host_end + 3, "/") : 0;
	for (;;) {
		if (!strncmp(rel, "./", 2)) {
			rel += 2;
		} else if (!strncmp(rel, "../", 3)) {
			rel += 3;
			char *slash = strrchr(base, '/');
			if (slash && (size_t)(slash - base) >= floor)
				*slash = '\0';
		} else {
			break;
		}
	}
	return lc_strdup_printf("%s/%s", base, rel);
}

int gitops_clone(const char *url, const char *branch, const char *dir, gh_auth_t *auth,
		 void (*on_submodule)(void *ud, const char *url), void *ud, lc_error_t **err)
{
	gitops_cred_t cred = { .auth = auth, .url = url, .lfs = true };
	/* the repository first (LFS files smudged on checkout) */
	int r = branch ? git(NULL, &cred, err, "clone", "-q", "--branch", branch, "--", url, dir, NULL)
		       : git(NULL, &cred, err, "clone", "-q", "--", url, dir, NULL);
	if (r < 0)
		return -1;
	_cleanup_free_ char *gm = lc_strdup_printf("%s/.gitmodules", dir);
	if (access(gm, F_OK) != 0)
		return 0;
	/* then its submodules, with the same credential where they live on
	 * the same host (the helper answers for no other) */
	const char *list[] = { "config", "-f", ".gitmodules", "--get-regexp", "^submodule\\..*\\.url$", NULL };
	_cleanup_free_ char *urls = NULL;
	lc_error_t *e = NULL;
	if (gitops_git(dir, list, NULL, &urls, &e) < 0)
		lc_error_free(e); /* no url in it: nothing to widen */
	char *save = NULL;
	for (char *l = urls ? strtok_r(urls, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
		const char *u = strchr(l, ' ');
		if (!u || !on_submodule)
			continue;
		_cleanup_free_ char *abs = gitops_resolve_url(url, u + 1);
		on_submodule(ud, abs);
	}
	if (git(dir, &cred, err, "submodule", "update", "-q", "--init", "--recursive", NULL) < 0)
		return lc_error_wrap(err, "the submodules");
	return 0;
}

int gitops_branch_diff(const char *url, gh_auth_t *auth, const char *base, const char *commit, const char *branch,
		       char **patch, size_t *len, char **head, lc_error_t **err)
{
	gitops_cred_t cred = { .auth = auth, .url = url };
	char *tmp = NULL;
	_cleanup_free_ char *repo = NULL;
	_cleanup_free_ char *ref = lc_strdup_printf("refs/remotes/origin/%s", branch);
	int r = -1;
	*patch = *head = NULL;
	if (fresh_fetch(&cred, base, branch, commit, &tmp, &repo, err) < 0)
		goto out;
	const char *rp[] = { "rev-parse", "--verify", "-q", ref, NULL };
	*head = git_out(repo, NULL, err, rp);
	if (!*head)
		goto out;
	const char *diff[] = { "diff", "--binary", "--full-index", "--no-ext-diff", "--no-textconv", commit, *head, "--", NULL };
	if (gitops_git(repo, diff, NULL, patch, err) < 0)
		goto out;
	*len = strlen(*patch);
	r = 0;
out:
	if (r < 0) {
		free(*head);
		*head = NULL;
	}
	rm_tmp(tmp);
	return r;
}
