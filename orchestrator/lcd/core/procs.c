/* procs.c — the commands of the E2B listener's envd (see procs.h).
 *
 * A command has two threads of its own: one waits in lcd_runner_exec (the
 * command's whole life), the other (the pump) reads its output and hands
 * each piece to the clients attached at that moment, enforces its
 * timeout, and, once the command has ended and its output is read, sends
 * the end and takes it out of the table.  A client (a stream of the HTTP
 * side) reads its events from a queue of its own, woken through a pipe.
 * One mutex guards the table, the queues and the commands' state. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "procs.h"
#include "runner.h"
#include "util.h"

#define CHUNK (32 * 1024)      /* read at once, as envd does */
#define DRAIN_MS 200           /* output read after the command ended */
#define SUB_MAX (32 << 20)     /* bytes queued for one client before it is dropped */
#define PROCS_MAX 256          /* commands per sandbox */
#define STOP_WAIT_MS 5000
#define INPUT_WAIT_MS 30000    /* a write to a command that reads nothing fails then */

typedef struct proc proc_t;

struct lcd_proc_sub {
	proc_t *p;
	lcd_proc_ev_t *head, **tail;
	size_t queued;
	bool overflow;
	int wake[2];   /* a byte on [1] while events wait */
	bool woken;
	lcd_proc_sub_t *next;
};

struct proc {
	lcd_t *lcd;
	char sandbox[LC_ID_LEN + 1];
	unsigned pid;
	char *tag;
	json_t *config;
	bool pty;
	int refs;              /* the pump's, clients', calls under way */
	bool listed;           /* in the table */
	bool killed;           /* told to die: no longer listed or found */
	bool ended;
	lcd_proc_sub_t *subs;
	/* the command */
	lc_exec_opts_t opts;
	char **argv, **env;
	char *workdir;
	int in_w, out_r, err_r, master; /* ours: stdin, stdout, stderr, or the pty */
	int child[3];          /* its ends, closed when the exec is over */
	int cancel[2], sigs[2], done[2];
	pthread_mutex_t input; /* writes to in_w or master */
	long long deadline;    /* ms (monotonic), 0: none */
	pthread_t exec_th;
	int rc;
	lc_result_t res;
	lc_error_t *err;
	proc_t *next;
};

struct lcd_procs {
	pthread_mutex_t lock;
	pthread_cond_t gone;   /* a command left the table */
	proc_t *list;
	unsigned next_pid;
	bool stopping;
};

static void kill_it(proc_t *p);
static void mark_killed(proc_t *p);

