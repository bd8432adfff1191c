/* The log files training writes: TensorBoard event records (an independent Python reader: its own
 * CRC32C, its own protobuf wire decoding, and google.protobuf when installed), with CRC32C, their
 * record checksum, against known vectors; and metrics.csv (against a Python model of Lightning's
 * CSVLogger). Helpers: train_files_test_util.{h,c}. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/crc32c.h"
#include "core/base/fsio.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/tb_events.h"
#include "test/unit/train/train_files_test_util.h"

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

/* ---- TensorBoard events ---------------------------------------------------------------- */

TestSuite(tb_events, .init = train_files_setup, .fini = train_files_teardown);

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

TestSuite(metrics_csv, .init = train_files_setup, .fini = train_files_teardown);

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
    char *text = read_file(path, READ_LIST, &len, &err);
    cr_assert_str_eq(text, "loss,step\r\n1.5,10\r\n3.0,20\r\n4.5,30\r\n9.0,40\r\n");
    free(text);
    free(path);
}
