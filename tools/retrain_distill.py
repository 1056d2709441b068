#!/usr/bin/env python3
"""Distillation for sparq's prune.retrain hook: fine-tune a pruned ONNX model
toward its dense teacher on unlabeled calibration data, masks held.

    prune:
      retrain:
        command: python3 tools/retrain_distill.py --teacher model.onnx
                 {model_in} {masks} {model_out} --data {data} --step {step} --iterations 150

Per call (one pruning step):
  1. {model_in} (the step's masked model) and --teacher (the dense FP32
     model, the same graph) load into tools/onnx_torch.py's interpreter; the
     student's float initializers are the parameters trained.
  2. Batches of --data (.npz keyed by input name, samples on axis 0; never the
     evaluation split) are augmented (image inputs [N, C, H, W]: flips, random
     resized crops, mixup; token ids: random replacement of tokens) and run
     through both; the loss is the outputs' normalized MSE (each output's
     squared error over the teacher's mean square, per channel of axis 1 for
     rank >= 3) plus --feature-weight x the same over the outputs of every
     pruned layer (the node that reads a masked weight), and, with
     --kl-weight, the KL divergence of rank-2 outputs read as logits.
  3. Adam (--lr, cosine-decayed) steps --iterations times (or until
     --max-seconds); after each update every masked weight is multiplied by
     its mask (its gradient is masked too), so pruned weights stay exactly 0.
  4. A held-out share of the data (--holdout, not augmented, not trained on)
     scores the start and a checkpoint every --eval-every iterations; the
     best one is written (the start itself when training never beat it), so
     a step cannot come back worse on data it did not see.
  5. {model_out} is {model_in} with each trained initializer's values
     replaced: the same graph, names, types and shapes.

Deterministic for a given --seed, --iterations and thread count (--threads;
torch's CPU reductions depend on it); --max-seconds cuts the run by wall time
and so is not. Prints one line per checkpoint and a summary; exit 0 on
success, 2 on bad arguments or an unsupported model.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_torch import OnnxModule  # noqa: E402

WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_in", help="the step's masked model ({model_in})")
    ap.add_argument("masks", help="the masks .npz ({masks}): uint8 per pruned weight, 1 = kept")
    ap.add_argument("model_out", help="where to write the retrained model ({model_out})")
    ap.add_argument("--teacher", required=True, help="the dense FP32 model (the same graph)")
    ap.add_argument("--data", required=True, help="unlabeled training inputs, .npz keyed by input name ({data})")
    ap.add_argument("--step", type=int, default=1, help="the pruning step ({step}); seeds the data order")
    ap.add_argument("--iterations", type=int, default=100, help="Adam steps (default 100)")
    ap.add_argument("--max-seconds", type=float, default=0.0, help="stop training after this wall time (0: none)")
    ap.add_argument("--batch", type=int, default=8, help="samples per Adam step (default 8)")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate, cosine-decayed to 0 (default 1e-4)")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="share of --iterations over which the learning rate rises linearly from 0 to --lr before "
                         "the cosine decay (default 0: none). Adam's first steps move every weight by about lr "
                         "whatever its gradient; a warm-up keeps them from undoing a recovered (least-squares / OBS) "
                         "start")
    ap.add_argument("--feature-weight", type=float, default=1.0,
                    help="weight of the pruned layers' output error against the teacher's (default 1; 0: outputs only)")
    ap.add_argument("--kl-weight", type=float, default=0.0,
                    help="weight of the KL divergence of rank-2 outputs as logits (classifiers; default 0)")
    ap.add_argument("--holdout", type=float, default=0.125,
                    help="share of the data held out to pick the checkpoint (default 0.125; 0: keep the last)")
    ap.add_argument("--eval-every", type=int, default=25, help="checkpoint interval in iterations (default 25)")
    ap.add_argument("--augment", choices=("auto", "flip", "none"), default="auto",
                    help="auto: flips / crops / mixup on [N,C,H,W] float inputs, token replacement on "
                         "*input_ids* inputs; flip: images mirrored left-right at random only (no crops, no mixup), "
                         "other inputs as is; none: the data as is")
    ap.add_argument("--mixup", type=float, default=0.5, help="probability that a batch of images is mixed (default 0.5)")
    ap.add_argument("--token-replace", type=float, default=0.1,
                    help="share of a sentence's inner tokens replaced by tokens of the data (default 0.1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    return ap.parse_args(argv)


def load_data(path, input_names):
    z = np.load(path)
    missing = [n for n in input_names if n not in z.files]
    if missing:
        raise ValueError(f"{path}: no array for input(s) {missing} (it has {z.files})")
    data = {n: z[n] for n in input_names}
    counts = {n: a.shape[0] for n, a in data.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"{path}: inputs have different sample counts {counts}")
    return data, next(iter(counts.values()))


def is_image(a):
    return a.ndim == 4 and np.issubdtype(a.dtype, np.floating) and a.shape[1] in (1, 3, 4)


def flip_only(batch, rng):
    """--augment flip: each image mirrored left-right with probability 1/2."""
    out = {}
    for name, a in batch.items():
        x = a.copy()
        if is_image(a):
            for i in range(x.shape[0]):
                if rng.random() < 0.5:
                    x[i] = x[i][..., ::-1]
        out[name] = torch.from_numpy(np.ascontiguousarray(x))
    return out


def learning_rate(args, it):
    """--lr at iteration it: linear warm-up over --warmup of the iterations, then cosine decay to 0."""
    warm = int(round(args.warmup * args.iterations))
    if it < warm:
        return args.lr * (it + 1) / warm
    span = max(1, args.iterations - warm)
    return args.lr * 0.5 * (1.0 + math.cos(math.pi * (it - warm) / span))


def augment(batch, pools, args, rng):
    """Augmented copies of one batch ({name: np array}); the teacher labels whatever comes out."""
    if args.augment == "flip":
        return flip_only(batch, rng)
    out = {}
    mix = rng.random() < args.mixup
    perm = rng.permutation(next(iter(batch.values())).shape[0])
    lam = rng.uniform(0.0, 0.5)
    for name, a in batch.items():
        if is_image(a):
            x = torch.from_numpy(a.copy())
            n, _, h, w = x.shape
            imgs = []
            for i in range(n):
                img = x[i]
                if rng.random() < 0.5:
                    img = img.flip(-1)
                scale = rng.uniform(0.5, 1.0)
                ch, cw = max(8, int(round(h * math.sqrt(scale)))), max(8, int(round(w * math.sqrt(scale))))
                top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
                crop = img[:, top:top + ch, left:left + cw].unsqueeze(0)
                imgs.append(F.interpolate(crop, size=(h, w), mode="bilinear", align_corners=False)[0])
            x = torch.stack(imgs)
            if mix:
                x = (1.0 - lam) * x + lam * x[perm]
            out[name] = x
        elif "input_ids" in name and np.issubdtype(a.dtype, np.integer) and a.ndim == 2:
            ids = a.copy()
            pool = pools[name]
            for r in range(ids.shape[0]):
                live = np.nonzero(ids[r] != 0)[0]
                inner = live[1:-1]  # keep the first ([CLS]) and last ([SEP]) token
                k = int(round(args.token_replace * len(inner)))
                if k and len(pool):
                    at = rng.choice(inner, size=k, replace=False)
                    ids[r, at] = rng.choice(pool, size=k)
            out[name] = torch.from_numpy(ids)
        else:
            out[name] = torch.from_numpy(a.copy())
    return out


def normalized_mse(s, t):
    """Squared error over the teacher's mean square; per channel of axis 1 for rank >= 3."""
    s, t = s.float(), t.float()
    if t.dim() >= 3:
        dims = [d for d in range(t.dim()) if d != 1]
        return ((s - t) ** 2).mean(dim=dims).div(t.pow(2).mean(dim=dims) + 1e-8).mean()
    return ((s - t) ** 2).mean() / (t.pow(2).mean() + 1e-8)


