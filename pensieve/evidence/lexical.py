"""The lexical half of the evidence: what a sentence asserts that similarity alone misses.

MiniLM scores "grew 14% in 2019" and "grew 41% in 2021" as near-identical; a changed number,
date or name is the commonest invented detail. So a sentence's numbers, dates, quantities
and named entities must appear in the passage (or next to it), and three cheap cue checks
catch what flips a sentence's meaning without changing its topic: negation, direction
(rose / fell) and strength (a claim stated more strongly than the source states it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "m": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
}
_WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "hundred": 100,
    "dozen": 12,
    "twice": 2,
    "double": 2,
    "triple": 3,
    "half": 0.5,
}
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for m in names
}
_NUMBER = re.compile(
    r"(?<![\w.])([$€£]\s?)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
    r"(?:\s?(%|percent\b|per cent\b|percentage points?\b))?"
    r"(?:\s?(thousand|millions?|billions?|trillion|bn|mn|[kmb])\b)?",
    re.I,
)
_HALF_SCALE = re.compile(r"\bhalf an? (thousand|million|billion|trillion)\b", re.I)
_WORD_NUMBER = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.I)
_MONTH_NAME = re.compile(
    r"\b(january|february|march|april|june|july|august|september|october|november|december)\b", re.I
)
_MAY_DATE = re.compile(r"\bmay\s+(?:\d{1,2},?\s+)?\d{4}\b|\b\d{1,2}\s+may\b", re.I)
_CAPITALISED = re.compile(r"(?<![\w'\u2019-])([A-Z][\w&'\u2019.-]*[\w&]|[A-Z])")
_WORD = re.compile(r"[\w'\u2019-]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "they",
        "their",
        "there",
        "then",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "i",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "to",
        "of",
        "and",
        "or",
        "but",
        "so",
        "yet",
        "as",
        "if",
        "when",
        "while",
        "although",
        "though",
        "because",
        "since",
        "after",
        "before",
        "during",
        "until",
        "unlike",
        "like",
        "most",
        "many",
        "some",
        "several",
        "each",
        "every",
        "all",
        "both",
        "one",
        "no",
        "not",
        "none",
        "however",
        "moreover",
        "still",
        "also",
        "thus",
        "therefore",
        "today",
        "yesterday",
        "now",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "where",
        "according",
        "instead",
        "despite",
        "beyond",
        "between",
        "among",
        "about",
        "above",
        "below",
        "under",
        "over",
        "into",
        "onto",
        "upon",
        "overall",
        "meanwhile",
        "indeed",
        "finally",
        "first",
        "second",
        "third",
        "last",
        "next",
        "other",
        "another",
        "such",
        "even",
        "only",
        "just",
        "researchers",
        "scientists",
        "experts",
        "studies",
        "study",
        "authors",
        "people",
        "users",
        "teams",
        "companies",
        "critics",
        "officials",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "can",
        "could",
        "may",
        "might",
        "will",
        "would",
        "should",
        "must",
        "unlike",
        "similarly",
        "likewise",
        "nevertheless",
        "nonetheless",
        "furthermore",
        "additionally",
        "consequently",
        "chapter",
        "section",
        "figure",
        "table",
        "part",
        "appendix",
    ]
)
STOP = _STOP  # words that say nothing of a claim
NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|cannot|without|nothing|nobody|fails?\s+to|failed\s+to|"
    r"lacks?|lacked|unable|absent)\b|n['\u2019]t\b",
    re.I,
)
_UP = re.compile(
    r"\b(?:increas\w*|ris(?:e|es|ing)|rose|risen|gr[eo]w\w*|higher|more|gain\w*|improv\w*|boost\w*|"
    r"faster|larger|greater|doubl\w*|tripl\w*|surg\w*|expand\w*|up)\b",
    re.I,
)
_DOWN = re.compile(
    r"\b(?:decreas\w*|declin\w*|f[ae]ll\w*|fallen|drop\w*|lower\w*|less|fewer|reduc\w*|cut|cuts|"
    r"slower|smaller|shr[iau]nk\w*|halv\w*|worse\w*|down|lost|loses?|plung\w*)\b",
    re.I,
)
# A claim stated more strongly than its source: absolutes in the sentence...
_STRONG = (
    ("always", re.compile(r"\b(?:always|whenever|invariably|in every case|without exception)\b", re.I)),
    # "each method returns ..." distributes, it claims no universality; "not ... at all" is
    # emphasis of a negation.
    (
        "all",
        re.compile(
            r"\b(?:(?<!\bat )all|everywhere|every(?!\s+(?:\d+|\w+)\s*-?\s*(?:days?|weeks?|months?|years?)\b))\b", re.I
        ),
    ),
    ("never", re.compile(r"\bnever\b", re.I)),
    ("proves", re.compile(r"\b(?:prov(?:e|es|ed|en|ing)|proof|confirm(?:s|ed)?|establish(?:es|ed)?)\b", re.I)),
    ("guarantees", re.compile(r"\b(?:guarantee\w*|ensur\w*|certain(?:ly)?|definitely|undoubtedly)\b", re.I)),
    ("eliminates", re.compile(r"\b(?:eliminat\w*|entirely|completely|fully|totally|solves?|solved)\b", re.I)),
    # "only part of it", "only a future possibility": a diminisher, not an exclusive claim.
    ("only", re.compile(r"\b(?:only(?!\s+(?:a|an|part|partly|partially|some)\b)|sole(?:ly)?|exclusively)\b", re.I)),
    # "first" only as a claim to be first ("the first to", "world's first"), not as an ordinal.
    (
        "best",
        re.compile(
            r"\b(?:best|most effective|fastest|largest|unmatched|unrivall?ed|first\s+(?:to|ever)|"
            r"world['\u2019]s first)\b",
            re.I,
        ),
    ),
    ("causes", re.compile(r"\b(?:caus(?:e|es|ed|ing)|leads? to|led to|results? in|responsible for)\b", re.I)),
)
# How a page says an absolute in other words: "anything but a function" is "only a function".
_SAID_OTHERWISE = {
    "only": re.compile(r"\b(?:anything but|nothing but|nothing other than|except|other than|apart from)\b", re.I),
    "all": re.compile(r"\b(?:whole|entire|universal(?:ly)?)\b", re.I),
    "always": re.compile(r"\b(?:any time|at all times|regardless)\b", re.I),
}
# ... or a source that hedges where the sentence does not.
HEDGE = re.compile(
    r"\b(?:may|might|could|possibly|perhaps|likely|unlikely|suggests?|suggested|appears? to|seems? to|"
    r"tends? to|often|sometimes|partly|partially|preliminary|modest(?:ly)?|in some cases|associated with|"
    r"correlat\w*|linked to|early results?)\b",
    re.I,
)


@dataclass(frozen=True)
class Fact:
    surface: str  # as the sentence writes it: "14%", "March 2019", "OpenAI"
    kind: str  # number | date | entity
    keys: frozenset[str]  # any of these found in a text means the fact is there


def _number_keys(match: re.Match[str]) -> tuple[str, frozenset[str]]:
    _currency, whole, decimals, percent, scale = match.groups()
    digits = whole.replace(",", "")
    value = float(f"{digits}.{decimals}" if decimals else digits)
    if scale:
        value *= _SCALES[scale.lower()]
    text = f"{value:.6g}" if value < 1e15 else str(value)
    keys = {text}
    if percent:
        keys = {f"{text}%"}
    return match.group(0).strip(), frozenset(keys)


def _is_year(match: re.Match[str]) -> bool:
    currency, whole, decimals, percent, scale = match.groups()
    return not (currency or decimals or percent or scale) and len(whole) == 4 and 1500 <= int(whole) <= 2100


def number_keys(text: str) -> set[str]:
    """Every number in a text, as comparable keys (1,200 / 1200 / 1.2 thousand -> '1200')."""
    keys: set[str] = set()
    # Cheap tests first: most windows of a long page hold no digit, no number word and no
    # month, and each pattern below costs a scan (a cold check reads a million characters).
    lower = text.lower()
    digits = _DIGIT.search(text) is not None
    words = _WORD_PROBE.search(lower) is not None
    months = _MONTH_PROBE.search(lower) is not None
    if digits:
        for match in _NUMBER.finditer(text):
            keys |= _number_keys(match)[1]
            # "14%" also counts where the page writes "14 percent" (same key) or "0.14" (rare: skip).
    if words:
        for match in _WORD_NUMBER.finditer(text):
            keys.add(f"{_WORDS[match.group(1).lower()]:.6g}")
        for match in _HALF_SCALE.finditer(text):
            keys.add(f"{0.5 * _SCALES[match.group(1).lower()]:.6g}")
    if months:
        for match in _MONTH_NAME.finditer(text):
            keys.add(f"month:{_MONTHS[match.group(1).lower()]}")
        if _MAY_DATE.search(text):
            keys.add("month:5")
    if months and digits:
        for match in _MONTH_ABBREVIATION.finditer(text):
            keys.add(f"month:{_MONTHS[match.group(1).lower()]}")
        for match in _MONTH_YEAR.finditer(text):
            keys.add(_month_year_key(match))
    if digits:
        # Dates as values: 2017-08-02 and 2017/08 hold August 2017, as a reader sees.
        for match in _ISO_DATE.finditer(text):
            month = int(match.group(2))
            if 1 <= month <= 12:
                keys.add(f"month:{month}")
                keys.add(f"ym:{match.group(1)}-{month}")
    return keys


_WORD_PROBES = tuple(_WORDS)
_MONTH_PROBES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# One scan each instead of a Python loop per character or per probe (a cold check runs these
# over every window of every cited page: a million characters).
_DIGIT = re.compile(r"\d")
_WORD_PROBE = re.compile("|".join(re.escape(w) for w in _WORD_PROBES))
_MONTH_PROBE = re.compile("|".join(_MONTH_PROBES))
_MONTH_ABBREVIATION = re.compile(r"\b(jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?[\s-]+\d", re.I)


# "June 2017", "June 26, 2017", "26 June 2017", "29-Sep-2014": a month of a year, one fact.
_MONTH_YEAR = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?[\s-]+(?:\d{1,2}(?:st|nd|rd|th)?,?[\s-]+)?(1[5-9]\d\d|20\d\d)\b",
    re.I,
)


def _month_year_key(match: re.Match[str]) -> str:
    return f"ym:{match.group(2)}-{_MONTHS[match.group(1).lower()]}"


_ISO_DATE = re.compile(r"\b(1[5-9]\d\d|20\d\d)[-/](\d{1,2})(?:[-/]\d{1,2})?\b")
# "3.5 to 3.9", "1.26-1.30", "2015 through 2018": a value in between is what the page says.
_RANGE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:to|through|until|-|\u2013|\u2014|\.\.=?)\s*(?:v(?:ersion)?\s*)?(\d+(?:\.\d+)?)(?![\w.]*\d)",
    re.I,
)


def ranges(text: str) -> list[tuple[float, float]]:
    found = []
    for match in _RANGE.finditer(text):
        low, high = float(match.group(1)), float(match.group(2))
        if low < high and ("." in match.group(1)) == ("." in match.group(2)):
            found.append((low, high))
    return found


def word_keys(text: str) -> set[str]:
    return {w.lower().strip("'\u2019-") for w in _WORD.findall(text)}


def facts(sentence: str) -> list[Fact]:
    """The numbers, dates, quantities and named entities a sentence asserts."""
    found: list[Fact] = []
    seen: set[str] = set()

    def add(fact: Fact) -> None:
        if fact.surface.lower() not in seen:
            seen.add(fact.surface.lower())
            found.append(fact)

    for match in _NUMBER.finditer(sentence):
        surface, keys = _number_keys(match)
        add(Fact(surface, "date" if _is_year(match) else "number", keys))
    for match in _HALF_SCALE.finditer(sentence):
        add(Fact(match.group(0), "number", frozenset({f"{0.5 * _SCALES[match.group(1).lower()]:.6g}"})))
    for match in _WORD_NUMBER.finditer(sentence):
        if _HALF_SCALE.match(sentence, match.start()):
            continue
        value = f"{_WORDS[match.group(1).lower()]:.6g}"
        add(Fact(match.group(1), "number", frozenset({value})))
    for match in _MONTH_NAME.finditer(sentence):
        add(Fact(match.group(1), "date", frozenset({f"month:{_MONTHS[match.group(1).lower()]}"})))
    if _MAY_DATE.search(sentence):
        add(Fact("May", "date", frozenset({"month:5"})))
    for match in _MONTH_YEAR.finditer(sentence):
        if match.group(1).lower() != "may" or _MAY_DATE.match(sentence, match.start()):
            add(Fact(match.group(0), "date", frozenset({_month_year_key(match)})))
    words = list(_CAPITALISED.finditer(sentence))
    first_word = re.search(r"[A-Za-z]", sentence)
    for position, match in enumerate(words):
        token = match.group(1).rstrip(".'\u2019").removesuffix("'s").removesuffix("\u2019s")
        lowered = token.lower()
        if not token or lowered in _STOP or lowered in _MONTHS or lowered in _WORDS:
            continue
        special = (token.isupper() and len(token) > 1) or any(c.isdigit() for c in token) or _inner_caps(token)
        at_start = first_word is not None and match.start() == first_word.start()
        if at_start and not special:
            following = words[position + 1] if position + 1 < len(words) else None
            gap = sentence[match.end() : following.start()] if following else "x"
            if not (following and gap.strip() == ""):  # "New York", "Google DeepMind": a name
                continue
        if len(token) < 2:
            continue
        add(Fact(token, "entity", frozenset({lowered})))
    return found


def _inner_caps(token: str) -> bool:
    return any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)


def _value(key: str) -> float | None:
    try:
        return float(key)
    except ValueError:
        return None


def _close(key: str, numbers: set[str]) -> bool:
    """A large round figure matches a precise one within 1% ('half a million' / 498,000)."""
    wanted = _value(key)
    # Only a round figure is an approximation: 39871 is not "about" 39817.
    if wanted is None or wanted < 1000 or len(str(int(wanted)).rstrip("0")) > 2:
        return False
    return any(v is not None and abs(v - wanted) <= 0.01 * wanted for v in map(_value, numbers))


@dataclass
class Haystack:
    """A text as the fact checks look into it (its numbers, words and names computed once)."""

    text: str
    numbers: set[str]
    words: set[str]
    lower: str
    _acronyms: set[str] | None = None
    _ranges: list[tuple[float, float]] | None = None
    _flat: str | None = None

    @classmethod
    def of(cls, text: str) -> Haystack:
        return cls(text, number_keys(text), word_keys(text), text.lower())

    @property
    def acronyms(self) -> set[str]:
        if self._acronyms is None:
            self._acronyms = acronyms(self.text)
        return self._acronyms

    @property
    def ranges(self) -> list[tuple[float, float]]:
        if self._ranges is None:
            self._ranges = ranges(self.text)
        return self._ranges

    @property
    def flat(self) -> str:
        """The text as a quotation is compared with it (`flat`)."""
        if self._flat is None:
            self._flat = flat(self.text)
        return self._flat

    def has(self, fact: Fact) -> bool:
        return present(fact, self)


def present(fact: Fact, hay: Haystack) -> bool:
    """Whether a fact appears in a text."""
    numbers, words, text_lower = hay.numbers, hay.words, hay.lower
    if fact.kind in ("number", "date"):
        if fact.keys & numbers:
            return True
        # "14%" where the page writes "14 per cent" in other words, and "10" of "10-60%".
        if any(key.rstrip("%") in numbers or f"{key}%" in numbers for key in fact.keys):
            return True
        if fact.kind == "number" and any(_close(key, numbers) for key in fact.keys):
            return True
        value = next((v for v in map(_value, fact.keys) if v is not None), None)
        return value is not None and any(low <= value <= high for low, high in hay.ranges)
    key = next(iter(fact.keys))
    if key in words or (len(key) > 3 and key in text_lower):
        return True
    # "From-convertible" where the page writes "`From`-convertible": each part is there.
    if "-" in key and all(part in words for part in key.split("-") if part):
        return True
    if fact.surface.isupper() and 2 <= len(key) <= 6 and key in hay.acronyms:
        return True
    if fact.surface.isupper() and 2 <= len(key) <= 6 and key.isalpha() and _spelled_out(key, text_lower):
        return True  # "NLL" where the page writes "non-lexical lifetimes"
    # Inflections and demonyms: "Europe" / "European", "Kenya" / "Kenyan".
    stem = key[: max(4, len(key) - 2)]
    return len(key) >= 5 and any(w.startswith(stem) for w in words)


def _spelled_out(acronym: str, text_lower: str) -> bool:
    """Whether the text has words (or hyphenated parts) whose initials spell the acronym."""
    pattern = r"[\s-]+".join(rf"{re.escape(c)}[a-z]*" for c in acronym)
    return re.search(rf"(?<![\w-]){pattern}(?![\w-])", text_lower) is not None


_NAME_RUN = re.compile(r"(?:[A-Z][\w-]*(?:\s+(?:of|and|for|the|de|du)\s+|\s+))+[A-Z][\w-]*")


def acronyms(text: str) -> set[str]:
    """Initials of the capitalised names in a text: 'Food and Agriculture Organization' -> 'fao'."""
    found = set()
    for match in _NAME_RUN.finditer(text):
        words = re.split(r"\s+", match.group(0))
        for start in range(len(words)):  # "The Food and ..." is also "Food and ..."
            if words[start][:1].isupper():
                found.add("".join(w[0] for w in words[start:] if w[:1].isupper()).lower())
                found.add("".join(w[0] for w in words[start:]).lower())
    return found


def _content(text: str) -> set[str]:
    return {w for w in word_keys(text) if len(w) > 3 and w not in _STOP and not w.isdigit()}


def coverage(sentence: str, passage: str) -> float:
    """The share of the sentence's content words (or their stems) that the passage uses."""
    content = _content(sentence)
    if not content:
        return 1.0
    words = word_keys(passage)
    missing = [w for w in content if w not in words]
    hits = len(content) - len(missing)
    if missing:
        # A stem: the passage has a word starting with the word's first letters (all but
        # three, at least four). The prefixes once, not a scan of the passage per word.
        prefixes = {x[:k] for x in words for k in range(4, len(x) + 1)}
        hits += sum(w[: max(4, len(w) - 3)] in prefixes for w in missing)
    return hits / len(content)


