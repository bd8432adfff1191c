// The C interface of spm_shim.h over SentencePiece's C++ API. Nothing here throws past the
// extern "C" boundary: library errors are util::Status values, and allocation failures are
// caught and reported like them.
#include "core/data/spm_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct spm_model {
    sentencepiece::SentencePieceProcessor sp;
};

namespace {

// SentencePiece's message without the source location and the failed condition that its
// CHECK_*_OR_RETURN macros put first ("./src/x.cc(660) [(a) == (b)] "), on one line.
void put_error(const std::string &msg, char *err, size_t errlen)
{
    if (!err || !errlen) return;
    std::string m = msg;
    size_t close = m.find(") [");
    if (close != std::string::npos && m.find(".cc(") < close) {
        size_t end = m.find("] ", close);
        if (end != std::string::npos) m = m.substr(end + 2);
    }
    for (char &c : m)
        if (c == '\n' || c == '\r') c = ' ';
    std::snprintf(err, errlen, "%s", m.c_str());
}

void put_status(const sentencepiece::util::Status &st, char *err, size_t errlen)
{
    put_error(st.error_message(), err, errlen);
}

char *dup_c(const std::string &s)
{
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (!p) throw std::bad_alloc();
    std::memcpy(p, s.data(), s.size() + 1);
    return p;
}

// The training sentences as SentencePiece's iterator interface.
class array_iterator : public sentencepiece::SentenceIterator {
  public:
    array_iterator(const char *const *s, size_t n) : s_(s), n_(n) { load(); }
    bool done() const override { return i_ >= n_; }
    void Next() override
    {
        i_++;
        load();
    }
    const std::string &value() const override { return cur_; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

  private:
    void load()
    {
        if (i_ < n_) cur_ = s_[i_];
    }
    const char *const *s_;
    size_t n_;
    size_t i_ = 0;
    std::string cur_;
};

std::string number(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// The model file, and the vocabulary as spm_train writes it (Trainer's SaveVocab: every piece and
// its score through std::ostream).
int write_files(const std::string &proto, const char *model_path, const char *vocab_path, char *err, size_t errlen)
{
    sentencepiece::SentencePieceProcessor sp;
    auto st = sp.LoadFromSerializedProto(proto);
    if (!st.ok()) {
        put_status(st, err, errlen);
        return -1;
    }
    std::ofstream model(model_path, std::ios::binary);
    model.write(proto.data(), static_cast<std::streamsize>(proto.size()));
    model.close();
    std::ofstream vocab(vocab_path, std::ios::binary);
    for (int i = 0; i < sp.GetPieceSize(); i++) vocab << sp.IdToPiece(i) << "\t" << sp.GetScore(i) << "\n";
    vocab.close();
    if (model.fail() || vocab.fail()) {
        std::snprintf(err, errlen, "cannot write %s or %s: %s", model_path, vocab_path, std::strerror(errno));
        return -2;
    }
    return 0;
}

} // namespace

extern "C" int spm_train(const spm_train_opts *o, char *err, size_t errlen)
{
    try {
        std::unordered_map<std::string, std::string> kw = {
            {"model_type", o->model_type},
            {"vocab_size", std::to_string(o->vocab_size)},
            {"character_coverage", number(o->character_coverage)},
            {"input_sentence_size", std::to_string(o->input_sentence_size)},
            {"minloglevel", "2"}, // SentencePiece's progress lines stay off stderr; errors return
        };
        if (o->n_user_defined_symbols) {
            std::string uds;
            for (size_t i = 0; i < o->n_user_defined_symbols; i++) {
                if (i) uds += ",";
                uds += o->user_defined_symbols[i];
            }
            kw["user_defined_symbols"] = uds;
        }
        array_iterator it(o->sentences, o->n_sentences);
        std::string proto;
        auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &proto);
        if (!st.ok()) {
            put_status(st, err, errlen);
            return -1;
        }
        return write_files(proto, o->model_path, o->vocab_path, err, errlen);
    } catch (const std::exception &e) {
        put_error(e.what(), err, errlen);
    }
    return -1;
}

extern "C" spm_model *spm_load(const char *path, char *err, size_t errlen)
{
    try {
        std::unique_ptr<spm_model> m(new spm_model);
        auto st = m->sp.Load(path);
        if (st.ok()) return m.release();
        put_status(st, err, errlen);
    } catch (const std::exception &e) {
        put_error(e.what(), err, errlen);
    }
    return nullptr;
}

extern "C" void spm_free(spm_model *m) { delete m; }

extern "C" int spm_piece_count(const spm_model *m) { return m->sp.GetPieceSize(); }

extern "C" const char *spm_piece(const spm_model *m, int id) { return m->sp.IdToPiece(id).c_str(); }

extern "C" int spm_encode(const spm_model *m, const char *text, char ***pieces, int **ids, unsigned char **unknown,
                          size_t *n, char *err, size_t errlen)
{
    *pieces = nullptr;
    *ids = nullptr;
    *unknown = nullptr;
    *n = 0;
    try {
        std::vector<std::string> v;
        auto st = m->sp.Encode(text, &v);
        if (!st.ok()) {
            put_status(st, err, errlen);
            return -1;
        }
        size_t k = v.size();
        *pieces = static_cast<char **>(std::calloc(k ? k : 1, sizeof(char *)));
        *ids = static_cast<int *>(std::malloc((k ? k : 1) * sizeof(int)));
        *unknown = static_cast<unsigned char *>(std::malloc(k ? k : 1));
        if (!*pieces || !*ids || !*unknown) throw std::bad_alloc();
        *n = k;
        for (size_t i = 0; i < k; i++) {
            (*pieces)[i] = dup_c(v[i]);
            int id = m->sp.PieceToId(v[i]);
            (*ids)[i] = id;
            (*unknown)[i] = m->sp.IsUnknown(id) ? 1 : 0;
        }
        return 0;
    } catch (const std::exception &e) {
        spm_pieces_free(*pieces, *ids, *unknown, *n);
        *pieces = nullptr, *ids = nullptr, *unknown = nullptr, *n = 0;
        put_error(e.what(), err, errlen);
    }
    return -1;
}

extern "C" void spm_pieces_free(char **pieces, int *ids, unsigned char *unknown, size_t n)
{
    if (pieces)
        for (size_t i = 0; i < n; i++) std::free(pieces[i]);
    std::free(pieces);
    std::free(ids);
    std::free(unknown);
}

extern "C" char *spm_decode_pieces(const spm_model *m, const char *const *pieces, size_t n)
{
    std::vector<std::string> v(pieces, pieces + n);
    std::string text;
    if (!m->sp.Decode(v, &text).ok()) text.clear(); // as DecodePieces: no text on a failure
    return dup_c(text);
}
