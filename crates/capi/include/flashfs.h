/* The flashfs C API. Generated from crates/capi/src by cbindgen: do not edit. */

#ifndef FLASHFS_H
#define FLASHFS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/*
 `flashfs_config::medium`: NOR flash (byte reads, word programs, unit erases).
 */
#define FLASHFS_NOR 0

/*
 `flashfs_config::medium`: NAND flash (page reads and programs with a spare area, block
 erases).
 */
#define FLASHFS_NAND 1

/*
 Erase cycles assumed when `flashfs_config::endurance` is 0.
 */
#define FLASHFS_DEFAULT_ENDURANCE 100000

/*
 NOR block size used when `flashfs_config::block_size` is 0.
 */
#define FLASHFS_DEFAULT_NOR_BLOCK 512

/*
 Longest name, in bytes (without the terminating NUL).
 */
#define FLASHFS_NAME_MAX 255

/*
 `flashfs_info::kind`: a regular file.
 */
#define FLASHFS_TYPE_REG 1

/*
 `flashfs_info::kind`: a directory.
 */
#define FLASHFS_TYPE_DIR 2

/*
 `flashfs_info::kind`: anything else (a symbolic link, a device node made by other
 tools).
 */
#define FLASHFS_TYPE_OTHER 3

/*
 Open for reading.
 */
#define FLASHFS_O_RDONLY 1

/*
 Open for writing.
 */
#define FLASHFS_O_WRONLY 2

/*
 Open for reading and writing.
 */
#define FLASHFS_O_RDWR (FLASHFS_O_RDONLY | FLASHFS_O_WRONLY)

/*
 Create the file if it does not exist.
 */
#define FLASHFS_O_CREAT 256

/*
 With `FLASHFS_O_CREAT`: fail if the file exists.
 */
#define FLASHFS_O_EXCL 512

/*
 Truncate the file to 0 bytes.
 */
#define FLASHFS_O_TRUNC 1024

/*
 Every write goes to the end of the file.
 */
#define FLASHFS_O_APPEND 2048

/*
 Seek from the start of the file.
 */
#define FLASHFS_SEEK_SET 0

/*
 Seek from the current position.
 */
#define FLASHFS_SEEK_CUR 1

/*
 Seek from the end of the file.
 */
#define FLASHFS_SEEK_END 2

/*
 Longest record, in bytes.
 */
#define FLASHFS_RECORD_MAX 4096

/*
 What a call returns on failure (0 or a count on success). Callbacks return these too.
 */
enum flashfs_error
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : int32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /*
   Success.
   */
  FLASHFS_OK = 0,
  /*
   Operation not permitted.
   */
  FLASHFS_ERR_PERM = -1,
  /*
   No such file or directory.
   */
  FLASHFS_ERR_NOENT = -2,
  /*
   Input/output error: the flash failed, or data did not read back as written.
   */
  FLASHFS_ERR_IO = -5,
  /*
   Bad file or directory handle, or transaction.
   */
  FLASHFS_ERR_BADF = -9,
  /*
   Transaction identifiers exhausted.
   */
  FLASHFS_ERR_AGAIN = -11,
  /*
   Out of memory.
   */
  FLASHFS_ERR_NOMEM = -12,
  /*
   File exists.
   */
  FLASHFS_ERR_EXIST = -17,
  /*
   Not a flashfs volume.
   */
  FLASHFS_ERR_NODEV = -19,
  /*
   Not a directory.
   */
  FLASHFS_ERR_NOTDIR = -20,
  /*
   Is a directory.
   */
  FLASHFS_ERR_ISDIR = -21,
  /*
   Invalid argument.
   */
  FLASHFS_ERR_INVAL = -22,
  /*
   File too large.
   */
  FLASHFS_ERR_FBIG = -27,
  /*
   No space left on the device.
   */
  FLASHFS_ERR_NOSPC = -28,
  /*
   Read-only volume.
   */
  FLASHFS_ERR_ROFS = -30,
  /*
   Too many links.
   */
  FLASHFS_ERR_MLINK = -31,
  /*
   Conflict between transactions: the transaction was rolled back.
   */
  FLASHFS_ERR_DEADLK = -35,
  /*
   File name too long.
   */
  FLASHFS_ERR_NAMETOOLONG = -36,
  /*
   Directory not empty.
   */
  FLASHFS_ERR_NOTEMPTY = -39,
  /*
   Too many levels of symbolic links.
   */
  FLASHFS_ERR_LOOP = -40,
  /*
   No such attribute.
   */
  FLASHFS_ERR_NODATA = -61,
  /*
   Bad message: uncorrectable bit errors (returned by a NAND read callback).
   */
  FLASHFS_ERR_BADMSG = -74,
  /*
   Operation not supported.
   */
  FLASHFS_ERR_NOTSUP = -95,
  /*
   Corrupt volume: run a check.
   */
  FLASHFS_ERR_CORRUPT = -117,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum flashfs_error flashfs_error;
