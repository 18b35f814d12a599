"""What every training stage shares: device and threads, checkpoints that resume, the learning
rate schedule, and a wall-clock budget that fixes the step count early in a run."""
import math
import os
import random
import time

import torch


def setup(args):
    """Seeds, threads and the device ('auto' picks CUDA when present)."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(args.threads or os.cpu_count())
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    return torch.device(args.device)


def add_run_args(ap, seed, steps, lr):
    ap.add_argument("--steps", type=int, default=steps,
                    help="optimizer steps (an upper bound when --minutes is given)")
    ap.add_argument("--minutes", type=float, default=0.0,
                    help="wall-clock budget: after the first timed steps, the step count is cut "
                         "to what fits (the schedule then follows the new count)")
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--resume", action="store_true",
                    help="continue from OUT/ckpt.pt: weights, optimizer, step and step count")
    ap.add_argument("--save-every", type=int, default=200)


def autocast(device):
    """BF16 autocast on CUDA; plain f32 on the CPU (where Debian's PyTorch has no fast BF16)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def load(path, device="cpu"):
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except TypeError:  # PyTorch < 1.13 has no weights_only
        return torch.load(path, map_location=device)


def lr_at(args, step, floor=0.1):
    """Linear warmup over 4% of the steps, then cosine decay to floor * lr."""
    warmup = max(1, args.steps // 25)
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps)))
    return args.lr * min(1.0, (step + 1) / warmup) * (floor + (1 - floor) * cos)


class Budget:
    """Sets args.steps so that the run ends within --minutes of the process start.

    The rate is measured over the latest 50 steps (the first steps pay for allocator and kernel
    warm-up, and a GPU run keeps speeding up over its first minutes, so a rate averaged from the
    start under-counts) and the count re-estimated every 50 steps until three quarters of it
    have run; later the schedule stays fixed. A resumed run keeps the count it saved."""

    def __init__(self, args, start_step):
        self.args, self.start, self.cap = args, start_step, args.steps
        self.mark = None  # (step, time) 50 steps ago

    def tick(self, step, log):
        a = self.args
        if a.minutes <= 0 or a.resume or step < self.start + 10 or (step - self.start) % 50 != 10:
            return
        now = time.time()
        if self.mark is not None and step < a.steps * 3 // 4:
            rate = (step - self.mark[0]) / (now - self.mark[1])
            fits = int(step + rate * (a.minutes * 60 - elapsed()))
            a.steps = max(step + 1, min(self.cap, fits))
            log(f"budget: {rate:.2f} steps/s, {a.minutes:g} min -> {a.steps} steps")
        self.mark = (step, now)


T0 = time.time()


def elapsed():
    return time.time() - T0


def save_ckpt(path, **state):
    state["py_rng"] = random.getstate()
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def resume(path, model, opt, args, rng, device):
    """Restores a save_ckpt state into model, opt, rng and args.steps; returns the state."""
    ck = load(path, device)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    args.steps = ck["steps"]
    rng.setstate(ck["rng"])
    say(f"resumed at step {ck['step']} of {args.steps}")
    return ck


class Logger:
    """Prints and appends to a TSV with a fixed header."""

    def __init__(self, path, header, resume):
        new = not (resume and os.path.exists(path))
        self.f = open(path, "a" if not new else "w")
        if new:
            self.f.write("\t".join(header) + "\n")

    def row(self, *values):
        self.f.write("\t".join(str(v) for v in values) + "\n")
        self.f.flush()


def say(msg):
    print(f"[{elapsed():7.1f}s] {msg}", flush=True)
