/* A flash part in RAM behind flashfs's callbacks, NOR or NAND, whose power can be cut at
 * any callback: the test's stand-in for a firmware's flash driver. */
#ifndef RAMFLASH_H
#define RAMFLASH_H

#include <stdbool.h>
#include <stdint.h>

#include "flashfs.h"

struct ramflash {
    int medium;
    uint8_t *mem;
    uint32_t unit_size; /* NOR: erase unit; NAND: a block's pages with their spare */
    uint32_t units;
    uint32_t page_size, spare_size, pages_per_block; /* NAND */
    long calls;   /* callbacks so far */
    long erases;  /* erases so far */
    long cut_at;  /* the callback the power goes off at (-1: never) */
    bool torn;    /* the cut program or erase does half its work first */
    bool off;     /* the power is off: every callback fails */
};

/* A NOR part of `units` erase units of `unit_size` bytes, 4-byte words, 256-byte program
 * pages; fills in `cfg`'s medium, geometry and callbacks. */
void ramflash_nor(struct ramflash *f, struct flashfs_config *cfg, uint32_t unit_size,
                  uint32_t units);
/* A NAND part of `blocks` blocks of `pages` pages of 2048 + 64 bytes. */
void ramflash_nand(struct ramflash *f, struct flashfs_config *cfg, uint32_t blocks,
                   uint32_t pages);
/* Cuts the power at callback `at` (counted from now; -1: never), tearing the operation it
 * hits if `torn`. */
void ramflash_cut(struct ramflash *f, long at, bool torn);
/* Powers the part on again (what was programmed stays) and clears the count. */
void ramflash_reboot(struct ramflash *f);
void ramflash_free(struct ramflash *f);

#endif
