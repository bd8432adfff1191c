#include "core/formats/torch_pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values live in one arena and refer to each other by index, so the memo can share them. */
typedef enum pv_kind {
    PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_TUPLE, PV_LIST, PV_DICT, PV_GLOBAL, PV_STORAGE, PV_TENSOR,
    PV_OBJECT /* what a class outside the state dict's subset would have built: never built, only named */
} pv_kind;

typedef enum pv_global {
    G_ORDERED_DICT, G_REBUILD_TENSOR, G_REBUILD_PARAMETER, G_STORAGE,
    G_OTHER /* any other class or function: named, never imported or called */
} pv_global;

typedef struct pv {
    pv_kind kind;
    int64_t i;      /* INT/BOOL value; FLOAT: the double's bits; STORAGE numel; GLOBAL: pv_global */
    int dtype;      /* GLOBAL storage type / STORAGE: pt_dtype */
    char *s;        /* STR; GLOBAL and OBJECT "module.name"; STORAGE key */
    int *items;     /* TUPLE/LIST elements; DICT keys and values alternating */
    size_t n, cap;  /* entries of items */
} pv;

/* A tensor value (pv.i indexes vm.tens). */
typedef struct pv_tensor {
    int storage;    /* its STORAGE value */
    int64_t offset;
    int ndim;
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
} pv_tensor;

typedef struct vm {
    const unsigned char *p;
    size_t len, pos, op_pos;
    const char *what;
    esp_err *err;
    pv *vals;
    size_t nv, cap_v;
    int *stack;
    size_t ns, cap_s;
    size_t *marks;
    size_t nm, cap_m;
    int *memo;
    size_t n_memo;
    pv_tensor *tens;
    size_t nt, cap_t;
} vm;

static const char *const kind_names[] = {"None", "bool", "int", "float", "str", "tuple",
                                         "list", "dict", "class", "storage", "tensor", "object"};

size_t pt_dtype_size(pt_dtype t)
{
    static const size_t sz[] = {4, 2, 2, 8, 8, 4};
    return sz[t];
}

const char *pt_dtype_name(pt_dtype t)
{
    static const char *const names[] = {"float32", "float16", "bfloat16", "float64", "int64", "int32"};
    return names[t];
}

static int fail(vm *m, const char *fmt, const char *a, const char *b)
{
    char what[512], sa[200], sb[200];
    snprintf(what, sizeof what, fmt, a ? esp_shown(a, sa, sizeof sa) : a, b ? esp_shown(b, sb, sizeof sb) : b);
    return esp_fail(m->err, "%s: pickle byte %zu: %s (a checkpoint may hold only a state dict of tensors)", m->what,
                    m->op_pos, what);
}

static void grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    *p = realloc(*p, c * elem);
    ESP_CHECK(*p != NULL);
    *cap = c;
}

static int new_val(vm *m, pv_kind k)
{
    grow((void **)&m->vals, &m->cap_v, m->nv + 1, sizeof *m->vals);
    memset(&m->vals[m->nv], 0, sizeof *m->vals);
    m->vals[m->nv].kind = k;
    return (int)m->nv++;
}

static void push(vm *m, int v)
{
    grow((void **)&m->stack, &m->cap_s, m->ns + 1, sizeof *m->stack);
    m->stack[m->ns++] = v;
}

static int pop(vm *m, int *v)
{
    size_t floor = m->nm ? m->marks[m->nm - 1] : 0;
    if (m->ns <= floor) return fail(m, "stack underflow%s%s", "", "");
    *v = m->stack[--m->ns];
    return 0;
}

static int top(vm *m, int *v)
{
    size_t floor = m->nm ? m->marks[m->nm - 1] : 0;
    if (m->ns <= floor) return fail(m, "stack underflow%s%s", "", "");
    *v = m->stack[m->ns - 1];
    return 0;
}

static void add_item(vm *m, int container, int v)
{
    pv *c = &m->vals[container];
    grow((void **)&c->items, &c->cap, c->n + 1, sizeof *c->items);
    c->items[c->n++] = v;
}