#else
typedef int32_t flashfs_error;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/*
 A mounted volume. Opaque: made by `flashfs_mount`, freed by `flashfs_unmount`.
 */
typedef struct flashfs_t flashfs_t;

/*
 What a name refers to.
 */
typedef struct flashfs_info {
  /*
   `FLASHFS_TYPE_*`.
   */
  uint8_t kind;
  /*
   Bytes (a directory: 0).
   */
  uint64_t size;
  /*
   Last change of the content, seconds since 1970 (the epoch where the firmware has
   no clock).
   */
  int64_t mtime;
  /*
   The name, NUL-terminated (empty from `flashfs_stat`).
   */
  char name[256];
} flashfs_info;

/*
 An open directory. The caller allocates it; its fields are the library's.
 */
typedef struct flashfs_dir_t {
  /*
   The directory's inode.
   */
  uint64_t ino;
  /*
   Where the listing goes on.
   */
  uint64_t cookie;
  /*
   Whether it is open.
   */
  uint32_t state;
} flashfs_dir_t;

/*
 An open file. The caller allocates it (on the stack, statically); its fields are the
 library's.
 */
typedef struct flashfs_file_t {
  /*
   The file's inode.
   */
  uint64_t ino;
  /*
   Where the next read or write goes.
   */
  uint64_t pos;
  /*
   The `FLASHFS_O_*` flags it was opened with.
   */
  int32_t flags;
  /*
   Whether it is open.
   */
  uint32_t state;
} flashfs_file_t;

/*
 What a record file holds.
 */
typedef struct flashfs_record_info {
  /*
   Bytes of every record, or 0 for records of any length.
   */
  uint32_t record_size;
  /*
   Records a cyclic file keeps (0: not cyclic).
   */
  uint32_t capacity;
  /*
   Number of the oldest record.
   */
  uint64_t first;
  /*
   Number the next record gets: the file holds records `first` to `next - 1`.
   */
  uint64_t next;
} flashfs_record_info;

/*
 Reads `len` bytes at byte address `addr` of a NOR part into `buf`.
 */
typedef int32_t (*flashfs_read_fn)(void *context,
                                   uint64_t addr,
                                   uint8_t *buf,
                                   uint32_t len);

/*
 Programs `len` bytes (whole words, word-aligned) at `addr` of a NOR part.
 */
typedef int32_t (*flashfs_prog_fn)(void *context,
                                   uint64_t addr,
                                   const uint8_t *data,
                                   uint32_t len);

/*
 Reads the start of page `page` of block `block` of a NAND part: `data_len` bytes of its
 data and `spare_len` of its spare area (either may be 0). Returns the bit errors the ECC
 corrected (0 or more), `FLASHFS_ERR_BADMSG` when it could not
 correct them, or another negative error.
 */
typedef int32_t (*flashfs_read_page_fn)(void *context,
                                        uint32_t block,
                                        uint32_t page,
                                        uint8_t *data,
                                        uint32_t data_len,
                                        uint8_t *spare,
                                        uint32_t spare_len);