def negated(text: str) -> bool:
    return len(NEGATION.findall(text)) % 2 == 1


# What turns a statement into its opposite: "not", "never", "cannot", "no longer", "n't".
# "none", "without" and "nothing" mostly describe ("a crate that declares none", "without
# breaking code") and counted as reversals in 11 of 11 findings on real writing.
_POLARITY = re.compile(
    r"\b(?:not|never|cannot|no\s+longer|neither|nor|fails?\s+to|failed\s+to|no|nothing\s+(?:in|of|inside|within))\b"
    r"|n['\u2019]t\b",
    re.I,
)
# Saying no in other words: a paraphrase of "there is no way to" writes "cannot", one of
# "it is impossible to bind anything but" writes "only". A text that says no this way is
# not the opposite of one that says "not".
_IMPLICIT = re.compile(
    r"\b(?:nowhere|nothing|none|without|impossible|unable|prevent(?:s|ed)?|forbid(?:s|den)?|disallow(?:s|ed)?|"
    r"reject(?:s|ed)?|refuse[sd]?|lacks?|lacked|only|instead|rather than|but|away|inability|unlikely|absence|"
    r"avoid(?:s|ed)?|stop(?:s|ped)?|remov(?:e|es|ed)|eliminat\w*|except|limited|restrict\w*)\b",
    re.I,
)


