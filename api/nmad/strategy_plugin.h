/* nmad strategy plugins: the C interface between the engine and a packet
 * scheduling strategy built outside the engine (a shared object, or code
 * linked into the program and registered with nmad_strategy_register).
 *
 * How it works. A strategy decides what the next packet of a gate (the
 * connection to one peer) carries. The engine keeps, per gate, a queue of
 * chunks (pieces of messages the application submitted, and protocol
 * control items) and asks the gate's strategy instance to fill a packet
 * whenever one of the gate's tracks (driver connections) can take one. A
 * strategy sees the engine only through opaque handles (queue, chunk,
 * track, packet) and the functions of the engine table it is given at
 * creation; the engine sees the strategy only through the function table
 * the strategy fills. Both tables start with their size and version, so
 * either side can grow without breaking the other.
 *
 * A shared object exports ONE symbol, NMAD_STRATEGY_SYMBOL
 * ("nmad_strategy_plugin"), a descriptor whose first two fields are the
 * interface version it was written for and its size. The engine accepts
 * NMAD_STRATEGY_INTERFACE_VERSION and every older version (through
 * adapters: version 1 plugins keep working unchanged); a newer version
 * or a descriptor of the wrong size stops session start-up with a message
 * naming the file, the symbol and both versions.
 *
 * Selection: NMAD_STRATEGY=name looks for libnmad_strategy_<name>.so in the
 * directories of NMAD_STRATEGY_PATH (colon-separated), then in the
 * installed plugin directory (<prefix>/lib/nmad/strategies);
 * NMAD_STRATEGY=/path/to/lib.so loads that file. One instance is created
 * per gate (so per-peer state is allowed) and destroyed with the session.
 *
 * Threads and blocking, for every hook: called with the gate's lock held
 * (never two hooks of one instance at once), must not block, must not call
 * the engine's public API, and may only use the handles it was given during
 * that call (never keep a chunk, queue, track or packet handle across
 * calls). Chunks belong to the engine: a strategy never frees or copies
 * them; it takes them off the queue only by adding them to a packet.
 *
 * Plain C (C99), usable from C and C++. */
#ifndef NMAD_STRATEGY_PLUGIN_H
#define NMAD_STRATEGY_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NMAD_STRATEGY_INTERFACE_VERSION 2
#define NMAD_STRATEGY_SYMBOL "nmad_strategy_plugin"
/* File name of a plugin found by name: libnmad_strategy_<name>.so */
#define NMAD_STRATEGY_FILE_PREFIX "libnmad_strategy_"

/* Put before the descriptor's definition (C or C++):
 *   NMAD_STRATEGY_EXPORT const nmad_strategy_descriptor nmad_strategy_plugin = {...}; */
#ifdef __cplusplus
#define NMAD_STRATEGY_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define NMAD_STRATEGY_EXPORT __attribute__((visibility("default")))
#endif

/* ---- opaque handles ------------------------------------------------------ */
typedef struct nmad_strategy_queue nmad_strategy_queue;  /* a gate's queued chunks */
typedef struct nmad_strategy_chunk nmad_strategy_chunk;  /* one queued chunk */
typedef struct nmad_strategy_track nmad_strategy_track;  /* one track of the gate */
typedef struct nmad_strategy_packet nmad_strategy_packet;  /* the packet being built */

/* ---- what a strategy can read ---------------------------------------------- */
enum nmad_strategy_chunk_kind {
  NMAD_CHUNK_DATA = 1,     /* eager bytes of a message (may be split) */
  NMAD_CHUNK_RDV_REQ = 2,  /* rendezvous request for a large piece (its bulk
                              data goes later, on the tracks chosen by
                              choose_rdv_track at the receiver), or the
                              cancellation of one: keep it in its tag flow */
  NMAD_CHUNK_CONTROL = 3   /* protocol answer (ready-to-receive, cancel
                              answer): send it soon, the peer waits for it;
                              it may overtake anything */
};
/* Hints of a chunk (bit set). */
#define NMAD_HINT_EXPRESS 1u  /* pack_mode::express: the receiver waits for it */
#define NMAD_HINT_CHEAPER 2u  /* pack_mode::cheaper: may be delayed, reordered */
#define NMAD_HINT_LAST 4u     /* this piece ends its message */

