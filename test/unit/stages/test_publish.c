/* The Hugging Face upload of upload_model / upload_demo against the real `hf` CLI (the test venv's
 * huggingface_hub): our arguments are ones it accepts (it gets as far as the network), and its
 * failure, with the hub unreachable, is one error line that names the folder ready to upload. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/publish_files.h"
#include "test/unit/test_util.h"

Test(hf_upload, the_real_hf_cli_runs_and_its_failure_names_the_ready_folder)
{
    const char *hf = test_venv_tool("hf");
    char bin[4096], path[8192], endpoint[64], dir[64];
    snprintf(bin, sizeof bin, "%s", hf);
    *strrchr(bin, '/') = '\0';
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", bin);
    setenv("PATH", path, 1);
    /* a port nothing listens on: the hub is unreachable, quickly */
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", test_free_port());
    setenv("HF_ENDPOINT", endpoint, 1);
    setenv("HF_TOKEN", "hf_not_a_real_token", 1);
    setenv("HF_HUB_DISABLE_TELEMETRY", "1", 1);
    test_tmpdir_make(dir, sizeof dir, "hf_upload");
    setenv("HF_HOME", dir, 1);
    char folder[128];
    snprintf(folder, sizeof folder, "%s/model_pack", dir);
    test_write_text_mkdirs(test_path(folder, "README.md"), "# a model\n");
    esp_err err = {{0}};
    cr_assert_eq(hf_upload("conf/publication.yaml:3:11", "user/mini_an4", folder, "model", &err), -1);
    char want[300];
    snprintf(want, sizeof want, "%s is ready to upload: rerun when the hub is reachable and you are logged in", folder);
    cr_expect(strstr(err.msg, "conf/publication.yaml:3:11: hf upload user/mini_an4 failed (") && strstr(err.msg, want),
              "%s", err.msg);
    /* the CLI took the arguments and failed on the network, not on its usage */
    cr_expect(strstr(err.msg, "Connection refused") || strstr(err.msg, "ConnectError"), "%s", err.msg);
    cr_expect_null(strstr(err.msg, "usage"), "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
    test_tmpdir_remove(dir);
}
