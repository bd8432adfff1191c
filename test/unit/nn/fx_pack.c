/* test/unit/nn/fx_pack.h. */
#include "test/unit/nn/fx_pack.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

pack load_pack(const char *dir, const char *name)
{
    char path[512];
    pack p = {0};
    snprintf(path, sizeof path, "%s/test/fixtures/%s/%s.txt", test_root_dir(), dir, name);
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "%s", path);
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        p.names = realloc(p.names, (p.n + 1) * sizeof *p.names);
        p.off = realloc(p.off, (p.n + 1) * sizeof *p.off);
        p.count = realloc(p.count, (p.n + 1) * sizeof *p.count);
        cr_assert_eq(sscanf(line, "%127s %zu %zu", p.names[p.n], &p.off[p.n], &p.count[p.n]), 3, "%s", line);
        p.n++;
    }
    fclose(fp);
    cr_assert_gt(p.n, 0, "%s is empty", path);
    snprintf(path, sizeof path, "%s/test/fixtures/%s/%s.f32", test_root_dir(), dir, name);
    fp = fopen(path, "rb");
    cr_assert_not_null(fp, "%s", path);
    size_t total = p.off[p.n - 1] + p.count[p.n - 1];
    p.data = malloc(total * sizeof(float));
    cr_assert_eq(fread(p.data, sizeof(float), total, fp), total, "%s is short", path);
    fclose(fp);
    return p;
}

void pack_free(pack *p)
{
    free(p->names), free(p->off), free(p->count), free(p->data);
    memset(p, 0, sizeof *p);
}

const float *pack_get(const pack *p, const char *name, size_t *n)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->names[i], name)) {
            if (n) *n = p->count[i];
            return p->data + p->off[i];
        }
    return NULL;
}

const float *pack_must(const pack *p, const char *name, size_t *n)
{
    const float *v = pack_get(p, name, n);
    cr_assert_not_null(v, "fixture has no %s", name);
    return v;
}

double pack_rel_err(const float *a, const float *b, size_t n, double scale_b)
{
    return test_err_ff(a, b, n, scale_b, NULL);
}
