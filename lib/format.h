/* SPDX-License-Identifier: BSD-3-Clause */
/* format.h: the bytes of a bitmap file (nbdkit-dirtybitmap-filter(1),
 * FILE FORMAT): the limits, the header slots and the directory encoded
 * and decoded, and every rule their fields must keep.  Nothing here
 * does I/O: the file layer (bmfile.c) reads the bytes and hands them
 * over, so this is also what the fuzzer exercises.
 */

#ifndef DIRTYBITMAP_FORMAT_H
#define DIRTYBITMAP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define BMF_VERSION         1
#define BMF_HEADER_SLOT     4096        /* two slots, at 0 and 4096 */
#define BMF_HEADER_LENGTH   256         /* bytes of a slot in use */
#define BMF_ALIGN           4096        /* regions start and end here */
#define BMF_FIRST_REGION    (2 * BMF_HEADER_SLOT)
#define BMF_ENTRY_FIXED     32          /* directory entry before name */
#define BMF_MAX_NAME        1023        /* bytes of a bitmap name */
#define BMF_MAX_BITMAPS     65535
#define BMF_MIN_GBITS       9
#define BMF_MAX_GBITS       31
#define BMF_DEFAULT_GBITS   16
#define BMF_MIN_GRANULARITY (UINT64_C (1) << BMF_MIN_GBITS)     /* 512 */
#define BMF_MAX_GRANULARITY (UINT64_C (1) << BMF_MAX_GBITS)     /* 2G */
#define BMF_BOOT_ID_LEN     40
#define BMF_MAX_DISK_SIZE   INT64_MAX
/* Sequence numbers go up by one per commit and are compared as
 * numbers; one past this they would wrap, so a header beyond it is
 * refused (2^63 commits never happen: only a crafted file has it).
 */
#define BMF_MAX_SEQ         INT64_MAX

/* Directory entry flags.  BMF_SETTLING: the bitmap stopped recording
 * while the disk was served, and its last bits may not be on stable
 * storage yet (txn-sync.c): after a power loss it counts as recording
 * did.  A reader that predates it refuses the file, as for any flag
 * it does not know.
 */
#define BMF_ENABLED         1
#define BMF_INCONSISTENT    2
#define BMF_SETTLING        4
#define BMF_ENTRY_FLAGS     (BMF_ENABLED | BMF_INCONSISTENT | BMF_SETTLING)

/* Header flags: a reader refuses bits it does not know. */
#define BMF_HDR_SIZED       1           /* disk_size is known */
#define BMF_HDR_OPEN        2           /* a server has it open */
#define BMF_HDR_FLAGS       (BMF_HDR_SIZED | BMF_HDR_OPEN)

/* Compatible features: a reader that does not know a bit ignores it
 * (and its fields), and drops it at its next commit.
 */
#define BMF_COMPAT_DISK_ID  1           /* the disk's identity at a clean stop */
#define BMF_COMPAT_SHADOWS  2           /* coarse shadows (shadow.h) */
#define BMF_COMPAT_SEEN     4           /* the disk's writes known until */
#define BMF_COMPAT_RESTORED 8           /* a restore is complete */
#define BMF_COMPAT_FEATURES \
  (BMF_COMPAT_DISK_ID | BMF_COMPAT_SHADOWS | BMF_COMPAT_SEEN | \
   BMF_COMPAT_RESTORED)

/* Incompatible features: a reader that does not know a bit refuses
 * the file.
 */
#define BMF_INCOMPAT_RESTORING 1        /* a restore runs */
#define BMF_INCOMPAT_FEATURES BMF_INCOMPAT_RESTORING

/* The restore record (restore-record.h): its source, a URI of at most
 * this many bytes, in the first page of its region.
 */
#define BMF_MAX_SOURCE      4095
#define BMF_SOURCE_PAGE     4096

/* The liveness record (identity.h): a server that writes the disk
 * says, at this offset of the file and without a commit, until when it
 * is surely alive.
 */
#define BMF_ALIVE_OFFSET    BMF_HEADER_LENGTH
#define BMF_ALIVE_LENGTH    32

enum bmf_durability { BMF_FLUSH = 0, BMF_STRICT = 1, BMF_COARSE = 2 };
#define BMF_MAX_DURABILITY  BMF_COARSE

