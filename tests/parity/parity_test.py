#!/usr/bin/python3
"""dscale against an independent float64 PyTorch reference (Debian's python3-torch).

  /usr/bin/python3 tests/parity/parity_test.py --dscale build/dscale [-v] [--keep DIR]

For the bundled pair (models/tiny-target + models/tiny-dflash), its `dscale inflate` output
(whose float64 reference must also equal the source's, InflatedPairTest), and random pairs with
odd sizes written here in Python (make_random_pair.py: BF16 sharded over two files, F16 with tied
embeddings and a sharded, "model."-prefixed drafter, F32 sharded and tied; Llama 3 targets;
Qwen3-MoE targets with dense and sparse layers mixed and norm_topk_prob both ways), it checks
  * `dscale logits`: every position's full logits row;
  * `dscale draft`: the bonus token, every draft logits row and the draft tokens;
  * the loader, by the above (dscale reads checkpoints this folder's writer produced, the
    reference reads them with this folder's reader), and by broken checkpoints that dscale must
    refuse with exit status 1 and a message naming the tensor.

Both commands run with --kv-dtype f32 and --activations f32: the reference keeps K and V and the
activations exact, and the budget below is for float32 arithmetic (a BF16 cache's rounding is
bounded in tests/model/logit_bounds.h).

Tolerances (hf_reference.py, "The float32 error budget"): logit v of row t may differ from the
float64 reference by eps · |h_t| · |W_v|, where h_t is the reference's final-normed hidden
row, W_v the LM-head row, and eps = 8 · 2^-24 · sqrt(Σ a²·(K+2)) over the chain of float32
reductions leading to the logit (a probabilistic rounding-error bound, a = the attention-score
gain measured on the reference, 1 elsewhere). Tokens are compared exactly only where the
reference's top-1 logit leads every other by more than the two logits' tolerances together;
elsewhere dscale's token must be one of those within that margin of the top.

The float64 Qwen3.5 reference (hybrid_reference.py) is checked on its own first
(HybridReferenceTest): its conv, delta rule, partial RoPE and sparse MLP against independent
statements of them, and a prefill split into chunks against the whole one on random hybrid targets; then
`dscale logits` on those targets against it (HybridParityTest), within the same kind of budget
extended to the Gated DeltaNet's stages.

Exits 77 (skipped) when /usr/bin/python3 has no torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import torch
except ImportError:
    print("SKIPPED: python3-torch not installed (scripts/install_deps.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import domino_reference as domino  # noqa: E402
import hf_reference as ref  # noqa: E402
import hybrid_reference as hybrid  # noqa: E402
import hf_safetensors as st  # noqa: E402
import make_random_pair as mk  # noqa: E402

ARGS = None  # set in main()

# Prompts: 20 and 19 ids, past one 16-position KV page; vocabulary edges (0, last row),
# special tokens and repeats.
BUNDLED_IDS = [4097, 349, 264, 198, 39, 299, 340, 2303, 309, 610, 1636, 12, 4098, 0, 4159,
               77, 77, 4096, 1, 2]
RANDOM_IDS = [1, 0, 332, 17, 99, 250, 3, 3, 3, 45, 200, 121, 7, 8, 9, 10, 11, 12, 300]
# Llama targets: 45 ids, past the random Llama configs' original contexts (16 and 32 positions)
# where llama3 scaling changes the angles, over three KV pages.
LLAMA_IDS = RANDOM_IDS + [5, 6, 13, 280, 281, 44, 44, 2, 90, 91, 92, 150, 151, 152, 17, 18,
                          19, 20, 330, 4, 64, 65, 66, 67, 68, 1]


def run_dscale(*args):
    p = subprocess.run([ARGS.dscale, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def dscale_json(testcase, *args):
    code, out, err = run_dscale(*args)
    testcase.assertEqual(code, 0, f"dscale {' '.join(args)} failed:\n{err}")
    return json.loads(out)


def load_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def report(label, diff, tol, what="dscale - reference"):
    ratio = (diff / tol).max().item()
    print(f"  {label}: max |{what}| {diff.max().item():.3e}, tolerance "
          f"{tol.min().item():.2e}..{tol.max().item():.2e}, max diff/tolerance {ratio:.4f}")
    return ratio


class ParityMixin:
    """Logits and draft parity for one target/drafter pair (target_dir, drafter_dir)."""

    def check_pair(self, target_dir, drafter_dir, ids):
        t_cfg, d_cfg = load_config(target_dir), load_config(drafter_dir)
        t_tensors, _ = st.read_checkpoint(target_dir)
        d_tensors, _ = st.read_checkpoint(drafter_dir)
        target = ref.TargetReference(t_cfg, t_tensors)
        drafter = ref.DFlashReference(d_cfg, d_tensors, target)
        ids_arg = ",".join(map(str, ids))
        n, vocab = len(ids), t_cfg["vocab_size"]

        # Target logits, every position.
        logits, hidden, streams, gains = target.forward(ids)
        got = dscale_json(self, "logits", "--model", target_dir, "--ids", ids_arg,
                          "--kv-dtype", "f32", "--activations", "f32")["logits"]
        got = torch.tensor(got, dtype=torch.float64)
        self.assertEqual(tuple(got.shape), (n, vocab))
        eps = ref.logits_budget(t_cfg, n, gains)
        tol = ref.logit_tolerance(eps, hidden, target.lm_head)
        diff = (got - logits).abs()
        report("target logits", diff, tol)
        self.check_router_margins(target, eps)
        bad = (diff > tol).nonzero()
        self.assertEqual(len(bad), 0, self.describe(bad, got, logits, tol))

        # One drafting step after the prefill.
        out = dscale_json(self, "draft", "--target", target_dir, "--drafter", drafter_dir,
                          "--ids", ids_arg, "--kv-dtype", "f32", "--activations", "f32")
        bonus = out["bonus"]
        self.check_token(logits[-1], tol[-1], bonus, "bonus")
        d_logits, d_hidden, d_gains = drafter.draft(streams, n, bonus)
        got = torch.tensor(out["draft_logits"], dtype=torch.float64)
        self.assertEqual(tuple(got.shape), (drafter.block_size - 1, vocab))
        eps = ref.draft_budget(t_cfg, d_cfg, n, gains, d_gains, drafter.target_layer_ids,
                               drafter.block_size)
        d_tol = ref.logit_tolerance(eps, d_hidden, target.lm_head)
        diff = (got - d_logits).abs()
        report("draft logits", diff, d_tol)
        bad = (diff > d_tol).nonzero()
        self.assertEqual(len(bad), 0, self.describe(bad, got, d_logits, d_tol))
        self.assertEqual(len(out["draft"]), drafter.block_size - 1)
        exact = sum(self.check_token(d_logits[j], d_tol[j], tok, f"draft token {j + 1}")
                    for j, tok in enumerate(out["draft"]))
        print(f"  bonus {bonus}; draft tokens {out['draft']} ({exact} of {len(out['draft'])} "
              "beyond the tie margin, all equal to the reference)")

    def check_router_margins(self, target, eps):
        """A mixture of experts' logits are comparable only where the reference's routing is
        clear of float32 rounding: every row's k-th expert ahead of the (k+1)-th by more than
        their router logits' tolerances (hf_reference.router_margin). A random checkpoint that
        fails this is unsuited (pick another seed), not a dscale error."""
        margins = target.router_margins(eps)
        if not margins:
            return
        print("  router margins (gap / tolerance, per sparse layer): " +
              ", ".join(f"{i}: {m:.0f}" for i, m in sorted(margins.items())))
        for layer, margin in margins.items():
            self.assertGreater(margin, 1.0, f"layer {layer}: a routing near-tie")

    def check_token(self, row, tol, token, what):
        """dscale's argmax `token` against the reference logits `row`. Returns whether the
        reference's top-1 was clear of every other logit (and so had to match exactly)."""
        top = int(row.argmax())
        # Tokens whose logit could exceed the top one's once both move by their tolerances.
        rivals = (row[top] - row <= tol[top] + tol).nonzero().flatten().tolist()
        if rivals == [top]:
            self.assertEqual(token, top, f"{what}: dscale chose {token}, reference {top} "
                             f"(margin {float(row[top] - row[token]):.3e})")
            return True
        self.assertIn(token, rivals, f"{what}: dscale chose {token}; reference top {top}, "
                      f"tokens within the tolerance of it: {rivals}")
        return False

    @staticmethod
    def describe(bad, got, want, tol):
        lines = [f"{len(bad)} logits beyond tolerance; first ones (row, token, dscale, reference, tol):"]
        for r, v in bad[:10].tolist():
            lines.append(f"  {r} {v} {got[r, v].item():.6g} {want[r, v].item():.6g} {tol[r, v].item():.2e}")
        return "\n".join(lines)


