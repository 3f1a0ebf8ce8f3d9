"""CPF (Cadastro de Pessoas Fisicas) numbers: check digits, validation, formatting.

The project's single CPF implementation, shared by the extractors (which validate
what they read) and the synthetic documents (which generate valid numbers).
"""

from __future__ import annotations

import random
import re

# [0-9] rather than \d: \d also matches non-ASCII digits such as Arabic-Indic ones.
_FORMATTED = re.compile(r"[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}")
_PLAIN = re.compile(r"[0-9]{11}")
_NINE = re.compile(r"[0-9]{9}")


def _check_digit(digits: str) -> str:
    # Weights run from len+1 down to 2; a remainder below 2 maps to 0.
    weight = len(digits) + 1
    total = sum(int(d) * (weight - i) for i, d in enumerate(digits))
    remainder = total % 11
    return "0" if remainder < 2 else str(11 - remainder)


def cpf_check_digits(nine_digits: str) -> str:
    """Return the two check digits for the nine-digit CPF base."""
    if not _NINE.fullmatch(nine_digits):
        raise ValueError("expected exactly nine ASCII digits")
    first = _check_digit(nine_digits)
    return first + _check_digit(nine_digits + first)


def cpf_digits(s: str) -> str:
    """Return the 11 digits of a CPF given as `ddd.ddd.ddd-dd` or 11 digits.

    Raises ValueError for any other shape; check digits are not verified.
    """
    s = s.strip()
    if _PLAIN.fullmatch(s):
        return s
    if _FORMATTED.fullmatch(s):
        return s.replace(".", "").replace("-", "")
    raise ValueError("not a CPF-shaped string")


def is_valid_cpf(s: str) -> bool:
    """True if `s` is a CPF (formatted or 11 digits) with correct check digits.

    Numbers made of a single repeated digit pass the checksum but were never
    issued, so they are rejected.
    """
    try:
        digits = cpf_digits(s)
    except ValueError:
        return False
    if len(set(digits)) == 1:
        return False
    return cpf_check_digits(digits[:9]) == digits[9:]


def format_cpf(s: str) -> str:
    """Format a CPF as `ddd.ddd.ddd-dd` (input: 11 digits or already formatted)."""
    d = cpf_digits(s)
    return f"{d[:3]}.{d[3:6]}.{d[6:9]}-{d[9:]}"


def random_cpf(rng: random.Random, *, formatted: bool = True) -> str:
    """A random valid CPF drawn from `rng`; formatted as `ddd.ddd.ddd-dd` by default."""
    while True:
        base = "".join(str(rng.randrange(10)) for _ in range(9))
        if len(set(base)) > 1:  # all-same bases yield all-same (invalid) CPFs
            break
    digits = base + cpf_check_digits(base)
    return format_cpf(digits) if formatted else digits