void lcd_procs_init(lcd_t *lcd)
{
	struct lcd_procs *t = lc_xmalloc0(sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->gone, NULL);
	t->next_pid = 100;
	lcd->procs = t;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void proc_free(proc_t *p)
{
	int *fds[] = { &p->in_w, &p->out_r, &p->err_r, &p->master, &p->child[0], &p->child[1], &p->child[2],
		       &p->cancel[0], &p->cancel[1], &p->sigs[0], &p->sigs[1], &p->done[0], &p->done[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		close_fd(fds[i]);
	for (size_t i = 0; p->env && p->env[i]; i++)
		explicit_bzero(p->env[i], strlen(p->env[i]));
	lc_strv_free(p->env);
	lc_strv_free(p->argv);
	free(p->workdir);
	free(p->tag);
	json_decref(p->config);
	lc_error_free(p->err);
	pthread_mutex_destroy(&p->input);
	free(p);
}

/* Drop a reference; the caller holds the table's lock. */
static void unref_locked(proc_t *p)
{
	if (--p->refs == 0)
		proc_free(p);
}

void lcd_proc_ev_free(lcd_proc_ev_t *e)
{
	if (!e)
		return;
	free(e->data);
	free(e->error);
	free(e);
}

/* Queue e for s (the lock held): its copy, or nothing once s overflowed. */
static void sub_push(lcd_proc_sub_t *s, const lcd_proc_ev_t *e)
{
	if (s->overflow)
		return;
	if (s->queued + e->len > SUB_MAX && e->kind != LCD_PROC_END) {
		s->overflow = true;
	} else {
		lcd_proc_ev_t *c = lc_xmalloc0(sizeof(*c));
		*c = *e;
		c->next = NULL;
		c->data = e->len ? lc_xmalloc0(e->len) : NULL;
		if (e->len)
			memcpy(c->data, e->data, e->len);
		c->error = e->error ? strdup(e->error) : NULL;
		*s->tail = c;
		s->tail = &c->next;
		s->queued += e->len;
	}
	if (!s->woken) {
		s->woken = true;
		(void)!write(s->wake[1], "x", 1);
	}
}

static lcd_proc_sub_t *sub_new(proc_t *p)
{
	lcd_proc_sub_t *s = lc_xmalloc0(sizeof(*s));
	s->p = p;
	s->tail = &s->head;
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(s);
		return NULL;
	}
	s->next = p->subs;
	p->subs = s;
	p->refs++;
	lcd_proc_ev_t start = { .kind = LCD_PROC_START, .pid = p->pid };
	sub_push(s, &start);
	return s;
}

int lcd_proc_sub_fd(const lcd_proc_sub_t *s)
{
	return s->wake[0];
}

bool lcd_proc_sub_overflowed(const lcd_proc_sub_t *s)
{
	struct lcd_procs *t = s->p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	bool o = s->overflow && !s->head;
	pthread_mutex_unlock(&t->lock);
	return o;
}

lcd_proc_ev_t *lcd_proc_sub_next(lcd_proc_sub_t *s)
{
	struct lcd_procs *t = s->p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	lcd_proc_ev_t *e = s->head;
	if (e) {
		s->head = e->next;
		if (!s->head)
			s->tail = &s->head;
		s->queued -= e->len;
		e->next = NULL;
	}
	if (!s->head && s->woken) {
		char buf[16];
		while (read(s->wake[0], buf, sizeof(buf)) > 0)
			;
		s->woken = false;
	}
	pthread_mutex_unlock(&t->lock);
	return e;
}

void lcd_proc_sub_kill(lcd_proc_sub_t *s)
{
	mark_killed(s->p);
	kill_it(s->p);
}

void lcd_proc_sub_free(lcd_proc_sub_t *s)
{
	if (!s)
		return;
	struct lcd_procs *t = s->p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	for (lcd_proc_sub_t **pp = &s->p->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	for (lcd_proc_ev_t *e = s->head, *n; e; e = n) {
		n = e->next;
		lcd_proc_ev_free(e);
	}
	unref_locked(s->p);
	pthread_mutex_unlock(&t->lock);
	close(s->wake[0]);
	close(s->wake[1]);
	free(s);
}

/* Hand e to every client (the lock held). */
static void broadcast(proc_t *p, const lcd_proc_ev_t *e)
{
	for (lcd_proc_sub_t *s = p->subs; s; s = s->next)
		sub_push(s, e);
}

/* ---- the command's threads ---- */

static void *exec_thread(void *arg)
{
	proc_t *p = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	p->rc = lcd_runner_exec(p->lcd, p->sandbox, &p->opts, &p->res, &p->err);
	for (int i = 0; i < 3; i++)
		close_fd(&p->child[i]);
	(void)!write(p->done[1], "x", 1);
	return NULL;
}

/* Kill the command with its children (lc_exec_opts_t.cancel_fd).  The
 * pipe does not block: callers may hold the table's lock. */
static void kill_it(proc_t *p)
{
	if (p->cancel[1] >= 0)
		(void)!write(p->cancel[1], "x", 1);
}

static void mark_killed(proc_t *p)
{
	struct lcd_procs *t = p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	p->killed = true;
	pthread_mutex_unlock(&t->lock);
}

static void emit_output(proc_t *p, int kind, const char *buf, size_t n)
{
	lcd_proc_ev_t e = { .kind = kind, .data = (unsigned char *)buf, .len = n };
	struct lcd_procs *t = p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	broadcast(p, &e);
	pthread_mutex_unlock(&t->lock);
}

static void *pump_thread(void *arg)
{
	proc_t *p = arg;
	struct lcd_procs *t = p->lcd->procs;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	int fds[2] = { p->pty ? p->master : p->out_r, p->pty ? -1 : p->err_r };
	int kinds[2] = { p->pty ? LCD_PROC_PTY : LCD_PROC_STDOUT, LCD_PROC_STDERR };
	bool exec_over = false, killed = false;
	long long drain_until = 0;
	char *buf = lc_xmalloc0(CHUNK);
	for (;;) {
		long long now = lc_now_ms();
		if (exec_over && ((fds[0] < 0 && fds[1] < 0) || now >= drain_until))
			break;
		pthread_mutex_lock(&t->lock);
		bool stop = t->stopping;
		pthread_mutex_unlock(&t->lock);
		if ((stop || (p->deadline && now >= p->deadline)) && !killed) {
			killed = true;
			mark_killed(p);
			kill_it(p);
		}
		int timeout = exec_over ? (int)(drain_until - now) : 1000;
		if (!killed && p->deadline && p->deadline - now < timeout)
			timeout = (int)(p->deadline - now);
		struct pollfd pf[3] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 },
					{ exec_over ? -1 : p->done[0], POLLIN, 0 } };
		int n = poll(pf, 3, timeout < 0 ? 0 : timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (pf[2].revents) {
			pthread_join(p->exec_th, NULL);
			exec_over = true;
			drain_until = lc_now_ms() + DRAIN_MS;
		}
		for (int k = 0; k < 2; k++) {
			if (fds[k] < 0 || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = read(fds[k], buf, CHUNK);
			if (r > 0)
				emit_output(p, kinds[k], buf, (size_t)r);
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				fds[k] = -1; /* EOF, or EIO from a pty nobody holds */
		}
	}
	free(buf);
	if (!exec_over) {
		kill_it(p);
		pthread_join(p->exec_th, NULL);
	}
	/* the end, as envd reports it: an exit status, or -1 and the signal */
	lcd_proc_ev_t end = { .kind = LCD_PROC_END };
	if (p->rc < 0) {
		end.exit_code = -1;
		end.error = p->err && p->err->msg ? p->err->msg : "the command could not be run";
	} else if (p->res.signal) {
		end.exit_code = -1;
		end.signal = p->res.signal;
	} else {
		end.exit_code = p->res.exit_code;
	}
	pthread_mutex_lock(&t->lock);
	p->ended = true;
	broadcast(p, &end);
	for (proc_t **pp = &t->list; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	p->listed = false;
	pthread_cond_broadcast(&t->gone);
	unref_locked(p);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ---- starting ---- */

static int open_pty(int *master, int *slave, unsigned cols, unsigned rows, lc_error_t **err)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		int e = errno;
		if (m >= 0)
			close(m);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot open a terminal for the command");
	}
	char name[128];
	if (ptsname_r(m, name, sizeof(name)) != 0) {
		int e = errno;
		close(m);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot open a terminal for the command");
	}
	int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		int e = errno;
		close(m);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot open %s", name);
	}
	/* raw from the start: the terminal is the sandbox's pty, this one only
	 * carries its bytes (a cooked one would echo what comes early) */
	struct termios tio;
	if (tcgetattr(s, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(s, TCSANOW, &tio);
	}
	struct winsize ws = { .ws_row = (unsigned short)(rows ? rows : 24), .ws_col = (unsigned short)(cols ? cols : 80) };
	ioctl(m, TIOCSWINSZ, &ws);
	fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
	*master = m;
	*slave = s;
	return 0;
}

static int make_pipes(proc_t *p, const lcd_proc_cfg_t *cfg, lc_error_t **err)
{
	int pr[2][2] = { { -1, -1 }, { -1, -1 } };
	if (pipe2(p->cancel, O_CLOEXEC) < 0 || pipe2(p->sigs, O_CLOEXEC) < 0 || pipe2(p->done, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create pipes");
	/* a kill or a signal never blocks its caller (it may hold the table's lock) */
	fcntl(p->cancel[1], F_SETFL, O_NONBLOCK);
	fcntl(p->sigs[1], F_SETFL, O_NONBLOCK);
	if (cfg->pty) {
		int slave = -1;
		if (open_pty(&p->master, &slave, cfg->cols, cfg->rows, err) < 0)
			return -1;
		p->child[0] = slave;
		p->opts.stdio[0] = p->opts.stdio[1] = p->opts.stdio[2] = slave;
		p->opts.tty = true;
		return 0;
	}
	if (pipe2(pr[0], O_CLOEXEC) < 0 || pipe2(pr[1], O_CLOEXEC) < 0) {
		int e = errno;
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < 2; k++)
				if (pr[i][k] >= 0)
					close(pr[i][k]);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot create pipes");
	}
	p->out_r = pr[0][0];
	p->child[1] = pr[0][1];
	p->err_r = pr[1][0];
	p->child[2] = pr[1][1];
	if (cfg->stdin_open) {
		int in[2];
		if (pipe2(in, O_CLOEXEC) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create pipes");
		p->child[0] = in[0];
		p->in_w = in[1];
		fcntl(p->in_w, F_SETFL, O_NONBLOCK); /* a command that reads nothing cannot hold a writer for ever */
		p->opts.interactive = true;
	}
	p->opts.stdio[0] = p->child[0];
	p->opts.stdio[1] = p->child[1];
	p->opts.stdio[2] = p->child[2];
	p->opts.new_pgroup = true; /* a kill or the timeout takes its children too */
	return 0;
}

int lcd_proc_start(lcd_t *lcd, const char *sandbox, const lcd_proc_cfg_t *cfg, lcd_proc_sub_t **sub,
		   lc_error_t **err)
{
	struct lcd_procs *t = lcd->procs;
	*sub = NULL;
	if (!cfg->argv || !cfg->argv[0])
		return lc_error_set(err, LC_EXIT_INVALID, 0, "no command given");
	proc_t *p = lc_xmalloc0(sizeof(*p));
	p->lcd = lcd;
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
	p->in_w = p->out_r = p->err_r = p->master = -1;
	for (int i = 0; i < 3; i++)
		p->child[i] = -1;
	p->cancel[0] = p->cancel[1] = p->sigs[0] = p->sigs[1] = p->done[0] = p->done[1] = -1;
	pthread_mutex_init(&p->input, NULL);
	p->pty = cfg->pty;
	p->tag = cfg->tag ? strdup(cfg->tag) : NULL;
	p->config = json_incref(cfg->config);
	for (size_t i = 0; cfg->argv[i]; i++)
		lc_strv_push(&p->argv, cfg->argv[i]);
	for (size_t i = 0; cfg->env && cfg->env[i]; i++)
		lc_strv_push(&p->env, cfg->env[i]);
	p->workdir = cfg->workdir ? strdup(cfg->workdir) : NULL;
	p->opts.argv = p->argv;
	p->opts.env = p->env;
	p->opts.workdir = p->workdir;
	p->opts.user_set = cfg->user_set;
	p->opts.uid = cfg->uid;
	p->opts.gid = cfg->gid;
	p->refs = 1; /* the pump's */
	if (make_pipes(p, cfg, err) < 0) {
		proc_free(p);
		return -1;
	}
	p->opts.cancel_fd = p->cancel[0];
	p->opts.signal_fd = p->sigs[0];
	if (cfg->timeout_ms > 0)
		p->deadline = lc_now_ms() + cfg->timeout_ms;

	pthread_mutex_lock(&t->lock);
	size_t have = 0;
	for (proc_t *q = t->list; q; q = q->next)
		have += !strcmp(q->sandbox, sandbox);
	bool tag_taken = false;
	for (proc_t *q = t->list; q && cfg->tag; q = q->next)
		tag_taken |= !strcmp(q->sandbox, sandbox) && q->tag && !strcmp(q->tag, cfg->tag);
	if (t->stopping || have >= PROCS_MAX || tag_taken) {
		bool stopping = t->stopping;
		pthread_mutex_unlock(&t->lock);
		proc_free(p);
		if (stopping)
			return lc_error_set(err, LC_EXIT_STATE, 0, "lcd is stopping: no new command in sandbox %s", sandbox);
		if (tag_taken)
			return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox %s runs a command tagged '%s' already", sandbox,
					    cfg->tag);
		return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox %s runs %d commands already (at most %d)", sandbox,
				    (int)have, PROCS_MAX);
	}
	p->pid = t->next_pid++;
	lcd_proc_sub_t *s = sub_new(p);
	if (!s) {
		pthread_mutex_unlock(&t->lock);
		proc_free(p);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a pipe");
	}
	int r = pthread_create(&p->exec_th, NULL, exec_thread, p);
	pthread_t pump;
	if (r == 0 && (r = pthread_create(&pump, NULL, pump_thread, p)) != 0) {
		kill_it(p);
		pthread_join(p->exec_th, NULL);
	}
	if (r != 0) {
		p->subs = NULL;
		pthread_mutex_unlock(&t->lock);
		close(s->wake[0]);
		close(s->wake[1]);
		lcd_proc_ev_free(s->head);
		free(s);
		proc_free(p);
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "cannot start a thread");
	}
	pthread_detach(pump);
	p->next = t->list;
	t->list = p;
	p->listed = true;
	pthread_mutex_unlock(&t->lock);
	*sub = s;
	return 0;
}

/* ---- the other calls ---- */

/* The listed command sel names in sandbox, referenced (the lock held). */
static proc_t *find_locked(struct lcd_procs *t, const char *sandbox, const lcd_proc_sel_t *sel)
{
	for (proc_t *p = t->list; p; p = p->next)
		if (!strcmp(p->sandbox, sandbox) && !p->ended && !p->killed &&
		    (sel->tag ? p->tag && !strcmp(p->tag, sel->tag) : p->pid == sel->pid))
			return p;
	return NULL;
}

static int not_found(const lcd_proc_sel_t *sel, lc_error_t **err)
{
	if (sel->tag)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "process with tag %s not found", sel->tag);
	return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "process with pid %u not found", sel->pid);
}