class BundledPairTest(ParityMixin, unittest.TestCase):
    def test_bundled_pair(self):
        print(f"\nbundled pair ({ARGS.models})")
        self.check_pair(os.path.join(ARGS.models, "tiny-target"),
                        os.path.join(ARGS.models, "tiny-dflash"), BUNDLED_IDS)


class BundledDominoHeadTest(ParityMixin, unittest.TestCase):
    """`dscale draft --drafter-head domino` on the bundled pair against the float64 backbone
    plus domino_reference.py's head. The reference's GRU reads dscale's proposals, so each row
    is compared given the same realised prefix; the tolerance of a corrected logit is the
    backbone's plus the correction's (DominoReference.budget / tolerance)."""

    def test_bundled_head(self):
        target_dir = os.path.join(ARGS.models, "tiny-target")
        drafter_dir = os.path.join(ARGS.models, "tiny-dflash")
        t_cfg, d_cfg = load_config(target_dir), load_config(drafter_dir)
        self.assertIn("domino_config", d_cfg, "the bundled drafter declares its Domino head")
        print(f"\nbundled Domino head ({drafter_dir}/{d_cfg['domino_config']['head_file']})")
        t_tensors, _ = st.read_checkpoint(target_dir)
        d_tensors, _ = st.read_checkpoint(drafter_dir)
        target = ref.TargetReference(t_cfg, t_tensors)
        drafter = ref.DFlashReference(d_cfg, d_tensors, target)
        head = domino.DominoReference(d_cfg, drafter_dir, target)
        ids = BUNDLED_IDS
        n = len(ids)
        logits, hidden, streams, gains = target.forward(ids)
        out = dscale_json(self, "draft", "--target", target_dir, "--drafter", drafter_dir,
                          "--ids", ",".join(map(str, ids)), "--kv-dtype", "f32", "--activations", "f32",
                          "--drafter-head", "domino")
        bonus = out["bonus"]
        base, d_hidden, d_gains = drafter.draft(streams, n, bonus)
        eps = ref.draft_budget(t_cfg, d_cfg, n, gains, d_gains, drafter.target_layer_ids,
                               drafter.block_size)
        want, mids = head.refine(base, d_hidden, bonus, out["draft"])
        width = drafter.block_size - 1
        tol = ref.logit_tolerance(eps, d_hidden, target.lm_head) + \
            head.tolerance(head.budget(eps, t_cfg["hidden_size"], width), mids)
        got = torch.tensor(out["draft_logits"], dtype=torch.float64)
        self.assertEqual(tuple(got.shape), (width, t_cfg["vocab_size"]))
        diff = (got - want).abs()
        report("corrected draft logits", diff, tol)
        bad = (diff > tol).nonzero()
        self.assertEqual(len(bad), 0, self.describe(bad, got, want, tol))
        exact = sum(self.check_token(want[j], tol[j], tok, f"draft token {j + 1}")
                    for j, tok in enumerate(out["draft"]))
        changed = sum(int(want[j].argmax() != base[j].argmax()) for j in range(width))
        print(f"  draft tokens {out['draft']} ({exact} of {width} beyond the tie margin, all "
              f"equal to the reference); the head changed {changed} of the backbone's argmaxes")


