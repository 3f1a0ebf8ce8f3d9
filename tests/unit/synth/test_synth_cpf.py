from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from synth.cpf import cpf_check_digits, format_cpf, is_valid_cpf, random_cpf

seeds = st.integers(min_value=0, max_value=2**32)


@given(seeds)
def test_generated_cpfs_are_valid_formatted_or_not(seed: int) -> None:
    cpf = random_cpf(random.Random(seed))
    digits = cpf.replace(".", "").replace("-", "")
    assert is_valid_cpf(cpf) and is_valid_cpf(digits)
    assert format_cpf(digits) == cpf
    assert digits[9:] == cpf_check_digits(digits[:9])


# Not "any digit": CPF maps remainders 0 and 1 both to check digit 0, so some
# single-digit changes in the body keep a valid CPF. A changed check digit never does.
@given(seeds, st.integers(min_value=9, max_value=10), st.integers(min_value=1, max_value=9))
def test_changing_a_check_digit_invalidates(seed: int, pos: int, delta: int) -> None:
    digits = list(random_cpf(random.Random(seed), formatted=False))
    digits[pos] = str((int(digits[pos]) + delta) % 10)
    assert not is_valid_cpf("".join(digits))


def test_known_values() -> None:
    assert is_valid_cpf("529.982.247-25")
    assert not is_valid_cpf("111.111.111-11")  # right check digits, but refused
    assert not is_valid_cpf("529.982.247-2")
