/* pool.c — the warm pool: sandboxes made ahead of time, one set per image
 * named in lcd.json's "sandbox_pool", handed to creates that ask for
 * nothing a made sandbox cannot still be given (lcd_sandbox_make).
 *
 * A member is an ordinary sandbox of liblcrun (lc_sandbox_create: its own
 * namespaces, overlay upper, cgroup, default limits, net none, no mounts,
 * no name) in which nothing has run but its pid 1.  It has no row in
 * lcd.db: it is nobody's, listed to nobody, counted against no quota.  A
 * claim takes it out of the pool for good (a deleted sandbox is removed as
 * any other, never returned), and the filler thread makes a replacement.
 *
 * Each member has a file STATE/pool/ID, written before the sandbox is made
 * and removed once it is claimed or removed: after a crash, the next start
 * removes every sandbox those files name (and lcd's stop removes the
 * members it holds), so the pool never outlives lcd. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "json.h"
#include "lcd.h"
#include "pool.h"
#include "runner.h"
#include "sandboxes.h"
#include "state.h"
#include "util.h"

#define POOL_SIZE_MAX 64
#define POOL_RETRY_MS 30000

typedef struct member {
	char id[LC_ID_LEN + 1];
	char *digest; /* the image's manifest digest when it was made; NULL: host */
	struct member *next;
} member_t;

typedef struct shape {
	char *image;
	int size;
	long long disk; /* the members' upper layer's disk (limits.disk); 0: none */
	member_t *ready;
	int n_ready;
	bool failing; /* the last make failed: logged once, retried later */
	char *current; /* a create missed: the image's digest now (NULL: none seen) */
	bool outdated; /* ... and no member had it: the filler drops the others */
} shape_t;

struct lcd_pool {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	shape_t *shapes;
	size_t n_shapes;
	char *dir;
	bool kicked, stopping;
	pthread_t filler;
	bool started;
};

static void kick_locked(struct lcd_pool *p)
{
	p->kicked = true;
	pthread_cond_signal(&p->wake);
}

static void kick(struct lcd_pool *p)
{
	pthread_mutex_lock(&p->lock);
	kick_locked(p);
	pthread_mutex_unlock(&p->lock);
}

int lcd_pool_config(json_t *v, const char *path, json_t **out, lc_error_t **err)
{
	static const char *const keys[] = { "image", "size", "disk", NULL };
	if (!json_is_array(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "config %s: sandbox_pool: expected an array of {\"image\": NAME, \"size\": N}", path);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		if (!json_is_object(e))
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "config %s: sandbox_pool[%zu]: expected {\"image\": NAME, \"size\": N}", path, i);
		_cleanup_free_ char *p = lc_strdup_printf("config %s: sandbox_pool[%zu]", path, i);
		if (lcd_check_keys(e, p, keys, err) < 0)
			return -1;
		const char *image = lc_json_str(e, "image");
		json_t *size = json_object_get(e, "size");
		if (!image || (strcmp(image, LC_IMAGE_HOST) && !lc_image_name_valid(image)))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.image: expected \"host\" or an image name", p);
		if (!json_is_integer(size) || json_integer_value(size) < 1 || json_integer_value(size) > POOL_SIZE_MAX)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.size: expected an integer, 1 to %d", p, POOL_SIZE_MAX);
		json_t *disk = json_object_get(e, "disk");
		long long d = 0;
		if (disk && lcd_config_size(disk, &d) < 0)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.disk: expected a size of at least 16M (like \"8G\")", p);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(image, lc_json_str(json_array_get(v, k), "image")))
				return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.image: %s is pooled already (sandbox_pool[%zu])",
						    p, image, k);
	}
	json_decref(*out);
	*out = json_incref(v);
	return 0;
}

static char *member_file(struct lcd_pool *p, const char *id)
{
	return lc_strdup_printf("%s/%s", p->dir, id);
}

static void member_remove(struct lcd_pool *p, const char *id)
{
	lc_error_t *e = NULL;
	if (lc_sandbox_remove(id, true, &e) < 0 && e && e->exit_code != LC_EXIT_UNKNOWN)
		lcd_log("sandbox pool: cannot remove %s: %s", id, e->msg);
	lc_error_free(e);
	_cleanup_free_ char *f = member_file(p, id);
	unlink(f);
}

/* Sandboxes named by files left in the pool's directory: an earlier lcd's
 * members (it was killed) or half-made ones.  Nobody has them: remove. */
static void remove_leftovers(struct lcd_pool *p)
{
	_cleanup_dir_ DIR *d = opendir(p->dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (lc_id_valid(de->d_name)) {
			member_remove(p, de->d_name);
			n++;
		} else {
			unlinkat(dirfd(d), de->d_name, 0);
		}
	}
	if (n)
		lcd_log("sandbox pool: removed %d sandbox(es) an earlier lcd left in its pool", n);
}