class RandomPairTest(ParityMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="dscale_parity_")
        cls.root = ARGS.keep or cls.tmp.name
        cls.pairs = {name: mk.write_pair(cls.root, name) for name in mk.VARIANTS}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reader_reads_back_what_was_written(self):
        for name, (t_dir, d_dir, t_values, d_values) in self.pairs.items():
            for folder, values in ((t_dir, t_values), (d_dir, d_values)):
                read, _ = st.read_checkpoint(folder)
                self.assertEqual(sorted(read), sorted(values), folder)
                for k, v in values.items():
                    self.assertTrue(torch.equal(read[k], v), f"{folder}: {k}")
                index = os.path.join(folder, st.INDEX_NAME)
                if os.path.exists(index):  # the sharded ones really use two shards
                    with open(index) as f:
                        self.assertEqual(len(set(json.load(f)["weight_map"].values())), 2, folder)

    def test_bf16_sharded(self):
        self.check_variant("bf16_sharded")

    def test_f16_tied(self):
        self.check_variant("f16_tied")

    def test_f32_sharded_tied(self):
        self.check_variant("f32_sharded_tied")

    def test_llama_gqa_bf16(self):
        self.check_variant("llama_gqa_bf16", LLAMA_IDS)

    def test_llama_gqa_f32_tied(self):
        self.check_variant("llama_gqa_f32_tied", LLAMA_IDS)

    def test_llama_mha_bf16_tied(self):
        self.check_variant("llama_mha_bf16_tied", LLAMA_IDS)

    def test_llama_mha_f16(self):
        self.check_variant("llama_mha_f16", LLAMA_IDS)

    def test_moe_norm_bf16_sharded(self):
        self.check_variant("moe_norm_bf16_sharded", LLAMA_IDS)

    def test_moe_raw_f32_tied(self):
        self.check_variant("moe_raw_f32_tied", LLAMA_IDS)

    def test_moe_routing_is_what_is_checked(self):
        """The bound sees the routing: references with norm_topk_prob flipped or with one fewer
        expert per token depart from dscale by far more than the tolerance."""
        t_dir, _, _, _ = self.pairs["moe_norm_bf16_sharded"]
        cfg, tensors = load_config(t_dir), st.read_checkpoint(t_dir)[0]
        ids = ",".join(map(str, LLAMA_IDS))
        got = dscale_json(self, "logits", "--model", t_dir, "--ids", ids, "--kv-dtype", "f32",
                          "--activations", "f32")["logits"]
        got = torch.tensor(got, dtype=torch.float64)
        print("\nQwen3-MoE routing variants (max diff/tolerance against dscale):")
        for what, changed in (("norm_topk_prob false", dict(cfg, norm_topk_prob=False)),
                              ("top 2 of 7", dict(cfg, num_experts_per_tok=2))):
            wrong = ref.TargetReference(changed, tensors)
            logits, hidden, _, gains = wrong.forward(LLAMA_IDS)
            tol = ref.logit_tolerance(ref.logits_budget(changed, len(LLAMA_IDS), gains), hidden,
                                      wrong.lm_head)
            ratio = ((got - logits).abs() / tol).max().item()
            print(f"  {what}: {ratio:.1f}")
            self.assertGreater(ratio, 10.0, what)

    def test_llama3_scaling_is_what_is_checked(self):
        """The bound sees the scaling: a reference without rope_scaling agrees with dscale at
        position 0 (no rotation) and departs from it by far more than the tolerance at later
        positions, most past the original context, where the rescaled low frequencies have
        turned furthest."""
        t_dir, _, _, _ = self.pairs["llama_gqa_f32_tied"]
        cfg = load_config(t_dir)
        context = cfg["rope_scaling"]["original_max_position_embeddings"]
        unscaled = ref.TargetReference(dict(cfg, rope_scaling=None), st.read_checkpoint(t_dir)[0])
        logits, hidden, _, gains = unscaled.forward(LLAMA_IDS)
        got = dscale_json(self, "logits", "--model", t_dir, "--ids", ",".join(map(str, LLAMA_IDS)),
                          "--kv-dtype", "f32", "--activations", "f32")["logits"]
        got = torch.tensor(got, dtype=torch.float64)
        tol = ref.logit_tolerance(ref.logits_budget(cfg, len(LLAMA_IDS), gains), hidden,
                                  unscaled.lm_head)
        ratio = ((got - logits).abs() / tol).max(dim=-1).values
        print(f"\nllama3 scaling: max diff/tolerance against an unscaled reference "
              f"{ratio[:context].max().item():.3f} inside the original context, "
              f"{ratio[context:].max().item():.1f} past it")
        self.assertLessEqual(ratio[0].item(), 1.0)
        self.assertGreater(ratio[context:].max().item(), 10.0)

    def check_variant(self, name, ids=RANDOM_IDS):
        t_dir, d_dir, _, _ = self.pairs[name]
        print(f"\nrandom pair {name}")
        self.check_pair(t_dir, d_dir, ids)


