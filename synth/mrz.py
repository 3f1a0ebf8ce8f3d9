"""ICAO 9303 TD1 machine-readable zone (three lines of 30), as on the CIN back."""

from __future__ import annotations

import string
from datetime import date

_VALUES = {c: i for i, c in enumerate(string.digits + string.ascii_uppercase)} | {"<": 0}


def check_digit(field: str) -> str:
    total = sum(_VALUES[c] * (7, 3, 1)[i % 3] for i, c in enumerate(field))
    return str(total % 10)


def _pad(s: str, n: int) -> str:
    return (s + "<" * n)[:n]


def _yymmdd(d: date) -> str:
    return d.strftime("%y%m%d")


def td1(
    *,
    document_number: str,
    birth: date,
    sex: str,
    expiry: date,
    surname: str,
    given_names: str,
    optional: str = "",
) -> tuple[str, str, str]:
    doc = _pad(document_number, 9)
    line1 = _pad(f"IDBRA{doc}{check_digit(doc)}{optional}", 30)
    dob, exp = _yymmdd(birth), _yymmdd(expiry)
    head2 = f"{dob}{check_digit(dob)}{sex}{exp}{check_digit(exp)}BRA"
    line2_body = _pad(head2, 29)
    composite = line1[5:30] + line2_body[0:7] + line2_body[8:15] + line2_body[18:29]
    line2 = line2_body + check_digit(composite)
    name = f"{surname.replace(' ', '<')}<<{given_names.replace(' ', '<')}"
    return line1, line2, _pad(name, 30)