static proc_t *find(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, lc_error_t **err)
{
	struct lcd_procs *t = lcd->procs;
	pthread_mutex_lock(&t->lock);
	proc_t *p = find_locked(t, sandbox, sel);
	if (p)
		p->refs++;
	pthread_mutex_unlock(&t->lock);
	if (!p)
		not_found(sel, err);
	return p;
}

static void release(proc_t *p)
{
	struct lcd_procs *t = p->lcd->procs;
	pthread_mutex_lock(&t->lock);
	unref_locked(p);
	pthread_mutex_unlock(&t->lock);
}

lcd_proc_sub_t *lcd_proc_connect(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, lc_error_t **err)
{
	struct lcd_procs *t = lcd->procs;
	pthread_mutex_lock(&t->lock);
	proc_t *p = find_locked(t, sandbox, sel);
	lcd_proc_sub_t *s = p ? sub_new(p) : NULL;
	pthread_mutex_unlock(&t->lock);
	if (!p)
		not_found(sel, err);
	else if (!s)
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a pipe");
	return s;
}

json_t *lcd_proc_list(lcd_t *lcd, const char *sandbox)
{
	struct lcd_procs *t = lcd->procs;
	json_t *out = json_array();
	pthread_mutex_lock(&t->lock);
	for (proc_t *p = t->list; p; p = p->next) {
		if (strcmp(p->sandbox, sandbox) || p->ended || p->killed)
			continue;
		json_t *e = json_pack("{s:I, s:b, s:O}", "pid", (json_int_t)p->pid, "pty", p->pty, "config", p->config);
		if (p->tag)
			json_object_set_new(e, "tag", json_string(p->tag));
		json_array_insert_new(out, 0, e); /* oldest first */
	}
	pthread_mutex_unlock(&t->lock);
	return out;
}