/* Coarse shadows: granules of 2^cgbits bytes, 16M unless told. */
#define BMF_DEFAULT_CGBITS  24
#define BMF_SHADOW_ENTRY    16          /* shadow table entry */

/* Whether flags say a power loss may have cost the bitmap bits: it
 * records, or stopped recording and settles, and is still trusted.
 */
static inline int
bmf_flags_unsettled (uint32_t flags)
{
  return (flags & (BMF_ENABLED | BMF_SETTLING)) &&
    !(flags & BMF_INCONSISTENT);
}

enum bmf_recovery { BMF_NOT_RECOVERED = 0, BMF_RECOVERED,
                    BMF_RECOVER_ON_READ };

struct bmf_bitmap {
  char *name;
  unsigned gbits;               /* granularity is 1 << gbits */
  uint32_t flags;               /* BMF_ENABLED | BMF_INCONSISTENT | ... */
  uint64_t data_offset;         /* 0 when data_length is 0 */
  uint64_t data_length;
  /* Its coarse shadow, when the state has shadows (shadow.h). */
  uint64_t shadow_offset;       /* 0 when shadow_length is 0 */
  uint64_t shadow_length;
  /* In memory only, set by opening a file after a power loss in
   * durability=coarse (recover.h): whether the bitmap was recovered
   * from its shadow, or is each time its bits are read (a file opened
   * without the write lock), and the bytes that this made dirty.
   */
  enum bmf_recovery recovery;
  uint64_t recovered;
};

/* What identifies the disk's state when the bitmaps last held every
 * change of it (identity.h): where the disk is a regular file, its
 * device, inode, size and modification time.
 */
struct bmf_disk_id {
  uint64_t dev, ino, size;
  int64_t mtime_ns;
};

struct bmf_region {
  uint64_t offset, length;
};

/* A restore of the disk from a source (restore-record.h): none, running
 * (BMF_INCOMPAT_RESTORING: its region is the source's page, then the
 * restored bitmap), or complete (BMF_COMPAT_RESTORED: the source's page
 * only).
 */
enum bmf_restore { BMF_RESTORE_NONE, BMF_RESTORE_RUNNING,
                   BMF_RESTORE_DONE };

struct bmf_restore_record {
  enum bmf_restore state;
  unsigned gbits;               /* restored granules are 2^gbits bytes */
  struct bmf_region region;
  uint32_t source_length;
  uint32_t source_crc;          /* CRC-32C of the source's bytes */
  char source[BMF_MAX_SOURCE + 1]; /* NUL-terminated, once loaded */
};

struct bmf_state {
  uint64_t seq;
  uint64_t disk_size;
  bool sized;                   /* disk_size is known */
  bool open;                    /* a server had it open and did not close */
  uint32_t open_mode;           /* its enum bmf_durability */
  char boot_id[BMF_BOOT_ID_LEN]; /* its boot id, NUL-terminated */
  uint64_t open_pid;
  bool has_disk_id;             /* disk_id is valid */
  struct bmf_disk_id disk_id;
  /* BMF_COMPAT_SEEN: every write made to the disk before this time
   * (nanoseconds since the epoch) is in the bitmaps (identity.h).
   */
  bool has_seen;
  int64_t seen_ns;
  uint64_t dir_offset;
  uint32_t dir_length;
  bool has_shadows;             /* BMF_COMPAT_SHADOWS: the fields below */
  unsigned cgbits;              /* coarse granularity of the shadows */
  uint64_t shadow_table_offset;
  uint32_t shadow_table_length;
  struct bmf_restore_record restore;
  uint64_t file_length;
  size_t nr_bitmaps;
  struct bmf_bitmap *bitmaps;
};


/* The limits, checked in one place.  Each returns NULL if the value
 * is allowed, else why not ("must be ...").
 */
extern const char *bmf_granularity_problem (uint64_t bytes);
extern const char *bmf_name_problem (const char *name);

extern struct bmf_bitmap *bmf_find (const struct bmf_state *st,
                                    const char *name);

/* Granules covering the disk, and bytes of data for them. */
extern uint64_t bmf_nr_bits (uint64_t disk_size, unsigned gbits);
extern uint64_t bmf_data_length (uint64_t disk_size, unsigned gbits);