class InflatedPairTest(ParityMixin, unittest.TestCase):
    """`dscale inflate` of the bundled pair to a shape that changes every field (docs/INFLATE.md).

    dscale on the output is checked against the reference on the output, as any checkpoint; and
    the reference on the output against the reference on the source. Both are float64, so they
    differ only by the output's one-time roundings: its compensated norm gains are f32 (relative
    error u each), which the budget counts as one stage of one term per rounded gain vector on
    the path (hidden norms, k_norm, whose error the score gain a amplifies, the final norms)."""

    SHAPE = ["--hidden", "512", "--intermediate", "1088", "--layers", "9", "--heads", "8",
             "--kv-heads", "4", "--head-dim", "128", "--vocab", "4224", "--draft-layers", "3"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="dscale_parity_inflate_")
        cls.small = (os.path.join(ARGS.models, "tiny-target"), os.path.join(ARGS.models, "tiny-dflash"))
        cls.large = (os.path.join(cls.tmp.name, "target"), os.path.join(cls.tmp.name, "drafter"))
        code, out, err = run_dscale("inflate", "--target", cls.small[0], "--drafter", cls.small[1],
                                    "--out-target", cls.large[0], "--out-drafter", cls.large[1],
                                    *cls.SHAPE)
        if code != 0:
            raise RuntimeError(f"dscale inflate failed:\n{out}{err}")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_dscale_reads_the_inflated_pair(self):
        print("\ninflated bundled pair")
        self.check_pair(*self.large, BUNDLED_IDS)

    @staticmethod
    def reference(dirs):
        t_cfg, d_cfg = load_config(dirs[0]), load_config(dirs[1])
        target = ref.TargetReference(t_cfg, st.read_checkpoint(dirs[0])[0])
        return target, ref.DFlashReference(d_cfg, st.read_checkpoint(dirs[1])[0], target)

    def test_same_function_as_the_source(self):
        small, small_drafter = self.reference(self.small)
        large, large_drafter = self.reference(self.large)
        vocab = small.cfg["vocab_size"]
        s_logits, s_hidden, s_streams, s_gains = small.forward(BUNDLED_IDS)
        l_logits, _, l_streams, _ = large.forward(BUNDLED_IDS)
        norms = sum(2 + a * a for a in s_gains) + 1
        tol = ref.logit_tolerance(ref.LAMBDA * ref.U * math.sqrt(norms), s_hidden, small.lm_head)
        diff = (l_logits[:, :vocab] - s_logits).abs()
        print("\ninflated bundled pair against its source (float64 references)")
        report("target logits", diff, tol, "inflated - source")
        self.assertTrue(bool((diff <= tol).all()), self.describe((diff > tol).nonzero(),
                                                                 l_logits, s_logits, tol))
        top = s_logits.max(dim=-1).values
        self.assertTrue(bool((l_logits[:, vocab:].max(dim=-1).values <= top - 1000).all()))

        bonus = int(s_logits[-1].argmax())
        n = len(BUNDLED_IDS)
        d_logits, d_hidden, d_gains = small_drafter.draft(s_streams, n, bonus)
        l_d_logits, _, _ = large_drafter.draft(l_streams, n, bonus)
        norms += sum(2 + a * a for a in d_gains) + 2  # the drafter's layers, hidden_norm, norm
        d_tol = ref.logit_tolerance(ref.LAMBDA * ref.U * math.sqrt(norms), d_hidden, small.lm_head)
        diff = (l_d_logits[:, :vocab] - d_logits).abs()
        report("draft logits", diff, d_tol, "inflated - source")
        self.assertTrue(bool((diff <= d_tol).all()))
        self.assertTrue(torch.equal(l_d_logits.argmax(dim=-1), d_logits.argmax(dim=-1)))


