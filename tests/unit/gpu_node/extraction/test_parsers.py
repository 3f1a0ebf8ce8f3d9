"""Parsers of OCR output: CPFs, dates, names, label geometry (no model needed)."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpu_node.extraction.parsers import (
    Box,
    LabelMatch,
    column_below,
    find_cpfs,
    find_dates,
    find_label,
    match_label,
    normalize_name,
    parse_date,
    value_candidates,
)
from schemas.cpf import cpf_check_digits, format_cpf, is_valid_cpf

# What OCR reads for each digit, besides the digit itself.
CONFUSIONS = {"0": "OoQD", "1": "Il|", "5": "Ss", "8": "B", "2": "Zz"}


@st.composite
def valid_cpfs(draw: st.DrawFn) -> str:
    base = draw(st.text("0123456789", min_size=9, max_size=9).filter(lambda s: len(set(s)) > 1))
    return base + cpf_check_digits(base)


@st.composite
def ocr_cpf_renderings(draw: st.DrawFn, digits: str) -> str:
    """`digits` written any usual way, with OCR confusions injected."""
    groups = [digits[:3], digits[3:6], digits[6:9], digits[9:]]
    seps = [
        draw(st.sampled_from(["", ".", ",", " ", ". ", " . "])),
        draw(st.sampled_from(["", ".", ",", " ", ". "])),
        draw(st.sampled_from(["", "-", " - ", " ", "_", ".", "~"])),
    ]
    out = groups[0]
    for sep, group in zip(seps, groups[1:], strict=True):
        out += sep + group
    chars = list(out)
    for i, ch in enumerate(chars):
        if ch in CONFUSIONS and draw(st.booleans()):
            chars[i] = draw(st.sampled_from(CONFUSIONS[ch]))
    return "".join(chars)


# Context OCR prints around a CPF: words without digit-like letters, newlines.
_context = st.sampled_from(["", "CPF ", "CPF: ", "CPF\n", "N. CPF ", "NUMERO DO CPF: "])
_trailer = st.sampled_from(["", "\n", " EMITIDO EM ", "\n16/07/1989", " - VALIDO"])


@given(data=st.data(), digits=valid_cpfs(), before=_context, after=_trailer)
def test_every_valid_cpf_is_found_however_ocr_wrote_it(
    data: st.DataObject, digits: str, before: str, after: str
) -> None:
    rendered = data.draw(ocr_cpf_renderings(digits))
    assert format_cpf(digits) in find_cpfs(before + rendered + after)


@given(st.text(max_size=300))
@example("783.675.902-45")  # check digit off by one
@example("111.111.111-11")  # passes the checksum, never issued
def test_random_text_never_yields_an_invalid_cpf(text: str) -> None:
    for cpf in find_cpfs(text):
        assert is_valid_cpf(cpf)
        assert len(cpf) == 14


@given(st.text(alphabet="0123456789.-/ OISBlZ\n", max_size=80))
def test_digit_soup_never_yields_an_invalid_cpf(text: str) -> None:
    assert all(is_valid_cpf(cpf) for cpf in find_cpfs(text))


def test_cpf_with_wrong_check_digits_is_not_found() -> None:
    assert find_cpfs("CPF 783.675.902-45") == []
    assert find_cpfs("CPF 783.675.902-44") == ["783.675.902-44"]


def test_cpf_glued_to_a_word_ending_in_digit_like_letters() -> None:
    assert find_cpfs("NASCIMENTO783.675.902-44") == ["783.675.902-44"]


def test_other_numbers_next_to_a_cpf_do_not_hide_it() -> None:
    text = "783.675.902-44 16/07/1989\nREGISTRO 99.187.792-6"
    assert find_cpfs(text) == ["783.675.902-44"]


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 12, 31)))
def test_any_ddmmyyyy_date_round_trips_to_iso(d: date) -> None:
    printed = d.strftime("%d/%m/%Y")
    assert parse_date(printed) == d.isoformat()
    assert find_dates(f"DATA DE NASCIMENTO {printed}") == [d.isoformat()]


@given(
    st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 12, 31)),
    st.sampled_from([".", "-"]),
)
def test_dot_and_dash_separators(d: date, sep: str) -> None:
    assert parse_date(d.strftime(f"%d{sep}%m{sep}%Y")) == d.isoformat()


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("16/07/1989", "1989-07-16"),
        ("16.07.1989", "1989-07-16"),
        ("16-07-1989", "1989-07-16"),
        ("16107/1989", "1989-07-16"),  # first slash read as 1
        ("16/07l1989", "1989-07-16"),  # second slash read as l
        ("16|07|1989", "1989-07-16"),
        ("I6/O7/I989", "1989-07-16"),  # digits read as letters
        ("16 / 07 / 1989", "1989-07-16"),
        ("16071989", "1989-07-16"),  # punctuation lost
        ("1607/1989", "1989-07-16"),
        ("1/7/1989", "1989-07-01"),
        ("29/02/2020", "2020-02-29"),
    ],
)
def test_dates_read_through_ocr_confusions(text: str, iso: str) -> None:
    assert parse_date(text) == iso


@pytest.mark.parametrize(
    "text",
    [
        "31/02/2020",  # no such day
        "29/02/2019",  # not a leap year
        "00/01/2000",
        "12/13/2000",  # month 13
        "01/01/1850",  # out of range
        "16/07/89",  # two-digit year: ambiguous century
        "783.675.902-44",
        "99.187.792-6",
        "ABCDEFGH",
        "",
    ],
)
def test_impossible_or_non_dates_are_rejected(text: str) -> None:
    assert parse_date(text) is None


@given(st.integers(1, 31), st.integers(1, 12), st.integers(1900, 2100))
def test_dates_are_either_real_or_rejected(day: int, month: int, year: int) -> None:
    printed = f"{day:02d}/{month:02d}/{year:04d}"
    try:
        expected: str | None = date(year, month, day).isoformat()
    except ValueError:
        expected = None
    assert parse_date(printed) == expected


def test_find_dates_keeps_order_and_skips_noise() -> None:
    text = "LEI No 7.116 DE 29/08/83\nVALIDADE 22/12/2022 NASCIMENTO16/07/1989"
    assert find_dates(text) == ["2022-12-22", "1989-07-16"]


def test_normalize_name() -> None:
    assert normalize_name("  José  da  Silva ") == "JOSE DA SILVA"
    assert normalize_name("MARC0S CARVALH0-BARROS") == "MARCOS CARVALHO BARROS"


def test_match_label_tolerates_ocr_errors_and_returns_inline_value() -> None:
    assert match_label("DATA DE NASCIMENT0", "DATA DE NASCIMENTO") is not None
    assert match_label("DATADE NASCIMENTO", "DATA DE NASCIMENTO") is not None
    m = match_label("REGISTRO GERAL  79.204.700-1", "REGISTRO GERAL")
    assert m is not None
    assert m[1] == "79.204.700-1"
    # Short labels must be exact.
    assert match_label("CPE", "CPF") is None
    assert match_label("NACIONALIDADE", "NATURALIDADE") is None
    # Labels open their box; inside a value a label word is just a word.
    assert match_label("CECILIA BATISTA NASCIMENTO", "NASCIMENTO") is None
    assert match_label("| CPF", "CPF") is not None


def _box(text: str, x0: float, y0: float, x1: float, y1: float) -> Box:
    return Box(text, x0, y0, x1, y1)


def test_value_is_the_nearest_box_below_or_right_of_the_label() -> None:
    cpf_label = _box("CPF", 300, 260, 340, 275)
    boxes = [
        cpf_label,
        _box("DATA DE NASCIMENTO", 620, 260, 800, 275),
        _box("783.675.902-44", 302, 280, 500, 305),
        _box("16/07/1989", 622, 280, 760, 305),
        _box("FILIACAO", 300, 330, 380, 345),
    ]
    (label,) = find_label(boxes, ["CPF"])
    candidates = value_candidates(label, boxes, exclude=[boxes[1], boxes[4]])
    assert candidates[0] == "783.675.902-44"

    (birth,) = find_label(boxes, ["DATA DE NASCIMENTO"])
    assert value_candidates(birth, boxes)[0] == "16/07/1989"


def test_inline_value_comes_first() -> None:
    boxes = [_box("REGISTRO GERAL 79.204.700-1", 40, 30, 400, 50)]
    (label,) = find_label(boxes, ["REGISTRO GERAL"])
    assert value_candidates(label, boxes) == ["79.204.700-1"]


def test_rival_labels_keep_similar_labels_apart() -> None:
    boxes = [_box("DATA DE EMISSAO", 0, 0, 100, 10)]
    assert find_label(boxes, ["DATA DE NASCIMENTO"], rivals=["DATA DE EMISSAO"]) == []


def test_column_below_stacks_father_then_mother() -> None:
    label = LabelMatch(_box("FILIACAO", 40, 180, 120, 195), 1.0, "")
    boxes = [
        label.box,
        _box("MARCOS CARVALHO BARROS", 42, 200, 400, 225),
        _box("JULIANA MARQUES", 41, 232, 300, 257),
        _box("FAR BELOW", 40, 600, 200, 620),
    ]
    texts = [b.text for b in column_below(label, boxes, 3)]
    assert texts == ["MARCOS CARVALHO BARROS", "JULIANA MARQUES"]