/* Deep copy (-1 and errno on failure) and free of a state. */
extern int bmf_state_copy (struct bmf_state *dst,
                           const struct bmf_state *src);
extern void bmf_state_free (struct bmf_state *st);

/* Problems found while decoding, counted.  Every problem is prefixed
 * with path; report (if set) hears each of them (a check lists them
 * all), else the first is kept in first, an error like any other
 * (EINVAL), for the opener to return.  Start it with first empty.
 */
struct bmf_problems {
  const char *path;
  void (*report) (void *opaque, const char *problem);
  void *opaque;
  unsigned count;
  struct bmerr first;
};
extern void bmf_problem (struct bmf_problems *p, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* A header slot, decoded.  status orders the failures from the least
 * to the most telling.
 */
enum bmf_slot_status { SLOT_OK, SLOT_SHORT, SLOT_MAGIC, SLOT_VERSION,
                       SLOT_CRC, SLOT_FIELD };
struct bmf_slot {
  enum bmf_slot_status status;
  char why[256];
  uint32_t dir_crc;
  uint32_t shadow_crc;          /* of the shadow table */
  struct bmf_state st;          /* without bitmaps */
  unsigned char raw[BMF_HEADER_LENGTH];
};

/* Decode the first got bytes (at most BMF_HEADER_LENGTH) of a slot. */
extern void bmf_decode_slot (const unsigned char *buf, size_t got,
                             struct bmf_slot *s);

/* Which slot is current (0 or 1) in a file of file_size bytes, or -1
 * with the reason reported to p.
 */
extern int bmf_pick_slot (const struct bmf_slot s[2], uint64_t file_size,
                          struct bmf_problems *p);

/* The liveness record: encoded, and decoded (-1 unless it is whole). */
extern void bmf_encode_alive (uint64_t pid, int64_t until_ns,
                              unsigned char buf[BMF_ALIVE_LENGTH]);
extern int bmf_decode_alive (const unsigned char buf[BMF_ALIVE_LENGTH],
                             uint64_t *pid, int64_t *until_ns);

extern void bmf_encode_header (const struct bmf_state *st, uint32_t dir_crc,
                               uint32_t shadow_crc,
                               unsigned char buf[BMF_HEADER_SLOT]);

/* The directory of st, encoded into a malloced buffer of *len bytes
 * (NULL with errno if out of memory; an empty directory gives a
 * non-NULL buffer and *len 0).
 */
extern unsigned char *bmf_encode_dir (const struct bmf_state *st,
                                      size_t *len);

/* Decode the directory of st (whose header fields are set and whose
 * bitmaps are not yet) from its len bytes with checksum crc: fills
 * st->bitmaps.  Reports every problem found to p when p->report is
 * set (and keeps going as far as it can), else stops at the first.
 * Returns 0 if there was none.
 */
extern int bmf_decode_dir (const unsigned char *buf, size_t len,
                           uint32_t crc, struct bmf_state *st,
                           struct bmf_problems *p);

/* What is wrong with a region of a file whose header says it is
 * file_length bytes long, or NULL.
 */
extern const char *bmf_region_problem (uint64_t offset, uint64_t length,
                                       uint64_t file_length);

/* The regions of st that it places (offset and length both set): the
 * directory, the shadow table, each bitmap's data and shadow, the
 * restore record's.  r has
 * room for bmf_max_regions (st) of them; returns how many it holds,
 * in no particular order.  Every walk over the regions of a state
 * (space, syncs, overlaps) is this.
 */
extern size_t bmf_max_regions (const struct bmf_state *st);
extern size_t bmf_state_regions (const struct bmf_state *st,
                                 struct bmf_region *r);

/* Regions by offset, for qsort. */
extern int bmf_region_cmp (const void *a, const void *b);

/* Report regions (the directory, bitmap data, the shadow table and
 * the shadows) that overlap.
 */
extern void bmf_check_overlaps (const struct bmf_state *st,
                                struct bmf_problems *p);

/* Whether the tail of a bitmap's data, from the word holding granule
 * nbits (rounded down to a word) to the end of its region, len bytes,
 * has bits set past the last granule.
 */
extern bool bmf_tail_dirty (const uint64_t *tail, size_t len,
                            uint64_t nbits);

#endif /* DIRTYBITMAP_FORMAT_H */