typedef struct nmad_strategy_chunk_info {
  uint32_t kind;        /* enum nmad_strategy_chunk_kind */
  uint32_t hints;       /* NMAD_HINT_* */
  uint64_t tag;
  uint32_t seq;         /* sequence number in its (peer, ordering domain) */
  uint32_t priority;    /* 0 = normal; higher goes first under `prio`-like
                           strategies (send_options::priority) */
  uint64_t offset;      /* of the next byte to send, within the message */
  uint64_t length;      /* bytes still to send (data) or requested (rdv) */
  uint64_t msg_length;  /* whole message, or UINT64_MAX while unknown (pack) */
  uint64_t wire_size;   /* header + payload if added whole to a packet */
  uint32_t age;         /* progress rounds since it was queued */
  uint32_t reserved;
} nmad_strategy_chunk_info;

typedef struct nmad_strategy_track_info {
  uint32_t rail;             /* index of the track in its gate (0 first) */
  uint32_t outstanding;      /* operations posted and not completed */
  uint64_t bytes_in_flight;  /* bytes of those operations */
  int idle;                  /* nothing posted, nothing waiting for it */
  int connected;
  const char *driver;        /* driver name, for logs only */
  double latency_us;         /* driver's small-packet latency estimate */
  double bandwidth_mbps;     /* driver's large-transfer bandwidth (MB/s) */
  uint64_t max_packet;       /* largest packet the track takes */
  uint64_t max_inline;       /* largest inline (small-message path) send */
} nmad_strategy_track_info;

/* A rendezvous range the receiver is about to ask for (choose_rdv_track). */
typedef struct nmad_strategy_rdv_info {
  uint64_t tag;
  uint32_t seq;
  uint32_t reserved;
  uint64_t offset;  /* first byte of the range within the message */
  uint64_t length;  /* bytes of the range */
} nmad_strategy_rdv_info;

/* ---- the engine's table (version 2) -------------------------------------
 * Passed to create(); valid for the instance's whole life. Every function
 * is callable only from inside a hook, on the handles of that call. */
typedef struct nmad_strategy_engine_v2 {
  size_t size;       /* sizeof(nmad_strategy_engine_v2) of the engine */
  uint32_t version;  /* the engine's NMAD_STRATEGY_INTERFACE_VERSION */
  /* Queue walk, oldest first; NULL at the end. */
  nmad_strategy_chunk *(*queue_first)(nmad_strategy_queue *q);
  nmad_strategy_chunk *(*queue_next)(nmad_strategy_queue *q, nmad_strategy_chunk *c);
  /* Fills *out; returns 0. */
  int (*chunk_info)(const nmad_strategy_chunk *c, nmad_strategy_chunk_info *out);
  int (*track_info)(const nmad_strategy_track *t, nmad_strategy_track_info *out);
  /* Payload bytes one more chunk can still carry in the packet (0 when
   * not even a chunk header fits). */
  uint64_t (*packet_room)(const nmad_strategy_packet *p);
  /* Chunks already in the packet. */
  uint32_t (*packet_chunks)(const nmad_strategy_packet *p);
  /* Adds chunk c (a data chunk: at most max_payload bytes of it, the rest
   * stays queued with its offset advanced) to the packet. The chunk
   * leaves the queue once fully added: fetch the next one with queue_next
   * BEFORE adding. Returns 1 if something was added, 0 if the packet is
   * full (nothing changed). */
  int (*packet_add)(nmad_strategy_packet *p, nmad_strategy_queue *q, nmad_strategy_chunk *c,
                    uint64_t max_payload);
  /* A message for the engine's log (level 0 = info, 1 = warning). */
  void (*log)(int level, const char *strategy, const char *message);
} nmad_strategy_engine_v2;

/* ---- the strategy's table (version 2) -----------------------------------
 * Filled by create(). The engine sets size and version to its own before
 * calling create(); the strategy leaves them as they are. A NULL hook means
 * the engine's default. */