def negates(text: str) -> bool:
    """Whether a text says no ("not", "never", "cannot", "no longer" ...)."""
    return _POLARITY.search(_prose(text)) is not None


# Code says no words: `None` or `no_std` in backticks, or `None` mid-sentence where the
# claim text lost its backticks ("map can be mutated in the None arm").
_CODE_SPAN = re.compile(r"`[^`\n]*`|(?<=[a-z,;] )None\b")


def _prose(text: str) -> str:
    """The text without its inline code, for the words that say no."""
    return _CODE_SPAN.sub(" ", text) if "`" in text or "None" in text else text


# A sentence's clauses: a contrast or a second claim joined by a comma ("X, but not Y",
# "X, and that Y") is its own clause; a passage's are its sentences.
_CLAIM_CLAUSE = re.compile(r"[;:]\s|,\s+(?=(?:but|and|while|whereas|not|rather|although|though)\b)", re.I)
_PASSAGE_CLAUSE = re.compile(r"[.;:!?](?:\s|$)|\n\s*\n|///")


def matching_clauses(sentence: str, passage: str) -> tuple[str, str]:
    """The sentence's clause the passage says most of, and the passage's sentence that says
    most of that clause."""
    parts = [c for c in _CLAIM_CLAUSE.split(sentence) if c.strip()] or [sentence]
    # Most words said, not the largest share: "Auto traits still leak" is a short clause.
    said = max(parts, key=lambda c: coverage(c, passage) * len(_content(c))) if len(parts) > 1 else sentence
    pieces = [c for c in _PASSAGE_CLAUSE.split(passage) if len(c.split()) >= 3] or [passage]
    clause = max(pieces, key=lambda c: coverage(said, c)) if len(pieces) > 1 else passage
    return said, clause


