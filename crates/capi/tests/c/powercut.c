/* Power cuts through the C API: a small workload of files, directories, transactions and
 * record files runs on a RAM flash whose power goes off at callback n, for every n the
 * workload makes; after each cut the volume mounts again and must hold exactly what the
 * acknowledged steps made, or that and the step the cut interrupted, and keep working.
 *
 *   powercut nor|nand [--every k]     (--every: every k-th callback only) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashfs.h"
#include "ramflash.h"

#define MAX_ENTRIES 16
#define MAX_DATA 8192
#define RECORD 16

struct entry {
    char path[32];
    int dir;
    uint32_t len;
    uint8_t data[MAX_DATA];
};

/* What the volume should hold: its files and directories by path. */
struct model {
    int n;
    struct entry e[MAX_ENTRIES];
};

static struct entry *find(struct model *m, const char *path) {
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->e[i].path, path) == 0) {
            return &m->e[i];
        }
    }
    return NULL;
}

static struct entry *add(struct model *m, const char *path, int dir) {
    struct entry *e = &m->e[m->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->path, sizeof e->path, "%s", path);
    e->dir = dir;
    return e;
}

static void drop(struct model *m, const char *path) {
    struct entry *e = find(m, path);
    *e = m->e[--m->n];
}

static void m_write(struct model *m, const char *path, uint32_t off, const uint8_t *d,
                    uint32_t len) {
    struct entry *e = find(m, path);
    if (!e) {
        e = add(m, path, 0);
    }
    if (off > e->len) {
        memset(e->data + e->len, 0, off - e->len);
    }
    memcpy(e->data + off, d, len);
    if (off + len > e->len) {
        e->len = off + len;
    }
}

/* Renames a file, or a directory and everything under it. */
static void m_rename(struct model *m, const char *from, const char *to) {
    size_t n = strlen(from);
    for (int i = 0; i < m->n; i++) {
        char *p = m->e[i].path;
        if (strncmp(p, from, n) == 0 && (p[n] == 0 || p[n] == '/')) {
            char rest[32];
            snprintf(rest, sizeof rest, "%s", p + n);
            snprintf(p, sizeof m->e[i].path, "%s%s", to, rest);
        }
    }
}

static void pattern(uint8_t *buf, uint32_t len, int seed) {
    for (uint32_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
    }
}

/* Steps 0-30 make the tree; the rest rewrite one file, so the cleaner runs. */
#define TREE_STEPS 31
#define STEPS (TREE_STEPS + 24)
#define CHECK(call)                                                                         \
    do {                                                                                    \
        int32_t rc_ = (call);                                                               \
        if (rc_ < 0) {                                                                      \
            return rc_;                                                                     \
        }                                                                                   \
    } while (0)

/* Writes `len` bytes of pattern `seed` at `off` of `path` (opened with `flags`), closing
 * it (outside a transaction, close syncs). */
static int32_t put(flashfs_t *fs, const char *path, int flags, int64_t off, uint32_t len,
                   int seed) {
    static uint8_t buf[MAX_DATA];
    flashfs_file_t f;
    pattern(buf, len, seed);
    CHECK(flashfs_file_open(fs, &f, path, flags));
    if (off >= 0) {
        CHECK(flashfs_file_seek(fs, &f, off, FLASHFS_SEEK_SET));
    }
    int32_t n = flashfs_file_write(fs, &f, buf, len);
    if (n < 0) {
        flashfs_file_close(fs, &f);
        return n;
    }
    return flashfs_file_close(fs, &f);
}

static int32_t record_op(flashfs_t *fs, const char *path, int64_t update, int seed) {
    uint8_t rec[RECORD];
    flashfs_file_t f;
    pattern(rec, RECORD, seed);
    CHECK(flashfs_file_open(fs, &f, path, FLASHFS_O_RDWR));
    int64_t r = update >= 0 ? flashfs_record_update(fs, &f, (uint64_t)update, rec, RECORD)
                            : flashfs_record_add(fs, &f, rec, RECORD);
    if (r < 0) {
        flashfs_file_close(fs, &f);
        return (int32_t)r;
    }
    return flashfs_file_close(fs, &f);
}

