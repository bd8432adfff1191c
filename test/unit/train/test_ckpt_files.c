/* The files training writes: CRC32C, safetensors (against numpy and, when installed, the Python
 * safetensors package), TensorBoard event records (an independent Python reader: its own CRC32C,
 * its own protobuf wire decoding, and google.protobuf when installed), metrics.csv (against a
 * Python model of Lightning's CSVLogger), and checkpoint directories (top-k, averaging, `last`
 * after a crash at every step of a save). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/train/checkpoint.h"
#include "core/base/crc32c.h"
#include "core/base/fsio.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/safetensors.h"
#include "core/formats/tb_events.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "ckpt");
    log_set_quiet(1);
}
static void teardown(void) { test_tmpdir_remove(dir); }

/* Runs a Python script in the test directory; returns its exit status (77 = a module is missing). */
static int run_python(const char *code) { return test_run_python(dir, code); }

static int python_has(const char *module)
{
    char code[256];
    snprintf(code, sizeof code, "import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec('%s') else 77)\n",
             module);
    return run_python(code) == 0;
}

static char *in_dir(const char *name) { return path_join(dir, name); }

/* ---- CRC32C ---------------------------------------------------------------------------- */

TestSuite(crc32c);

Test(crc32c, known_vectors)
{
    cr_assert_eq(crc32c("123456789", 9), 0xE3069283u);
    cr_assert_eq(crc32c("", 0), 0u);
    unsigned char buf[32];
    memset(buf, 0, sizeof buf); /* RFC 3720 B.4 */
    cr_assert_eq(crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    cr_assert_eq(crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    cr_assert_eq(crc32c(buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)(31 - i);
    cr_assert_eq(crc32c(buf, 32), 0x113FDB5Cu);
    cr_assert_eq(crc32c_extend(crc32c("12345", 5), "6789", 4), 0xE3069283u);
    /* TFRecord masking of the CRC of 8 zero bytes (a zero length field). */
    memset(buf, 0, 8);
    uint32_t c = crc32c(buf, 8);
    cr_assert_eq(crc32c_mask(c), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

/* ---- safetensors ----------------------------------------------------------------------- */

TestSuite(safetensors, .init = setup, .fini = teardown);

static const float F32_B[6] = {1.5f, -2.25f, 3.0f, 0.1f, 1e-8f, -0.0f};
static const double F64_C = 3.141592653589793;
static const int64_t I64_D[2] = {-5, 1LL << 40};
static const int8_t I8_A[3] = {-1, 0, 7};

static void write_sample(const char *path)
{
    st_tensor t[] = {
        {.name = "b", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = F32_B},
        {.name = "a", .dtype = ST_I8, .ndim = 1, .shape = {3}, .data = I8_A},
        {.name = "c", .dtype = ST_F64, .ndim = 0, .data = &F64_C},
        {.name = "d", .dtype = ST_I64, .ndim = 1, .shape = {2}, .data = I64_D},
    };
    st_kv meta[] = {{"format", "pt"}};
    esp_err err;
    cr_assert_eq(st_write(path, t, 4, meta, 1, &err), 0, "%s", err.msg);
}

Test(safetensors, header_is_byte_identical_to_the_python_library)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    size_t len;
    esp_err err;
    char *bytes = read_file(path, &len, &err);
    cr_assert_not_null(bytes);
    /* safetensors 0.8.0's save() of the same dict (numpy), header bytes verbatim. */
    const char *expect = "{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"d\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                         "\"c\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[16,24]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,48]},"
                         "\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[48,51]}}     ";
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
    cr_assert_eq(hlen, 256);
    cr_assert_eq(hlen, strlen(expect));
    cr_assert(memcmp(bytes + 8, expect, hlen) == 0, "%.*s", (int)hlen, bytes + 8);
    cr_assert_eq(len, 8 + 256 + 51);
    free(bytes);
    free(path);
}

Test(safetensors, round_trip_aligned_and_errors_name_file_and_tensor)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(path, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(f.n, 4);
    cr_assert_str_eq(f.tensors[0].name, "d"); /* file order */
    cr_assert_str_eq(st_meta_get(&f, "format"), "pt");
    cr_assert_null(st_meta_get(&f, "nope"));
    for (size_t i = 0; i < f.n; i++)
        cr_assert_eq((uintptr_t)f.tensors[i].data % st_dtype_size(f.tensors[i].dtype), 0);
    const float *b;
    int64_t shape[2] = {2, 3};
    cr_assert_eq(st_get_f32(&f, "b", 2, shape, &b, &err), 0, "%s", err.msg);
    cr_assert(memcmp(b, F32_B, sizeof F32_B) == 0);
    cr_assert_eq(*(const double *)st_get(&f, "c")->data, F64_C);
    cr_assert_eq(st_get(&f, "c")->ndim, 0);
    cr_assert_eq(((const int64_t *)st_get(&f, "d")->data)[1], 1LL << 40);
    cr_assert_eq(((const int8_t *)st_get(&f, "a")->data)[0], -1);

    int64_t wrong[2] = {3, 2};
    cr_assert_neq(st_get_f32(&f, "b", 2, wrong, &b, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "'b'") && strstr(err.msg, "[2, 3]") &&
                  strstr(err.msg, "[3, 2]"),
              "%s", err.msg);
    cr_assert_neq(st_get_f32(&f, "d", 1, shape, &b, &err), 0);
    cr_assert(strstr(err.msg, "'d' is I64"), "%s", err.msg);
    cr_assert_neq(st_get_f32(&f, "encoder.x", 1, shape, &b, &err), 0);
    cr_assert(strstr(err.msg, "no tensor 'encoder.x'"), "%s", err.msg);
    st_close(&f);

    /* A truncated file is refused with the file named. */
    cr_assert_eq(truncate(path, 8 + 256 + 40), 0);
    cr_assert_neq(st_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "truncated"), "%s", err.msg);
    cr_assert_eq(truncate(path, 5), 0);
    cr_assert_neq(st_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, "too short"), "%s", err.msg);

    st_tensor dup[] = {{.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = F32_B},
                       {.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = F32_B}};
    cr_assert_neq(st_write(path, dup, 2, NULL, 0, &err), 0);
    cr_assert(strstr(err.msg, "'x' given twice"), "%s", err.msg);
    free(path);
}

Test(safetensors, numpy_reads_what_we_write)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    free(path);
    /* A reader of the format from its spec with numpy alone, so this check never depends on the package. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "b = open('s.safetensors', 'rb').read()\n"
                        "n = struct.unpack('<Q', b[:8])[0]\n"
                        "assert n % 8 == 0\n"
                        "h = json.loads(b[8:8 + n])\n"
                        "assert h.pop('__metadata__') == {'format': 'pt'}\n"
                        "dt = {'F32': '<f4', 'F64': '<f8', 'I64': '<i8', 'I8': 'i1'}\n"
                        "def get(k):\n"
                        "    e = h[k]; s, t = e['data_offsets']\n"
                        "    return np.frombuffer(b[8 + n + s:8 + n + t], dtype=dt[e['dtype']]).reshape(e['shape'])\n"
                        "assert sorted(h) == ['a', 'b', 'c', 'd']\n"
                        "assert get('b').tolist() == np.array([[1.5, -2.25, 3.0], [0.1, 1e-8, -0.0]], "
                        "np.float32).tolist()\n"
                        "assert get('c').shape == () and float(get('c')) == 3.141592653589793\n"
                        "assert get('d').tolist() == [-5, 1 << 40] and get('a').tolist() == [-1, 0, 7]\n"
                        "assert 8 + n + max(e['data_offsets'][1] for e in h.values()) == len(b)\n");
    cr_assert_eq(rc, 0, "numpy did not read our safetensors file as written");
}

Test(safetensors, python_safetensors_package_reads_and_writes)
{
    if (!python_has("safetensors"))
        cr_skip_test("the Python safetensors package is not installed for /usr/bin/python3 (pip install "
                     "safetensors); the numpy reader test still checks the format");
    char *path = in_dir("s.safetensors");
    write_sample(path);
    free(path);
    int rc = run_python("import numpy as np\n"
                        "from safetensors import safe_open\n"
                        "from safetensors.numpy import load_file, save_file\n"
                        "d = load_file('s.safetensors')\n"
                        "assert d['b'].dtype == np.float32 and d['b'].shape == (2, 3) and d['b'][0, 1] == -2.25\n"
                        "assert d['d'].tolist() == [-5, 1 << 40] and d['a'].dtype == np.int8\n"
                        "with safe_open('s.safetensors', 'np') as f: assert f.metadata() == {'format': 'pt'}\n"
                        "save_file({'w': np.arange(6, dtype=np.float32).reshape(2, 3), 'n': np.array(9)}, "
                        "'p.safetensors', metadata={'k': 'v'})\n");
    cr_assert_eq(rc, 0, "the safetensors package did not read our file");
    char *p = in_dir("p.safetensors");
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[2] = {2, 3};
    cr_assert_eq(st_get_f32(&f, "w", 2, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(w[5], 5.0f);
    cr_assert_eq(*(const int64_t *)st_get(&f, "n")->data, 9);
    cr_assert_str_eq(st_meta_get(&f, "k"), "v");
    st_close(&f);
    free(p);
}

Test(safetensors, reads_a_foreign_unaligned_layout)
{
    /* Written by hand with an I8 tensor first, so the F32 one starts at an odd offset. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "a = np.array([1, 2, 3], np.int8).tobytes(); w = np.array([0.5, -1.0], '<f4').tobytes()\n"
                        "h = json.dumps({'a': {'dtype': 'I8', 'shape': [3], 'data_offsets': [0, 3]},\n"
                        "                'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [3, 11]}}).encode()\n"
                        "open('u.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + a + w)\n");
    cr_assert_eq(rc, 0);
    char *p = in_dir("u.safetensors");
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[1] = {2};
    cr_assert_eq(st_get_f32(&f, "w", 1, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq((uintptr_t)w % 4, 0);
    cr_assert(w[0] == 0.5f && w[1] == -1.0f);
    st_close(&f);
    free(p);
}

/* ---- TensorBoard events ---------------------------------------------------------------- */

TestSuite(tb_events, .init = setup, .fini = teardown);

/* An independent reader: bitwise CRC32C, TFRecord framing, protobuf wire format by hand. */
static const char *TB_READER =
    "import glob, struct, sys\n"
    "def crc32c(b):\n"
    "    c = 0xffffffff\n"
    "    for x in b:\n"
    "        c ^= x\n"
    "        for _ in range(8): c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)\n"
    "    return c ^ 0xffffffff\n"
    "def masked(b):\n"
    "    c = crc32c(b); return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff\n"
    "def varint(b, i):\n"
    "    v = s = 0\n"
    "    while True:\n"
    "        x = b[i]; i += 1; v |= (x & 0x7f) << s; s += 7\n"
    "        if not x & 0x80: return v, i\n"
    "def fields(b):\n"
    "    i, out = 0, []\n"
    "    while i < len(b):\n"
    "        k, i = varint(b, i); f, w = k >> 3, k & 7\n"
    "        if w == 0: v, i = varint(b, i)\n"
    "        elif w == 1: v = b[i:i + 8]; i += 8\n"
    "        elif w == 5: v = b[i:i + 4]; i += 4\n"
    "        elif w == 2: n, i = varint(b, i); v = b[i:i + n]; i += n\n"
    "        else: raise ValueError('wire type %d' % w)\n"
    "        out.append((f, w, v))\n"
    "    assert i == len(b)\n"
    "    return out\n"
    "def records(path):\n"
    "    b = open(path, 'rb').read(); i = 0; out = []\n"
    "    while i < len(b):\n"
    "        hdr = b[i:i + 8]; n = struct.unpack('<Q', hdr)[0]\n"
    "        assert struct.unpack('<I', b[i + 8:i + 12])[0] == masked(hdr), 'length crc'\n"
    "        data = b[i + 12:i + 12 + n]\n"
    "        assert struct.unpack('<I', b[i + 12 + n:i + 16 + n])[0] == masked(data), 'data crc'\n"
    "        out.append(data); i += 16 + n\n"
    "    return out\n"
    "def event(data):\n"
    "    e = {'step': 0, 'values': []}\n"
    "    for f, w, v in fields(data):\n"
    "        if f == 1: e['wall_time'] = struct.unpack('<d', v)[0]\n"
    "        elif f == 2: e['step'] = v - (1 << 64) if v >> 63 else v\n"
    "        elif f == 3: e['file_version'] = v.decode()\n"
    "        elif f == 7: e['session_log'] = dict((g, x) for g, _, x in fields(v))\n"
    "        elif f == 5:\n"
    "            for g, _, val in fields(v):\n"
    "                assert g == 1\n"
    "                d = dict((h, x) for h, _, x in fields(val))\n"
    "                e['values'].append((d[1].decode(), struct.unpack('<f', d[2])[0]))\n"
    "    return e\n"
    "[path] = glob.glob('tb/version_0/events.out.tfevents.*')\n"
    "ev = [event(r) for r in records(path)]\n";

static void write_events(int64_t purge)
{
    char *logdir = in_dir("tb/version_0");
    tb_writer w;
    esp_err err;
    cr_assert_eq(tb_open(&w, logdir, purge, &err), 0, "%s", err.msg);
    cr_assert(strstr(w.path, "/events.out.tfevents."), "%s", w.path);
    const char *tags[] = {"train/loss", "train/lr"};
    const float vals[] = {12.5f, 0.002f};
    cr_assert_eq(tb_add_scalars(&w, 10, 1700000000.25, tags, vals, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(tb_add_scalar(&w, "valid/cer", 0.75f, 20, &err), 0, "%s", err.msg);
    cr_assert_eq(tb_add_scalar(&w, "big", -1.0f, 5000000000LL, &err), 0, "%s", err.msg);
    /* Unbuffered: every record is on disk (page cache) when the call returns. */
    struct stat sb;
    cr_assert_eq(stat(w.path, &sb), 0);
    cr_assert_gt(sb.st_size, 100);
    tb_close(&w);
    free(logdir);
}

Test(tb_events, records_have_valid_crcs_and_parse)
{
    write_events(-1);
    char code[8192];
    snprintf(code, sizeof code,
             "%s"
             "assert len(ev) == 5, ev\n"
             "assert ev[0]['file_version'] == 'brain.Event:2' and ev[0]['wall_time'] > 1.6e9\n"
             "assert ev[1]['step'] == 0 and ev[1]['session_log'] == {1: 1}, ev[1]\n"
             "assert ev[2]['step'] == 10 and ev[2]['wall_time'] == 1700000000.25\n"
             "assert ev[2]['values'] == [('train/loss', 12.5), ('train/lr', struct.unpack('<f', struct.pack('<f', "
             "0.002))[0])]\n"
             "assert ev[3]['step'] == 20 and ev[3]['values'] == [('valid/cer', 0.75)]\n"
             "assert ev[4]['step'] == 5000000000 and ev[4]['values'] == [('big', -1.0)]\n",
             TB_READER);
    cr_assert_eq(run_python(code), 0, "our event records do not check out");
}

Test(tb_events, purge_step_writes_session_log_start)
{
    write_events(7);
    char code[8192];
    snprintf(code, sizeof code,
             "%s"
             "assert len(ev) == 5 and ev[1]['step'] == 7 and ev[1]['session_log'] == {1: 1}, ev[1]\n",
             TB_READER);
    cr_assert_eq(run_python(code), 0);
}

Test(tb_events, google_protobuf_parses_the_events)
{
    if (!python_has("google.protobuf"))
        cr_skip_test("python3-protobuf is not installed; the hand-written wire reader test still checks the events");
    write_events(3);
    char code[16384];
    /* The tensorflow Event/Summary messages rebuilt from their .proto field numbers. */
    snprintf(code, sizeof code,
             "%s"
             "from google.protobuf import descriptor_pb2, descriptor_pool, message_factory\n"
             "fd = descriptor_pb2.FileDescriptorProto(name='ev.proto', package='tf', syntax='proto3')\n"
             "F = descriptor_pb2.FieldDescriptorProto\n"
             "def msg(name, *fs):\n"
             "    m = fd.message_type.add(name=name)\n"
             "    for n, num, t, lab, tn in fs: m.field.add(name=n, number=num, type=t, label=lab, type_name=tn)\n"
             "O, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED\n"
             "msg('Value', ('tag', 1, F.TYPE_STRING, O, None), ('simple_value', 2, F.TYPE_FLOAT, O, None))\n"
             "msg('Summary', ('value', 1, F.TYPE_MESSAGE, R, '.tf.Value'))\n"
             "msg('SessionLog', ('status', 1, F.TYPE_INT32, O, None))\n"
             "msg('Event', ('wall_time', 1, F.TYPE_DOUBLE, O, None), ('step', 2, F.TYPE_INT64, O, None),\n"
             "    ('file_version', 3, F.TYPE_STRING, O, None), ('summary', 5, F.TYPE_MESSAGE, O, '.tf.Summary'),\n"
             "    ('session_log', 7, F.TYPE_MESSAGE, O, '.tf.SessionLog'))\n"
             "pool = descriptor_pool.DescriptorPool(); pool.Add(fd)\n"
             "Event = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName('tf.Event'))\n"
             "es = [Event.FromString(r) for r in records(path)]\n"
             "assert es[0].file_version == 'brain.Event:2'\n"
             "assert es[1].step == 3 and es[1].session_log.status == 1\n"
             "assert es[2].step == 10 and [(v.tag, v.simple_value) for v in es[2].summary.value][0] == "
             "('train/loss', 12.5)\n"
             "assert es[4].step == 5000000000 and es[4].summary.value[0].tag == 'big'\n",
             TB_READER);
    cr_assert_eq(run_python(code), 0);
}

Test(tb_events, frame_record_layout)
{
    size_t n;
    unsigned char *r = tb_frame_record((const unsigned char *)"abc", 3, &n);
    cr_assert_eq(n, 19);
    cr_assert_eq(r[0], 3);
    for (int i = 1; i < 8; i++) cr_assert_eq(r[i], 0);
    uint32_t c = crc32c_mask(crc32c("abc", 3));
    cr_assert_eq(r[15] | r[16] << 8 | r[17] << 16 | (uint32_t)r[18] << 24, c);
    cr_assert(memcmp(r + 12, "abc", 3) == 0);
    free(r);
}

/* ---- metrics.csv ----------------------------------------------------------------------- */

TestSuite(metrics_csv, .init = setup, .fini = teardown);

Test(metrics_csv, floats_print_as_python_repr)
{
    struct {
        double v;
        const char *s;
    } cases[] = {
        {0.1, "0.1"},       {2.0, "2.0"},         {1e-5, "1e-05"},   {0.0001, "0.0001"},
        {1e16, "1e+16"},    {1e15, "1000000000000000.0"},            {123.456, "123.456"},
        {-0.5, "-0.5"},     {0.0, "0.0"},         {-0.0, "-0.0"},    {NAN, "nan"},
        {INFINITY, "inf"},  {-INFINITY, "-inf"},  {1.0 / 3, "0.3333333333333333"},
        {(double)0.1f, "0.10000000149011612"},    {1.5e300, "1.5e+300"},
        {5e-324, "5e-324"}, {1234567.0, "1234567.0"}, {-2.5e-7, "-2.5e-07"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[48];
        format_py_float(buf, sizeof buf, cases[i].v);
        cr_assert_str_eq(buf, cases[i].s, "case %zu", i);
    }
    /* Random doubles (raw bits, and float32 values of all magnitudes) against Python's repr. */
    char *path = in_dir("floats.txt");
    FILE *fp = fopen(path, "w");
    uint64_t s = 12345;
    for (int i = 0; i < 4000; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t bits = s ^ (s >> 29);
        double v;
        memcpy(&v, &bits, 8);
        if (i % 2) v = (double)(float)((double)(s >> 11) / 9007199254740992.0 * pow(10, (int)(s % 40) - 20));
        memcpy(&bits, &v, 8);
        char buf[48];
        format_py_float(buf, sizeof buf, v);
        fprintf(fp, "%016llx %s\n", (unsigned long long)bits, buf);
    }
    fclose(fp);
    free(path);
    int rc = run_python("import struct\n"
                        "bad = 0\n"
                        "for line in open('floats.txt'):\n"
                        "    h, s = line.split()\n"
                        "    v = struct.unpack('>d', bytes.fromhex(h))[0]\n"
                        "    if repr(v) != s: bad += 1; print('mismatch', h, s, repr(v))\n"
                        "raise SystemExit(1 if bad else 0)\n");
    cr_assert_eq(rc, 0, "format_py_float differs from Python's repr");
}

/* The same log calls through a Python model of Lightning's CSVLogger writer: keys sorted, rewrite
 * on new keys, csv.DictWriter rows. */
static const char *LIGHTNING_CSV = "import csv\n"
                                   "def write(calls, path):\n"
                                   "    keys = []\n"
                                   "    for step, row in calls:\n"
                                   "        row = dict(row, step=step)\n"
                                   "        new = set(row) - set(keys)\n"
                                   "        keys = sorted(set(keys) | set(row))\n"
                                   "        try: old = list(csv.DictReader(open(path, newline='')))\n"
                                   "        except FileNotFoundError: old = None\n"
                                   "        if new and old is not None:\n"
                                   "            with open(path, 'w', newline='') as f:\n"
                                   "                w = csv.DictWriter(f, fieldnames=keys); w.writeheader(); "
                                   "w.writerows(old)\n"
                                   "        with open(path, 'a' if old is not None else 'w', newline='') as f:\n"
                                   "            w = csv.DictWriter(f, fieldnames=keys)\n"
                                   "            if old is None: w.writeheader()\n"
                                   "            w.writerow(row)\n";

Test(metrics_csv, matches_lightning_csvlogger_byte_for_byte)
{
    char *path = in_dir("logs/version_0/metrics.csv");
    metrics_csv m;
    esp_err err;
    cr_assert_eq(metrics_csv_open(&m, path, -1, &err), 0, "%s", err.msg);
    metric a[] = {{"train/loss", 12.5, 0}, {"epoch", 0, 1}, {"lr", 0.0002, 0}};
    metric b[] = {{"train/loss", 7.25, 0}, {"epoch", 0, 1}, {"lr", (double)0.0004f, 0}};
    metric c[] = {{"valid/loss", 6.5, 0}, {"valid/cer", 0.9, 0}, {"epoch", 0, 1}};
    metric d[] = {{"train/loss", NAN, 0}, {"epoch", 1, 1}, {"weird,key", 1e-7, 0}};
    cr_assert_eq(metrics_csv_log(&m, 49, a, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(metrics_csv_log(&m, 99, b, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(metrics_csv_log(&m, 99, c, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(metrics_csv_log(&m, 149, d, 3, &err), 0, "%s", err.msg);
    metrics_csv_close(&m);
    char code[8192];
    snprintf(code, sizeof code,
             "%s"
             "import struct\n"
             "f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]\n"
             "write([(49, {'train/loss': 12.5, 'epoch': 0, 'lr': 0.0002}),\n"
             "       (99, {'train/loss': 7.25, 'epoch': 0, 'lr': f32(0.0004)}),\n"
             "       (99, {'valid/loss': 6.5, 'valid/cer': 0.9, 'epoch': 0}),\n"
             "       (149, {'train/loss': float('nan'), 'epoch': 1, 'weird,key': 1e-7})], 'ref.csv')\n"
             "ours, ref = open('logs/version_0/metrics.csv', 'rb').read(), open('ref.csv', 'rb').read()\n"
             "assert ours == ref, (ours, ref)\n",
             LIGHTNING_CSV);
    cr_assert_eq(run_python(code), 0, "metrics.csv differs from what CSVLogger writes");
    free(path);
}

Test(metrics_csv, resume_drops_rows_after_the_checkpoint_and_keeps_the_header)
{
    char *path = in_dir("metrics.csv");
    metrics_csv m;
    esp_err err;
    cr_assert_eq(metrics_csv_open(&m, path, -1, &err), 0, "%s", err.msg);
    for (int s = 1; s <= 5; s++) {
        metric v[] = {{"loss", s * 1.5, 0}};
        cr_assert_eq(metrics_csv_log(&m, s * 10, v, 1, &err), 0, "%s", err.msg);
    }
    metrics_csv_close(&m);
    cr_assert_eq(metrics_csv_open(&m, path, 30, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n_keys, 2);
    metric v[] = {{"loss", 9.0, 0}};
    cr_assert_eq(metrics_csv_log(&m, 40, v, 1, &err), 0, "%s", err.msg);
    metrics_csv_close(&m);
    size_t len;
    char *text = read_file(path, &len, &err);
    cr_assert_str_eq(text, "loss,step\r\n1.5,10\r\n3.0,20\r\n4.5,30\r\n9.0,40\r\n");
    free(text);
    free(path);
}

/* ---- checkpoints ----------------------------------------------------------------------- */

TestSuite(checkpoint, .init = setup, .fini = teardown);

enum { NW = 5 };

/* The model at step s: weights s + i/10, an integer buffer s; optimizer moment 2s. */
typedef struct fake_model {
    float w[NW];
    int64_t counter;
    float moment[NW];
} fake_model;

static void fill(fake_model *fm, int64_t s)
{
    for (int i = 0; i < NW; i++) fm->w[i] = (float)s + (float)i / 10, fm->moment[i] = 2.0f * (float)s;
    fm->counter = s;
}

static int save_step(ckpt_manager *m, int64_t epoch, int64_t step, double loss, double acc, esp_err *err)
{
    fake_model fm;
    fill(&fm, step);
    st_tensor model[] = {
        {.name = "encoder.embed.out.weight", .dtype = ST_F32, .ndim = 1, .shape = {NW}, .data = fm.w},
        {.name = "bn.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .data = &fm.counter},
    };
    st_tensor state[] = {{.name = "optimizer.exp_avg.encoder.embed.out.weight", .dtype = ST_F32, .ndim = 1,
                          .shape = {NW}, .data = fm.moment}};
    metric metrics[] = {{"valid/loss", loss, 0}, {"valid/acc", acc, 0}, {"epoch", (double)epoch, 1}};
    uint64_t rng[2] = {0xfedcba9876543210ULL, (uint64_t)step};
    ckpt_counter counters[] = {{"batch_in_epoch", step % 7}, {"nan_streak", 0}};
    ckpt_info info = {.epoch = epoch, .step = step, .metrics = metrics, .n_metrics = 3, .rng = rng, .n_rng = 2,
                      .counters = counters, .n_counters = 2, .config_hash = "abc123"};
    return ckpt_save(m, &info, model, 2, state, 1, err);
}

static const criterion_cfg CRIT[] = {{"valid/loss", 3, "min"}, {"valid/acc", 1, "max"}};

static int ckpt_exists(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/checkpoints/%s", dir, name);
    return is_dir(p);
}

static int count_entries(const char *sub)
{
    char *p = path_join(dir, sub);
    DIR *d = opendir(p);
    cr_assert_not_null(d, "%s", p);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) n++;
    closedir(d);
    free(p);
    return n;
}

static void check_last(const char *name)
{
    char link[256], target[256];
    snprintf(link, sizeof link, "%s/last", dir);
    ssize_t n = readlink(link, target, sizeof target - 1);
    cr_assert_gt(n, 0, "no `last` link");
    target[n] = '\0';
    char want[256];
    snprintf(want, sizeof want, "checkpoints/%s", name);
    cr_assert_str_eq(target, want);
}

Test(checkpoint, top_k_retention_last_link_and_load)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 1);
    /* valid/loss by epoch: 5 3 4 1 2 6 (k=3, min); valid/acc: .1 .9 .2 .3 .4 .5 (k=1, max). */
    double loss[] = {5, 3, 4, 1, 2, 6}, acc[] = {.1, .9, .2, .3, .4, .5};
    for (int e = 1; e <= 6; e++) cr_assert_eq(save_step(&m, e, e * 10, loss[e - 1], acc[e - 1], &err), 0, "%s", err.msg);
    /* Kept: loss best 3 = epochs 4, 5, 2; acc best = epoch 2; last = epoch 6. */
    cr_assert(ckpt_exists("epoch=4-step=40") && ckpt_exists("epoch=5-step=50") && ckpt_exists("epoch=2-step=20"));
    cr_assert(ckpt_exists("epoch=6-step=60"));
    cr_assert(!ckpt_exists("epoch=1-step=10") && !ckpt_exists("epoch=3-step=30"));
    cr_assert_eq(count_entries("checkpoints"), 4);
    check_last("epoch=6-step=60");
    cr_assert_eq(m.tables[0].n, 3);
    cr_assert_str_eq(m.tables[0].entries[0].dir, "epoch=4-step=40");
    cr_assert_str_eq(m.tables[0].entries[2].dir, "epoch=2-step=20");
    cr_assert_str_eq(m.tables[1].entries[0].dir, "epoch=2-step=20");

    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.epoch, 6);
    cr_assert_eq(c.step, 60);
    cr_assert_str_eq(c.config_hash, "abc123");
    cr_assert_eq(c.n_rng, 2);
    cr_assert_eq(c.rng[0], 0xfedcba9876543210ULL);
    cr_assert_eq(ckpt_counter_get(&c, "batch_in_epoch", -1), 60 % 7);
    cr_assert_eq(ckpt_counter_get(&c, "missing", -1), -1);
    cr_assert_eq(c.n_metrics, 3);
    cr_assert_str_eq(c.metrics[0].name, "valid/loss");
    cr_assert_eq(c.metrics[0].value, 6.0);
    const float *w;
    int64_t shape[1] = {NW};
    cr_assert_eq(st_get_f32(&c.model, "encoder.embed.out.weight", 1, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(w[3], 60.3f);
    cr_assert_eq(st_get_f32(&c.state, "optimizer.exp_avg.encoder.embed.out.weight", 1, shape, &w, &err), 0);
    cr_assert_eq(w[0], 120.0f);
    cr_assert_str_eq(st_meta_get(&c.model, "step"), "60");
    ckpt_loaded_free(&c);

    /* Saving the same step twice is refused and changes nothing. */
    cr_assert_neq(save_step(&m, 6, 60, 0.5, 0.5, &err), 0);
    cr_assert(strstr(err.msg, "already saved"), "%s", err.msg);
    ckpt_close(&m);

    /* A resumed run gets the tables back from trainer_state.json and ranks on. */
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=6-step=60");
    cr_assert_eq(m.tables[0].n, 3);
    cr_assert_eq(m.tables[0].entries[1].value, 2.0);
    cr_assert_eq(save_step(&m, 7, 70, 1.5, 0.0, &err), 0, "%s", err.msg); /* beats epoch 2 (loss 3) */
    cr_assert(ckpt_exists("epoch=2-step=20")); /* still the acc best */
    cr_assert(!ckpt_exists("epoch=6-step=60"));
    cr_assert_str_eq(m.tables[0].entries[1].dir, "epoch=7-step=70");
    ckpt_close(&m);

    /* A changed criterion (k=1) trims on open and the next save prunes. */
    criterion_cfg one[] = {{"valid/loss", 1, "min"}};
    cr_assert_eq(ckpt_open(&m, dir, one, 1, &err), 0, "%s", err.msg);
    cr_assert(ckpt_exists("epoch=4-step=40") && ckpt_exists("epoch=7-step=70"));
    cr_assert_eq(count_entries("checkpoints"), 2);
    ckpt_close(&m);
}

Test(checkpoint, k_best_average_values_and_names)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    double loss[] = {5, 3, 4, 1, 2};
    for (int e = 1; e <= 5; e++) cr_assert_eq(save_step(&m, e, e * 10, loss[e - 1], 0.1 * e, &err), 0, "%s", err.msg);
    cr_assert_eq(ckpt_average(&m, &err), 0, "%s", err.msg);
    /* valid/loss best 3: steps 40, 50, 20; valid/acc best 1: step 50. */
    char *p = in_dir("valid.loss.ave_3best.safetensors");
    st_file f;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[1] = {NW};
    cr_assert_eq(st_get_f32(&f, "encoder.embed.out.weight", 1, shape, &w, &err), 0, "%s", err.msg);
    for (int i = 0; i < NW; i++) {
        float a = 40 + i / 10.0f, b = 50 + i / 10.0f, c = 20 + i / 10.0f;
        cr_assert_eq(w[i], (float)(((double)a + b + c) / 3), "w[%d] = %.9g", i, w[i]);
    }
    cr_assert_eq(*(const int64_t *)st_get(&f, "bn.num_batches_tracked")->data, 50, "integers from the newest");
    cr_assert_str_eq(st_meta_get(&f, "averaged_models"), "3");
    st_close(&f);
    free(p);
    char link[256], target[256];
    snprintf(link, sizeof link, "%s/valid.loss.ave.safetensors", dir);
    ssize_t n = readlink(link, target, sizeof target - 1);
    cr_assert_gt(n, 0);
    target[n] = '\0';
    cr_assert_str_eq(target, "valid.loss.ave_3best.safetensors");
    p = in_dir("valid.acc.ave_1best.safetensors");
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(((const float *)st_get(&f, "encoder.embed.out.weight")->data)[1], 50.1f);
    st_close(&f);
    free(p);

    /* numpy agrees on the mean. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "def load(p):\n"
                        "    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])\n"
                        "    e = h['encoder.embed.out.weight']; s, t = e['data_offsets']\n"
                        "    return np.frombuffer(b[8 + n + s:8 + n + t], '<f4')\n"
                        "ws = [load('checkpoints/epoch=%d-step=%d/model.safetensors' % (e, e * 10)) for e in (4, 5, 2)]\n"
                        "ave = np.mean(np.stack(ws).astype(np.float64), 0).astype(np.float32)\n"
                        "assert (load('valid.loss.ave.safetensors') == ave).all()\n");
    cr_assert_eq(rc, 0);

    /* Files of different models are refused with both named. */
    char *a = in_dir("checkpoints/epoch=5-step=50/model.safetensors");
    char *b = in_dir("checkpoints/epoch=5-step=50/trainer_state.safetensors");
    const char *inputs[] = {a, b};
    char *out = in_dir("x.safetensors");
    cr_assert_neq(ckpt_average_files(out, inputs, 2, 0, &err), 0);
    cr_assert(strstr(err.msg, "trainer_state.safetensors"), "%s", err.msg);
    free(a);
    free(b);
    free(out);
    ckpt_close(&m);
}

static const char *crash_at;
static void crash_hook(const char *point)
{
    if (strcmp(point, crash_at) == 0) _exit(42);
}

/* A process killed at `point` of the third save: `last` must load, and a reopened manager goes on. */
static void crash_during_save(const char *point, const char *want_last)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, 5.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 2, 20, 4.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 3, 30, 3.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 4, 40, 9.0, 0, &err), 0, "%s", err.msg); /* loss table: 30, 20, 10 */
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        crash_at = point;
        ckpt_crash_hook = crash_hook;
        esp_err e2;
        save_step(&m, 5, 50, 1.0, 0, &e2); /* would push out step 10 */
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 42, "the hook at '%s' did not fire", point);
    ckpt_close(&m);

    check_last(want_last);
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.model.n, 2);
    char want_dir[256];
    snprintf(want_dir, sizeof want_dir, "%s/checkpoints/%s", dir, want_last);
    cr_assert_str_eq(c.dir, want_dir);
    ckpt_loaded_free(&c);
    /* No temporary directory or unreferenced checkpoint is left after the reopen. */
    int want_n = strcmp(want_last, "epoch=5-step=50") == 0 ? 3 : 4; /* 50, 30, 20 (+ 10 and 40 before) */
    cr_assert_eq(count_entries("checkpoints"), want_n, "after a crash at %s", point);
    cr_assert_eq(save_step(&m, 6, 60, 8.0, 0, &err), 0, "%s", err.msg);
    check_last("epoch=6-step=60");
    ckpt_close(&m);
}

Test(checkpoint, crash_after_model_file) { crash_during_save("model", "epoch=4-step=40"); }
Test(checkpoint, crash_after_state_file) { crash_during_save("state", "epoch=4-step=40"); }
Test(checkpoint, crash_after_json_file) { crash_during_save("json", "epoch=4-step=40"); }
Test(checkpoint, crash_after_rename) { crash_during_save("renamed", "epoch=4-step=40"); }
Test(checkpoint, crash_after_link_swap) { crash_during_save("linked", "epoch=5-step=50"); }
Test(checkpoint, crash_during_prune) { crash_during_save("pruned", "epoch=5-step=50"); }

Test(checkpoint, lost_last_link_falls_back_to_newest_complete)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, 2.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 2, 20, 1.0, 0, &err), 0, "%s", err.msg);
    ckpt_close(&m);
    char p[256];
    snprintf(p, sizeof p, "%s/last", dir);
    cr_assert_eq(unlink(p), 0);
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=2-step=20");
    cr_assert_eq(m.tables[0].n, 2);
    ckpt_close(&m);
    /* A bad criterion is a user error naming the key. */
    criterion_cfg bad[] = {{"valid/loss", 3, "lowest"}};
    cr_assert_neq(ckpt_open(&m, dir, bad, 1, &err), 0);
    cr_assert(strstr(err.msg, "best_model_criterion[0]") && strstr(err.msg, "min or max"), "%s", err.msg);
}

Test(checkpoint, nan_metrics_are_stored_and_never_ranked)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, NAN, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(m.tables[0].n, 0);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert(isnan(c.metrics[0].value));
    ckpt_loaded_free(&c);
    ckpt_close(&m);
}