# Words that reverse a claim without a negation word: "picks the maximal lifetime" against
# "the minimal", "accepted" against "postponed", "optional" against "required".
_OPPOSITES = (
    ("minimal", "maximal"),
    ("minimum", "maximum"),
    ("smallest", "largest"),
    ("fewest", "most"),
    ("before", "after"),
    ("accepted", "rejected"),
    ("accepted", "postponed"),
    ("optional", "required"),
    ("optional", "mandatory"),
    ("allowed", "forbidden"),
    ("permitted", "forbidden"),
    ("easy", "awkward"),
    ("easy", "difficult"),
    ("explicit", "implicit"),
    ("explicitly", "implicitly"),
    ("eager", "lazy"),
    ("eagerly", "lazily"),
    ("stable", "unstable"),
    ("sound", "unsound"),
    ("mutable", "immutable"),
    ("public", "private"),
    ("enabled", "disabled"),
    ("included", "excluded"),
    ("inside", "outside"),
    ("earlier", "later"),
    ("success", "failure"),
    ("succeeded", "failed"),
)
_NOT_ONLY = re.compile(r"\bnot\s+(?:\w+\s+)?only\b", re.I)
_ONLY = re.compile(r"\bonly\b", re.I)
_RATHER = re.compile(r"(\w+)\W+(?:rather than|instead of)\W+(?:\w+\W+){0,2}?(\w+)", re.I)


