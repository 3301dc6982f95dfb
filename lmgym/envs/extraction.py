"""Finding the final answer in a model's text (no evaluation, only string scanning).

Every step is linear in the text's length (no regex that can backtrack
quadratically, no repeated re-scans; plain ``re`` syntax, Python 3.10 has no
possessive quantifiers), and only the last ``MAX_SCAN_CHARS``
characters of a text are read: the final answer is at its end.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_SCAN_CHARS", "Box", "extract_answer", "find_boxes", "gsm8k_gold"]

MAX_SCAN_CHARS = 200_000  # longer texts are read from their last this-many characters
MAX_BOX_GAP_CHARS = 40  # boxes closer than this, joined only by joining words (_is_joining_gap), form one answer
MAX_DISPLAY_MATH_CHARS = 2_000  # "$$ ... $$" / "\\[ ... \\]" after "answer is" may span lines up to this long
MAX_UNIT_WORDS = 2  # words allowed after a fallback number: "18 apples.", "-7/8 remains.", "42 Äpfel"

_NUMBER = r"[-−]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:/[0-9]+)?"  # 1,234 -2.5 3/4
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(r"\banswer\**\s*(?:is\b|:)\s*:?[ \t]*", re.IGNORECASE)
# (the lookbehind keeps a search linear: no retry from inside a run of digits)
_LEADING_NUMBER_RE = re.compile(rf"(?<![0-9$,.])\$?({_NUMBER})\s+[A-Za-z]")
_BOX_RE = re.compile(r"\\boxed(?:[ \t]*(\{)|[ \t]+([^\s${}]+))")
_BRACE_RE = re.compile(r"[{}]")
# What may stand between boxes of one answer: separators and "and"/"or", item labels ("(b)", "ii)"), the name a
# box answers ("y =", "x_2 =", "\\beta ="), a unit after a box ("cm").  Anything else (a correction, "but
# actually") keeps only the last box.
_GAP_NOISE_RE = re.compile(r"\\q?quad|\\text\s*\{|\\[,;! ]|[{}$,;:.]")
_GAP_TOKEN_RE = re.compile(
    r"and|or|&|=|\(?(?:[a-z]{1,3}|\d{1,2})\)|[A-Za-z](?:_\{?\w{1,3}\}?)?=?|\\[A-Za-z]{2,8}=?"
    r"|(?:cm|mm|km|kg|ft|in|m|g|s|h|min|units?|degrees?|dollars?|cents?|meters?|inches|feet|hours?|minutes?|seconds?)"
)
# A sentence ends at ". " / "! " / "? ", or at a full-width or other-script stop ("。", "！", "؟", "।").
_SENTENCE_END_RE = re.compile(r"[.!?]\s|[。！？؟।]")
# Characters that mark code or markup rather than a stated answer ("__import__('os')...", "f(x) or 0");
# an apostrophe counts unless it stands between two letters of any script ("l'âge", "don't").
_CODE_CHAR_RE = re.compile(r"[_\"`\[\]{}\\;|&<>#@~()]|'(?![^\W\d_])|(?<![^\W\d_])'")
_ARITH_CODE_CHAR_RE = re.compile(r"[_\"`\[\]{}\\;|&<>#@~]|'(?![^\W\d_])|(?<![^\W\d_])'")
# A number glued to an identifier ("x2", "foo3", "a_1") or standing after an operator ("2 + 3") is
# part of an expression, not an answer.
_GLUED_TO_NAME_RE = re.compile(r"[A-Za-z0-9_.]")
_OPERATOR_CHARS = frozenset("+-*/^%×÷·−")
# Words that, right before the number or among the words after it, make it a hedge or code:
# "5 or 6", "x and 0", "return 0", "1 if x", "y else 0".
_CODE_WORDS = frozenset("or and not if else elif return lambda yield assert await".split())
_SENTENCE_STOPS = ".!。！।۔"
_ALNUM_RE = re.compile(r"[A-Za-z0-9]")
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def _strip_ends(s: str) -> str:
    """Strip whitespace and ``$`` at both ends and trailing periods (one linear pass)."""
    start, end = 0, len(s)
    while start < end and (s[start].isspace() or s[start] == "$"):
        start += 1
    while end > start and (s[end - 1].isspace() or s[end - 1] in ".$"):
        end -= 1
    return s[start:end]


def _clean(s: str) -> str:
    """``_strip_ends``, then the same inside ``**bold**`` markers around the whole answer."""
    s = _strip_ends(s)
    lead, trail = len(s) - len(s.lstrip("*")), len(s) - len(s.rstrip("*"))
    pairs = min(lead, trail) // 2 * 2
    if pairs and len(s) > 2 * pairs:
        s = _strip_ends(s[pairs:-pairs])
    return s


class Box:
    """One ``\\boxed{...}`` (or ``\\boxed 5``): its span in the text and its content."""

    __slots__ = ("start", "end", "content", "braced")

    def __init__(self, start: int, end: int, content: str, braced: bool):
        self.start, self.end, self.content, self.braced = start, end, content, braced


def find_boxes(text: str) -> list[Box]:
    """The outermost balanced ``\\boxed`` answers of ``text`` in order (one linear pass).

    Braces are matched with a stack over all ``{``/``}`` in the text, so a
    truncated (unbalanced) box is skipped and a box nested in another is part
    of the outer box's content.  Only the outermost boxes' contents are copied.
    """
    openers: dict[int, int] = {}  # brace position -> start of its "\boxed"
    spans: list[tuple[int, int, int, int]] = []  # start, end, content start, content end
    for m in _BOX_RE.finditer(text):
        if m.group(1) is not None:
            openers[m.start(1)] = m.start()
        else:
            spans.append((m.start(), m.end(), m.start(2), m.end(2)))
    if openers:
        stack: list[int] = []
        for m in _BRACE_RE.finditer(text):
            pos = m.start()
            if text[pos] == "{":
                stack.append(pos)
            elif stack:
                opened = stack.pop()
                if opened in openers:
                    spans.append((openers[opened], pos + 1, opened + 1, pos))
    spans.sort()
    outer: list[Box] = []
    for start, end, content_start, content_end in spans:
        if not outer or start >= outer[-1].end:
            braced = text[content_start - 1] == "{"
            outer.append(Box(start, end, text[content_start:content_end], braced))
    return outer


def _unwrap_box(content: str) -> str:
    """``\\boxed{\\boxed{5}}`` -> ``5``: content that is itself exactly one box."""
    for _ in range(8):
        inner = find_boxes(content) if content.lstrip().startswith("\\boxed") else []
        if len(inner) != 1 or content[: inner[0].start].strip() or content[inner[0].end :].strip():
            break
        content = inner[0].content
    return content


def _is_joining_gap(gap: str) -> bool:
    """Do only joining words stand between two boxes (see ``_GAP_TOKEN_RE``)?  ``gap`` is short (bounded)."""
    return all(_GAP_TOKEN_RE.fullmatch(token) for token in _GAP_NOISE_RE.sub(" ", gap).split())


def _boxed_answer(text: str) -> str | None:
    """The last box, or the last boxes joined with ", " when only ",", "and", "or" separate them."""
    boxes = find_boxes(text)
    if not boxes:
        return None
    group = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        gap_start, gap_end = box.end, group[-1].start
        if gap_end - gap_start > MAX_BOX_GAP_CHARS or not _is_joining_gap(text[gap_start:gap_end]):
            break
        group.append(box)
    answers = (_clean(_unwrap_box(box.content)) for box in reversed(group))
    return ", ".join(dict.fromkeys(answer for answer in answers if answer)) or None  # in order, no repeats


def _delimited_math(s: str) -> str | None:
    """The math of ``$...$``, ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]`` at the start of ``s``.

    Display math (``$$``, ``\\[``) may span lines (up to ``MAX_DISPLAY_MATH_CHARS``); inline math (``$``,
    ``\\(``) closes on its own line, else it is no math (a dollar sign, a line cut short).
    """
    for opening, closing in _MATH_DELIMITERS:
        if s.startswith(opening):
            display = opening in ("$$", "\\[")
            limit = len(opening) + MAX_DISPLAY_MATH_CHARS if display else s.find("\n")
            end = s.find(closing, len(opening), len(s) if limit < 0 else limit)
            if end < 0:
                return None
            return _clean(s[len(opening) : end]) or None
    return None


def _is_prose(s: str) -> bool:
    """Three words in a row of two or more letters: "that she has 5 apples"."""
    run = 0
    for word in s.split():
        run = run + 1 if len(word) >= 2 and word.isascii() and word.isalpha() else 0
        if run >= 3:
            return True
    return False


def _answer_is(text: str) -> str | None:
    """The answer after the last "answer is" / "answer:" (e.g. "The final answer is $x$.")."""
    matches = list(_ANSWER_IS_RE.finditer(text))
    last = matches[-1] if matches else None
    if last is None:
        return None
    rest = text[last.end() :].lstrip()
    line = rest.partition("\n")[0].strip()
    math = _delimited_math(rest.lstrip("*").lstrip())  # "**Answer:** $x$", "answer is $$\n x \n$$"
    if math is not None:
        return math
    ans = _clean(_clean(line).strip("*"))  # "**Answer:** 18", "answer is **18**."
    m = _LEADING_NUMBER_RE.match(ans)  # "18 apples" -> "18"
    if m:
        return m.group(1)
    if _is_prose(ans):  # "that she has 5 apples" -> "5"
        nums = _NUMBER_RE.findall(ans)
        if nums:
            return nums[-1]
    return ans or None


def _last_line_with_content(text: str) -> str:
    """The last line with a letter or digit (skips trailing ``###``, ``---``, fences); "" if none."""
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        if _ALNUM_RE.search(line):
            return line
        end = start - 1
    return ""


def _is_attached_script(ch: str) -> bool:
    """Scripts written without spaces, whose words follow a number directly: "42个", "42個", "42개"."""
    return (
        "\u3040" <= ch <= "\u30ff"  # hiragana, katakana
        or "\u3400" <= ch <= "\u4dbf"  # CJK extension A
        or "\u4e00" <= ch <= "\u9fff"  # CJK unified ideographs
        or "\uf900" <= ch <= "\ufaff"  # CJK compatibility ideographs
        or "\uac00" <= ch <= "\ud7af"  # hangul syllables
        or "\u0e00" <= ch <= "\u0e7f"  # thai
    )


def _is_word(word: str) -> bool:
    """Letters (and their combining marks) of any script; ``%``; ``-``/``'`` between letters."""
    for i, ch in enumerate(word):
        if ch in "-'’" and 0 < i < len(word) - 1:
            continue
        if ch != "%" and unicodedata.category(ch)[0] not in "LM":
            return False
    return True


def _is_unit_tail(tail: str) -> bool:
    """What may follow a standing number: at most ``MAX_UNIT_WORDS`` words in any script and one full stop.

    "", " apples.", " Äpfel", " 个", "个苹果。" (no space needed in CJK and similar scripts), "%";
    not "x" glued to the number ("5x"), brackets, operators or code words ("1 if x", "5 or more").
    """
    tail = tail.rstrip()
    if tail and tail[-1] in _SENTENCE_STOPS:
        tail = tail[:-1].rstrip()
    if not tail:
        return True
    if not tail[0].isspace() and tail[0] != "%" and not _is_attached_script(tail[0]):
        return False
    words = tail.split(None, MAX_UNIT_WORDS)
    if len(words) > MAX_UNIT_WORDS:
        return False
    return all(_is_word(w) and w.lower() not in _CODE_WORDS for w in words)


def _last_word(s: str) -> str:
    """The last whitespace-separated word of ``s`` (reads from the end only)."""
    parts = s.rsplit(None, 1)
    return parts[-1] if parts else ""


def _reads_as_code(before: str) -> bool:
    """Is the text before a final number code or an expression rather than prose?

    ``... = N`` is an answer unless the ``=`` is a comparison or walrus or the left side has code
    characters (``5 * 3 = 15`` and ``(3 + 4) * 2 = 14`` stand; ``x == 0`` and ``a[0] = 1`` do not).
    Otherwise the number must not follow an operator (``x = 2 + 3``), an identifier it is glued to
    (``x2``), code characters (``foo(3``, ``[1, 2][0``) or a code word (``... or 0``, ``return 0``).
    """
    stripped = before.rstrip()
    if stripped.endswith("="):
        return stripped.endswith(("==", "!=", "<=", ">=", ":=")) or bool(_ARITH_CODE_CHAR_RE.search(stripped))
    if before and _GLUED_TO_NAME_RE.fullmatch(before[-1]):
        return True
    if stripped and stripped[-1] in _OPERATOR_CHARS:
        return True
    return bool(_CODE_CHAR_RE.search(before)) or _last_word(stripped).lower() in _CODE_WORDS


def _standing_number(text: str) -> str | None:
    """The last number, only where it stands as the answer at the end of the final line.

    Accepted: the line (its last sentence) is just the number, or ends with ``= N``, or is prose in
    any language ending in the number; ``$``, ``**``, a full stop and up to ``MAX_UNIT_WORDS`` words
    of any script after it are allowed ("18 apples.", "42 Äpfel.", "42 个", "15 яблок").
    Refused: code or an expression on the line (``__import__('os').system('x') or 0``, ``foo(3)``,
    ``x = 2 + 3``), and a hedge ("5 or 6").
    """
    line = _last_line_with_content(text)
    line = line.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",").replace(",\\!", ",")
    for wrapper in ("\\[", "\\]", "\\(", "\\)"):
        line = line.replace(wrapper, " ")
    line = line.replace("*", "").replace("$", "").strip()
    sentence_start = 0
    for end in _SENTENCE_END_RE.finditer(line):
        if end.end() < len(line):  # a stop at the very end ("。") closes the last sentence
            sentence_start = end.end()
    sentence = line[sentence_start:]
    numbers = list(_NUMBER_RE.finditer(sentence))
    number = numbers[-1] if numbers else None
    if number is None or not _is_unit_tail(sentence[number.end() :]):
        return None
    if _reads_as_code(sentence[: number.start()]):
        return None
    percent = sentence[number.end() :].lstrip().startswith("%")
    return number.group(0) + "%" if percent else number.group(0)


def extract_answer(text: str, *, last_number_fallback: bool = True) -> str | None:
    """Return the final answer in a model's text, or None.

    Priority: text after the last ``####`` (to end of line); the last
    ``\\boxed{...}`` (several boxes separated only by ",", "and" or "or" are
    joined with ", "); the answer after "The (final) answer is" / "answer:"
    (math inside ``$...$`` or ``\\(...\\)`` taken whole); then, if
    ``last_number_fallback``, a number that stands as the answer at the end of
    the final line (see ``_standing_number``).  Reads at most the last
    ``MAX_SCAN_CHARS`` characters.
    """
    if not isinstance(text, str):
        return None
    if len(text) > MAX_SCAN_CHARS:
        text = text[-MAX_SCAN_CHARS:]
    idx = text.rfind("####")
    if idx >= 0:
        ans = _clean(text[idx + 4 :].partition("\n")[0])
        if ans:
            return ans
    boxed = _boxed_answer(text)
    if boxed is not None:
        return boxed
    stated = _answer_is(text)
    if stated is not None:
        return stated
    return _standing_number(text) if last_number_fallback else None


def gsm8k_gold(answer_field: str) -> str:
    """Gold answer of a GSM8K ``answer`` field: text after ``####``, commas removed."""
    idx = answer_field.rfind("####")
    if idx < 0:
        raise ValueError(f"GSM8K answer field has no '####' marker: {answer_field[-80:]!r}")
    gold = answer_field[idx + 4 :].strip().split("\n", 1)[0].strip().replace(",", "")
    if not gold:
        raise ValueError("GSM8K answer field has an empty answer after '####'")
    return gold
