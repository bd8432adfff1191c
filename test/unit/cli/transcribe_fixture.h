/* The models `espnet3 transcribe` and libespnet3's tests decode: the interop fixture's ESPnet-trained
 * model (test/fixtures/interop/espnet_model, with ESPnet's own hypotheses in hyps.txt) in every form
 * a user may give: its ESPnet2 experiment folder, an ESPnet2 packed zip of it, our pack folder
 * (stage 8 pack_model run on it: its conf/inference.yaml says beam 4, ctc_weight 0.3, as hyps.txt's
 * beam-4 lines) and a zip of that pack. */
#ifndef ESPNET3_TEST_TRANSCRIBE_FIXTURE_H
#define ESPNET3_TEST_TRANSCRIBE_FIXTURE_H

typedef struct tr_fixture {
    char dir[64];        /* temporary folder holding the rest */
    char espnet[512];    /* the ESPnet2 model's folder (its config's paths are relative to it) */
    char exp[600];       /* its experiment folder, exp/asr_train */
    char pack[128];      /* <dir>/exp/model_pack */
    char pack_zip[128];  /* <dir>/pack.zip: model_pack/ zipped with its folder */
    char espnet2_zip[128]; /* <dir>/espnet2.zip: ESPnet's packed-model layout, meta.yaml at the top */
    char wav[3][600];    /* test/fixtures/interop/wav/utt{1,2,3}.wav */
    char text[3][64];    /* ESPnet's beam-4, ctc_weight-0.3 hypotheses of them */
    char ids[3][64];     /* ... and their token ids */
} tr_fixture;

void tr_fixture_make(tr_fixture *f);
void tr_fixture_free(tr_fixture *f);

#endif
