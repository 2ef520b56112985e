/* tag_batch: a strategy plugin for nmad, written the way a third party
 * writes one: plain C against the installed header <nmad/strategy_plugin.h>,
 * built with make and pkg-config, loaded by the engine at session start
 * (NMAD_STRATEGY=tag_batch with NMAD_STRATEGY_PATH, or the file's path).
 *
 * What it does: each packet starts with the oldest queued chunk and is
 * then filled with the other queued chunks of the SAME tag (in queue
 * order, so a tag's messages stay in order), then with chunks of other
 * tags while they fit. Messages of one flow leave together, which helps a
 * receiver that consumes one tag at a time.
 *
 * It refuses the small-message path (allow_inline answers 0), so every
 * message goes through build_packet; a strategy that wants the lowest
 * latency answers 1 on an idle track, as the built-in `aggreg` does.
 *
 * With TAG_BATCH_REPORT=1 in the environment it prints, at exit, how many
 * packets and chunks it built: a way to check that it really ran. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <nmad/strategy_plugin.h>

struct tag_batch {
  const nmad_strategy_engine *engine;
};

/* Totals over every instance (one instance per peer). */
static unsigned long g_packets, g_chunks;

/* Adds every queued chunk for which `want` says yes while it fits whole. */
static void add_matching(const nmad_strategy_engine *e, nmad_strategy_queue *q, nmad_strategy_packet *p,
                         int same_tag, uint64_t tag) {
  nmad_strategy_chunk *c = e->queue_first(q);
  while (c) {
    /* Fetch the next one first: an added chunk leaves the queue. */
    nmad_strategy_chunk *next = e->queue_next(q, c);
    nmad_strategy_chunk_info ci;
    e->chunk_info(c, &ci);
    const int match = same_tag ? ci.tag == tag : ci.tag != tag;
    if (match && ci.kind != NMAD_CHUNK_CONTROL) {
      if (e->packet_room(p) == 0) return;
      if (ci.wire_size <= e->packet_room(p) + 64 /* its header */) e->packet_add(p, q, c, UINT64_MAX);
      else if (same_tag)
        return; /* a tag's next message does not fit: keep its order */
    }
    c = next;
  }
}

static int build_packet(void *self, nmad_strategy_queue *q, nmad_strategy_packet *p, const nmad_strategy_track *t) {
  struct tag_batch *s = self;
  const nmad_strategy_engine *e = s->engine;
  (void)t;
  nmad_strategy_chunk *first = e->queue_first(q);
  if (!first) return 0;
  nmad_strategy_chunk_info fi;
  e->chunk_info(first, &fi);
  /* The oldest chunk, whole or the part that fits. */
  if (!e->packet_add(p, q, first, UINT64_MAX)) return 0;
  if (fi.kind != NMAD_CHUNK_CONTROL) {
    add_matching(e, q, p, 1, fi.tag);  /* its tag's followers */
    add_matching(e, q, p, 0, fi.tag);  /* then the others that fit */
  }
  __atomic_add_fetch(&g_packets, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g_chunks, e->packet_chunks(p), __ATOMIC_RELAXED);
  return 1;
}

static int allow_inline(void *self, const nmad_strategy_track *t) {
  (void)self;
  (void)t;
  return 0;
}

static void destroy(void *self) { free(self); }

static void *create(const nmad_strategy_engine *engine, nmad_strategy_ops *ops) {
  struct tag_batch *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->engine = engine;
  ops->build_packet = build_packet;
  ops->allow_inline = allow_inline;
  ops->destroy = destroy;
  /* on_submit, choose_rdv_track, flush: NULL = the engine's defaults. */
  return s;
}

__attribute__((destructor)) static void report(void) {
  const char *v = getenv("TAG_BATCH_REPORT");
  if (v && *v == '1')
    fprintf(stderr, "tag_batch: %lu packets, %lu chunks\n", g_packets, g_chunks);
}

/* The one symbol the engine looks for. */
NMAD_STRATEGY_EXPORT const nmad_strategy_descriptor nmad_strategy_plugin = {
    NMAD_STRATEGY_INTERFACE_VERSION, sizeof(nmad_strategy_descriptor), "tag_batch",
    "example plugin: the oldest chunk and the rest of its tag, then others", create};
