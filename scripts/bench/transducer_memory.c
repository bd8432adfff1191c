/* Peak memory and time of one training step of the ASR task's transducer (core/nn/transducer.h) on
 * the CPU backend: forward, loss and backward of one utterance of T encoder frames (input_layer
 * linear, so T features are T frames) and U labels over V tokens, a 2-block Transformer encoder of
 * d 256, ESPnet2's default prediction network (one LSTM of 320) and joint space (256). The joint's
 * chunk budget is the model's (16 MB) or, with WHOLE 1, unbounded (the (1, T, U+1, V) logits and
 * the joint's activations held at once).
 *   usage: transducer_memory T U V WHOLE THREADS      (e.g. 500 100 5000 0 2, then 500 100 5000 1 2) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/nn/model.h"
#include "core/nn/transducer.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: transducer_memory T U V WHOLE THREADS\n");
        return 2;
    }
    int T = atoi(argv[1]), U = atoi(argv[2]), V = atoi(argv[3]), whole = atoi(argv[4]), threads = atoi(argv[5]);
    if (T < 1 || U < 0 || V < 2 || threads < 1) {
        fprintf(stderr, "transducer_memory: need T >= 1, U >= 0, V >= 2, THREADS >= 1\n");
        return 2;
    }
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, threads, &err);
    if (!be) {
        fprintf(stderr, "transducer_memory: %s\n", err.msg);
        return 1;
    }
    model_dims d = {.idim = 80, .d = 256, .heads = 4, .ff = 1024, .blocks = 2, .vocab = V, .input_layer = IN_LINEAR,
                    .tr_layers = 1, .tr_hidden = 320, .tr_joint = 256};
    model_rates r = {.ctc_weight = 0.3f, .tr_weight = 1.0f};
    asr_model m;
    asr_model_init(&m, be, &d, &r);
    if (whole) transducer_set_joint_floats(&m, (size_t)-1);
    float *host = malloc(m.table.total * sizeof *host);
    if (param_init(host, &m.table, "xavier_uniform", 1, &err) != 0) return 1;
    asr_model_params_from_host(&m, host);
    free(host);
    size_t nf = (size_t)T * d.idim;
    float *fh = malloc(nf * sizeof *fh), *feats = be->alloc(be, nf * sizeof(float));
    unsigned s = 1;
    for (size_t i = 0; i < nf; i++) s = s * 1103515245u + 12345u, fh[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
    be->copy(be, feats, fh, nf * sizeof(float), BACKEND_HOST_TO_DEVICE);
    int *labels = malloc(((size_t)U + 1) * sizeof *labels);
    for (int u = 0; u < U; u++) labels[u] = 1 + (u * 7919) % (V - 1);
    double base = peak_rss_mib(), t0 = now_seconds();
    asr_model_zero_grad(&m);
    asr_model_forward(&m, feats, &T, 1, T, 1, 1);
    double loss = asr_model_loss(&m, labels, &U, U, NULL);
    asr_model_backward(&m, 1.0f);
    be->synchronize(be);
    double secs = now_seconds() - t0;
    printf("T %d U %d V %d joint %s threads %d: loss %.4f (transducer %.4f), step %.2f s, peak RSS %.0f MiB "
           "(%.0f MiB before the step)\n",
           T, U, V, whole ? "whole" : "chunked", threads, loss, m.loss_transducer, secs, peak_rss_mib(), base);
    free(fh), free(labels);
    be->free(be, feats);
    asr_model_free(&m);
    backend_close(be);
    return 0;
}