typedef struct nmad_strategy_ops_v2 {
  size_t size;
  uint32_t version;
  /* Required. Fill packet p for track t from queue q. Return 1 if it added
   * at least one chunk, 0 to hold (add nothing). Holding is allowed only
   * while t has operations outstanding (its completion asks again) or
   * after nothing was queued; on an idle track a hold is overruled: the
   * engine sends the oldest chunk itself. */
  int (*build_packet)(void *self, nmad_strategy_queue *q, nmad_strategy_packet *p,
                      const nmad_strategy_track *t);
  /* A chunk c was just queued (a message, or a piece of a packed one, was
   * submitted). Lets a strategy keep an aggregate open, or note hints. */
  void (*on_submit)(void *self, nmad_strategy_queue *q, nmad_strategy_chunk *c);
  /* The receiver side of a rendezvous: which of the ntracks tracks carries
   * the next part of range r. May shorten *length (the rest is asked for
   * by the next call). Returns a rail index < ntracks; an unconnected or
   * out-of-range answer is replaced by the first connected track. */
  uint32_t (*choose_rdv_track)(void *self, const nmad_strategy_rdv_info *r,
                               const nmad_strategy_track *const *tracks, uint32_t ntracks,
                               uint64_t *length);
  /* May a small message skip the queue and go straight to track t (the
   * small-message path, only taken while nothing is queued)? 1 = yes. */
  int (*allow_inline)(void *self, const nmad_strategy_track *t);
  /* Flush: send what is held now (the end of a packed message, or the
   * application asked). The next build_packet calls must not hold. */
  void (*flush)(void *self);
  /* Frees the instance. */
  void (*destroy)(void *self);
} nmad_strategy_ops_v2;

/* Creates one instance (one per gate): fills *ops and returns the instance
 * pointer passed to every hook (may be any non-NULL value), or NULL on
 * failure (session start-up then fails). */
typedef struct nmad_strategy_descriptor_v2 {
  uint32_t interface_version;  /* NMAD_STRATEGY_INTERFACE_VERSION (2) */
  uint32_t size;               /* sizeof(nmad_strategy_descriptor_v2) */
  const char *name;            /* what NMAD_STRATEGY selects */
  const char *description;     /* one line, for nmad-info */
  void *(*create)(const nmad_strategy_engine_v2 *engine, nmad_strategy_ops_v2 *ops);
} nmad_strategy_descriptor_v2;

/* ---- version 1 (retired, still accepted) ----------------------------------
 * Version 1 had only build_packet and destroy, and an engine table without
 * track_info, packet_chunks and log. The engine adapts it. */
typedef struct nmad_strategy_engine_v1 {
  size_t size;
  uint32_t version;
  nmad_strategy_chunk *(*queue_first)(nmad_strategy_queue *q);
  nmad_strategy_chunk *(*queue_next)(nmad_strategy_queue *q, nmad_strategy_chunk *c);
  int (*chunk_info)(const nmad_strategy_chunk *c, nmad_strategy_chunk_info *out);
  uint64_t (*packet_room)(const nmad_strategy_packet *p);
  int (*packet_add)(nmad_strategy_packet *p, nmad_strategy_queue *q, nmad_strategy_chunk *c,
                    uint64_t max_payload);
} nmad_strategy_engine_v1;

typedef struct nmad_strategy_ops_v1 {
  size_t size;
  uint32_t version;
  int (*build_packet)(void *self, nmad_strategy_queue *q, nmad_strategy_packet *p);
  void (*destroy)(void *self);
} nmad_strategy_ops_v1;

typedef struct nmad_strategy_descriptor_v1 {
  uint32_t interface_version;  /* 1 */
  uint32_t size;               /* sizeof(nmad_strategy_descriptor_v1) */
  const char *name;
  const char *description;
  void *(*create)(const nmad_strategy_engine_v1 *engine, nmad_strategy_ops_v1 *ops);
} nmad_strategy_descriptor_v1;

/* The current version's names. */
typedef nmad_strategy_engine_v2 nmad_strategy_engine;
typedef nmad_strategy_ops_v2 nmad_strategy_ops;
typedef nmad_strategy_descriptor_v2 nmad_strategy_descriptor;

/* In-process registration (strategies linked into the program). Takes a
 * descriptor of any accepted version (its first fields say which); the
 * descriptor must outlive every session. Call before creating a session
 * that selects it. Returns 0, or -1 with a message for
 * nmad_strategy_last_error() (wrong version or size, no name or create,
 * a name already taken). Implemented by libnmad. */
int nmad_strategy_register(const void *descriptor);
const char *nmad_strategy_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* NMAD_STRATEGY_PLUGIN_H */
