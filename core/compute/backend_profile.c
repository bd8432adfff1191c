/* The per-op profiler (core/compute/backend_profile.h): timing trampolines generated from the one
 * op list, the peak measurement, and the report. */
#include "core/compute/backend_profile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/base/progress.h"
#include "core/compute/op_cost.h"

/* Rows after the ops: the memory entries. */
enum { ROW_COPY_H2D = BACKEND_OP_COUNT, ROW_COPY_D2H, ROW_COPY_D2D, ROW_FILL, N_ROWS };

static const char *const layer_names[PROF_LAYER_COUNT] = {
#define X(ID, name) name,
    PROF_LAYERS(X)
#undef X
};

typedef struct prof_cell {
    uint64_t calls;
    double seconds, flops, bytes;
} prof_cell;

/* A device op's time not read yet: its marks and the cell it goes to. */
typedef struct prof_pending {
    prof_cell *cell;
    int a, b;
} prof_pending;

/* Marks kept before they are read (and the stream waited for): a step's ops, read at its end. */
enum { PENDING_MAX = 8192 };

struct backend_profile {
    backend saved;      /* the backend's entries before profiling: the trampolines call these */
    prof_layer layer;   /* what ops are charged to now */
    int marks;          /* a device backend: each op timed by be->mark around it */
    prof_pending *pending;
    int n_pending;
    double started;     /* now_seconds() when profiling began */
    double peak_flops;  /* per second, measured */
    double peak_bytes;  /* per second, measured */
    int peaks_given;    /* ESPNET3_PROFILE_PEAK_* replaced a measured peak */
    prof_cell cells[PROF_LAYER_COUNT][N_ROWS];
};

int backend_profile_requested(void)
{
    const char *v = getenv("ESPNET3_PROFILE");
    return v && *v && strcmp(v, "0") != 0;
}

prof_layer backend_profile_set_layer(backend *be, prof_layer layer)
{
    ESP_CHECK(be->profile && layer >= 0 && layer < PROF_LAYER_COUNT);
    prof_layer prev = be->profile->layer;
    be->profile->layer = layer;
    return prev;
}

/* ---- the trampolines ------------------------------------------------------------------------- */

typedef struct prof_call {
    backend *be;
    int row;
    op_cost cost;
    double t0;
    int mark;
} prof_call;

/* The device times of the pending ops (waiting for the last one's mark), then the marks are free. */
static void read_marks(backend *be)
{
    struct backend_profile *p = be->profile;
    if (!p || !p->marks) return;
    for (int i = 0; i < p->n_pending; i++)
        p->pending[i].cell->seconds += p->saved.mark_seconds(be, p->pending[i].a, p->pending[i].b);
    p->n_pending = 0;
    p->saved.marks_reset(be);
}

static prof_call call_begin(backend *be, int row, op_cost cost)
{
    struct backend_profile *p = be->profile;
    prof_call k = {.be = be, .row = row, .cost = cost};
    if (p->marks) k.mark = p->saved.mark(be);
    else k.t0 = now_seconds();
    return k;
}

/* Runs when the trampoline's call has returned (the cleanup of its prof_call). A device op's time
 * is read later: at a synchronize, after a copy to the host (the stream is idle then), or when
 * PENDING_MAX are waiting. */
static void call_end(prof_call *k)
{
    backend *be = k->be;
    struct backend_profile *p = be->profile;
    prof_cell *c = &p->cells[p->layer][k->row];
    c->calls++;
    c->flops += k->cost.flops;
    c->bytes += k->cost.bytes;
    if (!p->marks) {
        c->seconds += now_seconds() - k->t0;
        return;
    }
    p->pending[p->n_pending++] = (prof_pending){.cell = c, .a = k->mark, .b = p->saved.mark(be)};
    if (p->n_pending == PENDING_MAX || k->row == ROW_COPY_D2H) read_marks(be);
}

#define TIMED(row, cost) __attribute__((cleanup(call_end))) prof_call timed_call_ = call_begin(be, row, cost)

#define X(OP, name, ret, params, args)                                 \
    static ret prof_##name params                                      \
    {                                                                  \
        TIMED(BACKEND_OP_##OP, op_cost_##name args);                   \
        return be->profile->saved.name args;                           \
    }
BACKEND_OPS(X)
#undef X

static void prof_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    int row = kind == BACKEND_HOST_TO_DEVICE ? ROW_COPY_H2D : kind == BACKEND_DEVICE_TO_HOST ? ROW_COPY_D2H : ROW_COPY_D2D;
    TIMED(row, ((op_cost){.bytes = kind == BACKEND_DEVICE_TO_DEVICE ? 2.0 * bytes : (double)bytes}));
    be->profile->saved.copy(be, dst, src, bytes, kind);
}

