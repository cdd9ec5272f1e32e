"""Errors raised by the IRI core, and the one root of every error of the package.

Every error of the core is a :class:`ValueError` and names the component, the
offending character as ``U+XXXX`` and its index in the input string, so that a
caller can point at the exact problem (DEVELOPERS guide: "bad input gets a clear
error").  Every exception class of the package, here or in the plugin, the
frontier, the store and the CLI, derives from :class:`IRIScrapyError` (and keeps
the builtin base it had, ``ValueError`` or ``RuntimeError``), so that one
``except IRIScrapyError`` catches whatever the package raises of its own.
"""

from __future__ import annotations


def describe_char(char: str) -> str:
    """Return ``U+XXXX`` for *char* (4 to 6 hex digits, uppercase)."""
    return f"U+{ord(char):04X}"


def describe_at(char: str | None, index: int | None) -> str:
    """`` U+XXXX at index N`` (each part only when known; empty without *char*): the
    one way messages name a character and its index in the caller's input."""
    if char is None:
        return ""
    where = f" {describe_char(char)}"
    if index is not None:
        where += f" at index {index}"
    return where


class IRIScrapyError(Exception):
    """The root of every exception class of the package (tests/test_errors.py)."""


class IRIError(IRIScrapyError, ValueError):
    """Base class of every error of the IRI core.

    Attributes:
        component: the IRI component concerned (``"scheme"``, ``"host"``, ...).
        reason: the message, without the component, character and index.
        char: the offending character, or ``None`` when the error is not about one.
        index: the index of that character in the input text, or ``None``.
        text: the input text the error is about.
    """

    def __init__(
        self,
        message: str,
        *,
        component: str,
        char: str | None = None,
        index: int | None = None,
        text: str | None = None,
    ) -> None:
        self.component = component
        self.reason = message
        self.char = char
        self.index = index
        self.text = text
        super().__init__(self._message())

    def _message(self) -> str:
        return f"{self.component}: {self.reason}{describe_at(self.char, self.index)}"

    def relocate(self, char: str | None, index: int | None, text: str) -> None:
        """Point the error at *char*, at *index* of *text* (the caller's input), and
        write the message again to name them."""
        self.char, self.index, self.text = char, index, text
        self.args = (self._message(),)


class IRISyntaxError(IRIError):
    """A character or structure the RFC 3987 section 2.2 grammar does not allow."""


class IRIHostError(IRIError):
    """A host that cannot be converted (IDNA ToASCII failure, bad IP literal)."""


class IRIEncodingError(IRIError):
    """Text that cannot be encoded (lone surrogates, unencodable in a charset)."""