class HybridReferenceTest(unittest.TestCase):
    """The float64 Qwen3.5 reference against independent statements of its pieces: torch's own
    grouped conv1d, the delta rule as a product of matrices and its exact recall of orthonormal
    keys, partial RoPE against the full rotation on the rotated dims; and a prefill cut into
    chunks at odd places (one row at a time too) against the whole prefill on the random hybrid
    targets, where conv and recurrent states carry across the cuts."""

    def test_conv_matches_torch_grouped_conv1d(self):
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(9, 7, generator=gen, dtype=torch.float64)
        w = torch.randn(7, 4, generator=gen, dtype=torch.float64)
        got, state = hybrid.causal_conv(x, w, torch.zeros(3, 7, dtype=torch.float64))
        want = torch.nn.functional.conv1d(x.T[None], w[:, None, :], padding=3, groups=7)[0, :, :9].T
        self.assertLess((got - torch.nn.functional.silu(want)).abs().max().item(), 1e-13)
        self.assertTrue(torch.equal(state, x[-3:]))
        first, mid = hybrid.causal_conv(x[:2], w, torch.zeros(3, 7, dtype=torch.float64))
        rest, end = hybrid.causal_conv(x[2:], w, mid)
        self.assertLess((torch.cat((first, rest)) - got).abs().max().item(), 1e-13)
        self.assertTrue(torch.equal(end, state))

    def test_delta_rule_is_the_matrix_recurrence(self):
        gen = torch.Generator().manual_seed(2)
        t, h, dk, dv = 6, 3, 5, 4
        q = hybrid.l2_normalise(torch.randn(t, h, dk, generator=gen, dtype=torch.float64)) * dk ** -0.5
        k = hybrid.l2_normalise(torch.randn(t, h, dk, generator=gen, dtype=torch.float64))
        v = torch.randn(t, h, dv, generator=gen, dtype=torch.float64)
        g = -torch.rand(t, h, generator=gen, dtype=torch.float64)
        beta = torch.rand(t, h, generator=gen, dtype=torch.float64)
        s0 = torch.randn(h, dk, dv, generator=gen, dtype=torch.float64)
        out, s = hybrid.delta_rule(q, k, v, g, beta, s0)
        # S_t = (I − β k kᵀ) · e^g · S_{t−1} + β k vᵀ;  o_t = S_tᵀ q_t
        state = s0.clone()
        eye = torch.eye(dk, dtype=torch.float64)
        for i in range(t):
            for j in range(h):
                kk = k[i, j][:, None]
                state[j] = ((eye - beta[i, j] * kk @ kk.T) @ (g[i, j].exp() * state[j])
                            + beta[i, j] * kk @ v[i, j][None, :])
                self.assertLess((out[i, j] - state[j].T @ q[i, j]).abs().max().item(), 1e-12)
        self.assertLess((s - state).abs().max().item(), 1e-12)

    def test_delta_rule_recalls_orthonormal_keys(self):
        # No decay, β = 1: writing v under orthonormal keys replaces what each key reads.
        dk, dv = 4, 3
        keys = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64))[0].T[:3]  # 3 orthonormal rows
        v = torch.randn(3, 1, dv, dtype=torch.float64)
        k = keys[:, None, :]
        zeros = torch.zeros(3, 1, dtype=torch.float64)
        _, s = hybrid.delta_rule(k, k, v, zeros, zeros + 1, torch.zeros(1, dk, dv, dtype=torch.float64))
        for i in range(3):
            self.assertLess((s[0].T @ keys[i] - v[i, 0]).abs().max().item(), 1e-12)

    def test_partial_rope_rotates_only_the_first_dims(self):
        gen = torch.Generator().manual_seed(3)
        x = torch.randn(2, 5, 16, generator=gen, dtype=torch.float64)
        pos = torch.tensor([0, 1, 7, 30, 200])
        got = hybrid.partial_rope(x, pos, 5000.0, 6)
        cos, sin = ref.rope_cos_sin(pos, 6, {"rope_theta": 5000.0})
        self.assertLess((got[..., :6] - ref.apply_rope(x[..., :6], cos, sin)).abs().max().item(), 1e-13)
        self.assertTrue(torch.equal(got[..., 6:], x[..., 6:]))

    def test_sparse_moe_is_the_dense_sum_over_chosen_experts(self):
        # Every expert chosen (k = E): the block is Σ_e p_e · expert_e + σ(g·x) · shared, with
        # p the softmax itself (renormalising a full softmax changes nothing); a fused expert's
        # gate rows come first.
        gen = torch.Generator().manual_seed(4)
        h, e, i, si = 6, 3, 4, 5

        def rnd(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float64)

        gate_up, down = rnd(e, 2 * i, h), rnd(e, h, i)
        tensors = {"mlp.gate.weight": rnd(e, h), "mlp.experts.gate_up_proj": gate_up,
                   "mlp.experts.down_proj": down, "mlp.shared_expert_gate.weight": rnd(1, h),
                   "input_layernorm.weight": rnd(h), "post_attention_layernorm.weight": rnd(h)}
        for part, shape in (("gate", (si, h)), ("up", (si, h)), ("down", (h, si))):
            tensors[f"mlp.shared_expert.{part}_proj.weight"] = rnd(*shape)
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            tensors[f"self_attn.{name}.weight"] = rnd(1)
        tc = {"num_experts": e, "num_experts_per_tok": e, "moe_intermediate_size": i}
        lw = hybrid.HybridLayer(tc, tensors, "", "full_attention", True)
        x = rnd(4, h)
        p = torch.softmax(x @ tensors["mlp.gate.weight"].T, dim=-1)
        want = torch.zeros_like(x)
        silu = torch.nn.functional.silu
        for j in range(e):
            y = (silu(x @ gate_up[j, :i].T) * (x @ gate_up[j, i:].T)) @ down[j].T
            want += p[:, j:j + 1] * y
        sg = [tensors[f"mlp.shared_expert.{part}_proj.weight"] for part in ("gate", "up", "down")]
        shared = (silu(x @ sg[0].T) * (x @ sg[1].T)) @ sg[2].T
        want += torch.sigmoid(x @ tensors["mlp.shared_expert_gate.weight"].T) * shared
        self.assertLess((hybrid.sparse_moe(tc, lw, x) - want).abs().max().item(), 1e-12)

    def test_split_prefill_equals_the_whole_prefill(self):
        ids = RANDOM_IDS
        with tempfile.TemporaryDirectory(prefix="dscale_hybrid_ref_") as tmp:
            for name in mk.HYBRID_VARIANTS:
                folder, _ = mk.write_hybrid_target(tmp, name)
                tensors, _ = st.read_checkpoint(folder)
                target = hybrid.Qwen3_5Reference(load_config(folder), tensors)
                whole = target.forward(ids)[0]
                for splits in ((1, 6, 7, 13), tuple(range(1, len(ids)))):
                    diff = (target.forward(ids, splits)[0] - whole).abs().max().item()
                    self.assertLess(diff, 1e-10, f"{name} split at {splits}")


