#!/usr/bin/python3
"""`dscale draft` with DSpark drafters against the float64 reference (Debian's python3-torch).

  /usr/bin/python3 tests/parity/dspark_parity_test.py --dscale build/dscale [-v] [--keep DIR]

Targets and DSpark drafters (DeepSpec's Qwen3DSparkModel layout, with the frozen embedding and LM
head copies) written by `dscale make-tiny --drafter-arch dspark` at odd sizes (vocab 389, hidden
90, intermediate 150, 3 heads over 1 KV head of 30, odd block sizes), one pair per head variant
(VARIANTS: every Markov head type, rank 0, and the confidence head absent, plain and with the
Markov input; BF16, F16 and F32; tied and untied targets). For each:
  * the bonus token (the target's argmax) as parity_test.py checks it;
  * the draft: B = block_size candidates (the verify block is W = B + 1), each equal to the
    reference's argmax where that leads every other logit by more than both tolerances, else
    within that tie margin (ParityMixin.check_token);
  * the corrected logits (the drafter's distribution q): within the backbone's float32 bound
    (hf_reference.py's budget over the target, fc, hidden_norm, the draft layers over n + B keys,
    the final norm and LM head) plus the heads' first-order bound (dspark_reference.py);
  * the confidence logits, when the drafter has the head, within their bound; absent otherwise.
The reference is hf_reference.DFlashReference in its DSpark form (the drafter's own embedding
and LM head copies, as DeepSpec computes) and dspark_reference.DSparkHeadsReference, walked over
dscale's realised proposals (so each row is compared given the same previous token). That the
bound sees the heads: a reference without the Markov bias departs from dscale's logits by far
more than the tolerance on every Markov variant (how many of the backbone's argmaxes the head
changed is printed).

Both commands run with --kv-dtype f32 and --activations f32 (parity_test.py says why). Exits 77
(skipped) when /usr/bin/python3 has no torch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import parity_test as base  # noqa: E402  (exits 77 without torch)
import torch  # noqa: E402

import dspark_reference as dspark  # noqa: E402
import hf_reference as ref  # noqa: E402
import hf_safetensors as st  # noqa: E402

SIZES = ["--vocab", "389", "--hidden", "90", "--intermediate", "150", "--layers", "3",
         "--heads", "3", "--kv-heads", "1", "--head-dim", "30"]
# name: make-tiny flags of the pair (target and drafter share the dtype and seed).
VARIANTS = {
    "vanilla_r7_noconf_bf16": ["--markov-head-type", "vanilla", "--markov-rank", "7",
                               "--confidence-head", "none", "--block-size", "7", "--dtype", "BF16",
                               "--draft-layers", "2"],
    "gated_r5_plainconf_f32": ["--markov-head-type", "gated", "--markov-rank", "5",
                               "--confidence-head", "plain", "--block-size", "5", "--dtype", "F32",
                               "--draft-layers", "2"],
    "rnn_r6_markovconf_f16": ["--markov-head-type", "rnn", "--markov-rank", "6",
                              "--confidence-head", "markov", "--block-size", "9", "--dtype", "F16",
                              "--draft-layers", "1"],
    "gated_r8_markovconf_bf16_tied": ["--markov-head-type", "gated", "--markov-rank", "8",
                                      "--confidence-head", "markov", "--block-size", "15",
                                      "--dtype", "BF16", "--tie", "--draft-layers", "2"],
    "rank0_plainconf_bf16": ["--markov-rank", "0", "--confidence-head", "plain", "--block-size",
                             "7", "--dtype", "BF16", "--draft-layers", "2"],
    "rank0_noconf_f32_tied": ["--markov-rank", "0", "--confidence-head", "none", "--block-size",
                              "3", "--dtype", "F32", "--tie"],
}


def make_pair(root, name, flags, seed):
    target, drafter = os.path.join(root, name, "target"), os.path.join(root, name, "dspark")
    p = subprocess.run([base.ARGS.dscale, "make-tiny", "--out", target, "--drafter-out", drafter,
                        "--drafter-arch", "dspark", "--seed", str(seed), *SIZES, *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"make-tiny {name} failed:\n{p.stdout}{p.stderr}")
    return target, drafter


class DSparkParityTest(base.ParityMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="dscale_parity_dspark_")
        root = base.ARGS.keep or cls.tmp.name
        cls.pairs = {name: make_pair(root, name, flags, 11 + i)
                     for i, (name, flags) in enumerate(VARIANTS.items())}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_vanilla(self):
        self.check_variant("vanilla_r7_noconf_bf16")

    def test_gated_plain_confidence(self):
        self.check_variant("gated_r5_plainconf_f32")

    def test_rnn_markov_confidence(self):
        self.check_variant("rnn_r6_markovconf_f16")

    def test_gated_markov_confidence_tied(self):
        self.check_variant("gated_r8_markovconf_bf16_tied")

    def test_rank0_plain_confidence(self):
        self.check_variant("rank0_plainconf_bf16")

    def test_rank0_no_heads(self):
        self.check_variant("rank0_noconf_f32_tied")

    def check_variant(self, name):
        t_dir, d_dir = self.pairs[name]
        print(f"\nDSpark pair {name}")
        t_cfg, d_cfg = base.load_config(t_dir), base.load_config(d_dir)
        self.assertEqual(d_cfg["architectures"], ["Qwen3DSparkModel"])
        t_tensors, d_tensors = st.read_checkpoint(t_dir)[0], st.read_checkpoint(d_dir)[0]
        target = ref.TargetReference(t_cfg, t_tensors)
        drafter = ref.DFlashReference(d_cfg, d_tensors, target)
        heads = dspark.DSparkHeadsReference(d_cfg, d_tensors)
        # make-tiny's copies are the target's own (DeepSpec freezes them).
        self.assertTrue(torch.equal(drafter.embed, target.embed))
        self.assertTrue(torch.equal(drafter.lm_head, target.lm_head))
        ids = base.RANDOM_IDS
        n, b = len(ids), d_cfg["block_size"]

        logits, hidden, streams, gains = target.forward(ids)
        t_eps = ref.logits_budget(t_cfg, n, gains)
        out = base.dscale_json(self, "draft", "--target", t_dir, "--drafter", d_dir, "--ids",
                               ",".join(map(str, ids)), "--kv-dtype", "f32", "--activations", "f32")
        bonus = out["bonus"]
        self.check_token(logits[-1], ref.logit_tolerance(t_eps, hidden, target.lm_head)[-1], bonus,
                         "bonus")
        self.assertEqual(len(out["draft"]), b, "a DSpark block proposes block_size tokens")

        base_logits, d_hidden, d_gains = drafter.draft(streams, n, bonus)
        self.assertEqual(tuple(base_logits.shape), (b, t_cfg["vocab_size"]))
        eps = ref.draft_budget(t_cfg, d_cfg, n, gains, d_gains, drafter.target_layer_ids, b)
        want, extra, conf, conf_tol = heads.walk(base_logits, d_hidden, bonus, out["draft"], eps)
        tol = ref.logit_tolerance(eps, d_hidden, drafter.lm_head) + extra
        got = torch.tensor(out["draft_logits"], dtype=torch.float64)
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        diff = (got - want).abs()
        base.report("corrected draft logits", diff, tol)
        bad = (diff > tol).nonzero()
        self.assertEqual(len(bad), 0, self.describe(bad, got, want, tol))
        exact = sum(self.check_token(want[j], tol[j], tok, f"draft token {j + 1}")
                    for j, tok in enumerate(out["draft"]))
        changed = sum(int(want[j].argmax() != base_logits[j].argmax()) for j in range(b))
        print(f"  bonus {bonus}; draft {out['draft']} ({exact} of {b} beyond the tie margin, all "
              f"equal to the reference); the Markov head changed {changed} of the backbone's "
              "argmaxes")
        if heads.rank > 0:
            # The bound sees the head: without its bias the reference is far off.
            ratio = ((got - base_logits).abs() / tol).max().item()
            print(f"  without the Markov bias: max diff/tolerance {ratio:.1f}")
            self.assertGreater(ratio, 10.0)

        if conf is None:
            self.assertNotIn("confidence", out)
            return
        got_conf = torch.tensor(out["confidence"], dtype=torch.float64)
        self.assertEqual(tuple(got_conf.shape), (b,))
        c_diff = (got_conf - conf).abs()
        base.report("confidence logits", c_diff, conf_tol)
        self.assertTrue(bool((c_diff <= conf_tol).all()),
                        f"confidence: dscale {got_conf.tolist()}, reference {conf.tolist()}, "
                        f"bound {conf_tol.tolist()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dscale", required=True, help="the dscale binary")
    ap.add_argument("--keep", help="write the random checkpoints here and keep them")
    args, rest = ap.parse_known_args()
    args.dscale = os.path.abspath(args.dscale)
    base.ARGS = args
    torch.set_num_threads(1)
    start = time.time()
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False).result
    print(f"dspark parity: {time.time() - start:.1f} s")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