int lcd_proc_input(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, const void *data, size_t len, bool pty,
		   lc_error_t **err)
{
	proc_t *p = find(lcd, sandbox, sel, err);
	if (!p)
		return -1;
	int rc = 0;
	pthread_mutex_lock(&p->input);
	if (pty != p->pty)
		rc = lc_error_set(err, LC_EXIT_INVALID, 0,
				  p->pty ? "process %u has a terminal: its input goes to the pty, not stdin"
					 : "process %u has no terminal: its input goes to stdin", p->pid);
	else if (!pty && p->in_w < 0)
		rc = lc_error_set(err, LC_EXIT_STATE, 0, "stdin of process %u is not open (start it with stdin, and do not close it)",
				  p->pid);
	else {
		int fd = pty ? p->master : p->in_w;
		const char *b = data;
		size_t off = 0;
		long long give_up = lc_now_ms() + INPUT_WAIT_MS;
		while (off < len) {
			ssize_t w = write(fd, b + off, len - off);
			if (w > 0) {
				off += (size_t)w;
			} else if (w < 0 && errno == EAGAIN) {
				struct pollfd pf = { fd, POLLOUT, 0 };
				pthread_mutex_lock(&lcd->lock);
				bool stopping = lcd->stopping;
				pthread_mutex_unlock(&lcd->lock);
				if (stopping) {
					rc = lc_error_set(err, LC_EXIT_STATE, 0, "lcd is stopping");
					break;
				}
				if (lc_now_ms() >= give_up) {
					rc = lc_error_set(err, LC_EXIT_BUSY, 0, "process %u has read none of its input for %d s",
							  p->pid, INPUT_WAIT_MS / 1000);
					break;
				}
				poll(&pf, 1, 500);
			} else if (w < 0 && errno != EINTR) {
				rc = lc_error_set(err, LC_EXIT_STATE, errno, "cannot write to process %u", p->pid);
				break;
			}
		}
	}
	pthread_mutex_unlock(&p->input);
	release(p);
	return rc;
}

