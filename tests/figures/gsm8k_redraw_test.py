"""training/gsm8k_redraw.py: redrawn GSM8K problems keep their arithmetic true.

Run by CTest (`gsm8k_redraw`); needs only the standard library and data/gsm8k/train.jsonl.
"""
import os
import random
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "training"))

from common import gsm8k_train  # noqa: E402
from gsm8k_redraw import ANNOTATION, check_solution, evaluate, redraw_problem  # noqa: E402

QUESTION = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many "
            "clips in May. How many clips did Natalia sell altogether in April and May?")
ANSWER = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
          "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


class RedrawTest(unittest.TestCase):
    def test_carries_new_values_through_every_step(self):
        rng = random.Random(1)
        for _ in range(50):
            got = redraw_problem(QUESTION, ANSWER, rng)
            if got is None:
                continue
            q, a = got
            n = int(q.split("to ")[1].split(" ")[0])
            self.assertGreaterEqual(n, 10)
            self.assertLess(n, 100)
            half, total = n // 2, n + n // 2
            self.assertEqual(n % 2, 0)  # an odd draw would make a whole result fractional
            self.assertIn(f"{n}/2 = <<{n}/2={half}>>{half} clips", a)
            self.assertIn(f"<<{n}+{half}={total}>>{total}", a)
            self.assertTrue(a.endswith(f"#### {total}"))

    def test_refuses_a_result_that_stops_being_whole(self):
        rng = random.Random(2)
        draws = [redraw_problem(QUESTION, ANSWER, rng) for _ in range(200)]
        kept = [d for d in draws if d is not None]
        self.assertTrue(kept)
        self.assertLess(len(kept), len(draws))  # odd counts of clips are refused

    def test_check_solution_catches_wrong_arithmetic(self):
        self.assertTrue(check_solution(ANSWER))
        self.assertFalse(check_solution(ANSWER.replace("=72>>", "=73>>")))
        self.assertFalse(check_solution("So she has 10 + 5 = 16 apples."))
        self.assertIsNone(evaluate("__import__('os')"))

    def test_every_kept_draw_of_the_training_split_checks(self):
        rng = random.Random(3)
        kept = 0
        for q, a in gsm8k_train()[:600]:
            got = redraw_problem(q, a, rng)
            if got is None:
                continue
            kept += 1
            new_q, new_a = got
            self.assertTrue(check_solution(new_a))
            self.assertEqual(len(ANNOTATION.findall(new_a)), len(ANNOTATION.findall(a)))
            self.assertNotEqual(new_q, q)
        self.assertGreater(kept, 100)


if __name__ == "__main__":
    unittest.main()