def distill_loss(s_out, t_out, s_feat, t_feat, args):
    loss = sum(normalized_mse(s_out[k], t_out[k]) for k in t_out if t_out[k].is_floating_point()) / max(1, len(t_out))
    if args.kl_weight > 0:
        for k, t in t_out.items():
            if t.dim() == 2 and t.shape[1] > 1:
                loss = loss + args.kl_weight * F.kl_div(F.log_softmax(s_out[k], 1), F.log_softmax(t, 1),
                                                        log_target=True, reduction="batchmean")
    if args.feature_weight > 0 and t_feat:
        feat = sum(normalized_mse(s_feat[k], t_feat[k]) for k in t_feat) / len(t_feat)
        loss = loss + args.feature_weight * feat
    return loss


def pruned_layer_outputs(model, masked):
    """The outputs of the nodes that read a masked weight (the pruned layers)."""
    return [n.output[0] for n in model.graph.node if n.op_type in WEIGHTED_OPS and any(i in masked for i in n.input)]


def write_model(model, student, path):
    """model with the student's trained values: the same names, types and shapes."""
    trained = {name: getattr(student, key).detach().numpy() for key, name in student.param_names.items()}
    for t in model.graph.initializer:
        if t.name in trained:
            dtype = numpy_helper.to_array(t).dtype
            t.CopyFrom(numpy_helper.from_array(trained[t.name].astype(dtype), t.name))
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output[0] in trained:
            for a in n.attribute:
                if a.name == "value":
                    dtype = numpy_helper.to_array(a.t).dtype
                    a.t.CopyFrom(numpy_helper.from_array(trained[n.output[0]].astype(dtype), a.t.name))
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)


