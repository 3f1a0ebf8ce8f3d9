from __future__ import annotations

import random
import re

from hypothesis import given
from hypothesis import strategies as st

from schemas.cpf import is_valid_cpf
from synth.fields import FIELD_NAMES, REFERENCE_DATE, Person, format_brl, random_person
from synth.mrz import check_digit


@given(st.integers(min_value=0, max_value=2**32))
def test_random_person_is_plausible(seed: int) -> None:
    p = random_person(random.Random(seed))
    assert is_valid_cpf(p.cpf)
    assert re.fullmatch(r"[0-9]{2}\.[0-9]{3}\.[0-9]{3}-[0-9X]", p.rg_number)
    assert re.fullmatch(r"[0-9]{11}", p.registration_number)
    assert re.fullmatch(r"SSP/[A-Z]{2}", p.issuing_authority)
    assert re.fullmatch(r"[A-Z ]+ - [A-Z]{2}", p.place_of_birth)
    assert p.sex in ("M", "F")
    assert p.birth_date < p.issue_date <= REFERENCE_DATE < p.expiry_date
    for name in (p.name, p.father_name, p.mother_name):
        assert re.fullmatch(r"[A-Z]+( [A-Z]+)+", name), "ASCII upper-case words only"


def test_truth_and_printed_formats() -> None:
    p = random_person(random.Random(1))
    for field in FIELD_NAMES:
        assert hasattr(p, field)
    truth, printed = p.truth("birth_date"), p.printed("birth_date")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", truth)
    assert re.fullmatch(r"\d{2}/\d{2}/\d{4}", printed)
    assert truth.split("-")[::-1] == printed.split("/")
    assert p.truth("name") == p.printed("name") == p.name
    assert isinstance(p, Person)


def test_format_brl() -> None:
    assert format_brl(5) == "0,05"
    assert format_brl(123456) == "1.234,56"
    assert format_brl(100000000) == "1.000.000,00"


def test_mrz_check_digit_icao_example() -> None:
    # ICAO 9303 part 3 worked example.
    assert check_digit("520727") == "3"
    assert check_digit("D23145890") == "7"