/* Step k of the workload on the volume; 0 once it is durable. */
static int32_t step(flashfs_t *fs, int k) {
    const int W = FLASHFS_O_WRONLY, C = FLASHFS_O_CREAT, A = FLASHFS_O_APPEND;
    uint32_t tid;
    if (k == 0) {
        CHECK(flashfs_mkdir(fs, "/d"));
        return flashfs_sync(fs);
    }
    if (k == 1) { /* a file made whole in one transaction */
        CHECK(flashfs_tx_begin(fs, &tid));
        CHECK(put(fs, "/d/a", W | C, 0, 1000, 1));
        return flashfs_tx_commit(fs, tid);
    }
    if (k <= 6) {
        return put(fs, "/d/a", W | A, -1, 200, k);
    }
    if (k == 7) {
        CHECK(flashfs_record_create(fs, "/r", RECORD, 0));
        return flashfs_sync(fs);
    }
    if (k <= 17) {
        return record_op(fs, "/r", -1, k);
    }
    if (k == 18) {
        CHECK(flashfs_rename(fs, "/d/a", "/b"));
        return flashfs_sync(fs);
    }
    if (k == 19) { /* a new file, a directory removed and a record changed, atomically */
        CHECK(flashfs_tx_begin(fs, &tid));
        CHECK(put(fs, "/c", W | C, 0, 3000, 19));
        CHECK(flashfs_remove(fs, "/d"));
        CHECK(record_op(fs, "/r", 3, 19));
        return flashfs_tx_commit(fs, tid);
    }
    if (k == 20) {
        flashfs_file_t f;
        CHECK(flashfs_file_open(fs, &f, "/b", W));
        int32_t rc = flashfs_file_truncate(fs, &f, 100);
        int32_t closed = flashfs_file_close(fs, &f);
        return rc < 0 ? rc : closed;
    }
    if (k == 21) {
        return put(fs, "/b", W, 50, 64, 21); /* a small write inside the file */
    }
    if (k == 22) {
        CHECK(flashfs_remove(fs, "/c"));
        return flashfs_sync(fs);
    }
    if (k == 23) {
        return put(fs, "/e", W | C, 0, 0, 0);
    }
    if (k <= 28) {
        return put(fs, "/e", W | A, -1, 1024, k);
    }
    if (k == 29) {
        CHECK(flashfs_mkdir(fs, "/d2"));
        return flashfs_sync(fs);
    }
    if (k == 30) {
        CHECK(flashfs_rename(fs, "/e", "/d2/e"));
        return flashfs_sync(fs);
    }
    return put(fs, "/d2/e", W, 0, 5120, k); /* one write, atomic */
}

/* The model after step k. */
static void model_step(struct model *m, int k) {
    uint8_t buf[MAX_DATA];
    if (k == 0) {
        add(m, "/d", 1);
    } else if (k == 1) {
        pattern(buf, 1000, 1);
        m_write(m, "/d/a", 0, buf, 1000);
    } else if (k <= 6) {
        pattern(buf, 200, k);
        m_write(m, "/d/a", find(m, "/d/a")->len, buf, 200);
    } else if (k == 7) {
        add(m, "/r", 0);
    } else if (k <= 17) {
        pattern(buf, RECORD, k);
        m_write(m, "/r", find(m, "/r")->len, buf, RECORD);
    } else if (k == 18) {
        m_rename(m, "/d/a", "/b");
    } else if (k == 19) {
        pattern(buf, 3000, 19);
        m_write(m, "/c", 0, buf, 3000);
        drop(m, "/d");
        pattern(buf, RECORD, 19);
        m_write(m, "/r", 3 * RECORD, buf, RECORD);
    } else if (k == 20) {
        find(m, "/b")->len = 100;
    } else if (k == 21) {
        pattern(buf, 64, 21);
        m_write(m, "/b", 50, buf, 64);
    } else if (k == 22) {
        drop(m, "/c");
    } else if (k == 23) {
        add(m, "/e", 0);
    } else if (k <= 28) {
        pattern(buf, 1024, k);
        m_write(m, "/e", find(m, "/e")->len, buf, 1024);
    } else if (k == 29) {
        add(m, "/d2", 1);
    } else if (k == 30) {
        m_rename(m, "/e", "/d2/e");
    } else {
        pattern(buf, 5120, k);
        m_write(m, "/d2/e", 0, buf, 5120);
    }
}