/*
 Programs page `page` of block `block` of a NAND part: data and spare in one operation
 (shorter buffers leave the rest erased).
 */
typedef int32_t (*flashfs_prog_page_fn)(void *context,
                                        uint32_t block,
                                        uint32_t page,
                                        const uint8_t *data,
                                        uint32_t data_len,
                                        const uint8_t *spare,
                                        uint32_t spare_len);

/*
 Whether a NAND block carries a bad-block mark: 1 yes, 0 no, negative on error.
 */
typedef int32_t (*flashfs_block_fn)(void *context,
                                    uint32_t block);

/*
 Erases erase unit (NOR) or block (NAND) `unit`, and waits for it.
 */
typedef int32_t (*flashfs_erase_fn)(void *context,
                                    uint32_t unit);

/*
 Waits until every program before it is on the medium.
 */
typedef int32_t (*flashfs_sync_fn)(void *context);

/*
 A volume's flash and settings. Zero-initialize it, then fill in the medium, its geometry
 and its callbacks. Callbacks return 0 (or a count where said) on success and a negative
 error on failure: `FLASHFS_ERR_IO` from `prog`, `prog_page` or
 `erase` says the part reported a failed program or erase (a worn block, which the file
 system retires); any other negative value is a device failure that fails the operation.
 The library copies the configuration: it need not outlive the call it is passed to.
 */
typedef struct flashfs_config {
  /*
   Passed to every callback.
   */
  void *context;
  /*
   `FLASHFS_NOR` or `FLASHFS_NAND`.
   */
  uint32_t medium;
  /*
   NOR: bytes per erase unit.
   */
  uint32_t unit_size;
  /*
   NOR: erase units.
   */
  uint32_t units;
  /*
   NOR: program granularity and alignment, in bytes.
   */
  uint32_t word_size;
  /*
   NOR: the largest program a `prog` call may carry, which may not cross a multiple of
   it (SPI page program); 0 when any length may be programmed at once.
   */
  uint32_t program_page_size;
  /*
   NOR: whether a programmed word may be programmed again to clear more bits.
   */
  bool reprogrammable;
  /*
   NAND: data bytes per page.
   */
  uint32_t page_size;
  /*
   NAND: spare bytes per page free for the file system (at least 12).
   */
  uint32_t spare_size;
  /*
   NAND: pages per block.
   */
  uint32_t pages_per_block;
  /*
   NAND: blocks.
   */
  uint32_t blocks;
  /*
   NAND: bit errors the part's ECC corrects per page (0: none, or unknown).
   */
  uint32_t ecc_bits;
  /*
   Erase cycles each unit or block is rated for (0: `FLASHFS_DEFAULT_ENDURANCE`).
   */
  uint32_t endurance;
  /*
   NOR: reads.
   */
  flashfs_read_fn read;
  /*
   NOR: programs.
   */
  flashfs_prog_fn prog;
  /*
   NAND: page reads.
   */
  flashfs_read_page_fn read_page;
  /*
   NAND: page programs.
   */
  flashfs_prog_page_fn prog_page;
  /*
   NAND: bad-block marks (NULL: no block is marked bad).
   */
  flashfs_block_fn is_bad;
  /*
   NAND: marks a block bad for good (NULL: retired blocks are found again as worn).
   */
  flashfs_block_fn mark_bad;
  /*
   Erases.
   */
  flashfs_erase_fn erase;
  /*
   A barrier for parts that buffer programs (NULL: none needed).
   */
  flashfs_sync_fn sync;
  /*
   NOR: bytes per file-system block, a power of two of at least 64 (0:
   `FLASHFS_DEFAULT_NOR_BLOCK`). NAND blocks are pages.
   */
  uint32_t block_size;
  /*
   RAM for file blocks that small writes leave there until a sync, in bytes (0: every
   write programs its blocks at once). Each buffered block costs its size.
   */
  uint32_t write_buffer_bytes;
  /*
   RAM for every cache and buffer of the volume, in bytes, shared out over them
   (`FsConfig::ram_budget`; the write buffer's share replaces `write_buffer_bytes`); 0:
   the microcontroller profile's settings.
   */
  uint32_t ram_budget;
} flashfs_config;