static int take(vm *m, size_t n, const unsigned char **out)
{
    if (m->len - m->pos < n) return fail(m, "truncated (an argument runs past the end)%s%s", "", "");
    *out = m->p + m->pos;
    m->pos += n;
    return 0;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static int push_str(vm *m, const unsigned char *s, size_t n)
{
    int v = new_val(m, PV_STR);
    char *c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    if (strlen(c) != n) { /* bytes through _codecs.encode (numpy scalars): never a key or a name */
        free(c);
        m->vals[v].kind = PV_OBJECT;
        c = xstrdup("str with a NUL byte");
    }
    m->vals[v].s = c;
    push(m, v);
    return 0;
}

static int memo_put(vm *m, uint64_t idx)
{
    if (idx > (uint64_t)m->nv + 1024) return fail(m, "memo index out of range%s%s", "", "");
    int v;
    if (top(m, &v) != 0) return -1;
    if (idx >= m->n_memo) {
        m->memo = realloc(m->memo, (idx + 1) * sizeof *m->memo);
        ESP_CHECK(m->memo != NULL);
        for (size_t i = m->n_memo; i <= idx; i++) m->memo[i] = -1;
        m->n_memo = idx + 1;
    }
    m->memo[idx] = v;
    return 0;
}

static int memo_get(vm *m, uint64_t idx)
{
    if (idx >= m->n_memo || m->memo[idx] < 0) return fail(m, "memo entry not defined%s%s", "", "");
    push(m, m->memo[idx]);
    return 0;
}

/* Pops everything above the last MARK into a new tuple or list. */
static int pop_mark(vm *m, pv_kind k, int *out)
{
    if (!m->nm) return fail(m, "no MARK on the stack%s%s", "", "");
    size_t base = m->marks[--m->nm];
    int v = new_val(m, k);
    for (size_t i = base; i < m->ns; i++) add_item(m, v, m->stack[i]);
    m->ns = base;
    *out = v;
    return 0;
}

static int op_global(vm *m)
{
    const char *line[2];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        const unsigned char *s = m->p + m->pos, *nl = memchr(s, '\n', m->len - m->pos);
        if (!nl) return fail(m, "truncated GLOBAL%s%s", "", "");
        line[k] = (const char *)s, n[k] = (size_t)(nl - s);
        m->pos += n[k] + 1;
    }
    char name[256];
    if (n[0] + n[1] + 2 > sizeof name) return fail(m, "GLOBAL with a name too long%s%s", "", "");
    snprintf(name, sizeof name, "%.*s.%.*s", (int)n[0], line[0], (int)n[1], line[1]);
    static const struct { const char *name; pv_global g; int dtype; } allowed[] = {
        {"collections.OrderedDict", G_ORDERED_DICT, 0},
        {"torch._utils._rebuild_tensor_v2", G_REBUILD_TENSOR, 0},
        {"torch._utils._rebuild_parameter", G_REBUILD_PARAMETER, 0},
        {"torch.FloatStorage", G_STORAGE, PT_F32},
        {"torch.HalfStorage", G_STORAGE, PT_F16},
        {"torch.BFloat16Storage", G_STORAGE, PT_BF16},
        {"torch.DoubleStorage", G_STORAGE, PT_F64},
        {"torch.LongStorage", G_STORAGE, PT_I64},
        {"torch.IntStorage", G_STORAGE, PT_I32},
    };
    int v = new_val(m, PV_GLOBAL);
    m->vals[v].i = G_OTHER;
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
        if (!strcmp(name, allowed[i].name)) {
            m->vals[v].i = allowed[i].g;
            m->vals[v].dtype = allowed[i].dtype;
        }
    /* Any other class (a numpy scalar in ESPnet2's reporter, an OmegaConf DictConfig in a
     * Lightning checkpoint's hyper-parameters, os.system in a hostile file) is only named: what
     * it builds becomes an opaque object, which is an error only where a tensor is needed. */
    for (char *c = name; *c; c++)
        if ((unsigned char)*c < 32 || (unsigned char)*c > 126) *c = '?';
    m->vals[v].s = xstrdup(name);
    push(m, v);
    return 0;
}

/* An opaque object standing for what `cls` (a GLOBAL) would have built. */
static int push_object(vm *m, int cls)
{
    char *name = xstrdup(m->vals[cls].s);
    int v = new_val(m, PV_OBJECT);
    m->vals[v].s = name;
    push(m, v);
    return 0;
}