static void prof_fill(backend *be, void *q, int byte, size_t bytes)
{
    TIMED(ROW_FILL, ((op_cost){.bytes = (double)bytes}));
    be->profile->saved.fill(be, q, byte, bytes);
}

static void prof_synchronize(backend *be)
{
    be->profile->saved.synchronize(be);
    read_marks(be);
}

/* ---- peaks ----------------------------------------------------------------------------------- */

/* The best of a few timed runs of the backend's own GEMM and device-to-device copy; nothing is
 * run when ESPNET3_PROFILE_PEAK_GFLOPS and _GBPS give both. */
static void measure_peaks(backend *be, struct backend_profile *p)
{
    const char *gf = getenv("ESPNET3_PROFILE_PEAK_GFLOPS"), *gb = getenv("ESPNET3_PROFILE_PEAK_GBPS");
    if (gf && atof(gf) > 0 && gb && atof(gb) > 0) {
        p->peak_flops = atof(gf) * 1e9, p->peak_bytes = atof(gb) * 1e9, p->peaks_given = 1;
        return;
    }
    const int n = be->kind == BACKEND_CUDA ? 4096 : 512, runs = 4;
    const size_t copy_bytes = (size_t)64 << 20;
    size_t mat = (size_t)n * n * sizeof(float);
    float *a = be->alloc(be, mat), *b = be->alloc(be, mat), *c = be->alloc(be, mat);
    double best = 1e30;
    for (int r = 0; r <= runs; r++) {
        be->synchronize(be);
        double t0 = now_seconds();
        be->gemm(be, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        be->synchronize(be);
        if (r > 0 && now_seconds() - t0 < best) best = now_seconds() - t0; /* run 0 warms up */
    }
    p->peak_flops = 2.0 * n * n * n / (best > 0 ? best : 1e-9);
    be->free(be, a), be->free(be, b), be->free(be, c);
    void *src = be->alloc(be, copy_bytes), *dst = be->alloc(be, copy_bytes);
    best = 1e30;
    for (int r = 0; r <= runs; r++) {
        be->synchronize(be);
        double t0 = now_seconds();
        be->copy(be, dst, src, copy_bytes, BACKEND_DEVICE_TO_DEVICE);
        be->synchronize(be);
        if (r > 0 && now_seconds() - t0 < best) best = now_seconds() - t0;
    }
    p->peak_bytes = 2.0 * copy_bytes / (best > 0 ? best : 1e-9);
    be->free(be, src), be->free(be, dst);
    if (gf && atof(gf) > 0) p->peak_flops = atof(gf) * 1e9, p->peaks_given = 1;
    if (gb && atof(gb) > 0) p->peak_bytes = atof(gb) * 1e9, p->peaks_given = 1;
}

/* ---- start, stop ----------------------------------------------------------------------------- */

void backend_profile_start(backend *be)
{
    if (be->profile) return;
    struct backend_profile *p = xcalloc(1, sizeof *p);
    p->marks = be->mark != NULL;
    ESP_CHECK(p->marks || be->kind != BACKEND_CUDA); /* a device backend times its ops on the device */
    if (p->marks) p->pending = xcalloc(PENDING_MAX, sizeof *p->pending);
    measure_peaks(be, p);
    p->saved = *be;
#define X(OP, name, ret, params, args) \
    if (be->name) be->name = prof_##name;
    BACKEND_OPS(X)
#undef X
    be->copy = prof_copy;
    be->fill = prof_fill;
    be->synchronize = prof_synchronize;
    p->started = now_seconds();
    be->profile = p;
}

void backend_profile_stop(backend *be)
{
    struct backend_profile *p = be->profile;
    if (!p) return;
#define X(OP, name, ret, params, args) be->name = p->saved.name;
    BACKEND_OPS(X)
#undef X
    be->copy = p->saved.copy;
    be->fill = p->saved.fill;
    be->synchronize = p->saved.synchronize;
    if (p->marks) {
        p->saved.synchronize(be);
        p->n_pending = 0; /* what was not read is dropped with the counts */
        p->saved.marks_reset(be);
    }
    be->profile = NULL;
    free(p->pending);
    free(p);
}

prof_counts backend_profile_counts(backend *be, backend_op op, prof_layer layer)
{
    ESP_CHECK(op >= 0 && op < BACKEND_OP_COUNT && layer >= 0 && layer < PROF_LAYER_COUNT);
    if (!be->profile) return (prof_counts){0};
    read_marks(be);
    const prof_cell *c = &be->profile->cells[layer][op];
    return (prof_counts){.calls = c->calls, .seconds = c->seconds, .flops = c->flops, .bytes = c->bytes};
}

/* ---- the report ------------------------------------------------------------------------------ */

typedef struct report_row {
    const char *name;
    prof_cell c;
} report_row;

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const report_row *)a)->c.seconds, y = ((const report_row *)b)->c.seconds;
    return (x < y) - (x > y);
}