def reversed_terms(sentence: str, passage: str) -> str:
    """Where the passage says the opposite in other words: the sentence's word and the
    passage's opposite of it ('' when none)."""
    return reversed_in(*matching_clauses(sentence, passage))


def reversed_in(said: str, clause: str) -> str:
    """reversed_terms on clauses already matched (`matching_clauses`)."""
    mine, theirs = word_keys(said), word_keys(clause)
    for a, b in _OPPOSITES:
        for x, y in ((a, b), (b, a)):
            if x in mine and y not in mine and y in theirs and x not in theirs:
                return f"{y}, not {x}"
    # "not only when desugaring method calls" against "only used when desugaring method calls"
    # (a bare "only" says no in other words, so the negation check lets it pass).
    for x, y in ((said, clause), (clause, said)):
        if _NOT_ONLY.search(x) and not _NOT_ONLY.search(y) and _ONLY.search(y):
            return (
                '"only" where the sentence says "not only"'
                if x is said
                else '"not only" where the sentence says "only"'
            )
    # "minimal rather than maximal" against "maximal rather than minimal"
    ours = {(m.group(1).lower(), m.group(2).lower()) for m in _RATHER.finditer(said)}
    for m in _RATHER.finditer(clause):
        if (m.group(2).lower(), m.group(1).lower()) in ours and m.group(1).lower() != m.group(2).lower():
            return f"{m.group(1).lower()} rather than {m.group(2).lower()}"
    return ""


CONTRAST = re.compile(r"\b(?:rather than|instead of)\b", re.I)
_SIDE_WORDS = 4  # content words each side of "rather than" that name what is preferred to what


def _side_stems(part: str) -> list[str]:
    """The content words of one side of a contrast, cut to their stems."""
    return [w[: max(4, len(w) - 3)] for w in (x.lower() for x in _WORD.findall(part)) if len(w) > 3 and w not in _STOP]


def _sides(text: str, at: re.Match[str]) -> tuple[set[str], set[str]]:
    before = _side_stems(text[: at.start()])[-_SIDE_WORDS:]
    after = _side_stems(text[at.end() :])[:_SIDE_WORDS]
    return set(before), set(after)


def sides_swapped(said: str, clause: str) -> str:
    """ "X rather than Y" where the passage says "Y' rather than X'" in other words: the
    sentence's preferred side's words after the passage's "rather than", its rejected side's
    before it ("used `()` rather than a dedicated `Missing` type" against "the `Missing` type
    ... rather than a generic type like `()`")."""
    mine = CONTRAST.search(said)
    theirs = CONTRAST.search(clause)
    if not mine or not theirs:
        return ""
    chosen, rejected = _sides(said, mine)
    chosen, rejected = chosen - rejected, rejected - chosen
    first, second = _sides(clause, theirs)
    if len(chosen & second) > len(chosen & first) and len(rejected & first) > len(rejected & second):
        return f"{theirs.group(0).lower()}, the other way round"
    return ""


# "X is allowed, but Y is not", "Y is permitted (but not X)": granted before the "but", denied
# after it (up to the clause's end), as "X rather than Y" prefers X.
_GRANTED_DENIED = re.compile(r"\bbut\b(?=[^.;:]*?(?:\bnot\b|\bnever\b|n't\b))", re.I)
_CLAUSE_END = re.compile(r"[.;:]\s|[.;:]$")


def _two_sides_at(text: str) -> re.Match[str] | None:
    return _GRANTED_DENIED.search(text) or CONTRAST.search(text)


def _granted_denied(text: str) -> tuple[set[str], set[str]] | None:
    """The words of what a text grants and of what it denies: the whole clause on each side
    of its "but" (or "rather than"), since both name the things, not only the verbs."""
    at = _two_sides_at(text)
    if at is None:
        return None
    before = text[: at.start()]
    ends = list(_CLAUSE_END.finditer(before))
    before = before[ends[-1].end() :] if ends else before
    after = text[at.end() :]
    end = _CLAUSE_END.search(after)
    after = after[: end.start()] if end else after
    return set(_side_stems(before)), set(_side_stems(after))