static void free_members(member_t *m)
{
	while (m) {
		member_t *next = m->next;
		free(m->digest);
		free(m);
		m = next;
	}
}

static bool same_digest(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Make one member of s; 0 made, -1 failed (err set). */
static int make_one(lcd_t *lcd, shape_t *s, lc_error_t **err)
{
	struct lcd_pool *p = lcd->pool;
	_cleanup_free_ char *digest = NULL;
	lc_spec_t *spec = lcd_sandbox_pool_spec(lcd, s->image, &digest, err);
	if (!spec)
		return -1;
	member_t *m = lc_xmalloc0(sizeof(*m));
	lc_random_hex(m->id, LC_ID_LEN);
	spec->id = strdup(m->id);
	spec->limits.disk = s->disk;
	_cleanup_free_ char *f = member_file(p, m->id);
	char got[LC_ID_LEN + 1];
	int r = lc_write_file_atomic(f, s->image, strlen(s->image), 0600, err);
	if (r == 0 && (r = lcd_runner_create(lcd, spec, got, err)) < 0)
		unlink(f);
	lc_spec_free(spec);
	if (r < 0) {
		free(m);
		return -1;
	}
	m->digest = digest ? strdup(digest) : NULL;
	pthread_mutex_lock(&p->lock);
	/* Members of an older version of the image are not handed out. */
	member_t **pp = &s->ready;
	while (*pp) {
		member_t *x = *pp;
		if (same_digest(x->digest, m->digest)) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		s->n_ready--;
		pthread_mutex_unlock(&p->lock);
		member_remove(p, x->id);
		x->next = NULL;
		free_members(x);
		pthread_mutex_lock(&p->lock);
		pp = &s->ready;
	}
	m->next = s->ready;
	s->ready = m;
	s->n_ready++;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* Take the members out of s whose sandbox is not running (lcrun rm, a
 * reboot of the host), or, after a create missed for a newer version of
 * the image, those of another digest; remove them.  The inspects and
 * removals run outside the lock: creates keep taking members meanwhile. */
static void prune(struct lcd_pool *p, shape_t *s, bool check_running)
{
	pthread_mutex_lock(&p->lock);
	bool outdated = s->outdated;
	_cleanup_free_ char *current = s->outdated && s->current ? strdup(s->current) : NULL;
	s->outdated = false;
	size_t n = 0;
	for (member_t *x = s->ready; x; x = x->next)
		n++;
	char (*ids)[LC_ID_LEN + 1] = lc_xmalloc0((n + 1) * sizeof(*ids));
	bool *drop = lc_xmalloc0((n + 1) * sizeof(*drop));
	n = 0;
	for (member_t *x = s->ready; x; x = x->next, n++) {
		memcpy(ids[n], x->id, LC_ID_LEN + 1);
		drop[n] = outdated && !same_digest(x->digest, current);
		if (drop[n])
			lcd_log("sandbox pool: member %s of %s is of an older version of the image; replacing it", x->id,
				s->image);
	}
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; check_running && i < n; i++) {
		if (drop[i])
			continue;
		lc_error_t *e = NULL;
		_cleanup_json_ json_t *st = lc_sandbox_inspect(ids[i], &e);
		drop[i] = !st || strcmp(lc_json_str(st, "status") ?: "", "running");
		lc_error_free(e);
		if (drop[i])
			lcd_log("sandbox pool: member %s of %s is gone; replacing it", ids[i], s->image);
	}
	member_t *out = NULL;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		if (!drop[i])
			continue;
		/* still there (not taken by a create meanwhile): out */
		for (member_t **pp = &s->ready; *pp; pp = &(*pp)->next) {
			member_t *x = *pp;
			if (strcmp(x->id, ids[i]))
				continue;
			*pp = x->next;
			s->n_ready--;
			x->next = out;
			out = x;
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	for (member_t *x = out; x; x = x->next)
		member_remove(p, x->id);
	free_members(out);
	free(ids);
	free(drop);
}

static void *filler(void *arg)
{
	lcd_t *lcd = arg;
	struct lcd_pool *p = lcd->pool;
	long long waited_ms = POOL_RETRY_MS;
	for (;;) {
		bool retry = false;
		for (size_t i = 0; i < p->n_shapes; i++) {
			shape_t *s = &p->shapes[i];
			pthread_mutex_lock(&p->lock);
			bool outdated = s->outdated;
			pthread_mutex_unlock(&p->lock);
			if (waited_ms >= POOL_RETRY_MS || outdated)
				prune(p, s, waited_ms >= POOL_RETRY_MS);
			for (;;) {
				pthread_mutex_lock(&p->lock);
				bool more = !p->stopping && s->n_ready < s->size && !(s->failing && retry);
				pthread_mutex_unlock(&p->lock);
				if (!more)
					break;
				lc_error_t *e = NULL;
				if (make_one(lcd, s, &e) < 0) {
					if (!s->failing)
						lcd_log("sandbox pool: cannot make a sandbox of %s (retried every %d s): %s",
							s->image, POOL_RETRY_MS / 1000, e ? e->msg : "?");
					lc_error_free(e);
					s->failing = true;
					retry = true;
					break;
				}
				if (s->failing)
					lcd_log("sandbox pool: %s works again", s->image);
				s->failing = false;
			}
		}
		pthread_mutex_lock(&p->lock);
		long long t0 = lc_now_ms();
		if (!p->kicked && !p->stopping) {
			struct timespec ts;
			lcd_deadline(&ts, POOL_RETRY_MS);
			pthread_cond_timedwait(&p->wake, &p->lock, &ts);
		}
		waited_ms = lc_now_ms() - t0;
		p->kicked = false;
		bool stop = p->stopping;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			return NULL;
	}
}

int lcd_pool_start(lcd_t *lcd, json_t *cfg, lc_error_t **err)
{
	struct lcd_pool *p = lc_xmalloc0(sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	p->dir = lc_strdup_printf("%s/pool", lcd->state_dir);
	lcd->pool = p;
	if (lc_mkdir_p(p->dir, 0700, err) < 0)
		return -1;
	remove_leftovers(p);
	size_t n = json_array_size(cfg);
	if (n == 0)
		return 0;
	p->shapes = lc_xmalloc0(n * sizeof(*p->shapes));
	p->n_shapes = n;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(cfg, i);
		p->shapes[i].image = strdup(lc_json_str(e, "image"));
		p->shapes[i].size = (int)json_integer_value(json_object_get(e, "size"));
		json_t *disk = json_object_get(e, "disk");
		if (disk)
			(void)lcd_config_size(disk, &p->shapes[i].disk);
	}
	int rc = pthread_create(&p->filler, NULL, filler, lcd);
	if (rc != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, rc, "cannot start the sandbox pool's thread");
	p->started = true;
	lcd_log("sandbox pool: %zu image(s), filling", n);
	return 0;
}

void lcd_pool_stop(lcd_t *lcd)
{
	struct lcd_pool *p = lcd->pool;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	kick_locked(p);
	pthread_mutex_unlock(&p->lock);
	if (p->started)
		pthread_join(p->filler, NULL);
	int n = 0;
	for (size_t i = 0; i < p->n_shapes; i++) {
		for (member_t *m = p->shapes[i].ready; m; m = m->next, n++)
			member_remove(p, m->id);
		free_members(p->shapes[i].ready);
		free(p->shapes[i].image);
		free(p->shapes[i].current);
	}
	if (n)
		lcd_log("sandbox pool: removed its %d sandbox(es)", n);
	free(p->shapes);
	free(p->dir);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
	lcd->pool = NULL;
}

bool lcd_pool_take(lcd_t *lcd, const char *image, const char *digest, long long disk, char id[LC_ID_LEN + 1])
{
	struct lcd_pool *p = lcd->pool;
	if (!p || !p->n_shapes)
		return false;
	bool got = false;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_shapes && !got; i++) {
		shape_t *s = &p->shapes[i];
		if (strcmp(s->image, image) || s->disk != disk)
			continue;
		for (member_t **pp = &s->ready; *pp; pp = &(*pp)->next) {
			member_t *m = *pp;
			if (!same_digest(m->digest, digest))
				continue;
			memcpy(id, m->id, LC_ID_LEN + 1);
			*pp = m->next;
			s->n_ready--;
			m->next = NULL;
			free_members(m);
			got = true;
			break;
		}
		if (!got && s->ready) {
			/* Members, but none of the image as it is now: the
			 * filler replaces them. */
			free(s->current);
			s->current = digest ? strdup(digest) : NULL;
			s->outdated = true;
		}
	}
	if (!got) /* a miss: the filler looks (a member taken: once it is claimed) */
		kick_locked(p);
	pthread_mutex_unlock(&p->lock);
	return got;
}

void lcd_pool_put_back(lcd_t *lcd, const char *image, const char *digest, const char *id)
{
	struct lcd_pool *p = lcd->pool;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_shapes; i++) {
		shape_t *s = &p->shapes[i];
		if (strcmp(s->image, image))
			continue;
		member_t *m = lc_xmalloc0(sizeof(*m));
		memcpy(m->id, id, LC_ID_LEN + 1);
		m->digest = digest ? strdup(digest) : NULL;
		m->next = s->ready;
		s->ready = m;
		s->n_ready++;
		break;
	}
	pthread_mutex_unlock(&p->lock);
}

void lcd_pool_claimed(lcd_t *lcd, const char *id)
{
	_cleanup_free_ char *f = member_file(lcd->pool, id);
	unlink(f);
	kick(lcd->pool);
}

void lcd_pool_discard(lcd_t *lcd, const char *id)
{
	member_remove(lcd->pool, id);
	kick(lcd->pool);
}
