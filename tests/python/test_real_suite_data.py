"""tools/make_real_suite.py's data for the models it feeds itself: magika's
byte features equal magika's own (its reader strips whitespace and pads with
256 in a way easy to get off by one), and a missing wheel skips a model
instead of failing the build of the others."""
import glob
import os
import pathlib
import sys

import numpy as np
import pytest

import make_real_suite as R  # tools/, on sys.path through conftest


def sample_files(tmp_path):
    """Edge cases (short, all whitespace at an end, exactly one block,
    longer than a block) plus a few files of this machine."""
    cases = {"short.txt": b"  \n hello world \n\t", "blank_end.bin": bytes(range(256)) * 3 + b" " * 5000,
             "block.bin": bytes((i * 7) % 256 for i in range(4096)), "long.py": b"# x\n" * 3000,
             "tiny.dat": b"\x00\x01\x02\x03\x04\x05\x06\x07\x08"}
    paths = []
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths.append(str(p))
    return paths + sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), "*.py")))[:4]


def test_magika_features_equal_magikas_own(tmp_path):
    magika = pytest.importorskip("magika")
    m = magika.Magika()
    cfg = m._model_config  # private: the check needs magika's own feature extraction
    for path in sample_files(tmp_path):
        _, features = m._get_result_or_features_from_path(pathlib.Path(path))
        if features is None:  # magika decided without its model (too small)
            continue
        want = np.array(list(features.beg[:cfg.beg_size]) + list(features.end[-cfg.end_size:]), np.int32)
        np.testing.assert_array_equal(R.magika_features(path), want, err_msg=path)


def test_a_missing_wheel_skips_the_model(tmp_path, monkeypatch, capsys):
    def missing(out_dir, n_calib, n_eval):
        R.package_dir("no_such_module_for_sparq", "no-such-wheel")

    monkeypatch.setitem(R.MAKERS, "magika", missing)
    R.build("magika", str(tmp_path), 4, 4, force=True)
    assert "magika: skipped: Python package 'no-such-wheel' is missing" in capsys.readouterr().out
    assert not os.listdir(tmp_path)


def test_text_calibration_keeps_prose_and_never_an_evaluation_sentence():
    import make_text_calib as T
    text = ("Return the number of items in the queue. See\n``qsize`` below.\n\n"
            ">>> q.put(1)\n\n"
            "This call blocks until an item is available to be returned.\n"
            "Use x = f(y) for that. Short one.")
    got = list(T.sentences_of(text))
    assert "This call blocks until an item is available to be returned." in got
    kept = [s for s in got if T.keep(s)]
    assert kept == ["Return the number of items in the queue.",
                    "This call blocks until an item is available to be returned."]  # no code, no example, no fragment
    # one sentence of the evaluation split, and one sharing a 6-word run with it, are both left out
    first = R.read_pairs()[0][1]
    words = first.rstrip(".").split()
    banned = set().union(*(T.runs(s) for _, a, b in R.read_pairs() for s in (a, b)))
    assert T.runs(first) <= banned and T.runs("So " + " ".join(words[:6]) + " again today.") & banned


def test_text_calibration_packs_whole_sentences():
    import make_text_calib as T

    class Enc:
        def __init__(self, body, length=8):
            self.ids = ([101] + body + [102] + [0] * length)[:length]
            self.attention_mask = [1 if t else 0 for t in self.ids]

    ids, mask = T.pack([Enc([5, 6]), Enc([7, 8, 9]), Enc([10, 11])], 8)
    # [CLS] 5 6 [SEP] 7 8 9 [SEP] fills the first sample; 10 11 starts the next, the rest padding
    assert ids.tolist() == [[101, 5, 6, 102, 7, 8, 9, 102], [101, 10, 11, 102, 0, 0, 0, 0]]
    assert mask.tolist() == [[1] * 8, [1] * 4 + [0] * 4]