def two_sided(text: str) -> bool:
    """Whether a text grants one thing and denies another ("but ... not", "rather than")."""
    return _two_sides_at(text) is not None


def _only_granted_and_denied(sentence: str, passage: str) -> tuple[set[str], set[str], set[str], set[str]] | None:
    """What the sentence only grants, only denies, and what the passage only grants, only
    denies (None unless both have two sides)."""
    mine, theirs = _granted_denied(sentence), _granted_denied(passage)
    if mine is None or theirs is None:
        return None
    (granted, denied), (yes, no) = mine, theirs
    return granted - denied, denied - granted, yes - no, no - yes


def granted_same_way(sentence: str, passage: str) -> bool:
    """The passage grants and denies what the sentence does (both say "but ... not" or
    "rather than"), each on one side only."""
    sides = _only_granted_and_denied(sentence, passage)
    return sides is not None and bool(sides[0] & sides[2] and sides[1] & sides[3])


def granted_swapped(sentence: str, passage: str) -> str:
    """ "X is allowed, but Y is not" where the passage grants Y and denies X ("Y is permitted
    (but not X)"): something the sentence grants the passage denies, and the other way round,
    each on one side only. One of them says "but ... not"; the other may say "rather than"."""
    if not (_GRANTED_DENIED.search(sentence) or _GRANTED_DENIED.search(passage)):
        return ""
    sides = _only_granted_and_denied(sentence, passage)
    if sides is not None and sides[0] & sides[3] and sides[1] & sides[2]:
        return "granted and denied the other way round"
    return ""


# A value with its label: "Rust 2021", "version 1.13", "E0597", "u64", "RFC 204".
_LABELLED = re.compile(r"(?<![\w.])([A-Za-z]{1,12})(?:[ \t]#?|#|(?<=[A-Za-z])(?=\d))(\d+(?:\.\d+)*)(?![\w.]*\d)")


def labelled_values(text: str) -> dict[str, set[str]]:
    """Each label's values in a text (labels compared in lower case)."""
    found: dict[str, set[str]] = {}
    for match in _LABELLED.finditer(text):
        label = match.group(1).lower()
        if label in _STOP or label in _MONTHS or label in _WORDS:
            continue  # "in 2016" has no label to compare
        found.setdefault(label, set()).add(match.group(2))
    return found


def _as_written(text: str, label: str, value: str) -> str:
    match = re.search(rf"(?<![\w.])({re.escape(label)})([ \t]?#?){re.escape(value)}(?![\w.]*\d)", text, re.I)
    return match.group(0) if match else f"{label} {value}"


_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8}
# "the second problem case" is "problem case #2": a label a heading or a passage numbers. Only
# things a text numbers ("At first glance", "the first two cases" are no such label).
_NUMBERED = (
    "case",
    "step",
    "phase",
    "stage",
    "part",
    "chapter",
    "section",
    "rule",
    "example",
    "option",
    "alternative",
    "goal",
    "point",
    "item",
    "proposal",
    "approach",
    "question",
    "pass",
    "level",
)
_ORDINAL_LABEL = re.compile(
    r"\b(" + "|".join(_ORDINALS) + r")\s+((?:[a-z]+\s+)?)(" + "|".join(_NUMBERED) + r")\b", re.I
)


def ordinals_as_numbers(text: str) -> str:
    """The text with "the second problem case" written "the problem case #2"."""
    return _ORDINAL_LABEL.sub(lambda m: f"{m.group(2)}{m.group(3)} #{_ORDINALS[m.group(1).lower()]}", text)


def value_conflict(sentence: str, passage: str) -> tuple[str, str]:
    """A labelled value the sentence gives where the passage gives the same label another
    value and never this one ("Rust 2021" against "In Rust 2024 and later editions"): the
    sentence's value and the passage's, e.g. ('2021', 'Rust 2024'); ('', '') when none."""
    mine = labelled_values(sentence)
    theirs = labelled_values(passage)
    stated = number_keys(passage)
    said = number_keys(sentence)
    for label, values in mine.items():
        other = sorted(o for o in theirs.get(label, set()) - values if not number_keys(o) & said)
        for value in sorted(values):
            if other and not number_keys(value) & stated:
                return value, _as_written(passage, label, other[0])
    return "", ""


def may_negate(text: str) -> bool:
    """Whether a text says no, in so many words or in others."""
    prose = _prose(text)
    return _POLARITY.search(prose) is not None or _IMPLICIT.search(prose) is not None


# How often is no hedge of how sure ("sometimes a feature needs a new keyword"), and "may",
# "might", "could" in a specification say what is allowed or possible: on real writing every
# such finding was wrong.
_FREQUENCY = frozenset({"often", "sometimes", "tends to", "tend to"})
_MODALS = frozenset({"may", "might", "could"})  # possibility or permission, rarely a hedge on a claim


def hedged_clauses(text: str) -> list[tuple[str, str]]:
    """(hedge, the clause it sits in) for each hedge of a text: a hedge qualifies its clause,
    not everything the passage says."""
    found = []
    for match in HEDGE.finditer(text):
        start = max((text.rfind(c, 0, match.start()) for c in ".;:!?()"), default=-1) + 1
        ends = [i for i in (text.find(c, match.end()) for c in ".;:!?()") if i != -1]
        found.append((match.group(0).lower(), text[start : min(ends) if ends else len(text)]))
    return found