/*
 Space of a volume.
 */
typedef struct flashfs_fsinfo {
  /*
   Bytes per block.
   */
  uint32_t block_size;
  /*
   Blocks for files and their metadata.
   */
  uint64_t blocks;
  /*
   Blocks free.
   */
  uint64_t blocks_free;
  /*
   Files and directories.
   */
  uint64_t files;
} flashfs_fsinfo;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Makes the directory `path`.
 */
int32_t flashfs_mkdir(struct flashfs_t *fs,
                      const char *path);

/*
 Removes the file or empty directory `path`. An open file keeps its data until closed.
 */
int32_t flashfs_remove(struct flashfs_t *fs,
                       const char *path);

/*
 Renames `from` to `to`, replacing what `to` named (an empty directory by a directory, a
 file by a file), atomically.
 */
int32_t flashfs_rename(struct flashfs_t *fs,
                       const char *from,
                       const char *to);

/*
 Fills `*info` with what `path` names.
 */
int32_t flashfs_stat(struct flashfs_t *fs,
                     const char *path,
                     struct flashfs_info *info);

/*
 Opens the directory `path` for listing into the caller's `*dir`.
 */
int32_t flashfs_dir_open(struct flashfs_t *fs,
                         struct flashfs_dir_t *dir,
                         const char *path);

/*
 Reads the directory's next entry into `*info` (`.` and `..` first); returns 1, or 0
 after the last entry.
 */
int32_t flashfs_dir_read(struct flashfs_t *fs,
                         struct flashfs_dir_t *dir,
                         struct flashfs_info *info);

/*
 Closes a directory handle.
 */
int32_t flashfs_dir_close(struct flashfs_t *fs,
                          struct flashfs_dir_t *dir);

/*
 Opens the file at `path` with `FLASHFS_O_*` flags into the caller's `*file`. A created
 file has mode 0644.
 */
int32_t flashfs_file_open(struct flashfs_t *fs,
                          struct flashfs_file_t *file,
                          const char *path,
                          int32_t flags);

/*
 Reads up to `len` bytes at the file's position into `buf`; returns the bytes read (0 at
 the end of the file).
 */
int32_t flashfs_file_read(struct flashfs_t *fs,
                          struct flashfs_file_t *file,
                          void *buf,
                          uint32_t len);

/*
 Writes `len` bytes of `data` at the file's position (at its end with
 `FLASHFS_O_APPEND`); returns `len`. Durable once a sync covers it.
 */
int32_t flashfs_file_write(struct flashfs_t *fs,
                           struct flashfs_file_t *file,
                           const void *data,
                           uint32_t len);

/*
 Moves the file's position to `off` from `whence` (`FLASHFS_SEEK_*`); returns the new
 position.
 */
int64_t flashfs_file_seek(struct flashfs_t *fs,
                          struct flashfs_file_t *file,
                          int64_t off,
                          int32_t whence);

/*
 The file's position.
 */
int64_t flashfs_file_tell(struct flashfs_t *fs,
                          struct flashfs_file_t *file);

/*
 The file's size in bytes.
 */
int64_t flashfs_file_size(struct flashfs_t *fs,
                          struct flashfs_file_t *file);

/*
 Cuts the file to `size` bytes, or extends it with zeros.
 */
int32_t flashfs_file_truncate(struct flashfs_t *fs,
                              struct flashfs_file_t *file,
                              uint64_t size);

/*
 Makes the file's writes durable, with every change before them (a sync is all or
 nothing). Inside a transaction, its commit does that instead.
 */
int32_t flashfs_file_sync(struct flashfs_t *fs,
                          struct flashfs_file_t *file);

