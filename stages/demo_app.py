# The demo app pack_demo writes (espnet3's stages/pack_demo.c): it transcribes audio by running the
# espnet3 binary on the packed model in ./model, with no Python model code. With Gradio installed
# it serves the UI that ui.json (from demo.yaml's ui:) describes; without it, it transcribes the
# files given on the command line, one line each:
#
#     python app.py audio.wav [more.flac ...]
#
# The binary: $ESPNET3_BIN, else ./bin/espnet3 beside this file, else espnet3 on PATH.
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "model")


def espnet3_binary():
    for candidate in (os.environ.get("ESPNET3_BIN"), os.path.join(HERE, "bin", "espnet3"), shutil.which("espnet3")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("app.py: no espnet3 binary (set ESPNET3_BIN, put it in bin/, or on PATH)")


def transcribe(path):
    """The packed model's best hypothesis for one audio file."""
    if not path:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        manifest = os.path.join(tmp, "data", "manifest")
        os.makedirs(manifest)
        with open(os.path.join(manifest, "demo.tsv"), "w", encoding="utf-8") as f:
            f.write("demo\t%s\t\n" % os.path.abspath(path))
        cmd = [espnet3_binary(), "-q", "--inference_config", "conf/inference.yaml",
               "data_dir=" + os.path.join(tmp, "data"), "test_sets=[demo]", "~dataset",
               "inference_dir=" + os.path.join(tmp, "out"), "--stages", "infer"]
        done = subprocess.run(cmd, cwd=MODEL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "espnet3 failed")
        with open(os.path.join(tmp, "out", "demo", "hyp.scp"), encoding="utf-8") as f:
            line = f.readline().rstrip("\n")
        return line.split(" ", 1)[1] if " " in line else ""


def serve():
    import gradio as gr

    with open(os.path.join(HERE, "ui.json"), encoding="utf-8") as f:
        ui = json.load(f)
    inputs = [gr.Audio(type="filepath", label=i.get("label")) for i in ui.get("inputs", [])]
    outputs = [gr.Textbox(label=o.get("label")) for o in ui.get("outputs", [])]
    gr.Interface(fn=transcribe, inputs=inputs, outputs=outputs, title=ui.get("title"),
                 description=ui.get("description")).launch()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        for audio in sys.argv[1:]:
            print(transcribe(audio))
    else:
        serve()