def without_cues(text: str) -> str:
    """The text without its negation and direction words: what it is about."""
    return _DOWN.sub(" ", _UP.sub(" ", NEGATION.sub(" ", text)))


# Quotation marks pair in order ("reservation" ... "activated" is two quotations, not one);
# single quotes are left alone (Rust lifetimes, possessives).
_QUOTED = re.compile(r"\"([^\"\n]*)\"|\u201c([^\u201c\u201d\n]*)\u201d")


# Inline code that names one thing: an identifier, a path, a macro, an attribute, a
# command ("trait_variant", "debug_assert!", "#[test]", "cargo fix"); not an example.
_CODE = re.compile(r"`([^`\n]+)`")
_CODE_NAME = re.compile(r"#?!?\[?[A-Za-z_][\w:!\]\[-]*|[a-z][\w-]* [a-z][\w-]*")


def code_names(sentence: str) -> list[str]:
    """The names the sentence writes as code: a page that never writes one is not about it."""
    spans = [m.group(1) for m in _CODE.finditer(sentence)]
    return [s for s in spans if 3 <= len(s) <= 60 and _CODE_NAME.fullmatch(s)]


def quotations(sentence: str) -> list[str]:
    """Words the sentence quotes (three words or more): they must be in the source as written."""
    found = []
    for match in _QUOTED.finditer(sentence):
        quoted = next((g for g in match.groups() if g), "")
        if len(quoted.split()) >= 3 and len(quoted) <= 400:
            found.append(quoted)
    return found


def flat(text: str) -> str:
    """Text compared as a reader compares a quotation: case, spacing, typography and markup aside."""
    text = text.translate(_TYPOGRAPHY).lower()
    return " ".join(re.sub(r"[*_`]+", "", text).split())


_TYPOGRAPHY = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\u00a0": " "}
)


def direction(text: str) -> set[str]:
    found = set()
    if _UP.search(text):
        found.add("up")
    if _DOWN.search(text):
        found.add("down")
    return found


# "virtually all", "not always": the page's word is there, its absolute is not.
_APPROXIMATED = re.compile(r"\b(?:almost|nearly|virtually|practically|mostly|largely|not)\s+(?:\w+\s+)?$", re.I)
_SCOPE_WORDS = 2  # content words on each side of an absolute that say what it is about


