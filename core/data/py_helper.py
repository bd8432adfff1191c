# The Python side of espnet3's bridge to a recipe's own code (core/data/py_bridge.c runs it as
# `python -c <this file> MODE REQUEST_JSON` and reads its records from file descriptor 3, so what the
# recipe prints stays on the terminal). Training, collect_stats and decoding never run it: they read
# what it exported once (core/data/py_export.c).
#
# Modes (REQUEST_JSON is the request, or @FILE naming a file that holds it):
#   build    the DatasetBuilder lifecycle of each data source (ESPnet3's BaseSystem.create_dataset)
#   call     a function named by a dotted path (create_dataset.func, tokenizer.text_builder.func)
#   export   Dataset(**data_src_args), item by item: a header line per item, then its float32 samples
#   outputs  the inference output_fn(data, model_output, idx) of each decoded utterance
# Records are JSON lines; an item's samples follow its line as n little-endian float32 values.
# An exception becomes one {"error": ...} record with its type, message and innermost frame.
import importlib
import importlib.util
import json
import os
import sys
import traceback

OUT = os.fdopen(3, "wb", buffering=1 << 20)


def send(obj, payload=None):
    OUT.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
    if payload:
        OUT.write(payload)


class ItemError(Exception):
    """An item that is not what ESPnet3's ASR task reads: reported with its index, no traceback."""

    def __init__(self, index, message):
        super().__init__(message)
        self.index = index


