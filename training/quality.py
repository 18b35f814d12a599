"""What makes an answer usable: loops and final answers (issue figures for the bundled pair)."""
import re

FINAL_ANSWER = re.compile(r"####\s*-?[\d,.$]+|\\boxed\{[^{}]+\}")


def loops(ids, n=8, times=3):
    """True when some n-token sequence occurs `times` or more times in ids."""
    counts = {}
    for i in range(len(ids) - n + 1):
        key = tuple(ids[i:i + n])
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= times:
            return True
    return False


def has_final_answer(text):
    return FINAL_ANSWER.search(text) is not None
