from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.cpf import cpf_check_digits, cpf_digits, format_cpf, is_valid_cpf, random_cpf

seeds = st.integers(min_value=0, max_value=2**64)
nine_digits = st.text(alphabet="0123456789", min_size=9, max_size=9)


def test_known_values() -> None:
    # Widely published example CPF.
    assert cpf_check_digits("529982247") == "25"
    assert is_valid_cpf("529.982.247-25")
    assert is_valid_cpf("52998224725")
    assert not is_valid_cpf("529.982.247-26")


@pytest.mark.parametrize("digit", "0123456789")
def test_repeated_digit_cpfs_rejected(digit: str) -> None:
    assert not is_valid_cpf(digit * 11)
    assert not is_valid_cpf(format_cpf(digit * 11))


@pytest.mark.parametrize(
    "s", ["", "5299822472", "529982247255", "529.982.24725", "529-982-247.25", "abc.def.ghi-jk"]
)
def test_malformed_rejected(s: str) -> None:
    assert not is_valid_cpf(s)


def test_non_ascii_digits_rejected() -> None:
    arabic_indic = "".join(chr(0x660 + int(d)) for d in "52998224725")
    assert not is_valid_cpf(arabic_indic)


@given(seeds)
def test_random_cpf_is_valid_and_formatted(seed: int) -> None:
    cpf = random_cpf(random.Random(seed))
    assert is_valid_cpf(cpf)
    assert len(cpf) == 14 and cpf[3] == "." and cpf[7] == "." and cpf[11] == "-"
    plain = random_cpf(random.Random(seed), formatted=False)
    assert plain == cpf_digits(cpf)


def _textbook_valid(digits: str) -> bool:
    """Independent oracle: the Receita Federal definition, written differently."""
    d = [int(c) for c in digits]
    first = sum(x * w for x, w in zip(d[:9], range(10, 1, -1), strict=True)) * 10 % 11 % 10
    second = sum(x * w for x, w in zip(d[:10], range(11, 1, -1), strict=True)) * 10 % 11 % 10
    return len(set(digits)) > 1 and d[9] == first and d[10] == second


@given(seeds, st.integers(min_value=0, max_value=10), st.integers(min_value=1, max_value=9))
def test_changing_one_digit_matches_oracle(seed: int, position: int, delta: int) -> None:
    digits = random_cpf(random.Random(seed), formatted=False)
    changed = digits[:position] + str((int(digits[position]) + delta) % 10) + digits[position + 1 :]
    assert is_valid_cpf(changed) == is_valid_cpf(format_cpf(changed)) == _textbook_valid(changed)
    if position >= 9:  # a wrong check digit is always caught
        assert not is_valid_cpf(changed)


def test_one_digit_changes_mostly_detected() -> None:
    # Mod-11 check digits miss a few single-digit changes: the first digit off
    # by one (its weights are 10 and 11, i.e. -1 and 0 mod 11) and the sixth off
    # by 2 or 9. Everything else must be caught.
    rng = random.Random(0)
    missed: set[tuple[int, int]] = set()
    for _ in range(300):
        digits = random_cpf(rng, formatted=False)
        for i in range(11):
            for new in "0123456789":
                changed = digits[:i] + new + digits[i + 1 :]
                if new != digits[i] and is_valid_cpf(changed):
                    missed.add((i, abs(int(new) - int(digits[i]))))
    assert missed <= {(0, 1), (5, 2), (5, 9)}
    assert is_valid_cpf("70499962206") and is_valid_cpf("80499962206")


@given(nine_digits)
def test_formatted_and_plain_agree(base: str) -> None:
    plain = base + cpf_check_digits(base)
    formatted = format_cpf(plain)
    assert cpf_digits(formatted) == plain
    assert format_cpf(formatted) == formatted
    assert is_valid_cpf(plain) == is_valid_cpf(formatted) == (len(set(plain)) > 1)


@given(st.text(max_size=20))
def test_is_valid_cpf_never_raises(s: str) -> None:
    assert is_valid_cpf(s) in (True, False)


def test_check_digits_input_validated() -> None:
    with pytest.raises(ValueError):
        cpf_check_digits("12345678")
    with pytest.raises(ValueError):
        format_cpf("123")