/*
 Closes the file, syncing it first outside a transaction (as littlefs's close does); the
 handle is closed even when the sync fails.
 */
int32_t flashfs_file_close(struct flashfs_t *fs,
                           struct flashfs_file_t *file);

/*
 Creates the record file `path`: records of `record_size` bytes (0: any length up to
 `FLASHFS_RECORD_MAX`); a cyclic file if `capacity` is not 0 (adding one more record
 then removes the oldest). Open it with `flashfs_file_open` to work on its records.
 */
int32_t flashfs_record_create(struct flashfs_t *fs,
                              const char *path,
                              uint32_t record_size,
                              uint32_t capacity);

/*
 Adds a record of `len` bytes; returns its number.
 */
int64_t flashfs_record_add(struct flashfs_t *fs,
                           struct flashfs_file_t *file,
                           const void *data,
                           uint32_t len);

/*
 Reads record `n` into `buf` (up to `len` bytes); returns the record's length.
 */
int32_t flashfs_record_read(struct flashfs_t *fs,
                            struct flashfs_file_t *file,
                            uint64_t n,
                            void *buf,
                            uint32_t len);

/*
 Replaces record `n` with `len` bytes of `data`.
 */
int32_t flashfs_record_update(struct flashfs_t *fs,
                              struct flashfs_file_t *file,
                              uint64_t n,
                              const void *data,
                              uint32_t len);

/*
 Removes the oldest record (`last` false) or the newest (`last` true).
 */
int32_t flashfs_record_remove(struct flashfs_t *fs,
                              struct flashfs_file_t *file,
                              bool last);

/*
 Fills `*info` with the record file's format and the numbers of its records.
 */
int32_t flashfs_record_stat(struct flashfs_t *fs,
                            struct flashfs_file_t *file,
                            struct flashfs_record_info *info);

/*
 Begins a transaction, stores its identifier in `*tid` and runs the volume's next
 operations in it.
 */
int32_t flashfs_tx_begin(struct flashfs_t *fs,
                         uint32_t *tid);

/*
 Runs the volume's next operations in the open transaction `tid`, or outside any if
 `tid` is 0.
 */
int32_t flashfs_tx_use(struct flashfs_t *fs,
                       uint32_t tid);

/*
 Commits transaction `tid`: once it returns 0 all its operations are durable; a power
 cut before leaves none of them.
 */
int32_t flashfs_tx_commit(struct flashfs_t *fs,
                          uint32_t tid);

/*
 Aborts transaction `tid`: none of its operations happened.
 */
int32_t flashfs_tx_abort(struct flashfs_t *fs,
                         uint32_t tid);

/*
 Makes a new, empty volume on the flash `cfg` describes, erasing what it held. The
 volume is left unmounted.
 */
int32_t flashfs_format(const struct flashfs_config *cfg);

/*
 Mounts the volume on the flash `cfg` describes and stores its handle in `*out`. A mount
 after a power cut finishes or undoes what the cut interrupted: every operation a sync
 acknowledged is there, whole.
 */
int32_t flashfs_mount(const struct flashfs_config *cfg,
                      struct flashfs_t **out);

/*
 Syncs the volume and frees its handle, which the caller must not use again. The handle
 is freed even when the sync fails (as after a power cut): the error says the last
 changes may not be on flash.
 */
int32_t flashfs_unmount(struct flashfs_t *fs);

/*
 Makes every change so far durable (operations inside a transaction are durable when it
 commits). Once it returns 0, a power cut keeps all of them; before, it may lose any
 change since the last sync, never part of one.
 */
int32_t flashfs_sync(struct flashfs_t *fs);

/*
 Fills `*info` with the volume's space.
 */
int32_t flashfs_fs_stat(struct flashfs_t *fs,
                        struct flashfs_fsinfo *info);

/*
 A message for an error code this library returned (a static string).
 */
const char *flashfs_strerror(int32_t err);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FLASHFS_H */
