/* lcd.c — lcd_t, made and ended, and what every part of lcd shares: its
 * log, its clock (the scheduler's "now", deadlines, waits that end when
 * lcd stops) and its threads (the signals they block, detached ones). */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lcd.h"
#include "util.h"

void lcd_init(lcd_t *lcd)
{
	*lcd = (lcd_t){ 0 };
	pthread_mutex_init(&lcd->lock, NULL);
	pthread_cond_init(&lcd->wake, NULL);
	pthread_cond_init(&lcd->changed, NULL);
	pthread_cond_init(&lcd->idle, NULL);
	pthread_cond_init(&lcd->tick, NULL);
	pthread_mutex_init(&lcd->spawn_lock, NULL);
	pthread_cond_init(&lcd->spawn_done, NULL);
	lcd->spawn_tail = &lcd->spawn_queue;
}

void lcd_fini(lcd_t *lcd)
{
	lcd_db_close(lcd->db);
	free(lcd->state_dir);
	free(lcd->tasks_dir);
	free(lcd->logs_dir);
	free(lcd->clock_file);
	free(lcd->python_dir);
	free(lcd->workloads_dir);
	free(lcd->apps_dir);
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void lcd_log(const char *fmt, ...)
{
	char buf[2048];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ lcd: ", &tm);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += (size_t)m < sizeof(buf) - n - 1 ? (size_t)m : sizeof(buf) - n - 2;
	/* One line per call, whatever a message carries (a path a sandbox
	 * sent, a name from a request): every control byte is written as
	 * \xNN, so nothing can end the line, forge another or drive a
	 * terminal. */
	char out[sizeof(buf) * 4 + 1];
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 || c == 0x7f)
			o += (size_t)sprintf(out + o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o++] = '\n';
	pthread_mutex_lock(&log_lock);
	(void)lc_write_all(STDERR_FILENO, out, o);
	pthread_mutex_unlock(&log_lock);
}

long long lcd_now_s(lcd_t *lcd)
{
	if (!lcd->clock_file)
		return (long long)time(NULL);
	char *text = NULL;
	if (lc_read_file(lcd->clock_file, &text, NULL, NULL) < 0)
		return (long long)time(NULL);
	long long v = -1;
	char *end = NULL;
	long long n = strtoll(text, &end, 10);
	if (end != text && (*end == '\0' || *end == '\n'))
		v = n;
	else {
		struct tm tm = { 0 };
		const char *p = strptime(text, "%Y-%m-%dT%H:%M", &tm);
		if (p && *p == ':')
			p = strptime(p, ":%S", &tm);
		if (p)
			v = (long long)timegm(&tm);
	}
	free(text);
	return v >= 0 ? v : (long long)time(NULL);
}

void lcd_deadline(struct timespec *ts, long long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

bool lcd_sleep(lcd_t *lcd, pthread_cond_t *cond, long long ms)
{
	struct timespec ts;
	lcd_deadline(&ts, ms);
	pthread_mutex_lock(&lcd->lock);
	if (!lcd->stopping)
		pthread_cond_timedwait(cond, &lcd->lock, &ts);
	bool stop = lcd->stopping;
	pthread_mutex_unlock(&lcd->lock);
	return stop;
}

void lcd_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

int lcd_thread_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	int e = pthread_create(&th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return e;
}
