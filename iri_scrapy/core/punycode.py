"""Punycode encoding (RFC 3492 section 6.3), for IDNA A-labels.

The standard library's ``punycode`` codec is correct but slow for the short
labels of host names (it builds generator pipelines per label); this is the
straight transcription of the RFC's encoding procedure.  ``tests/core/test_hosts.py``
checks it against the codec on every label of the UTS 46 conformance file.
"""

from __future__ import annotations

_BASE, _TMIN, _TMAX, _SKEW, _DAMP = 36, 1, 26, 38, 700
_INITIAL_BIAS, _INITIAL_N = 72, 128
_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"


def _adapt(delta: int, numpoints: int, firsttime: bool) -> int:
    """Bias adaptation (RFC 3492 section 6.1)."""
    delta = delta // _DAMP if firsttime else delta // 2
    delta += delta // numpoints
    k = 0
    while delta > ((_BASE - _TMIN) * _TMAX) // 2:
        delta //= _BASE - _TMIN
        k += _BASE
    return k + (((_BASE - _TMIN + 1) * delta) // (delta + _SKEW))


def punycode_encode(label: str) -> str:
    """Encode *label* with Punycode (RFC 3492 section 6.3), without the ``xn--`` prefix."""
    codepoints = [ord(c) for c in label]
    out = [c for c in label if ord(c) < 0x80]
    h = b = len(out)
    if b:
        out.append("-")
    n, delta, bias = _INITIAL_N, 0, _INITIAL_BIAS
    for m in sorted({cp for cp in codepoints if cp >= _INITIAL_N}):
        delta += (m - n) * (h + 1)
        n = m
        for cp in codepoints:
            if cp < n:
                delta += 1
            elif cp == n:
                q, k = delta, _BASE
                while True:
                    t = _TMIN if k <= bias else _TMAX if k >= bias + _TMAX else k - bias
                    if q < t:
                        break
                    out.append(_DIGITS[t + (q - t) % (_BASE - t)])
                    q = (q - t) // (_BASE - t)
                    k += _BASE
                out.append(_DIGITS[q])
                bias = _adapt(delta, h + 1, h == b)
                delta = 0
                h += 1
        delta += 1
        n += 1
    return "".join(out)