class HybridParityTest(unittest.TestCase):
    """`dscale logits` on the random Qwen3.5 targets (both layouts, key/value head ratios 1 and 2,
    tied and untied, BF16/F16/F32, dense and with experts, whose routing must be clear of float32
    rounding: hf_reference.router_margin) against the float64 reference, every position within the
    budget (hybrid_reference.logits_budget); the multimodal layout's vision and mtp tensors are
    left unread and said so."""

    def test_logits_every_position(self):
        ids = RANDOM_IDS
        with tempfile.TemporaryDirectory(prefix="dscale_hybrid_parity_") as tmp:
            for name in mk.HYBRID_VARIANTS:
                with self.subTest(name):
                    folder, _ = mk.write_hybrid_target(ARGS.keep or tmp, name)
                    tensors, _ = st.read_checkpoint(folder)
                    cfg = load_config(folder)
                    target = hybrid.Qwen3_5Reference(cfg, tensors)
                    logits, hidden, _, gains = target.forward(ids)
                    code, out, err = run_dscale("logits", "--model", folder, "--ids",
                                                ",".join(map(str, ids)), "--kv-dtype", "f32",
                                                "--activations", "f32")
                    self.assertEqual(code, 0, err)
                    got = torch.tensor(json.loads(out)["logits"], dtype=torch.float64)
                    self.assertEqual(tuple(got.shape), tuple(logits.shape))
                    eps = hybrid.logits_budget(target.cfg, len(ids), gains)
                    for layer, margin in target.router_margins(eps).items():
                        self.assertGreater(margin, 1.0, f"{name} layer {layer}: a routing "
                                           "near-tie (the checkpoint is unsuited, not dscale)")
                    tol = ref.logit_tolerance(eps, hidden, target.lm_head)
                    diff = (got - logits).abs()
                    report(f"{name} logits", diff, tol)
                    self.assertTrue(bool((diff <= tol).all()), name)
                    if "text_config" in cfg:
                        self.assertIn("2 tensors left unread by the text model", err)


