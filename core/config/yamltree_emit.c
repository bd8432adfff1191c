#include "core/config/yamltree.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- emitting ------------------------------------------------------------------------ */

typedef struct out_buf {
    char *data;
    size_t len, cap;
} out_buf;

static int write_handler(void *ctx, unsigned char *buffer, size_t size)
{
    out_buf *b = ctx;
    if (b->len + size + 1 > b->cap) {
        while (b->len + size + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 4096;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, buffer, size);
    b->len += size;
    b->data[b->len] = '\0';
    return 1;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, int quoted, int escape)
{
    char *escaped = NULL;
    if (escape && strstr(s, "${")) {
        size_t n = 0;
        escaped = xmalloc(strlen(s) * 2 + 1);
        for (const char *p = s; *p; p++) {
            if (p[0] == '$' && p[1] == '{') escaped[n++] = '\\';
            escaped[n++] = *p;
        }
        escaped[n] = '\0';
        s = escaped;
    }
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), !quoted, 1,
                                 quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
    int ok = yaml_emitter_emit(em, &ev);
    free(escaped);
    return ok;
}

static int emit_node(yaml_emitter_t *em, const ynode *n, int escape)
{
    yaml_event_t ev;
    if (n->kind == YN_SCALAR) return emit_scalar(em, n->str, n->quoted, escape && n->resolved);
    if (n->kind == YN_SEQ) {
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_SEQUENCE_STYLE);
        if (!yaml_emitter_emit(em, &ev)) return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!emit_node(em, n->items[i], escape)) return 0;
        yaml_sequence_end_event_initialize(&ev);
        return yaml_emitter_emit(em, &ev);
    }
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_MAPPING_STYLE);
    if (!yaml_emitter_emit(em, &ev)) return 0;
    for (size_t i = 0; i < n->n; i++) {
        if (!emit_scalar(em, n->keys[i], 0, 0) || !emit_node(em, n->items[i], escape)) return 0;
    }
    yaml_mapping_end_event_initialize(&ev);
    return yaml_emitter_emit(em, &ev);
}

static char *emit_tree(const ynode *root, size_t *len_out, int escape)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    out_buf b = {0};
    yaml_emitter_initialize(&em);
    yaml_emitter_set_output(&em, write_handler, &b);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, 100);
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    int ok = yaml_emitter_emit(&em, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    ok = ok && yaml_emitter_emit(&em, &ev);
    ok = ok && emit_node(&em, root, escape);
    yaml_document_end_event_initialize(&ev, 1);
    ok = ok && yaml_emitter_emit(&em, &ev);
    yaml_stream_end_event_initialize(&ev);
    ok = ok && yaml_emitter_emit(&em, &ev);
    ESP_CHECK(ok); /* the tree holds only valid UTF-8 scalars we read with libyaml */
    yaml_emitter_delete(&em);
    if (!b.data) b.data = xstrdup("");
    if (len_out) *len_out = b.len;
    return b.data;
}

char *yt_emit(const ynode *root, size_t *len_out) { return emit_tree(root, len_out, 0); }
char *yt_emit_config(const ynode *root, size_t *len_out) { return emit_tree(root, len_out, 1); }

int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int extra = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2 : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (extra < 0 || (extra == 1 && *p < 0xC2)) return 0;
        p++;
        for (int i = 0; i < extra; i++, p++)
            if ((*p & 0xC0) != 0x80) return 0;
    }
    return 1;
}
