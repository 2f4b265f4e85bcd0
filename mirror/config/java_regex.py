"""Java's regular expressions (``java.util.regex.Pattern``) read as Python's :mod:`re` reads
them, where that is exact: MirrorMaker 2's topic and group lists are Java expressions, and a
list must never select other names under kmirror than it did under MM2."""

from __future__ import annotations

import re

__all__ = ["java_regex"]


class _Translation:
    """One pass over a ``java.util.regex.Pattern``, writing what Python's :mod:`re` reads the
    same way. Java-only syntax with an exact rewrite is rewritten (``\\Q..\\E``, ``(?<name>``,
    ``\\p{Alpha}``, a leading ``(?i)``); anything else raises ``ValueError`` naming it, so a
    list never selects other names than MM2's did. Java's ``\\w \\d \\s \\b`` and case folding
    are ASCII-only: where used, the whole is wrapped in ``(?a:...)``."""

    _POSIX = {"Lower": "a-z", "Upper": "A-Z", "Alpha": "a-zA-Z", "Digit": "0-9", "Alnum": "a-zA-Z0-9",
              "XDigit": "0-9a-fA-F", "Space": r" \t\n\x0b\f\r"}
    _SAME = "tnrfaA"
    _ASCII_CLASSES = "dDsSwW"

    def __init__(self, pattern: str):
        self.src, self.i, self.out = pattern, 0, []
        self.in_class = False
        self.closes = [0]  # per open group: scoped flag groups to close with it
        self.at_alternative_start = True
        self.ascii = False

    def fail(self, what: str) -> ValueError:
        return ValueError(f"the Java expression {self.src!r} has {what}, which kmirror cannot read as Java does")

    def run(self) -> str:
        while self.i < len(self.src):
            self._in_class() if self.in_class else self._outside()
        if self.in_class or len(self.closes) > 1:
            raise self.fail("an unclosed '[' or '('")
        text = "".join(self.out) + ")" * self.closes[0]
        text = f"(?a:{text})" if self.ascii else text
        try:
            re.compile(text)
        except re.error as exc:
            raise self.fail(f"syntax Python reads otherwise ({exc})") from None
        return text

    def _emit(self, text: str, advance: int, *, alternative_start: bool = False) -> None:
        self.out.append(text)
        self.i += advance
        self.at_alternative_start = alternative_start

    def _outside(self) -> None:
        c, rest = self.src[self.i], self.src[self.i:]
        if c == "\\":
            self._escape()
        elif c == "[":
            self._open_class()
        elif c == "(":
            self._group()
        elif c == ")":
            if len(self.closes) == 1:
                raise self.fail("an unbalanced ')'")
            self._emit(")" * self.closes.pop() + ")", 1)
        elif c == "|":
            self._emit("|", 1, alternative_start=True)
        elif c in "*+?":
            self._emit(c, 1)
            self._no_possessive()
        elif c == "{":
            repeat = re.match(r"\{\d+(?:,\d*)?\}", rest)
            if repeat is None:
                raise self.fail("a '{' that is not a repetition")
            self._emit(repeat.group(), repeat.end())
            self._no_possessive()
        else:
            self._emit(c, 1)

    def _no_possessive(self) -> None:
        if self.src.startswith("+", self.i):
            raise self.fail("a possessive quantifier (*+, ++, ?+, {n}+)")

    def _escape(self) -> None:
        nxt = self.src[self.i + 1:self.i + 2]
        if nxt == "Q":
            end = self.src.find("\\E", self.i + 2)
            literal = self.src[self.i + 2:] if end < 0 else self.src[self.i + 2:end]
            self._emit(re.escape(literal), (len(self.src) if end < 0 else end + 2) - self.i)
        elif nxt in ("p", "P"):
            body = self._posix()
            self._emit(f"[{'^' if nxt == 'P' else ''}{body}]", 0)
        elif nxt == "k":
            ref = re.match(r"\\k<([a-zA-Z][a-zA-Z0-9]*)>", self.src[self.i:])
            if ref is None:
                raise self.fail("a malformed \\k<name>")
            self._emit(f"(?P={ref.group(1)})", ref.end())
        elif nxt == "z":
            self._emit(r"\Z", 2)
        elif nxt and nxt in "bB" + self._ASCII_CLASSES:
            self.ascii = True
            self._emit("\\" + nxt, 2)
        else:
            self._emit(self._common_escape(nxt), 0)

    def _common_escape(self, nxt: str) -> str:
        """An escape both read alike (``\\t``, ``\\x41``, ``\\.``): its text, and the position moved."""
        code = re.match(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})", self.src[self.i:])
        if code is not None:
            self.i += code.end()
            return code.group()
        if nxt and (nxt in self._SAME or not nxt.isalnum()) and nxt.isascii():
            self.i += 2
            return "\\" + nxt
        what = "a trailing backslash" if not nxt else f"the escape \\{nxt}"
        raise self.fail(what + (" (a numbered back-reference)" if nxt.isdigit() else ""))

    def _posix(self) -> str:
        """``\\p{Alpha}`` and the like: Java's ASCII POSIX classes, as a class body."""
        name = re.match(r"\\[pP]\{(?:Is)?(\w+)\}", self.src[self.i:])
        if name is None or name.group(1) not in self._POSIX:
            raise self.fail(f"the class {self.src[self.i:self.i + 12]}... (only {', '.join(self._POSIX)} are read)")
        self.i += name.end()
        return self._POSIX[name.group(1)]

    def _open_class(self) -> None:
        negated = self.src.startswith("[^", self.i)
        self._emit("[^" if negated else "[", 2 if negated else 1)
        if self.src.startswith("]", self.i):
            raise self.fail("a ']' first in a character class")
        self.in_class = True

    def _in_class(self) -> None:
        c = self.src[self.i]
        if c == "]":
            self.in_class = False
            self._emit("]", 1)
        elif c == "[":
            raise self.fail("a class inside a class (Java's union)")
        elif self.src.startswith("&&", self.i):
            raise self.fail("'&&' in a class (Java's intersection)")
        elif c == "\\":
            self._class_escape()
        else:
            self._emit(c, 1)

    def _class_escape(self) -> None:
        nxt = self.src[self.i + 1:self.i + 2]
        if nxt == "p":
            self._emit(self._posix(), 0)
        elif nxt and nxt in self._ASCII_CLASSES:
            self.ascii = True
            self._emit("\\" + nxt, 2)
        else:
            self._emit(self._common_escape(nxt), 0)

    def _group(self) -> None:
        rest = self.src[self.i:]
        plain = next((p for p in ("(?:", "(?=", "(?!", "(?<=", "(?<!") if rest.startswith(p)), None)
        named = re.match(r"\(\?<([a-zA-Z][a-zA-Z0-9]*)>", rest)
        flags = re.match(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])", rest)
        if not rest.startswith("(?"):
            self._open("(", 1)
        elif plain is not None:
            self._open(plain, len(plain))
        elif named is not None:
            self._open(f"(?P<{named.group(1)}>", named.end())
        elif flags is not None:
            self._flags(flags)
        else:
            raise self.fail(f"the group {rest[:3]}... (atomic, or Java's own)")

    def _open(self, text: str, advance: int) -> None:
        self.closes.append(0)
        self._emit(text, advance, alternative_start=True)

    def _flags(self, match: re.Match[str]) -> None:
        """``(?i:x)`` as it is; ``(?i)`` where an alternative starts becomes ``(?i:`` closed
        with its group, which is what Java means (the flags hold to the group's end)."""
        on, off, end = match.group(1), match.group(2) or "", match.group(3)
        if set(on + off) - set("ims"):
            raise self.fail(f"the flags (?{on}{'-' + off if off else ''}) (Python reads only i, m, s alike)")
        self.ascii = self.ascii or "i" in on
        scoped = f"(?{on}{'-' + off if off else ''}:" if on or off else "(?:"
        if end == ":":
            self._open(scoped, match.end())
        elif self.at_alternative_start:
            self.closes[-1] += 1
            self._emit(scoped, match.end(), alternative_start=True)
        else:
            raise self.fail("inline flags in the middle of an alternative")


def java_regex(pattern: str) -> str:
    """``pattern`` (Java's syntax) as a Python expression that matches the same whole names;
    ``ValueError`` (its message says which part) where no rewrite is exact."""
    return _Translation(pattern).run()