def load_local_dataset(recipe_dir):
    # As ESPnet3's dataset_module: <recipe_dir>/dataset/__init__.py under a synthetic name, its
    # relative imports working.
    init = os.path.join(recipe_dir, "dataset", "__init__.py")
    if not os.path.isfile(init):
        raise ModuleNotFoundError(
            "no data_src and no recipe dataset package at %s (add dataset/__init__.py or set data_src)" % init
        )
    name = "_espnet3_local_dataset_" + os.path.realpath(init).replace("/", "_").replace(".", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[os.path.dirname(init)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_source(data_src, recipe_dir):
    """(module, class or None): data_src left out, a <recipe>/<task> tag, a module or a class path."""
    if not data_src:
        return load_local_dataset(recipe_dir), None
    if "/" in data_src:
        name = "egs3." + ".".join(p.replace("-", "_") for p in data_src.split("/")) + ".dataset"
        try:
            return importlib.import_module(name), None
        except ModuleNotFoundError as e:
            # The running recipe outside an egs3 tree: the tag names its own dataset/ (checked in C).
            if e.name and name.startswith(e.name) and os.path.isfile(os.path.join(recipe_dir, "dataset", "__init__.py")):
                return load_local_dataset(recipe_dir), None
            raise
    try:
        return importlib.import_module(data_src), None
    except ModuleNotFoundError as e:
        if "." not in data_src or e.name != data_src:
            raise
    module_name, attr = data_src.rsplit(".", 1)
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise AttributeError("module %s has no attribute %s" % (module_name, attr))
    return module, getattr(module, attr)


def load_function(path):
    if "." not in path:
        raise ValueError("'%s' is not a dotted path module.function" % path)
    module_name, attr = path.rsplit(".", 1)
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise AttributeError("module %s has no attribute %s" % (module_name, attr))
    return getattr(module, attr)


def run_build(req):
    for src in req["data_srcs"]:
        module, _ = load_source(src, req["recipe_dir"])
        cls = getattr(module, "DatasetBuilder", None)
        if cls is None:  # a module or class with data only: nothing to prepare
            send({"builder": src or "", "none": True})
            continue
        builder = cls()
        kwargs = dict(req["kwargs"])
        prepared = built = False
        if not builder.is_source_prepared(**kwargs):
            builder.prepare_source(**kwargs)
            prepared = True
        if not builder.is_built(**kwargs):
            builder.build(**kwargs)
            built = True
        send({"builder": src or "", "prepared": prepared, "built": built})
    send({"end": True})


def run_call(req):
    result = load_function(req["func"])(**req["kwargs"])
    if isinstance(result, (str, bytes, os.PathLike)):
        send({"path": os.path.abspath(os.fsdecode(result))})
    elif result is not None:
        for text in result:
            if not isinstance(text, str):
                raise TypeError("%s returned an iterable holding a %s; expected strings (or a path to a text file)"
                                % (req["func"], type(text).__name__))
            send({"text": text})
    send({"end": True})


ID_KEYS = ("utt_id", "uttid", "uid", "id", "key")
RATE_KEYS = ("fs", "sample_rate", "sampling_rate", "sr")
FILE_KEYS = ("wav_path", "audio_path", "speech_path", "wav", "path", "audio")


def samples(index, speech):
    """The item's speech as little-endian float32 bytes and their count."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        a = np.asarray(speech)
        if a.ndim == 2 and 1 in a.shape:
            a = a.reshape(-1)
        if a.ndim != 1:
            raise ItemError(index, "'speech' has shape %s; espnet3 reads mono audio, a 1-D array" % (tuple(a.shape),))
        if a.dtype.kind not in "fiu":
            raise ItemError(index, "'speech' holds %s values; expected numbers (float32 samples)" % a.dtype)
        a = np.ascontiguousarray(a, dtype="<f4")
        return a.tobytes(), int(a.size)
    import array

    a = array.array("f", speech)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes(), len(a)


def instantiate(spec):
    """A dataset entry's transform as Hydra instantiates it: {_target_, kwargs...} calls the target
    with the kwargs (a partial of it with _partial_: true); a dotted path string is the callable."""
    if isinstance(spec, str):
        return load_function(spec)
    spec = dict(spec)
    target = load_function(spec.pop("_target_"))
    if spec.pop("_partial_", False):
        import functools

        return functools.partial(target, **spec)
    return target(**spec)


def run_export(req):
    transform = instantiate(req["transform"]) if req.get("transform") else None
    module, cls = load_source(req.get("data_src"), req["recipe_dir"])
    if cls is None:
        cls = getattr(module, "Dataset", None)
        if cls is None:
            raise AttributeError("%s has no Dataset (ESPnet3 instantiates <module>.Dataset(**data_src_args))"
                                 % module.__name__)
    dataset = cls(**req["args"])
    try:
        n = len(dataset)
    except TypeError:
        n = -1
    send({"n": n})
    items = (dataset[i] for i in range(n)) if n >= 0 else iter(dataset)
    for i, item in enumerate(items):
        if transform is not None:
            item = transform(item)
        if not isinstance(item, dict):
            raise ItemError(i, "is a %s; ESPnet3's ASR items are dicts with 'speech' and 'text'" % type(item).__name__)
        if "speech" not in item:
            raise ItemError(i, "has no 'speech' (its keys: %s)" % ", ".join(sorted(map(str, item))))
        rec = {"i": i}
        text = item.get("text")
        if text is not None:
            if not isinstance(text, str):
                raise ItemError(i, "'text' is a %s, not a string" % type(text).__name__)
            rec["text"] = text
        for k in ID_KEYS:
            if isinstance(item.get(k), str) and item[k]:
                rec["id"] = item[k]
                break
        for k in RATE_KEYS:
            v = item.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                rec["fs"] = v
                break
        for k in FILE_KEYS:  # the file the samples were read from: reused when they are its samples
            v = item.get(k)
            if isinstance(v, (str, os.PathLike)) and os.path.isfile(v):
                rec["file"] = os.path.abspath(os.fspath(v))
                break
        speech = item["speech"]
        if isinstance(speech, (str, os.PathLike)):
            rec["path"] = os.path.abspath(os.fspath(speech))
            send(rec)
            continue
        payload, count = samples(i, speech)
        rec["n"] = count
        send(rec, payload)
    send({"end": True})


PRIMITIVES = (str, int, float, bool)


def run_outputs(req):
    fn = load_function(req["func"])
    for item in req["items"]:
        data = {"utt_id": item["utt_id"], "text": item["text"]}
        # Speech2Text's n-best list: (text, tokens, token ids, hypothesis) per entry
        out = fn(data, [(item["hyp"], [], [], None)], item["idx"])
        if not isinstance(out, dict):
            raise TypeError("%s returned a %s for utterance %s; ESPnet3's output_fn returns a dict of fields"
                            % (req["func"], type(out).__name__, item["utt_id"]))
        for k, v in out.items():
            if not isinstance(v, PRIMITIVES) or isinstance(v, float) and v != v:
                raise TypeError("%s: field %r of utterance %s is a %s; espnet3 writes str, int, float and bool "
                                "values to <field>.scp" % (req["func"], k, item["utt_id"], type(v).__name__))
        send({"i": item["idx"], "out": {str(k): v for k, v in out.items()}})
    send({"end": True})


def main():
    mode, arg = sys.argv[1], sys.argv[2]
    if arg.startswith("@"):
        with open(arg[1:], encoding="utf-8") as f:
            req = json.load(f)
    else:
        req = json.loads(arg)
    for p in reversed(req.get("sys_path", [])):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        {"build": run_build, "call": run_call, "export": run_export, "outputs": run_outputs}[mode](req)
    except BaseException as e:  # noqa: B902 -- every failure becomes one record for the C side
        err = {"type": type(e).__name__, "message": str(e)}
        if isinstance(e, ItemError):
            err["item"] = e.index
        elif isinstance(e, SyntaxError) and e.filename:
            err.update(file=e.filename, line=e.lineno or 0, func="<module>")
        else:  # the innermost frame of a real file: importlib's and this helper's own say nothing
            frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<")]
            if frames:
                err.update(file=frames[-1].filename, line=frames[-1].lineno, func=frames[-1].name)
        if isinstance(e, ModuleNotFoundError) and e.name:
            err["module"] = e.name
        send({"error": err})
        OUT.flush()
        os._exit(1)
    OUT.flush()


main()
