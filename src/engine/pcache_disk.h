/* The prompt cache on disk: cached prefixes written as files when they leave
 * memory (eviction, shutdown) and read back after a restart.
 *
 * One file holds one prefix: its token ids and the keys and values of its
 * whole blocks, every layer. Byte layout (little endian):
 *
 *   0    8  magic "TERNKVC\n"
 *   8    4  u32 format version (1)
 *   12   4  u32 header bytes H (where the block data starts)
 *   16   8  u64 key: the model fingerprint mixed with the namespace (tokenizer
 *           and chat template) of whoever opened the store
 *   24   4  u32 block tokens bt
 *   28   4  u32 blocks n
 *   32   8  u64 bytes per block (all layers)
 *   40  64  KV layout geometry, NUL-padded ("kv:plain f32 L.. H.. D.. B..")
 *   104  4*n*bt  token ids, i32
 *   ..   8*n     FNV-1a 64 of each block's bytes
 *   ..   8       FNV-1a 64 of every header byte before it
 *   H    n * block bytes: block i's bytes (layer 0 K, V, layer 1 K, V, ...)
 *
 * and the file is exactly H + n * block bytes long. Files are written to a
 * temporary name, fsynced and renamed, so a reader never sees a partial one;
 * the header is checked when the store opens (a file with another magic,
 * version, key, geometry, a bad header checksum or the wrong length is
 * skipped with a warning and never read), and every block's checksum when it
 * is loaded. The directory is capped in bytes: the oldest files go first.
 * Ownership: driven by the engine thread; borrows the pool it reads into. */
#ifndef TERN_ENGINE_PCACHE_DISK_H
#define TERN_ENGINE_PCACHE_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "kv/kv.h"

typedef struct tern_pdisk tern_pdisk;

typedef struct {
    long files;
    uint64_t bytes, writes, write_failures, loads, load_failures, skipped;
} tern_pdisk_stats;

/* Opens (creating it if needed) the directory dir for entries of this key
 * and the pool's geometry; files that do not qualify are skipped. */
tern_status tern_pdisk_open(const char *dir, size_t cap_bytes, uint64_t key, tern_kv *kv, tern_pdisk **out);
void tern_pdisk_close(tern_pdisk *d);
/* Writes the prefix toks[0, n*bt) held by pool blocks[0, n) (borrowed),
 * unless a file for exactly these tokens exists. */
tern_status tern_pdisk_store(tern_pdisk *d, const int32_t *toks, int n, const int *blocks);
/* The entry sharing the longest prefix of whole blocks with toks, at most
 * max_blocks: returns that many blocks (0 = none) and the entry in *entry. */
int tern_pdisk_match(tern_pdisk *d, const int32_t *toks, int max_blocks, int *entry);
/* Reads blocks [from, to) of an entry into pool blocks dst[0, to - from),
 * checking each block's checksum. A bad or vanished file is dropped from the
 * index (TERN_E_FORMAT / TERN_E_IO); the pool blocks' contents are then
 * unspecified, and the caller gives them back. */
tern_status tern_pdisk_load(tern_pdisk *d, int entry, int from, int to, const int *dst);
void tern_pdisk_get_stats(const tern_pdisk *d, tern_pdisk_stats *out);

#endif