def _absolute(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The text's first use of an absolute that is one ("virtually all" is not)."""
    return next((m for m in pattern.finditer(text) if not _APPROXIMATED.search(text[: m.start()])), None)


def _scope(sentence: str, start: int, end: int) -> set[str]:
    """What an absolute is about: the content words next to it ("every restriction",
    "always a breaking change", "tooling and documentation all come together")."""

    def content(text: str) -> list[str]:
        return [w.lower() for w in _WORD.findall(text) if len(w) > 3 and w.lower() not in _STOP]

    words = content(sentence[:start])[-_SCOPE_WORDS:] + content(sentence[end:])[:_SCOPE_WORDS]
    return {w[: max(4, len(w) - 3)] for w in words}


def _page_says(name: str, pattern: re.Pattern[str], scope: set[str], passage: str) -> bool:
    """Whether the passage states the absolute about the same thing: in one of its sentences,
    beside a word of what the sentence's absolute is about, and not approximated ("virtually
    all instances" is no "every instance"). An absolute the page uses for something else
    ("encompasses all the uses") is no support for the writer's ("removes every restriction")."""
    otherwise = _SAID_OTHERWISE.get(name)
    if not scope:
        return bool(pattern.search(passage) or (otherwise and otherwise.search(passage)))
    for piece in _PASSAGE_CLAUSE.split(passage):
        if not any(p.startswith(s) for p in word_keys(piece) for s in scope):
            continue
        if otherwise and otherwise.search(piece):
            return True
        if _absolute(pattern, piece):
            return True
    return False


# An absolute over a list: "always implement AsyncFn, AsyncFnMut and AsyncFnOnce", "only
# when desugaring method calls and compound assignments".
_LIST_ABSOLUTE = re.compile(r"\b(only|always|exclusively|solely)\b", re.I)
# Where the list ends: a clause of its own ("..., whatever they do", "..., which the RFC calls").
_LIST_END = re.compile(
    r"[;:]|,\s+(?:which|whatever|because|so|but|while|although|as|where|when|if|unless|also|and\s+(?:it|they|the|this|that))\b",
    re.I,
)
_LIST_SEPARATOR = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_LIST_ITEM_WORDS = 3  # an item of a list names a thing; a longer part is a clause of its own


def widened(said: str, clause: str) -> tuple[list[str], list[str]]:
    """An absolute whose list the sentence makes longer than the page's matching sentence
    does (clauses already matched, `matching_clauses`): (the items the page's sentence
    names, those it names none of the words of); ([], []) when none is added."""
    mine = _LIST_ABSOLUTE.search(said)
    if mine is None:
        return [], []
    theirs = re.search(r"\b" + mine.group(1) + r"\b", clause, re.I)
    if theirs is None:
        return [], []
    listed = _LIST_END.split(said[mine.end() :])[0]
    # A list ends with its "and" / "or" item: ", like regular closures" after it is no item.
    last = list(re.finditer(r"\s(?:and|or)\s", listed))
    if not last:
        return [], []
    end = listed.find(",", last[-1].end())
    items = [p.strip() for p in _LIST_SEPARATOR.split(listed if end == -1 else listed[:end]) if p.strip()]
    if len(items) < 2:
        return [], []
    # Exact words, not stems: `AsyncFnMut` is not `AsyncFnOnce`.
    after = word_keys(clause[theirs.end() :])
    words = [{w for w in word_keys(item) if w not in _STOP and len(w) > 2} for item in items]
    named = [item for item, w in zip(items, words, strict=True) if w and w <= after]
    added = [item for item, w in zip(items, words, strict=True) if w and not w & after and len(w) <= _LIST_ITEM_WORDS]
    return (named, added) if named and added else ([], [])


# "six major goals", "3 kinds": a count of things a page may list (one qualifier allowed).
_COUNTED = re.compile(
    r"(?<!\bor )(?<!\bto )(?<!\bevery )\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[2-9]|1[0-9])"
    r"\s+(?:[a-z-]+\s+)?([a-z]{3,}s)\b",
    re.I,
)
_DURATIONS = frozenset({"seconds", "minutes", "hours", "days", "weeks", "months", "years", "decades", "times"})
# A list's items: "1. ...", "2) ...", "- ...", "* ..." at the start of a line.
_LIST_ITEM = re.compile(r"^([ \t]*)(?:\d{1,2}[.)]|[-*+])[ \t]+\S", re.M)


def counted(sentence: str) -> list[tuple[int, str]]:
    """(how many, of what) for each count the sentence gives of things ("six major goals" ->
    (6, "goals"))."""
    found = []
    for match in _COUNTED.finditer(sentence):
        word = match.group(1).lower()
        if match.group(2).lower() in _DURATIONS:
            continue  # "every two or three years": a span of time, not things a page lists
        found.append((int(_WORDS[word]) if word in _WORDS else int(word), match.group(2).lower()))
    return found


def listed_after(text: str, end: int) -> int:
    """How many items the list that starts right after `end` has (its first level only; 0
    when no list follows): the page's "several major goals:" and its four numbered goals."""
    rest = text[end : end + 6000]
    first = _LIST_ITEM.match(rest.lstrip("\n"))
    if first is None or rest[: len(rest) - len(rest.lstrip("\n"))].count("\n") > 2:
        return 0
    indent = first.group(1)
    count = 0
    after_blank = False
    for line in rest.lstrip("\n").splitlines():
        item = _LIST_ITEM.match(line)
        if item is not None and item.group(1) == indent:
            count += 1
        elif line.strip() and item is None and not line[:1].isspace() and after_blank:
            break  # a paragraph after the list (an item's next line, unindented, goes on with it)
        after_blank = not line.strip()
    return count


# A year (or a four-digit number) naming a thing: "the 2016 roadmap", "the RFC 2052
# approach"; the thing is the word after it.
_YEAR_NOUN = re.compile(r"\b((?:19|20)\d\d)\s+([A-Za-z]{4,})\b")
_YEAR_NEAR = 120  # characters either side: "the survey run in 2016" names the 2016 survey


def year_named_otherwise(sentence: str, flat_page: str) -> tuple[str, str]:
    """ "the 2016 roadmap" where the page (`flat` text) never writes that year near that
    thing but writes "the 2017 Rust Roadmap": (the sentence's words, the page's); ("", "")
    when none."""
    for match in _YEAR_NOUN.finditer(sentence):
        year, noun = match.group(1), match.group(2).lower()
        if noun in _STOP:
            continue
        stem = noun[: max(4, len(noun) - 2)]
        # (a date, "2016-10-04", names a day: the page's own start date is no roadmap of 2016)
        near = (
            flat_page[max(0, m.start() - _YEAR_NEAR) : m.end() + _YEAR_NEAR]
            for m in re.finditer(rf"{year}(?![-/]\d)", flat_page)
        )
        if any(stem in text for text in near):
            continue
        other = re.search(rf"\b((?:19|20)\d\d)\s+(?:\w+\s+)?{re.escape(stem)}\w*", flat_page)
        if other is not None and other.group(1) != year:
            return f"{year} {noun}", other.group(0)
    return "", ""


def stronger_cues(sentence: str, passage: str, hedged: str | None = None) -> list[str]:
    """Absolutes the sentence uses and the passage does not, and hedges the passage (or
    `hedged`: the one passage it rests on) uses that the sentence drops."""
    # The word as the sentence has it ("first", not its family's name "best"): the stage that
    # fixes the sentence is shown it, and a real model looked for the word in vain.
    cues = [
        f'"{match.group(0).lower()}"'
        for name, pattern in _STRONG
        if (match := _absolute(pattern, sentence))
        and not _page_says(name, pattern, _scope(sentence, match.start(), match.end()), passage)
    ]
    hedged = passage if hedged is None else hedged
    if not HEDGE.search(sentence):
        # Only a hedge on what the sentence says: "may" elsewhere in the passage is no
        # qualification of this claim (7 of 7 such findings on real writing were wrong).
        hedges = sorted(
            {
                h
                for h, clause in hedged_clauses(hedged)
                if h not in _FREQUENCY and h not in _MODALS and coverage(sentence, clause) >= 0.5
            }
        )
        if hedges:
            cues.append("drops the source's hedge (" + ", ".join(hedges[:3]) + ")")
    return cues