int lcd_proc_close_stdin(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, lc_error_t **err)
{
	proc_t *p = find(lcd, sandbox, sel, err);
	if (!p)
		return -1;
	int rc = 0;
	pthread_mutex_lock(&p->input);
	if (p->pty)
		rc = lc_error_set(err, LC_EXIT_INVALID, 0, "process %u has a terminal: send ^D (0x04) to end its input", p->pid);
	else
		close_fd(&p->in_w);
	pthread_mutex_unlock(&p->input);
	release(p);
	return rc;
}

int lcd_proc_signal(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, int sig, lc_error_t **err)
{
	if (sig <= 0 || sig > 64)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "signal %d: not a signal", sig);
	proc_t *p = find(lcd, sandbox, sel, err);
	if (!p)
		return -1;
	if (sig == SIGKILL) {
		mark_killed(p);
		kill_it(p);
	} else {
		unsigned char b = (unsigned char)sig;
		(void)!write(p->sigs[1], &b, 1);
	}
	release(p);
	return 0;
}

int lcd_proc_resize(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, unsigned cols, unsigned rows,
		    lc_error_t **err)
{
	proc_t *p = find(lcd, sandbox, sel, err);
	if (!p)
		return -1;
	int rc = 0;
	if (!p->pty) {
		rc = lc_error_set(err, LC_EXIT_INVALID, 0, "process %u has no terminal to resize", p->pid);
	} else if (!cols || !rows || cols > 65535 || rows > 65535) {
		rc = lc_error_set(err, LC_EXIT_INVALID, 0, "a terminal of %u x %u: columns and rows from 1 to 65535", cols, rows);
	} else {
		struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
		/* the host side's size, then the word that the sandbox's pty takes it */
		pthread_mutex_lock(&p->input);
		if (ioctl(p->master, TIOCSWINSZ, &ws) < 0)
			rc = lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot resize the terminal of process %u", p->pid);
		pthread_mutex_unlock(&p->input);
		unsigned char b = SIGWINCH;
		if (rc == 0)
			(void)!write(p->sigs[1], &b, 1);
	}
	release(p);
	return rc;
}

void lcd_procs_drop(lcd_t *lcd, const char *sandbox)
{
	struct lcd_procs *t = lcd->procs;
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	for (proc_t *p = t->list; p; p = p->next)
		if (!strcmp(p->sandbox, sandbox))
			kill_it(p);
	pthread_mutex_unlock(&t->lock);
}

void lcd_procs_stop(lcd_t *lcd)
{
	struct lcd_procs *t = lcd->procs;
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	for (proc_t *p = t->list; p; p = p->next)
		kill_it(p);
	struct timespec ts;
	lcd_deadline(&ts, STOP_WAIT_MS);
	while (t->list && pthread_cond_timedwait(&t->gone, &t->lock, &ts) == 0)
		;
	bool left = t->list != NULL;
	pthread_mutex_unlock(&t->lock);
	if (left)
		lcd_log("envd: commands still running %d s after lcd stopped them", STOP_WAIT_MS / 1000);
	/* the table stays: a command still ending uses it */
}