/* BINPERSID: ('storage', <storage class>, key, location, numel). */
static int op_persid(vm *m)
{
    int t;
    if (pop(m, &t) != 0) return -1;
    const pv *p = &m->vals[t];
    if (p->kind != PV_TUPLE || p->n != 5)
        return fail(m, "BINPERSID of something other than a storage reference%s%s", "", "");
    const pv *tag = &m->vals[p->items[0]], *cls = &m->vals[p->items[1]], *key = &m->vals[p->items[2]],
             *numel = &m->vals[p->items[4]];
    if (tag->kind != PV_STR || strcmp(tag->s, "storage") || cls->kind != PV_GLOBAL || cls->i != G_STORAGE ||
        key->kind != PV_STR || numel->kind != PV_INT || numel->i < 0)
        return fail(m, "BINPERSID of a malformed storage reference%s%s", "", "");
    for (const char *c = key->s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_'))
            return fail(m, "storage key '%s' is not a plain name%s", key->s, "");
    char *k = xstrdup(key->s);
    int64_t n = numel->i;
    int dtype = cls->dtype;
    int v = new_val(m, PV_STORAGE); /* moves m->vals: the pointers above are not used after it */
    m->vals[v].s = k;
    m->vals[v].i = n;
    m->vals[v].dtype = dtype;
    push(m, v);
    return 0;
}

static int int_tuple(vm *m, int t, int64_t *out, int *n)
{
    const pv *p = &m->vals[t];
    if (p->kind != PV_TUPLE || p->n > PT_MAX_DIMS) return -1;
    for (size_t i = 0; i < p->n; i++) {
        const pv *e = &m->vals[p->items[i]];
        if (e->kind != PV_INT || e->i < 0 || e->i > ((int64_t)1 << 40)) return -1;
        out[i] = e->i;
    }
    *n = (int)p->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
static int rebuild_tensor(vm *m, const pv *args, int *out)
{
    if (args->n < 6 || args->n > 7) return fail(m, "_rebuild_tensor_v2 with an unexpected argument count%s%s", "", "");
    const pv *st = &m->vals[args->items[0]], *off = &m->vals[args->items[1]];
    pv_tensor t = {.storage = args->items[0]};
    int ns = 0;
    if (st->kind != PV_STORAGE || off->kind != PV_INT || off->i < 0 ||
        int_tuple(m, args->items[2], t.shape, &t.ndim) != 0 || int_tuple(m, args->items[3], t.stride, &ns) != 0 ||
        ns != t.ndim)
        return fail(m, "_rebuild_tensor_v2 with malformed arguments%s%s", "", "");
    t.offset = off->i;
    grow((void **)&m->tens, &m->cap_t, m->nt + 1, sizeof *m->tens);
    m->tens[m->nt] = t;
    int v = new_val(m, PV_TENSOR);
    m->vals[v].i = (int64_t)m->nt++;
    *out = v;
    return 0;
}

static int op_reduce(vm *m)
{
    int args, fn;
    if (pop(m, &args) != 0 || pop(m, &fn) != 0) return -1;
    const pv *f = &m->vals[fn], *a = &m->vals[args];
    if (f->kind != PV_GLOBAL || a->kind != PV_TUPLE)
        return fail(m, "REDUCE of a %s is not allowed%s", kind_names[f->kind], "");
    int v = 0;
    switch ((pv_global)f->i) {
    case G_ORDERED_DICT:
        if (a->n != 0) return fail(m, "REDUCE of collections.OrderedDict with arguments%s%s", "", "");
        v = new_val(m, PV_DICT);
        break;
    case G_REBUILD_TENSOR:
        if (rebuild_tensor(m, a, &v) != 0) return -1;
        break;
    case G_REBUILD_PARAMETER: /* (data, requires_grad, backward_hooks): the tensor itself */
        if (a->n != 3 || m->vals[a->items[0]].kind != PV_TENSOR)
            return fail(m, "_rebuild_parameter with malformed arguments%s%s", "", "");
        v = a->items[0];
        break;
    case G_OTHER:
        return push_object(m, fn);
    default:
        return fail(m, "REDUCE of %s is not allowed%s", f->s, "");
    }
    push(m, v);
    return 0;
}

/* NEWOBJ: cls.__new__(cls, *args) for a class outside the subset (OmegaConf's containers,
 * copyreg's protocol-2 objects): an opaque object. */
static int op_newobj(vm *m)
{
    int args, cls;
    if (pop(m, &args) != 0 || pop(m, &cls) != 0) return -1;
    const pv *c = &m->vals[cls];
    if (c->kind != PV_GLOBAL || c->i != G_OTHER || m->vals[args].kind != PV_TUPLE)
        return fail(m, "NEWOBJ of a %s is not allowed%s", kind_names[c->kind], "");
    return push_object(m, cls);
}

static int set_items(vm *m, size_t base)
{
    if ((m->ns - base) % 2) return fail(m, "SETITEMS with an odd number of values%s%s", "", "");
    if (base == 0) return fail(m, "SETITEMS without a dict%s%s", "", "");
    int d = m->stack[base - 1];
    if (m->vals[d].kind != PV_DICT && m->vals[d].kind != PV_OBJECT)
        return fail(m, "SETITEM(S) on a %s%s", kind_names[m->vals[d].kind], "");
    if (m->vals[d].kind == PV_DICT) /* an opaque object's items (a defaultdict's) are dropped */
        for (size_t i = base; i < m->ns; i++) add_item(m, d, m->stack[i]);
    m->ns = base;
    return 0;
}

static int op_build(vm *m)
{
    int state, obj;
    if (pop(m, &state) != 0 || top(m, &obj) != 0) return -1;
    /* OrderedDict's state: its attributes ({'_metadata': ...}, module versions), ignored; an
     * opaque object's state (a numpy dtype's tuple, a DictConfig's dict) is dropped with it. */
    if (m->vals[obj].kind == PV_OBJECT) return 0;
    if (m->vals[obj].kind != PV_DICT || (m->vals[state].kind != PV_DICT && m->vals[state].kind != PV_NONE))
        return fail(m, "BUILD of a %s is not allowed%s", kind_names[m->vals[obj].kind], "");
    return 0;
}

/* Values a pickle may create: a large model's state dict with optimizer states needs well under a
 * million; the cap bounds what a hostile pickle makes us allocate (~56 bytes each). */
enum { MAX_VALUES = 4 << 20 };

static int step(vm *m, int *done)
{
    const unsigned char *a = NULL;
    int v = 0, w = 0;
    m->op_pos = m->pos;
    if (m->nv >= MAX_VALUES) return fail(m, "more values than a state dict holds%s%s", "", "");
    unsigned char op = m->p[m->pos++];
    switch (op) {
    case 0x80: /* PROTO */
        if (take(m, 1, &a) != 0) return -1;
        if (a[0] < 2 || a[0] > 5) return fail(m, "unsupported pickle protocol%s%s", "", "");
        return 0;
    case 0x95: return take(m, 8, &a); /* FRAME: a length hint */
    case '.': *done = 1; return 0;    /* STOP */
    case '(':
        grow((void **)&m->marks, &m->cap_m, m->nm + 1, sizeof *m->marks);
        m->marks[m->nm++] = m->ns;
        return 0;
    case '}': push(m, new_val(m, PV_DICT)); return 0;
    case ']': push(m, new_val(m, PV_LIST)); return 0;
    case ')': push(m, new_val(m, PV_TUPLE)); return 0;
    case 'N': push(m, new_val(m, PV_NONE)); return 0;
    case 0x88: case 0x89:
        v = new_val(m, PV_BOOL);
        m->vals[v].i = op == 0x88;
        push(m, v);
        return 0;
    case 't': case 'l':
        if (pop_mark(m, op == 't' ? PV_TUPLE : PV_LIST, &v) != 0) return -1;
        push(m, v);
        return 0;
    case 0x85: case 0x86: case 0x87: {
        int n = op - 0x84, it[3];
        for (int i = n - 1; i >= 0; i--)
            if (pop(m, &it[i]) != 0) return -1;
        v = new_val(m, PV_TUPLE);
        for (int i = 0; i < n; i++) add_item(m, v, it[i]);
        push(m, v);
        return 0;
    }
    case 'K': case 'M': case 'J': {
        int n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (take(m, (size_t)n, &a) != 0) return -1;
        v = new_val(m, PV_INT);
        m->vals[v].i = op == 'J' ? (int64_t)(int32_t)(uint32_t)le(a, 4) : (int64_t)le(a, n);
        push(m, v);
        return 0;
    }
    case 0x8a: { /* LONG1 */
        if (take(m, 1, &a) != 0) return -1;
        int n = a[0];
        if (n > 8) return fail(m, "LONG1 of more than 8 bytes%s%s", "", "");
        if (take(m, (size_t)n, &a) != 0) return -1;
        uint64_t u = n ? le(a, n) : 0;
        if (n && n < 8 && (a[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        v = new_val(m, PV_INT);
        m->vals[v].i = (int64_t)u;
        push(m, v);
        return 0;
    }
    case 'G': {
        if (take(m, 8, &a) != 0) return -1;
        v = new_val(m, PV_FLOAT);
        uint64_t u = 0;
        for (int b = 0; b < 8; b++) u = u << 8 | a[b]; /* BINFLOAT: a big-endian double */
        m->vals[v].i = (int64_t)u;
        push(m, v);
        return 0;
    }
    case 'X': case 0x8c: {
        int n = op == 'X' ? 4 : 1;
        if (take(m, (size_t)n, &a) != 0) return -1;
        uint64_t len = le(a, n);
        if (len > m->len - m->pos) return fail(m, "truncated string%s%s", "", "");
        if (take(m, (size_t)len, &a) != 0) return -1;
        return push_str(m, a, (size_t)len);
    }
    case 'C': case 'B': case 0x8e: { /* SHORT_BINBYTES, BINBYTES, BINBYTES8: not needed, skipped */
        int n = op == 'C' ? 1 : op == 'B' ? 4 : 8;
        if (take(m, (size_t)n, &a) != 0) return -1;
        uint64_t len = le(a, n);
        if (len > m->len - m->pos) return fail(m, "truncated bytes%s%s", "", "");
        m->pos += (size_t)len;
        v = new_val(m, PV_OBJECT);
        m->vals[v].s = xstrdup("bytes");
        push(m, v);
        return 0;
    }
    case 'q': if (take(m, 1, &a) != 0) return -1; return memo_put(m, a[0]);
    case 'r': if (take(m, 4, &a) != 0) return -1; return memo_put(m, le(a, 4));
    case 0x94: return memo_put(m, m->n_memo);
    case 'h': if (take(m, 1, &a) != 0) return -1; return memo_get(m, a[0]);
    case 'j': if (take(m, 4, &a) != 0) return -1; return memo_get(m, le(a, 4));
    case 'c': return op_global(m);
    case 'Q': return op_persid(m);
    case 'R': return op_reduce(m);
    case 0x81: return op_newobj(m);
    case 'b': return op_build(m);
    case 's':
        if (m->ns - (m->nm ? m->marks[m->nm - 1] : 0) < 3) return fail(m, "SETITEM without a dict%s%s", "", "");
        return set_items(m, m->ns - 2);
    case 'u':
        if (!m->nm) return fail(m, "SETITEMS without MARK%s%s", "", "");
        return set_items(m, m->marks[--m->nm]);
    case 'a':
        if (pop(m, &w) != 0 || top(m, &v) != 0) return -1;
        if (m->vals[v].kind != PV_LIST && m->vals[v].kind != PV_OBJECT)
            return fail(m, "APPEND to a %s%s", kind_names[m->vals[v].kind], "");
        if (m->vals[v].kind == PV_LIST) add_item(m, v, w);
        return 0;
    case 'e': {
        if (!m->nm) return fail(m, "APPENDS without MARK%s%s", "", "");
        size_t base = m->marks[--m->nm];
        pv_kind lk = base ? m->vals[m->stack[base - 1]].kind : PV_NONE;
        if (lk != PV_LIST && lk != PV_OBJECT) return fail(m, "APPENDS without a list%s%s", "", "");
        if (lk == PV_LIST)
            for (size_t i = base; i < m->ns; i++) add_item(m, m->stack[base - 1], m->stack[i]);
        m->ns = base;
        return 0;
    }
    default: {
        char code[16];
        snprintf(code, sizeof code, "0x%02x", op);
        return fail(m, "opcode %s is not allowed%s", code, "");
    }
    }
}

static const pv *dict_get(const vm *m, const pv *d, const char *key)
{
    for (size_t i = 0; i + 1 < d->n; i += 2) {
        const pv *k = &m->vals[d->items[i]];
        if (k->kind == PV_STR && !strcmp(k->s, key)) return &m->vals[d->items[i + 1]];
    }
    return NULL;
}

static int64_t checked_extent(const pv_tensor *t)
{
    /* Last element's index + 1 (0 for an empty tensor); -1 on overflow. */
    int64_t last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return 0;
        if (t->stride[d] > ((int64_t)1 << 40)) return -1;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    return last + 1;
}

/* "a str", "a posix.system object", "the class numpy.dtype": a value as a message names it. */
static const char *describe(const pv *v, char *buf, size_t n)
{
    char shown[200];
    if (v->kind == PV_OBJECT) snprintf(buf, n, "a %s object", esp_shown(v->s, shown, sizeof shown));
    else if (v->kind == PV_GLOBAL) snprintf(buf, n, "the class %s", esp_shown(v->s, shown, sizeof shown));
    else snprintf(buf, n, "a %s", kind_names[v->kind]);
    return buf;
}

/* A view of tensor value tv named `name`, checked to lie inside its storage. */
static int add_view(vm *m, const pv *tv, const char *name, pt_views *out, size_t *cap)
{
    char kb[200];
    const pv_tensor *t = &m->tens[tv->i];
    const pv *st = &m->vals[t->storage];
    int64_t ext = checked_extent(t);
    if (ext < 0 || ext > st->i)
        return esp_fail(m->err, "%s: tensor '%s' reaches past its storage of %lld elements", m->what,
                        esp_shown(name, kb, sizeof kb), (long long)st->i);
    grow((void **)&out->v, cap, out->n + 1, sizeof *out->v);
    pt_view *o = &out->v[out->n++];
    memset(o, 0, sizeof *o);
    o->name = xstrdup(name);
    o->storage = xstrdup(st->s);
    o->dtype = (pt_dtype)st->dtype;
    o->storage_numel = st->i;
    o->offset = t->offset;
    o->ndim = t->ndim;
    memcpy(o->shape, t->shape, sizeof o->shape);
    memcpy(o->stride, t->stride, sizeof o->stride);
    return 0;
}

static int collect(vm *m, int root, pt_views *out)
{
    char kb[200];
    const pv *d = &m->vals[root];
    char cb[240];
    if (d->kind != PV_DICT)
        return esp_fail(m->err, "%s: the pickle holds %s, not a state dict (nothing in the file is run)", m->what,
                        describe(d, cb, sizeof cb));
    const pv *inner = dict_get(m, d, "state_dict"); /* Lightning */
    if (!inner) inner = dict_get(m, d, "model"); /* ESPnet2's trainer checkpoint.pth */
    if (inner && inner->kind == PV_DICT) d = inner;
    size_t cap = 0;
    for (size_t i = 0; i + 1 < d->n; i += 2) {
        const pv *k = &m->vals[d->items[i]], *tv = &m->vals[d->items[i + 1]];
        if (k->kind != PV_STR)
            return esp_fail(m->err, "%s: a state-dict key is %s, not a str", m->what, describe(k, cb, sizeof cb));
        if (tv->kind != PV_TENSOR)
            return esp_fail(m->err, "%s: state-dict entry '%s' is %s, not a tensor (nothing in the file is run)",
                            m->what, esp_shown(k->s, kb, sizeof kb), describe(tv, cb, sizeof cb));
        if (add_view(m, tv, k->s, out, &cap) != 0) return -1;
    }
    return 0;
}

/* ---- the whole pickle as named leaves (pt_pickle_tree) ------------------------------------ */

static double pv_float(const pv *x)
{
    uint64_t u = (uint64_t)x->i;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

typedef struct tree_walk {
    vm *m;
    pt_views *tensors;
    pt_scalars *scalars;
    size_t cap_t, cap_s, visited;
} tree_walk;

/* Names every tensor and number under value v "a.b.0.c" (dict keys that are str or int, list and
 * tuple positions); strings, None and opaque objects are left out. The memo can share a container
 * many times over, so the number of values visited is bounded, as is the depth. */
static int walk(tree_walk *w, int v, char *path, size_t plen, int depth)
{
    vm *m = w->m;
    const pv *x = &m->vals[v];
    if (++w->visited > PT_TREE_MAX_VALUES)
        return esp_fail(m->err, "%s: the pickle shares its values more than %d times over (refused)", m->what,
                        PT_TREE_MAX_VALUES);
    if (x->kind == PV_TENSOR) return add_view(m, x, path, w->tensors, &w->cap_t);
    if (x->kind == PV_INT || x->kind == PV_BOOL || x->kind == PV_FLOAT) {
        grow((void **)&w->scalars->v, &w->cap_s, w->scalars->n + 1, sizeof *w->scalars->v);
        pt_scalar *s = &w->scalars->v[w->scalars->n++];
        s->name = xstrdup(path);
        s->is_int = x->kind != PV_FLOAT;
        s->i = x->kind == PV_FLOAT ? 0 : x->i;
        s->f = x->kind == PV_FLOAT ? pv_float(x) : (double)x->i;
        return 0;
    }
    int is_dict = x->kind == PV_DICT;
    if (!is_dict && x->kind != PV_LIST && x->kind != PV_TUPLE) return 0;
    if (depth >= PT_TREE_MAX_DEPTH)
        return esp_fail(m->err, "%s: containers nested deeper than %d levels (refused)", m->what, PT_TREE_MAX_DEPTH);
    size_t n = is_dict ? x->n / 2 : x->n;
    for (size_t k = 0; k < n; k++) {
        char key[64];
        const char *kp = key;
        if (is_dict) {
            const pv *kv = &m->vals[x->items[2 * k]];
            if (kv->kind == PV_STR) kp = kv->s;
            else if (kv->kind == PV_INT) snprintf(key, sizeof key, "%lld", (long long)kv->i);
            else continue; /* a tuple or object key: nothing a checkpoint's training state uses */
        } else {
            snprintf(key, sizeof key, "%zu", k);
        }
        size_t kl = strlen(kp), at = plen ? plen + 1 : 0;
        if (at + kl + 1 > PT_TREE_MAX_PATH)
            return esp_fail(m->err, "%s: a name longer than %d bytes inside the pickle (refused)", m->what,
                            PT_TREE_MAX_PATH);
        if (plen) path[plen] = '.';
        memcpy(path + at, kp, kl + 1);
        int rc = walk(w, x->items[is_dict ? 2 * k + 1 : k], path, at + kl, depth + 1);
        path[plen] = 0;
        if (rc != 0) return rc;
    }
    return 0;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static int run(vm *m)
{
    int rc = 0, done = 0;
    while (rc == 0 && !done) {
        if (m->pos >= m->len) {
            m->op_pos = m->pos;
            rc = fail(m, "truncated (no STOP)%s%s", "", "");
            break;
        }
        rc = step(m, &done);
    }
    if (rc == 0 && (m->ns != 1 || m->nm))
        rc = esp_fail(m->err, "%s: pickle: STOP with %zu values on the stack", m->what, m->ns);
    return rc;
}

static void vm_free(vm *m)
{
    for (size_t i = 0; i < m->nv; i++) free(m->vals[i].s), free(m->vals[i].items);
    free(m->vals), free(m->stack), free(m->marks), free(m->memo), free(m->tens);
}

int pt_pickle_state_dict(const unsigned char *pkl, size_t len, const char *what, pt_views *out, esp_err *err)
{
    vm m = {.p = pkl, .len = len, .what = what, .err = err};
    memset(out, 0, sizeof *out);
    int rc = run(&m);
    if (rc == 0) rc = collect(&m, m.stack[0], out);
    vm_free(&m);
    if (rc != 0) pt_views_free(out);
    return rc;
}

int pt_pickle_tree(const unsigned char *pkl, size_t len, const char *what, pt_views *tensors, pt_scalars *scalars,
                   esp_err *err)
{
    vm m = {.p = pkl, .len = len, .what = what, .err = err};
    memset(tensors, 0, sizeof *tensors);
    memset(scalars, 0, sizeof *scalars);
    int rc = run(&m);
    char path[PT_TREE_MAX_PATH] = "";
    tree_walk w = {.m = &m, .tensors = tensors, .scalars = scalars};
    if (rc == 0 && m.vals[m.stack[0]].kind != PV_DICT) {
        char cb[240];
        rc = esp_fail(err, "%s: the pickle holds %s, not a checkpoint's dict (nothing in the file is run)", what,
                      describe(&m.vals[m.stack[0]], cb, sizeof cb));
    }
    if (rc == 0) rc = walk(&w, m.stack[0], path, 0, 0);
    vm_free(&m);
    if (rc != 0) pt_views_free(tensors), pt_scalars_free(scalars);
    return rc;
}

void pt_views_free(pt_views *v)
{
    for (size_t i = 0; i < v->n; i++) free(v->v[i].name), free(v->v[i].storage);
    free(v->v);
    memset(v, 0, sizeof *v);
}

void pt_scalars_free(pt_scalars *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i].name);
    free(s->v);
    memset(s, 0, sizeof *s);
}

const pt_scalar *pt_scalar_get(const pt_scalars *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) return &s->v[i];
    return NULL;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct obuf {
    unsigned char *p;
    size_t n, cap;
} obuf;

static void put(obuf *b, const void *s, size_t n)
{
    grow((void **)&b->p, &b->cap, b->n + n, 1);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void put1(obuf *b, unsigned char c) { put(b, &c, 1); }

static void put_str(obuf *b, const char *s)
{
    size_t n = strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 24)};
    put(b, h, 5);
    put(b, s, n);
}

static void put_int(obuf *b, int64_t v)
{
    if (v >= 0 && v < 256) {
        unsigned char h[2] = {'K', (unsigned char)v};
        put(b, h, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        unsigned char h[5] = {'J', (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                              (unsigned char)(u >> 24)};
        put(b, h, 5);
    } else {
        uint64_t u = (uint64_t)v;
        unsigned char h[10] = {0x8a, 8};
        for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(u >> (8 * i));
        put(b, h, 10);
    }
}

static void put_tuple(obuf *b, const int64_t *v, int n)
{
    put1(b, '(');
    for (int i = 0; i < n; i++) put_int(b, v[i]);
    put1(b, 't');
}

/* The OrderedDict of a state dict: names -> tensors whose storages are archive/data/<i>. */
static void put_state_dict(obuf *b, const char *const *names, const pt_dtype *dtypes, const int *ndims,
                           const int64_t (*shapes)[PT_MAX_DIMS], size_t n)
{
    static const char od[] = "ccollections\nOrderedDict\n", rebuild[] = "ctorch._utils\n_rebuild_tensor_v2\n";
    put(b, od, sizeof od - 1);
    put(b, ")R", 2);
    put1(b, '(');
    for (size_t i = 0; i < n; i++) {
        int64_t stride[PT_MAX_DIMS], numel = 1;
        for (int d = ndims[i] - 1; d >= 0; d--) stride[d] = numel, numel *= shapes[i][d];
        char key[32];
        snprintf(key, sizeof key, "%zu", i);
        put_str(b, names[i]);
        put(b, rebuild, sizeof rebuild - 1);
        put1(b, '(');
        /* the persistent id ('storage', torch.<T>Storage, key, 'cpu', numel) */
        put1(b, '(');
        put_str(b, "storage");
        const char *cls = dtypes[i] == PT_I64   ? "ctorch\nLongStorage\n"
                          : dtypes[i] == PT_F64 ? "ctorch\nDoubleStorage\n"
                                                : "ctorch\nFloatStorage\n";
        put(b, cls, strlen(cls));
        put_str(b, key);
        put_str(b, "cpu");
        put_int(b, numel);
        put(b, "tQ", 2);
        put_int(b, 0); /* storage offset */
        put_tuple(b, shapes[i], ndims[i]);
        put_tuple(b, stride, ndims[i]);
        put1(b, 0x89); /* requires_grad False */
        put(b, od, sizeof od - 1);
        put(b, ")R", 2); /* backward hooks: an empty OrderedDict */
        put(b, "tR", 2);
    }
    put1(b, 'u');
}

unsigned char *pt_pickle_write(const char *const *names, const pt_dtype *dtypes, const int *ndims,
                               const int64_t (*shapes)[PT_MAX_DIMS], size_t n, size_t *len)
{
    obuf b = {0};
    put(&b, "\x80\x02", 2);
    put_state_dict(&b, names, dtypes, ndims, shapes, n);
    put1(&b, '.');
    *len = b.n;
    return b.p;
}

unsigned char *pt_pickle_write_lightning(const char *const *names, const pt_dtype *dtypes, const int *ndims,
                                         const int64_t (*shapes)[PT_MAX_DIMS], size_t n, int64_t epoch,
                                         int64_t global_step, size_t *len)
{
    obuf b = {0};
    put(&b, "\x80\x02", 2);
    put(&b, "}(", 2);
    put_str(&b, "epoch");
    put_int(&b, epoch);
    put_str(&b, "global_step");
    put_int(&b, global_step);
    put_str(&b, "pytorch-lightning_version");
    put_str(&b, PT_LIGHTNING_VERSION);
    put_str(&b, "state_dict");
    put_state_dict(&b, names, dtypes, ndims, shapes, n);
    put(&b, "u.", 2);
    *len = b.n;
    return b.p;
}
