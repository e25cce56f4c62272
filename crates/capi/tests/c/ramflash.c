#include "ramflash.h"

#include <stdlib.h>
#include <string.h>

/* What a callback answers once the power is off: the device is gone. */
#define POWER_OFF FLASHFS_ERR_NODEV

enum power { ON, CUT, OFF };

/* Counts a callback: ON, or CUT if the power goes off at this one (`cut_at`), or OFF if
 * it is off already. */
static enum power power(struct ramflash *f) {
    if (f->off) {
        return OFF;
    }
    if (f->cut_at >= 0 && f->calls >= f->cut_at) {
        f->off = true;
        return CUT;
    }
    f->calls++;
    return ON;
}

static bool powered(struct ramflash *f) {
    return power(f) == ON;
}

/* Whether the cut tears this operation. */
static bool tears(struct ramflash *f, enum power p) {
    return p == CUT && f->torn;
}

/* A torn program: the bits of the first half of `data` are cleared, the rest not. */
static void tear_program(uint8_t *at, const uint8_t *data, uint32_t len) {
    for (uint32_t i = 0; i < len / 2; i++) {
        at[i] &= data[i];
    }
}

static int32_t nor_read(void *ctx, uint64_t addr, uint8_t *buf, uint32_t len) {
    struct ramflash *f = ctx;
    if (!powered(f)) {
        return POWER_OFF;
    }
    if (addr + len > (uint64_t)f->unit_size * f->units) {
        return FLASHFS_ERR_INVAL;
    }
    memcpy(buf, f->mem + addr, len);
    return 0;
}

static int32_t nor_prog(void *ctx, uint64_t addr, const uint8_t *data, uint32_t len) {
    struct ramflash *f = ctx;
    if (addr + len > (uint64_t)f->unit_size * f->units || addr % 4 || len % 4) {
        return FLASHFS_ERR_INVAL;
    }
    enum power p = power(f);
    if (p != ON) {
        if (tears(f, p)) {
            tear_program(f->mem + addr, data, len);
        }
        return POWER_OFF;
    }
    /* Programming only clears bits. */
    for (uint32_t i = 0; i < len; i++) {
        f->mem[addr + i] &= data[i];
    }
    return 0;
}

static int32_t erase(void *ctx, uint32_t unit) {
    struct ramflash *f = ctx;
    if (unit >= f->units) {
        return FLASHFS_ERR_INVAL;
    }
    enum power p = power(f);
    if (p != ON) {
        if (tears(f, p)) {
            memset(f->mem + (uint64_t)unit * f->unit_size, 0xFF, f->unit_size / 2);
        }
        return POWER_OFF;
    }
    memset(f->mem + (uint64_t)unit * f->unit_size, 0xFF, f->unit_size);
    f->erases++;
    return 0;
}

static int32_t sync_(void *ctx) {
    return powered(ctx) ? 0 : POWER_OFF;
}

static uint8_t *nand_page(struct ramflash *f, uint32_t block, uint32_t page) {
    return f->mem + (uint64_t)block * f->unit_size +
           (uint64_t)page * (f->page_size + f->spare_size);
}

static bool page_erased(struct ramflash *f, const uint8_t *p) {
    for (uint32_t i = 0; i < f->page_size + f->spare_size; i++) {
        if (p[i] != 0xFF) {
            return false;
        }
    }
    return true;
}

static int32_t nand_read(void *ctx, uint32_t block, uint32_t page, uint8_t *data,
                         uint32_t data_len, uint8_t *spare, uint32_t spare_len) {
    struct ramflash *f = ctx;
    if (block >= f->units || page >= f->pages_per_block || data_len > f->page_size ||
        spare_len > f->spare_size) {
        return FLASHFS_ERR_INVAL;
    }
    if (!powered(f)) {
        return POWER_OFF;
    }
    const uint8_t *p = nand_page(f, block, page);
    memcpy(data, p, data_len);
    memcpy(spare, p + f->page_size, spare_len);
    return 0; /* no bit errors to correct */
}

static int32_t nand_prog(void *ctx, uint32_t block, uint32_t page, const uint8_t *data,
                         uint32_t data_len, const uint8_t *spare, uint32_t spare_len) {
    struct ramflash *f = ctx;
    if (block >= f->units || page >= f->pages_per_block || data_len > f->page_size ||
        spare_len > f->spare_size) {
        return FLASHFS_ERR_INVAL;
    }
    uint8_t *pg = nand_page(f, block, page);
    if (!page_erased(f, pg)) {
        return FLASHFS_ERR_INVAL; /* one program per page per erase */
    }
    enum power p = power(f);
    if (p != ON) {
        if (tears(f, p)) {
            /* A torn NAND program leaves the page's data half written and its spare
             * (the tag, with the data's checksum) unwritten or garbled. */
            tear_program(pg, data, data_len);
        }
        return POWER_OFF;
    }
    memcpy(pg, data, data_len);
    memcpy(pg + f->page_size, spare, spare_len);
    return 0;
}

static void init(struct ramflash *f, struct flashfs_config *cfg) {
    f->mem = malloc((size_t)f->unit_size * f->units);
    memset(f->mem, 0xFF, (size_t)f->unit_size * f->units);
    f->calls = 0;
    f->cut_at = -1;
    f->torn = false;
    f->off = false;
    memset(cfg, 0, sizeof *cfg);
    cfg->context = f;
    cfg->erase = erase;
    cfg->sync = sync_;
}

void ramflash_nor(struct ramflash *f, struct flashfs_config *cfg, uint32_t unit_size,
                  uint32_t units) {
    memset(f, 0, sizeof *f);
    f->medium = FLASHFS_NOR;
    f->unit_size = unit_size;
    f->units = units;
    init(f, cfg);
    cfg->medium = FLASHFS_NOR;
    cfg->unit_size = unit_size;
    cfg->units = units;
    cfg->word_size = 4;
    cfg->program_page_size = 256;
    cfg->read = nor_read;
    cfg->prog = nor_prog;
}

void ramflash_nand(struct ramflash *f, struct flashfs_config *cfg, uint32_t blocks,
                   uint32_t pages) {
    memset(f, 0, sizeof *f);
    f->medium = FLASHFS_NAND;
    f->page_size = 2048;
    f->spare_size = 64;
    f->pages_per_block = pages;
    f->unit_size = pages * (f->page_size + f->spare_size);
    f->units = blocks;
    init(f, cfg);
    cfg->medium = FLASHFS_NAND;
    cfg->page_size = f->page_size;
    cfg->spare_size = f->spare_size;
    cfg->pages_per_block = pages;
    cfg->blocks = blocks;
    cfg->read_page = nand_read;
    cfg->prog_page = nand_prog;
}

void ramflash_cut(struct ramflash *f, long at, bool torn) {
    f->calls = 0;
    f->erases = 0;
    f->cut_at = at;
    f->torn = torn;
    f->off = false;
}

void ramflash_reboot(struct ramflash *f) {
    ramflash_cut(f, -1, false);
}

void ramflash_free(struct ramflash *f) {
    free(f->mem);
    f->mem = NULL;
}