def run(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng([args.seed, args.step])
    model = onnx.load(args.model_in)
    masks_npz = np.load(args.masks)
    masked = set(masks_npz.files)
    student = OnnxModule(model, trainable=masked)
    teacher = OnnxModule(onnx.load(args.teacher))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if student.input_names != teacher.input_names or student.output_names != teacher.output_names:
        raise ValueError(f"the teacher's inputs/outputs {teacher.input_names} -> {teacher.output_names} are not "
                         f"the model's {student.input_names} -> {student.output_names}")
    masks = {}
    for name in masked:
        key = student.param_of.get(name)
        if key is None:
            raise ValueError(f"masked weight {name} is not a float initializer or Constant of {args.model_in}")
        p = getattr(student, key)
        m = torch.from_numpy(masks_npz[name].astype(np.float32))
        if tuple(m.shape) != tuple(p.shape):
            raise ValueError(f"mask {name} has shape {tuple(m.shape)}, the weight {tuple(p.shape)}")
        masks[key] = m
        with torch.no_grad():
            p.mul_(m)
        p.register_hook(lambda g, m=m: g * m)
    features = [f for f in pruned_layer_outputs(model, masked)] if args.feature_weight > 0 else []

    data, count = load_data(args.data, student.input_names)
    order = rng.permutation(count)
    n_hold = int(round(args.holdout * count)) if args.holdout > 0 and count >= 2 else 0
    hold_idx, train_idx = order[:n_hold], order[n_hold:]
    pools = {k: np.unique(a[a > 0]) for k, a in data.items() if "input_ids" in k and np.issubdtype(a.dtype, np.integer)}

    def batch_of(idx):
        return {k: a[idx] for k, a in data.items()}

    def held_out_loss():
        if not n_hold:
            return float("nan")
        total = 0.0
        with torch.no_grad():
            for i in range(0, n_hold, args.batch):
                b = {k: torch.from_numpy(v) for k, v in batch_of(hold_idx[i:i + args.batch]).items()}
                t_out, _ = teacher(b)
                s_out, _ = student(b)
                total += float(sum(normalized_mse(s_out[k], t_out[k]) for k in t_out)) * len(hold_idx[i:i + args.batch])
        return total / n_hold

    params = [p for p in student.parameters()]
    opt = torch.optim.Adam(params, lr=args.lr)
    start = time.time()
    best = held_out_loss()
    best_state = {k: v.detach().clone() for k, v in student.state_dict().items()}
    best_at = 0
    print(f"step {args.step}: {len(params)} tensors trained ({sum(p.numel() for p in params)} values), "
          f"{len(masks)} masked, {len(features)} feature targets; {len(train_idx)} training / {n_hold} held-out "
          f"samples; held-out loss at start {best:.5f}", flush=True)
    cursor, it, running = len(train_idx), 0, 0.0
    while it < args.iterations:
        if args.max_seconds and time.time() - start > args.max_seconds:
            print(f"stopped by --max-seconds after {it} iterations", flush=True)
            break
        if cursor + args.batch > len(train_idx):
            train_idx = rng.permutation(train_idx)
            cursor = 0
        idx = train_idx[cursor:cursor + args.batch]
        cursor += args.batch
        b = batch_of(idx)
        b = augment(b, pools, args, rng) if args.augment != "none" else {k: torch.from_numpy(v) for k, v in b.items()}
        with torch.no_grad():
            t_out, t_feat = teacher(b, keep=features)
        s_out, s_feat = student(b, keep=features)
        loss = distill_loss(s_out, t_out, s_feat, t_feat, args)
        for g in opt.param_groups:
            g["lr"] = learning_rate(args, it)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for key, m in masks.items():
                getattr(student, key).mul_(m)
        it += 1
        running += float(loss.detach())
        if it % args.eval_every == 0 or it == args.iterations:
            held = held_out_loss()
            note = ""
            if not n_hold or held < best:
                best, best_at, note = held, it, " (best)"
                best_state = {k: v.detach().clone() for k, v in student.state_dict().items()}
            print(f"  it {it}: training loss {running / args.eval_every:.5f}, held-out {held:.5f}{note}, "
                  f"{time.time() - start:.0f} s", flush=True)
            running = 0.0
    if it % args.eval_every and it != args.iterations:  # stopped by time between checkpoints: score the last iterate
        held = held_out_loss()
        if not n_hold or held < best:
            best, best_at = held, it
            best_state = {k: v.detach().clone() for k, v in student.state_dict().items()}
        print(f"  it {it}: held-out {held:.5f}{' (best)' if best_at == it else ''}", flush=True)
    student.load_state_dict(best_state)
    write_model(model, student, args.model_out)
    print(f"step {args.step}: wrote the checkpoint of iteration {best_at} (held-out loss {best:.5f}) after "
          f"{it} iterations, {time.time() - start:.0f} s", flush=True)


def main(argv=None):
    args = parse_args(argv)
    if (args.iterations < 0 or args.batch < 1 or args.lr <= 0 or not 0 <= args.holdout < 1 or args.eval_every < 1 or
            not 0 <= args.warmup < 1):
        print("retrain_distill: --iterations >= 0, --batch >= 1, --lr > 0, 0 <= --holdout < 1, --eval-every >= 1, "
              "0 <= --warmup < 1",
              file=sys.stderr)
        return 2
    try:
        run(args)
    except (ValueError, NotImplementedError, FileNotFoundError) as e:
        print(f"retrain_distill: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