static void add_cell(prof_cell *to, const prof_cell *c)
{
    to->calls += c->calls;
    to->seconds += c->seconds;
    to->flops += c->flops;
    to->bytes += c->bytes;
}

static const char *row_name(int row)
{
    switch (row) {
    case ROW_COPY_H2D: return "copy host to device";
    case ROW_COPY_D2H: return "copy device to host";
    case ROW_COPY_D2D: return "copy device to device";
    case ROW_FILL: return "fill";
    default: return backend_op_name((backend_op)row);
    }
}

static double roofline(const struct backend_profile *p, const prof_cell *c)
{
    double f = c->flops / p->peak_flops, b = c->bytes / p->peak_bytes;
    return f > b ? f : b;
}

double backend_profile_roofline_seconds(const backend *be)
{
    const struct backend_profile *p = be->profile;
    if (!p) return 0;
    double s = 0;
    for (int l = 0; l < PROF_LAYER_COUNT; l++)
        for (int r = 0; r < N_ROWS; r++) s += roofline(p, &p->cells[l][r]);
    return s;
}

static void print_table(const struct backend_profile *p, const char *head, report_row *rows, int n, double wall,
                        FILE *out)
{
    qsort(rows, (size_t)n, sizeof *rows, by_time_desc);
    fprintf(out, "%-30s %9s %10s %6s %9s %8s %11s %9s\n", head, "calls", "total ms", "share", "GFLOP/s", "GB/s",
            "roofline ms", "x roofline");
    for (int i = 0; i < n; i++) {
        const prof_cell *c = &rows[i].c;
        if (!c->calls) continue;
        double roof = roofline(p, c);
        double s = c->seconds > 0 ? c->seconds : 1e-12;
        fprintf(out, "%-30s %9llu %10.2f %5.1f%% %9.2f %8.2f %11.3f %9.1f\n", rows[i].name, (unsigned long long)c->calls,
                1e3 * c->seconds, 100 * c->seconds / wall, c->flops / s * 1e-9, c->bytes / s * 1e-9, 1e3 * roof,
                roof > 0 ? c->seconds / roof : 0.0);
    }
}

void backend_profile_report(backend *be, const char *what, FILE *out)
{
    const struct backend_profile *p = be->profile;
    if (!p) return;
    read_marks(be);
    double wall = now_seconds() - p->started;
    if (wall <= 0) wall = 1e-9;
    report_row ops[N_ROWS], layers[PROF_LAYER_COUNT];
    prof_cell total = {0};
    for (int r = 0; r < N_ROWS; r++) {
        ops[r] = (report_row){.name = row_name(r)};
        for (int l = 0; l < PROF_LAYER_COUNT; l++) add_cell(&ops[r].c, &p->cells[l][r]);
        add_cell(&total, &ops[r].c);
    }
    for (int l = 0; l < PROF_LAYER_COUNT; l++) {
        layers[l] = (report_row){.name = layer_names[l]};
        for (int r = 0; r < N_ROWS; r++) add_cell(&layers[l].c, &p->cells[l][r]);
    }
    fprintf(out, "profile (%s backend): %s: %.3f s wall, %.3f s in ops and copies (%.1f%%)\n", be->name, what, wall,
            total.seconds, 100 * total.seconds / wall);
    fprintf(out, "peaks %s: GEMM %.1f GFLOP/s, device copy %.1f GB/s%s\n",
            p->peaks_given ? "(ESPNET3_PROFILE_PEAK_*)" : "measured on this backend", p->peak_flops * 1e-9,
            p->peak_bytes * 1e-9,
            p->marks ? "; each op timed on the device by events recorded around it (a wait of the device for the "
                       "host's next launch inside that span counts to the op)"
                     : "");
    double roof = backend_profile_roofline_seconds(be);
    fprintf(out, "roofline ms = max(FLOPs / GEMM peak, bytes / copy peak); x roofline = total / roofline; all "
                 "counted: %.2f ms in ops and copies against a roofline of %.2f ms (x %.1f)\n\n",
            1e3 * total.seconds, 1e3 * roof, roof > 0 ? total.seconds / roof : 0.0);
    print_table(p, "op", ops, N_ROWS, wall, out);
    fputc('\n', out);
    print_table(p, "layer kind", layers, PROF_LAYER_COUNT, wall, out);
}
