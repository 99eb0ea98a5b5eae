/* nodes.h — this lcd as a node of the store it shares (nodes.c): its row
 * in nodes, the heartbeat that renews it, and the cluster as
 * `lcctl node ls` shows it.  With SQLite the one lcd is its only node. */
#ifndef LCD_NODES_H
#define LCD_NODES_H

#include "lcd.h"

#define LCD_NODE_BEAT_MS 5000   /* how often a node renews its row */
#define LCD_NODE_DEAD_MS 30000  /* a node silent this long is dead */

typedef struct lcd_node_cfg {
	const char *name;    /* lcd.json node_name; NULL: the host's name */
	const char *address; /* node_address, HOST:PORT; NULL: listen's */
	int slots;           /* node_slots: sandboxes and tasks at once; 0: 16 per core */
} lcd_node_cfg_t;

/* lcd.json "node_name": letters, digits, '-', '_', '.'; at most 63. */
bool lcd_node_name_valid(const char *name);
/* Register: make this node's row, or take it over from this node's own
 * earlier run (same host and state directory).  A live node of that name
 * elsewhere: LC_EXIT_BUSY.  The store then names this node in the rows
 * of what it runs and holds (lcd_db_node). */
int lcd_node_start(lcd_t *lcd, const lcd_node_cfg_t *cfg, lc_error_t **err);
/* The heartbeat: every LCD_NODE_BEAT_MS until lcd stops; each beat also
 * takes the apps as the store has them (a deploy told while this node
 * did not listen), removes what other nodes marked for removal here,
 * queues again a task whose start the store may not have confirmed here
 * (a start whose commit was cut by a lost connection: the task is marked
 * running here but never ran), and, on the leader, ends what nodes silent
 * for LCD_NODE_DEAD_MS held: their running tasks fail with node_lost (or
 * are queued again where the function says retry_on_node_loss, while the
 * sandbox of the old attempt is left for that node to kill when it is
 * back: node_leftovers), their sandboxes are "lost". */
void *lcd_node_thread(void *arg);
/* What the other nodes tell (PostgreSQL): a task queued or ended (the
 * dispatcher looks again), an app deployed or deleted.  Not started on
 * SQLite. */
int lcd_node_listen_start(lcd_t *lcd, lc_error_t **err);
void lcd_node_listen_stop(lcd_t *lcd);
/* Has this node room for one more task?  Always, for one lcd on SQLite
 * without node_slots (its functions' concurrency alone holds it back). */
bool lcd_node_has_room(lcd_t *lcd);
/* Does this node lead: run the scheduler (schedules, map expiry) and
 * judge the other nodes?  One node at a time holds the leader's session
 * lock (on its listening connection: it goes with a node that dies, and
 * another takes it within a second or two); with SQLite, always. */
bool lcd_node_leads(lcd_t *lcd);
/* A clean stop: the row says so (node ls: "stopped"). */
void lcd_node_stop(lcd_t *lcd);
/* [{name, state (up, dead, stopped), address, cores, memory, slots, used,
 * free, images [{name, digest}], version, started, heartbeat}], by name. */
json_t *lcd_nodes_list(lcd_t *lcd, lc_error_t **err);
/* The cluster token this node presents to the others (forward.h) and
 * takes from them as the operator's (lcd.json cluster_token_file, else
 * token_file), or NULL: it cannot reach them. */
void lcd_node_set_token(lcd_t *lcd, const char *token);
const char *lcd_node_token(lcd_t *lcd);
/* The node of the cluster where a new sandbox of image goes (NULL: the
 * host image): an up node with room that has the image, else an up node
 * with room, else the least loaded; this node among equals.  malloc'd;
 * NULL on a store error (then: here). */
char *lcd_node_place(lcd_t *lcd, const char *image);
/* This node's sandbox slots, and how many its running tasks and its
 * sandboxes take now (-1 on a store error). */
int lcd_node_slots(lcd_t *lcd);
long long lcd_node_used(lcd_t *lcd);

#endif