/* Compares the directory `path` of the volume, recursively, with the model; counts the
 * entries seen. Returns 0 when they match, else a negative error or 1. */
static int verbose;

static int32_t compare(flashfs_t *fs, const char *path, struct model *m, int *seen) {
    static uint8_t buf[MAX_DATA + 1];
    flashfs_dir_t d;
    struct flashfs_info info;
    CHECK(flashfs_dir_open(fs, &d, path));
    int32_t r;
    while ((r = flashfs_dir_read(fs, &d, &info)) == 1) {
        if (!strcmp(info.name, ".") || !strcmp(info.name, "..")) {
            continue;
        }
        char child[300];
        snprintf(child, sizeof child, "%s/%s", strcmp(path, "/") ? path : "", info.name);
        struct entry *e = find(m, child);
        if (!e || e->dir != (info.kind == FLASHFS_TYPE_DIR)) {
            if (verbose) {
                fprintf(stderr, "  %s: not expected (or of another type)\n", child);
            }
            return 1;
        }
        ++*seen;
        if (e->dir) {
            CHECK(compare(fs, child, m, seen));
            continue;
        }
        flashfs_file_t f;
        CHECK(flashfs_file_open(fs, &f, child, FLASHFS_O_RDONLY));
        int32_t n = flashfs_file_read(fs, &f, buf, sizeof buf);
        CHECK(flashfs_file_close(fs, &f));
        if (n < 0) {
            return n;
        }
        if ((uint32_t)n != e->len || memcmp(buf, e->data, e->len) != 0 || info.size != e->len) {
            if (verbose) {
                fprintf(stderr, "  %s: %d bytes, expected %u\n", child, n, e->len);
            }
            return 1;
        }
    }
    CHECK(flashfs_dir_close(fs, &d));
    return r;
}

static int32_t matches(flashfs_t *fs, struct model *m) {
    int seen = 0;
    int32_t r = compare(fs, "/", m, &seen);
    if (r == 0 && seen != m->n) {
        if (verbose) {
            fprintf(stderr, "  %d entries, expected %d\n", seen, m->n);
        }
        return 1;
    }
    return r;
}

/* The error of the step that failed last. */
static int32_t step_error;

/* Runs the workload; returns the last step acknowledged (-1: none), and the step that
 * failed in `*failed` (-1: none). */
static int run(flashfs_t *fs, int *failed) {
    *failed = -1;
    for (int k = 0; k < STEPS; k++) {
        int32_t rc = step(fs, k);
        if (rc < 0) {
            *failed = k;
            step_error = rc;
            return k - 1;
        }
    }
    return STEPS - 1;
}

