/* Shard ranges, paths and the shard file: writing one, checking and reading it (see runner_shard.h). */
#include "core/runner/runner_shard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

static const char shard_magic[8] = {'E', 'S', 'P', '3', 'S', 'H', 'D', '1'};

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void runner_shard_range(const runner_plan *plan, size_t k, size_t *first, size_t *count)
{
    size_t n = plan->job->n_items;
    *first = k * plan->chunk_size;
    *count = n - *first < plan->chunk_size ? n - *first : plan->chunk_size;
}

char *runner_shard_path(const char *work_dir, size_t k)
{
    return xasprintf("%s/shard.%zu", work_dir, k);
}

const char *runner_item_name(const runner_job *job, size_t idx)
{
    static char buf[64];
    const char *name = job->item_name ? job->item_name(idx, job->arg) : NULL;
    if (name) return name;
    snprintf(buf, sizeof buf, "item %zu", idx);
    return buf;
}

int runner_shard_read_header(FILE *fp, size_t first, size_t count)
{
    unsigned char h[24];
    return fread(h, 1, sizeof h, fp) == sizeof h && memcmp(h, shard_magic, 8) == 0 && get_u64(h + 8) == first &&
           get_u64(h + 16) == count;
}

int runner_shard_read_item(FILE *fp, uint64_t *idx, uint64_t *len)
{
    unsigned char h[16];
    if (fread(h, 1, sizeof h, fp) != sizeof h) return 0;
    *idx = get_u64(h);
    *len = get_u64(h + 8);
    return 1;
}

int runner_shard_done(const runner_plan *plan, size_t k)
{
    size_t first, count;
    runner_shard_range(plan, k, &first, &count);
    char *path = runner_shard_path(plan->job->work_dir, k);
    FILE *fp = fopen(path, "rb");
    free(path);
    if (!fp) return 0;
    int ok = runner_shard_read_header(fp, first, count);
    fclose(fp);
    return ok;
}

int runner_write_shard(const runner_plan *plan, size_t k, void *env, void (*before_item)(size_t idx, void *ctx),
                       void *ctx, esp_err *err)
{
    const runner_job *job = plan->job;
    size_t first, count;
    runner_shard_range(plan, k, &first, &count);
    char *path = runner_shard_path(job->work_dir, k);
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) {
        free(path);
        return -1;
    }
    unsigned char h[24];
    memcpy(h, shard_magic, 8);
    put_u64(h + 8, first);
    put_u64(h + 16, count);
    fwrite(h, 1, sizeof h, af.fp);
    runner_buf out = {0};
    int rc = 0;
    for (size_t idx = first; idx < first + count; idx++) {
        if (before_item) before_item(idx, ctx);
        out.len = 0;
        esp_err e;
        strcpy(e.msg, "forward failed");
        if (job->forward(idx, env, &out, &e) != 0) {
            rc = esp_fail(err, "%s: %s", runner_item_name(job, idx), e.msg);
            break;
        }
        put_u64(h, idx);
        put_u64(h + 8, out.len);
        fwrite(h, 1, 16, af.fp);
        if (out.len) fwrite(out.data, 1, out.len, af.fp);
    }
    runner_buf_free(&out);
    if (rc == 0 && ferror(af.fp)) rc = esp_fail(err, "%s: write failed: %s (check free disk space)", path, strerror(errno));
    if (rc == 0) rc = atomic_commit(&af, err);
    else atomic_abort(&af);
    free(path);
    return rc;
}
