/* flashfs from C: a sensor log on a NOR part.
 *
 * The "driver" here is 256 KiB of RAM; on a board, the three callbacks call the chip's
 * driver (SPI NOR: read, page program, sector erase). Build against the static library:
 *
 *   cargo build --release -p flashfs-capi
 *   cc -Icrates/capi/include crates/capi/examples/hello.c target/release/libflashfs_c.a \
 *      -lpthread -ldl -lm -o hello && ./hello
 */
#include <stdio.h>
#include <string.h>

#include "flashfs.h"

#define UNIT 4096
#define UNITS 64

static uint8_t chip[UNIT * UNITS];

static int32_t chip_read(void *ctx, uint64_t addr, uint8_t *buf, uint32_t len) {
    (void)ctx;
    memcpy(buf, chip + addr, len);
    return 0;
}

static int32_t chip_prog(void *ctx, uint64_t addr, const uint8_t *data, uint32_t len) {
    (void)ctx;
    for (uint32_t i = 0; i < len; i++) {
        chip[addr + i] &= data[i]; /* programming clears bits */
    }
    return 0;
}

static int32_t chip_erase(void *ctx, uint32_t unit) {
    (void)ctx;
    memset(chip + (size_t)unit * UNIT, 0xFF, UNIT);
    return 0;
}

static int fail(const char *what, int32_t rc) {
    fprintf(stderr, "%s: %s\n", what, flashfs_strerror(rc));
    return 1;
}

int main(void) {
    struct flashfs_config cfg = {0};
    cfg.medium = FLASHFS_NOR;
    cfg.unit_size = UNIT;
    cfg.units = UNITS;
    cfg.word_size = 1;
    cfg.program_page_size = 256;
    cfg.read = chip_read;
    cfg.prog = chip_prog;
    cfg.erase = chip_erase;
    cfg.write_buffer_bytes = 2048;
    memset(chip, 0xFF, sizeof chip);

    int32_t rc;
    flashfs_t *fs;
    if ((rc = flashfs_format(&cfg)) < 0) return fail("format", rc);
    if ((rc = flashfs_mount(&cfg, &fs)) < 0) return fail("mount", rc);

    /* A log file, appended to line by line; close syncs it. */
    flashfs_file_t log;
    rc = flashfs_file_open(fs, &log, "/sensor.log",
                           FLASHFS_O_WRONLY | FLASHFS_O_CREAT | FLASHFS_O_APPEND);
    if (rc < 0) return fail("open", rc);
    for (int i = 0; i < 10; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "t=%d temp=%d\n", i, 20 + i % 3);
        if ((rc = flashfs_file_write(fs, &log, line, (uint32_t)n)) < 0) return fail("write", rc);
    }
    if ((rc = flashfs_file_close(fs, &log)) < 0) return fail("close", rc);

    /* Settings changed together or not at all. */
    uint32_t tid;
    flashfs_file_t f;
    if ((rc = flashfs_mkdir(fs, "/cfg")) < 0) return fail("mkdir", rc);
    if ((rc = flashfs_tx_begin(fs, &tid)) < 0) return fail("begin", rc);
    if ((rc = flashfs_file_open(fs, &f, "/cfg/net", FLASHFS_O_WRONLY | FLASHFS_O_CREAT)) < 0)
        return fail("open", rc);
    flashfs_file_write(fs, &f, "ssid=lab", 8);
    flashfs_file_close(fs, &f);
    if ((rc = flashfs_rename(fs, "/sensor.log", "/cfg/sensor.log")) < 0) return fail("rename", rc);
    if ((rc = flashfs_tx_commit(fs, tid)) < 0) return fail("commit", rc);

    /* A cyclic record file: the last 4 readings of 8 bytes. */
    if ((rc = flashfs_record_create(fs, "/last", 8, 4)) < 0) return fail("records", rc);
    if ((rc = flashfs_file_open(fs, &f, "/last", FLASHFS_O_RDWR)) < 0) return fail("open", rc);
    for (uint64_t i = 0; i < 6; i++) {
        int64_t n = flashfs_record_add(fs, &f, &i, 8);
        if (n < 0) return fail("add", (int32_t)n);
    }
    struct flashfs_record_info ri;
    flashfs_record_stat(fs, &f, &ri);
    printf("/last holds records %llu to %llu\n", (unsigned long long)ri.first,
           (unsigned long long)ri.next - 1);
    flashfs_file_close(fs, &f);

    if ((rc = flashfs_unmount(fs)) < 0) return fail("unmount", rc);

    /* Mount again and list what is there. */
    if ((rc = flashfs_mount(&cfg, &fs)) < 0) return fail("mount", rc);
    const char *dirs[] = {"/", "/cfg"};
    for (int d = 0; d < 2; d++) {
        flashfs_dir_t dir;
        struct flashfs_info info;
        if ((rc = flashfs_dir_open(fs, &dir, dirs[d])) < 0) return fail("opendir", rc);
        while ((rc = flashfs_dir_read(fs, &dir, &info)) == 1) {
            if (info.name[0] != '.') {
                printf("%s%s%s %llu\n", dirs[d], d ? "/" : "", info.name,
                       (unsigned long long)info.size);
            }
        }
        flashfs_dir_close(fs, &dir);
    }
    char buf[256] = {0};
    flashfs_file_open(fs, &f, "/cfg/sensor.log", FLASHFS_O_RDONLY);
    int32_t n = flashfs_file_read(fs, &f, buf, sizeof buf - 1);
    flashfs_file_close(fs, &f);
    printf("first line: %.*s", (int)(strchr(buf, '\n') - buf + 1), buf);

    struct flashfs_fsinfo fsi;
    flashfs_fs_stat(fs, &fsi);
    printf("%d bytes of log; %llu of %llu blocks free\n", n, (unsigned long long)fsi.blocks_free,
           (unsigned long long)fsi.blocks);
    return flashfs_unmount(fs) < 0;
}