class BrokenCheckpointTest(unittest.TestCase):
    """Checkpoints dscale must refuse: exit status 1 and the offending tensor named."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="dscale_parity_bad_")
        cls.cfg = dict(mk.TARGET)
        cls.tensors = [(n, st.round_to(x, "BF16"), "BF16")
                       for n, x in mk.target_tensors(cls.cfg, 3, tied=False)]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write_target(self, name, tensors, shards=1, header_override=None):
        folder = os.path.join(self.tmp.name, name)
        mk.write_config(folder, self.cfg)
        st.write_checkpoint(folder, tensors, shards=shards, header_override=header_override)
        return folder

    def expect_refused(self, folder, *needles, drafter=None):
        if drafter is None:
            code, out, err = run_dscale("logits", "--model", folder, "--ids", "1,2,3")
        else:
            code, out, err = run_dscale("draft", "--target", folder, "--drafter", drafter,
                                        "--ids", "1,2,3")
        self.assertEqual(code, 1, f"exit {code}; stderr: {err}")
        self.assertEqual(out, "")
        for needle in needles:
            self.assertIn(needle, err)

    def test_shape_mismatch(self):
        name = "model.layers.1.self_attn.k_proj.weight"
        tensors = [(n, t[:-2] if n == name else t, d) for n, t, d in self.tensors]
        self.expect_refused(self.write_target("shape", tensors), f'"{name}"', "expected shape [22, 75]",
                            "got [20, 75]")

    def test_missing_tensor(self):
        tensors = [e for e in self.tensors if e[0] != "lm_head.weight"]
        self.expect_refused(self.write_target("missing", tensors, shards=2), '"lm_head.weight"',
                            "not found")

    def test_offsets_disagree_with_shape(self):
        name = "model.layers.0.mlp.up_proj.weight"
        folder = self.write_target("offsets", self.tensors, header_override={name: {"shape": [101, 74]}})
        self.expect_refused(folder, f'"{name}"', "data_offsets")

    def test_drafter_fc_width(self):
        # fc must take len(target_layer_ids) x target hidden inputs: here one feature too few.
        target = self.write_target("fc_target", self.tensors)
        drafter = os.path.join(self.tmp.name, "fc_drafter")
        mk.write_config(drafter, mk.DRAFTER_A)
        tensors = [(n, st.round_to(t[:, :-1] if n == "fc.weight" else t, "BF16"), "BF16")
                   for n, t in mk.drafter_tensors(mk.DRAFTER_A, self.cfg, 4, "")]
        st.write_checkpoint(drafter, tensors)
        self.expect_refused(target, '"fc.weight"', "expected shape [75, 150]", "got [75, 149]",
                            drafter=drafter)

    def test_index_names_the_wrong_shard(self):
        folder = self.write_target("index", self.tensors, shards=2)
        path = os.path.join(folder, st.INDEX_NAME)
        with open(path) as f:
            index = json.load(f)
        name = "model.embed_tokens.weight"
        shards = sorted(set(index["weight_map"].values()))
        index["weight_map"][name] = shards[1] if index["weight_map"][name] == shards[0] else shards[0]
        with open(path, "w") as f:
            json.dump(index, f)
        self.expect_refused(folder, f'"{name}"', "does not contain it")


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dscale", required=True, help="the dscale binary")
    ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "models"),
                    help="folder holding tiny-target and tiny-dflash")
    ap.add_argument("--keep", help="write the random checkpoints here and keep them")
    ARGS, rest = ap.parse_known_args()
    ARGS.dscale = os.path.abspath(ARGS.dscale)
    ARGS.models = os.path.abspath(ARGS.models)
    torch.set_num_threads(1)
    start = time.time()
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False).result
    print(f"parity: {time.time() - start:.1f} s")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
