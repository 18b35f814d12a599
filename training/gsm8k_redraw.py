"""GSM8K training problems with their numbers redrawn and their solutions recomputed.

A GSM8K answer shows its arithmetic as calculator annotations, "48/2 = <<48/2=24>>24 clips".
redraw_problem() replaces the question's quantities (those >= min_value; small numbers are
mostly the "half", "twice", "3 times" of the wording) by random numbers written the same way,
then walks the answer line by line: every number equal to a redrawn quantity or to an earlier
result takes its new value, each annotation is evaluated again, and its result becomes a new
mapping for the lines after it. A draw is kept only when every annotation evaluates, results
that were whole numbers stay whole (non-negative, at most two decimals otherwise), results
below min_value keep their values, no value would need two different replacements, and the
arithmetic written outside annotations ("a + b = c") still checks. The target learns to carry a
problem's quantities through its steps instead of reciting one solution per question.
"""
import re

NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")
ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>]+)>>")
SAFE_EXPR = re.compile(r"^[\d.+\-*/() ]+$")
# "a op b [op c ...] = d" written in the text, outside an annotation.
_NUM = r"\d[\d,]*(?:\.\d+)?"
INLINE_EQUATION = re.compile(
    rf"(?<![\w.=])({_NUM}(?:\s*[-+*/x]\s*{_NUM})+)\s*=\s*({_NUM})(?![\d])")


def value_of(text):
    return float(text.replace(",", ""))


def write_like(value, like):
    """`value` written as `like` is: with thousands commas if it has them, as a whole number
    when the value is whole, else with at most two decimals."""
    if abs(value - round(value)) < 1e-9:
        out = f"{int(round(value)):,}" if "," in like else str(int(round(value)))
    else:
        out = f"{value:.2f}".rstrip("0")
    return out


def redraw_value(text, rng):
    """A random number of the same digit count and decimals as `text`, other than its value."""
    whole, _, frac = text.replace(",", "").partition(".")
    d, scale = len(whole), 10 ** len(frac)
    while True:
        n = rng.randint(10 ** (d - 1), 10 ** d - 1) + rng.randint(0, scale - 1) / scale
        if abs(n - value_of(text)) > 1e-9:
            return float(n)


def evaluate(expr):
    """The value of an annotation's arithmetic, or None when it is not plain arithmetic."""
    expr = expr.replace("x", "*").replace(",", "")
    if not SAFE_EXPR.match(expr) or "**" in expr:
        return None
    try:
        return float(eval(expr, {"__builtins__": {}}, {}))  # digits and + - * / ( ) only
    except (ArithmeticError, SyntaxError):
        return None


class Mapping:
    """Old value -> new value, refusing a second, different replacement for one value."""

    def __init__(self):
        self.new = {}

    def add(self, old, new):
        key = round(old, 6)
        if key in self.new and abs(self.new[key] - new) > 1e-9:
            return False
        self.new[key] = new
        return True

    def rewrite(self, text):
        def sub(m):
            key = round(value_of(m.group(0)), 6)
            return write_like(self.new[key], m.group(0)) if key in self.new else m.group(0)
        return NUMBER.sub(sub, text)


def redraw_problem(question, answer, rng, min_value=10):
    """(question, answer) with new quantities and recomputed arithmetic, or None."""
    mapping = Mapping()
    for m in NUMBER.finditer(question):
        old = value_of(m.group(0))
        if old >= min_value and round(old, 6) not in mapping.new:
            if not mapping.add(old, redraw_value(m.group(0), rng)):
                return None
    if not mapping.new:
        return None
    new_question = mapping.rewrite(question)
    out_lines = []
    for line in answer.split("\n"):
        pieces, pos = [], 0
        for m in ANNOTATION.finditer(line):
            expr, old_result = m.group(1), m.group(2)
            new_expr = mapping.rewrite(expr)
            new_result = evaluate(new_expr)
            old_value = evaluate(old_result)
            if new_result is None or old_value is None or new_result < 0:
                return None
            whole = abs(old_value - round(old_value)) < 1e-9
            if whole and abs(new_result - round(new_result)) > 1e-9:
                return None
            if not whole and abs(new_result * 100 - round(new_result * 100)) > 1e-6:
                return None
            if old_value < min_value and abs(new_result - old_value) > 1e-9:
                return None  # a small result could be read later as one of the wording's constants
            pieces.append(mapping.rewrite(line[pos:m.start()]))
            if not mapping.add(old_value, new_result):
                return None
            pieces.append(f"<<{new_expr}={write_like(new_result, old_result)}>>")
            pos = m.end()
        pieces.append(mapping.rewrite(line[pos:]))
        out_lines.append("".join(pieces))
    new_answer = "\n".join(out_lines)
    return (new_question, new_answer) if check_solution(new_answer) else None


def agrees(expr, stated):
    got, want = evaluate(expr), evaluate(stated)
    return got is not None and want is not None and abs(got - want) <= 1e-6 * max(1.0, abs(want))


def check_solution(answer):
    """Whether every annotation of `answer`, and every plain "a + b = c" written outside one,
    evaluates to the result it states."""
    if not all(agrees(m.group(1), m.group(2)) for m in ANNOTATION.finditer(answer)):
        return False
    plain = ANNOTATION.sub(" ", answer).replace("$", "")
    return all(agrees(m.group(1), m.group(2)) for m in INLINE_EQUATION.finditer(plain))