int main(int argc, char **argv) {
    int nand = argc > 1 && !strcmp(argv[1], "nand");
    long every = argc > 3 && !strcmp(argv[2], "--every") ? atol(argv[3]) : 1;
    static struct model models[STEPS];
    struct model m = {0};
    for (int k = 0; k < STEPS; k++) {
        model_step(&m, k);
        models[k] = m;
    }
    static struct model empty;

    struct ramflash rf;
    struct flashfs_config cfg;
    if (nand) {
        ramflash_nand(&rf, &cfg, 16, 16);
    } else {
        ramflash_nor(&rf, &cfg, 4096, 32);
    }
    cfg.write_buffer_bytes = 4096;
    /* POWERCUT_RAM_BUDGET: every cache and buffer shared out of that many bytes. */
    const char *budget = getenv("POWERCUT_RAM_BUDGET");
    if (budget) cfg.ram_budget = (uint32_t)atol(budget);
    int32_t rc = flashfs_format(&cfg);
    if (rc < 0) {
        fprintf(stderr, "format: %s\n", flashfs_strerror(rc));
        return 1;
    }
    size_t size = (size_t)rf.unit_size * rf.units;
    uint8_t *formatted = malloc(size);
    memcpy(formatted, rf.mem, size);

    /* The whole workload without a cut: how many callbacks it makes. */
    flashfs_t *fs;
    ramflash_reboot(&rf);
    rf.cut_at = -1;
    int failed;
    if ((rc = flashfs_mount(&cfg, &fs)) < 0 || run(fs, &failed) != STEPS - 1 ||
        (rc = flashfs_unmount(fs)) < 0) {
        fprintf(stderr, "workload without cuts failed: step %d, %s\n", failed,
                flashfs_strerror(rc < 0 ? rc : step_error));
        return 1;
    }
    long calls = rf.calls, erases = rf.erases;
    if ((rc = flashfs_mount(&cfg, &fs)) < 0 || matches(fs, &models[STEPS - 1]) != 0) {
        fprintf(stderr, "workload without cuts: wrong content after remount\n");
        return 1;
    }
    flashfs_unmount(fs);

    long cuts = 0, torn = 0;
    for (long at = 0; at < calls; at += every) {
        memcpy(rf.mem, formatted, size);
        bool tear = at % 2 == 1;
        ramflash_cut(&rf, at, tear);
        int acked = -1;
        failed = -1;
        if (flashfs_mount(&cfg, &fs) == 0) {
            acked = run(fs, &failed);
            flashfs_unmount(fs); /* fails once the power is off; frees the handle */
        }
        ramflash_reboot(&rf);
        cuts++;
        torn += tear;
        if ((rc = flashfs_mount(&cfg, &fs)) < 0) {
            fprintf(stderr, "cut at callback %ld%s: mount: %s\n", at, tear ? " (torn)" : "",
                    flashfs_strerror(rc));
            return 1;
        }
        /* What the acknowledged steps made, or that and the interrupted one. */
        struct model *before = acked >= 0 ? &models[acked] : &empty;
        struct model *after = failed >= 0 ? &models[failed] : before;
        if (matches(fs, before) != 0 && matches(fs, after) != 0) {
            verbose = 1;
            matches(fs, before);
            matches(fs, after);
            fprintf(stderr, "cut at callback %ld%s (step %d acknowledged, step %d cut): "
                            "the volume holds neither state\n",
                    at, tear ? " (torn)" : "", acked, failed);
            return 1;
        }
        /* And it keeps working. */
        if ((rc = put(fs, "/z", FLASHFS_O_WRONLY | FLASHFS_O_CREAT, 0, 300, 99)) < 0 ||
            (rc = flashfs_unmount(fs)) < 0 || (rc = flashfs_mount(&cfg, &fs)) < 0) {
            fprintf(stderr, "cut at callback %ld: write after recovery: %s\n", at,
                    flashfs_strerror(rc));
            return 1;
        }
        struct flashfs_info info;
        if ((rc = flashfs_stat(fs, "/z", &info)) < 0 || info.size != 300) {
            fprintf(stderr, "cut at callback %ld: /z lost after remount\n", at);
            return 1;
        }
        flashfs_unmount(fs);
    }
    printf("%s: %ld callbacks in the workload (%ld erases); %ld cuts (%ld torn), every volume mounted "
           "with what was acknowledged\n",
           nand ? "nand" : "nor", calls, erases, cuts, torn);
    ramflash_free(&rf);
    free(formatted);
    return 0;
}
