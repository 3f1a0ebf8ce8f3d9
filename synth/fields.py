"""Random Brazilian-looking people and their identity-document field values.

Everything is ASCII and upper case (as printed on Brazilian IDs): the OCR model
that reads these images is English-only and would never produce accents.
Values imitate personal data and must never be logged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta

from schemas.cpf import random_cpf

# Fixed "today" so generated dates never depend on when the generator runs.
REFERENCE_DATE = date(2025, 6, 30)

FIELD_NAMES = (
    "name",
    "cpf",
    "rg_number",
    "birth_date",
    "issue_date",
    "expiry_date",
    "father_name",
    "mother_name",
    "place_of_birth",
    "issuing_authority",
    "registration_number",
    "category",
    "sex",
    "nationality",
)
DATE_FIELDS = frozenset({"birth_date", "issue_date", "expiry_date"})

MALE_FIRST_NAMES = (
    "JOSE", "JOAO", "ANTONIO", "FRANCISCO", "CARLOS", "PAULO", "PEDRO", "LUCAS", "LUIZ",
    "MARCOS", "LUIS", "GABRIEL", "RAFAEL", "DANIEL", "MARCELO", "BRUNO", "EDUARDO",
    "FELIPE", "RAIMUNDO", "RODRIGO", "MANOEL", "MATEUS", "ANDRE", "FERNANDO", "FABIO",
    "LEONARDO", "GUSTAVO", "GUILHERME", "LEANDRO", "TIAGO", "ANDERSON", "RICARDO",
    "MARCIO", "JORGE", "SEBASTIAO", "ALEXANDRE", "ROBERTO", "EDSON", "DIEGO", "VITOR",
    "SERGIO", "CLAUDIO", "JULIO", "RENATO", "HENRIQUE", "OTAVIO", "SAMUEL", "ARTUR",
)  # fmt: skip
FEMALE_FIRST_NAMES = (
    "MARIA", "ANA", "FRANCISCA", "ANTONIA", "ADRIANA", "JULIANA", "MARCIA", "FERNANDA",
    "PATRICIA", "ALINE", "SANDRA", "CAMILA", "AMANDA", "BRUNA", "JESSICA", "LETICIA",
    "JULIA", "LUCIANA", "VANESSA", "MARIANA", "GABRIELA", "VERA", "VITORIA", "LARISSA",
    "CLAUDIA", "BEATRIZ", "LUANA", "RITA", "SONIA", "RENATA", "ELIANE", "JOSEFA",
    "SIMONE", "NATALIA", "CRISTIANE", "CARLA", "DEBORA", "ROSANGELA", "TATIANE", "RAQUEL",
    "HELENA", "ISABELA", "LAURA", "CECILIA", "CONCEICAO", "APARECIDA", "LUCIA", "TERESA",
)  # fmt: skip
SURNAMES = (
    "DA SILVA", "DOS SANTOS", "DE OLIVEIRA", "DE SOUZA", "RODRIGUES", "FERREIRA", "ALVES",
    "PEREIRA", "LIMA", "GOMES", "COSTA", "RIBEIRO", "MARTINS", "CARVALHO", "DE ALMEIDA",
    "LOPES", "SOARES", "FERNANDES", "VIEIRA", "BARBOSA", "ROCHA", "DIAS", "NASCIMENTO",
    "ANDRADE", "MOREIRA", "NUNES", "MARQUES", "MACHADO", "MENDES", "FREITAS", "CARDOSO",
    "RAMOS", "GONCALVES", "SANTANA", "TEIXEIRA", "DE ARAUJO", "CAVALCANTI", "MONTEIRO",
    "BATISTA", "PINTO", "MOURA", "REIS", "CAMPOS", "FARIAS", "BARROS", "FONSECA",
    "AZEVEDO", "DE CASTRO", "BEZERRA", "GUIMARAES", "XAVIER", "BRAGA", "SIQUEIRA",
    "MIRANDA", "PACHECO", "QUEIROZ", "TAVARES", "DE MELO", "CORREIA", "DA CONCEICAO",
)  # fmt: skip

# UF -> the state's name as it appears in "ESTADO DE/DO/DA ..." headers.
STATES = {
    "AC": "DO ACRE", "AL": "DE ALAGOAS", "AM": "DO AMAZONAS", "AP": "DO AMAPA",
    "BA": "DA BAHIA", "CE": "DO CEARA", "DF": "DO DISTRITO FEDERAL", "ES": "DO ESPIRITO SANTO",
    "GO": "DE GOIAS", "MA": "DO MARANHAO", "MG": "DE MINAS GERAIS", "MS": "DE MATO GROSSO DO SUL",
    "MT": "DE MATO GROSSO", "PA": "DO PARA", "PB": "DA PARAIBA", "PE": "DE PERNAMBUCO",
    "PI": "DO PIAUI", "PR": "DO PARANA", "RJ": "DO RIO DE JANEIRO",
    "RN": "DO RIO GRANDE DO NORTE", "RO": "DE RONDONIA", "RR": "DE RORAIMA",
    "RS": "DO RIO GRANDE DO SUL", "SC": "DE SANTA CATARINA", "SE": "DE SERGIPE",
    "SP": "DE SAO PAULO", "TO": "DO TOCANTINS",
}  # fmt: skip
CITIES = (
    ("SAO PAULO", "SP"), ("CAMPINAS", "SP"), ("SANTOS", "SP"), ("RIBEIRAO PRETO", "SP"),
    ("RIO DE JANEIRO", "RJ"), ("NITEROI", "RJ"), ("BELO HORIZONTE", "MG"),
    ("UBERLANDIA", "MG"), ("JUIZ DE FORA", "MG"), ("SALVADOR", "BA"),
    ("FEIRA DE SANTANA", "BA"), ("RECIFE", "PE"), ("CARUARU", "PE"), ("FORTALEZA", "CE"),
    ("CURITIBA", "PR"), ("LONDRINA", "PR"), ("PORTO ALEGRE", "RS"), ("CAXIAS DO SUL", "RS"),
    ("FLORIANOPOLIS", "SC"), ("JOINVILLE", "SC"), ("GOIANIA", "GO"), ("BRASILIA", "DF"),
    ("BELEM", "PA"), ("MANAUS", "AM"), ("SAO LUIS", "MA"), ("TERESINA", "PI"),
    ("NATAL", "RN"), ("JOAO PESSOA", "PB"), ("MACEIO", "AL"), ("ARACAJU", "SE"),
    ("VITORIA", "ES"), ("CAMPO GRANDE", "MS"), ("CUIABA", "MT"), ("PORTO VELHO", "RO"),
    ("RIO BRANCO", "AC"), ("MACAPA", "AP"), ("BOA VISTA", "RR"), ("PALMAS", "TO"),
)  # fmt: skip
CNH_CATEGORIES = ("A", "B", "B", "B", "AB", "AB", "AB", "C", "D", "E", "AC", "AD", "AE")


@dataclass(frozen=True)
class Person:
    """One synthetic person; dates are `date` objects, everything else printed text."""

    name: str
    sex: str  # "M" or "F"
    nationality: str
    cpf: str  # ddd.ddd.ddd-dd
    rg_number: str  # dd.ddd.ddd-d
    issuing_authority: str  # SSP/UF
    birth_date: date
    issue_date: date
    expiry_date: date
    father_name: str
    mother_name: str
    place_of_birth: str  # CITY - UF
    issue_city: str  # CITY - UF where the documents were issued (not a ground-truth field)
    registration_number: str  # CNH: 11 digits
    category: str  # CNH category

    @property
    def uf(self) -> str:
        return self.issuing_authority.rsplit("/", 1)[1]

    def truth(self, field: str) -> str:
        """Ground-truth value: dates as ISO `YYYY-MM-DD`, everything else as printed."""
        value = getattr(self, field)
        return value.isoformat() if isinstance(value, date) else str(value)

    def printed(self, field: str) -> str:
        """The value as it appears on a document: dates as `DD/MM/YYYY`."""
        value = getattr(self, field)
        return format_date(value) if isinstance(value, date) else str(value)


def format_date(d: date) -> str:
    return d.strftime("%d/%m/%Y")


def format_brl(cents: int) -> str:
    """Brazilian currency formatting: 123456 -> '1.234,56' (no 'R$' prefix)."""
    reais, centavos = divmod(cents, 100)
    return f"{reais:,}".replace(",", ".") + f",{centavos:02d}"


def random_date(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randrange((end - start).days + 1))


def add_years(d: date, years: int) -> date:
    try:
        return d.replace(year=d.year + years)
    except ValueError:  # 29 February in a non-leap target year
        return d.replace(year=d.year + years, day=28)


def rg_check_digit(eight_digits: str) -> str:
    # Sao Paulo's rule (weights 2..9, mod 11, 10 -> X); other states differ, but
    # a plausible-looking digit is all the documents need.
    remainder = sum(int(d) * w for d, w in zip(eight_digits, range(2, 10), strict=True)) % 11
    return "X" if remainder == 10 else str(remainder)


def random_rg(rng: random.Random) -> str:
    base = f"{rng.randrange(10_000_000, 100_000_000)}"
    return f"{base[:2]}.{base[2:5]}.{base[5:]}-{rg_check_digit(base)}"


def random_first_name(rng: random.Random, sex: str) -> str:
    names = MALE_FIRST_NAMES if sex == "M" else FEMALE_FIRST_NAMES
    first = rng.choice(names)
    if rng.random() < 0.35:  # compound first names are common ("MARIA EDUARDA")
        second = rng.choice(names)
        if second != first:
            first = f"{first} {second}"
    return first


def _surnames(rng: random.Random, k: int) -> list[str]:
    return rng.sample(SURNAMES, k)


def random_person(rng: random.Random) -> Person:
    """Draw a person; the child's surnames come from the mother's and father's."""
    sex = rng.choice("MF")
    mother_surnames = _surnames(rng, rng.choice((1, 2, 2)))
    father_surnames = _surnames(rng, rng.choice((1, 2, 2)))
    mother = f"{random_first_name(rng, 'F')} {' '.join(mother_surnames)}"
    father = f"{random_first_name(rng, 'M')} {' '.join(father_surnames)}"
    child_surnames = [mother_surnames[-1], father_surnames[-1]]
    if child_surnames[0] == child_surnames[1] or rng.random() < 0.25:
        child_surnames = child_surnames[1:]
    name = f"{random_first_name(rng, sex)} {' '.join(child_surnames)}"

    birth_city, birth_uf = rng.choice(CITIES)
    # Most people get documents where they live, often the state they were born in.
    issue_city, issue_uf = (birth_city, birth_uf) if rng.random() < 0.6 else rng.choice(CITIES)

    birth = random_date(rng, date(1950, 1, 1), add_years(REFERENCE_DATE, -19))
    # CNH rule of thumb: 10-year validity below 50, 5 years above. Issue dates
    # fall inside the validity window so documents are current at REFERENCE_DATE.
    years = 10 if add_years(birth, 50) > REFERENCE_DATE else 5
    earliest = add_years(REFERENCE_DATE, -years) + timedelta(days=1)
    issue = random_date(rng, max(add_years(birth, 18), earliest), REFERENCE_DATE)
    expiry = add_years(issue, years)

    return Person(
        name=name,
        sex=sex,
        nationality="BRASILEIRO" if sex == "M" else "BRASILEIRA",
        cpf=random_cpf(rng),
        rg_number=random_rg(rng),
        issuing_authority=f"SSP/{issue_uf}",
        birth_date=birth,
        issue_date=issue,
        expiry_date=expiry,
        father_name=father,
        mother_name=mother,
        place_of_birth=f"{birth_city} - {birth_uf}",
        issue_city=f"{issue_city} - {issue_uf}",
        registration_number="".join(str(rng.randrange(10)) for _ in range(11)),
        category=rng.choice(CNH_CATEGORIES),
    )
