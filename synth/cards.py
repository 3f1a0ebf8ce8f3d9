"""Layouts of the identity cards: RG, CNH and CIN, front and back.

Each layout draws on an upright canvas and records the ground-truth fields it
prints through `Canvas.field` / `Canvas.show`. Coordinates are design units
(page width 1000). Colours are loosely modelled on the real documents.
"""

from __future__ import annotations

from synth import mrz
from synth.draw import Canvas, shade, tint
from synth.fields import STATES, Person

WHITE = (255, 255, 255)
RG_GREEN = (28, 84, 48)
CNH_GREEN = (34, 108, 62)
CNH_LABEL = (30, 88, 50)
CIN_NAVY = (22, 42, 92)


def _label_color(c: Canvas, base: tuple[int, int, int]) -> tuple[int, int, int]:
    return tint(base, c.rng, 10)


def _signature_block(c: Canvas, x0: float, x1: float, y: float, label: str) -> None:
    c.signature(x0 + (x1 - x0) * 0.12, x0 + (x1 - x0) * c.rng.uniform(0.6, 0.85), y - 22, 36)
    c.hline(x0, x1, y, (70, 70, 70))
    c.text((x0 + x1) / 2, y + 6, label, size=13, fill=(60, 60, 60), anchor="ma")


def _filiacao(
    c: Canvas, p: Person, x: float, y: float, *, color: tuple[int, int, int], w: float
) -> None:
    """Father and mother under one FILIACAO label, as on every Brazilian ID."""
    c.field(
        x,
        y,
        "FILIACAO",
        p.father_name,
        key="father_name",
        label_color=color,
        max_width=w,
        value_size=23,
    )
    c.value(x, y + 15 * 1.35 + 31, p.mother_name, size=23, max_width=w)
    c.show("mother_name", p.mother_name)


def rg_front(c: Canvas, p: Person) -> None:
    green = _label_color(c, RG_GREEN)
    c.texture(10, shade(c.background, -16))
    c.header_lines(
        [
            ("REPUBLICA FEDERATIVA DO BRASIL", 30, True),
            (f"ESTADO {STATES[p.uf]}", 20, True),
            ("SECRETARIA DA SEGURANCA PUBLICA", 18, False),
            ("INSTITUTO DE IDENTIFICACAO", 16, False),
        ],
        y=22,
        color=green,
    )
    c.hline(40, 960, 148, green, 2)
    c.photo((50, 172, 320, 535))
    c.text(360, 175, "CARTEIRA DE IDENTIDADE", size=38, bold=True, fill=green, max_width=600)
    c.field(
        360, 250, "REGISTRO GERAL", p.rg_number, key="rg_number", label_color=green, value_size=34
    )
    c.field(
        360,
        345,
        "ORGAO EXPEDIDOR",
        p.issuing_authority,
        key="issuing_authority",
        label_color=green,
        value_size=28,
    )
    c.rect((780, 250, 950, 440), outline=green, line=1.5, radius=6)
    c.thumbprint((790, 260, 940, 430), shade((200, 200, 200), -40))
    c.text(865, 446, "POLEGAR DIREITO", size=12, fill=green, anchor="ma")
    _signature_block(c, 360, 950, 560, "ASSINATURA DO TITULAR")
    c.text(
        500,
        622,
        "VALIDA EM TODO O TERRITORIO NACIONAL",
        size=16,
        bold=True,
        fill=green,
        anchor="ma",
    )


def rg_back(c: Canvas, p: Person) -> None:
    green = _label_color(c, RG_GREEN)
    c.texture(10, shade(c.background, -14))
    c.field(
        40,
        30,
        "REGISTRO GERAL",
        p.rg_number,
        key="rg_number",
        label_color=green,
        inline=True,
        value_size=27,
        max_width=480,
    )
    c.field(
        540,
        30,
        "DATA DE EXPEDICAO",
        p.printed("issue_date"),
        key="issue_date",
        truth=p.truth("issue_date"),
        label_color=green,
        inline=True,
        value_size=27,
        max_width=430,
    )
    c.hline(30, 970, 82, green, 2)
    c.field(40, 100, "NOME", p.name, key="name", label_color=green, max_width=920, value_size=28)
    _filiacao(c, p, 40, 182, color=green, w=920)
    c.field(
        40,
        312,
        "NATURALIDADE",
        p.place_of_birth,
        key="place_of_birth",
        label_color=green,
        max_width=480,
    )
    c.field(
        600,
        312,
        "DATA DE NASCIMENTO",
        p.printed("birth_date"),
        key="birth_date",
        truth=p.truth("birth_date"),
        label_color=green,
        max_width=360,
    )
    rng = c.rng
    book = (
        f"C.NASC LV.A{rng.randint(10, 300)} FLS.{rng.randint(1, 300)} N.{rng.randint(1000, 99999)}"
    )
    c.field(
        40,
        390,
        "DOC. ORIGEM",
        book,
        key=None,
        label_color=green,
        max_width=520,
        value_size=20,
        bold=False,
    )
    c.field(600, 390, "CPF", p.cpf, key="cpf", label_color=green, max_width=360, value_size=27)
    _signature_block(c, 300, 700, 560, "ASSINATURA DO DIRETOR")
    c.text(40, 625, "LEI No 7.116 DE 29/08/83", size=13, fill=green)
    c.text(960, 625, f"{p.issue_city}", size=13, fill=green, anchor="ra")


def _cnh_band(c: Canvas, y0: float, y1: float) -> tuple[int, int, int]:
    band = tint(CNH_GREEN, c.rng, 10)
    c.rect((0, y0, 1000, y1), fill=band)
    return band


def cnh_front(c: Canvas, p: Person) -> None:
    label = _label_color(c, CNH_LABEL)
    c.texture(12, shade(c.background, -18), waves=18)
    _cnh_band(c, 0, 112)
    c.header_lines(
        [
            ("REPUBLICA FEDERATIVA DO BRASIL", 22, True),
            ("MINISTERIO DOS TRANSPORTES - SECRETARIA NACIONAL DE TRANSITO", 14, False),
            ("CARTEIRA NACIONAL DE HABILITACAO", 31, True),
        ],
        y=10,
        color=WHITE,
    )
    c.photo((40, 140, 290, 470))
    x, w = 320, 640
    c.field(x, 132, "NOME", p.name, key="name", label_color=label, max_width=w)
    c.field(
        x,
        202,
        "DOC. IDENTIDADE / ORG. EMISSOR / UF",
        f"{p.rg_number} {p.issuing_authority}",
        key=None,
        label_color=label,
        max_width=w,
        value_size=23,
    )
    c.show("rg_number", p.rg_number)
    c.show("issuing_authority", p.issuing_authority)
    c.field(x, 272, "CPF", p.cpf, key="cpf", label_color=label, max_width=290)
    c.field(
        640,
        272,
        "DATA DE NASCIMENTO",
        p.printed("birth_date"),
        key="birth_date",
        truth=p.truth("birth_date"),
        label_color=label,
        max_width=320,
    )
    _filiacao(c, p, x, 342, color=label, w=w)
    c.field(x, 462, "CATEGORIA", p.category, key="category", label_color=label, max_width=150)
    c.field(
        480,
        462,
        "No REGISTRO",
        p.registration_number,
        key="registration_number",
        label_color=label,
        max_width=260,
    )
    c.field(
        770,
        462,
        "VALIDADE",
        p.printed("expiry_date"),
        key="expiry_date",
        truth=p.truth("expiry_date"),
        label_color=label,
        max_width=190,
    )
    _signature_block(c, 40, 560, 610, "ASSINATURA DO PORTADOR")
    c.text(960, 585, f"DETRAN-{p.uf}", size=26, bold=True, fill=label, anchor="ra")
    c.text(500, 655, "VALIDA EM TODO O TERRITORIO NACIONAL", size=14, fill=label, anchor="ma")


CNH_OBSERVATIONS = (
    "EAR",
    "A - USO OBRIGATORIO DE LENTES",
    "EAR A",
    "-",
    "D - VEICULO COM DIRECAO HIDRAULICA",
    "EXERCE ATIVIDADE REMUNERADA",
)


def cnh_back(c: Canvas, p: Person) -> None:
    label = _label_color(c, CNH_LABEL)
    c.texture(12, shade(c.background, -18), waves=18)
    _cnh_band(c, 0, 64)
    c.text(
        40, 18, "CARTEIRA NACIONAL DE HABILITACAO", size=24, bold=True, fill=WHITE, max_width=600
    )
    c.text(960, 22, "REPUBLICA FEDERATIVA DO BRASIL", size=16, bold=True, fill=WHITE, anchor="ra")
    c.text(40, 92, "OBSERVACOES", size=15, fill=label)
    c.rect((40, 116, 640, 300), outline=label, line=1.5, radius=4)
    c.value(60, 136, c.rng.choice(CNH_OBSERVATIONS), size=24, max_width=560)
    c.qr_placeholder(700, 92, 250)
    c.field(
        40,
        330,
        "No REGISTRO",
        p.registration_number,
        key="registration_number",
        label_color=label,
        max_width=420,
        value_size=28,
    )
    c.field(
        520,
        330,
        "DATA EMISSAO",
        p.printed("issue_date"),
        key="issue_date",
        truth=p.truth("issue_date"),
        label_color=label,
        max_width=300,
        value_size=28,
    )
    city, uf = p.issue_city.split(" - ")
    c.field(40, 410, "LOCAL", f"{city}, {uf}", key=None, label_color=label, max_width=600)
    _signature_block(c, 300, 800, 560, "ASSINATURA DO EMISSOR")
    state = STATES[uf]
    c.text(
        550,
        590,
        f"DEPARTAMENTO ESTADUAL DE TRANSITO {state}",
        size=14,
        fill=label,
        anchor="ma",
        max_width=600,
    )
    _cnh_band(c, 640, 690)
    c.text(500, 652, "DENATRAN - CONTRAN", size=18, bold=True, fill=WHITE, anchor="ma")


def _flag(c: Canvas, x: float, y: float, w: float) -> None:
    h = w * 0.7
    c.rect((x, y, x + w, y + h), fill=(0, 148, 64))
    diamond = [
        (x + w * 0.5, y + h * 0.1),
        (x + w * 0.92, y + h * 0.5),
        (x + w * 0.5, y + h * 0.9),
        (x + w * 0.08, y + h * 0.5),
    ]
    c.draw.polygon([(c.px(px), c.px(py)) for px, py in diamond], fill=(254, 221, 0))
    r = h * 0.22
    cx, cy = x + w / 2, y + h / 2
    c.draw.ellipse([c.px(cx - r), c.px(cy - r), c.px(cx + r), c.px(cy + r)], fill=(0, 39, 118))


def _cin_band(c: Canvas, height: float, title_size: float) -> None:
    c.rect((0, 0, 1000, height), fill=tint((190, 215, 240), c.rng, 8))
    _flag(c, 30, height * 0.18, height * 0.9)
    navy = tint(CIN_NAVY, c.rng, 8)
    x = 30 + height * 0.9 + 30
    c.text(
        x,
        height * 0.14,
        "REPUBLICA FEDERATIVA DO BRASIL",
        size=title_size * 0.7,
        bold=True,
        fill=navy,
        max_width=960 - x,
    )
    c.text(
        x,
        height * 0.48,
        "CARTEIRA DE IDENTIDADE NACIONAL",
        size=title_size,
        bold=True,
        fill=navy,
        max_width=960 - x,
    )


def cin_front(c: Canvas, p: Person) -> None:
    navy = _label_color(c, CIN_NAVY)
    c.texture(8, shade(c.background, -12), waves=10)
    _cin_band(c, 108, 31)
    c.photo((40, 132, 290, 460))
    x = 320
    c.field(x, 130, "NOME", p.name, key="name", label_color=navy, max_width=640)
    c.field(x, 202, "SEXO", p.sex, key="sex", label_color=navy, max_width=120)
    c.field(
        470, 202, "NACIONALIDADE", p.nationality, key="nationality", label_color=navy, max_width=300
    )
    c.field(x, 274, "CPF", p.cpf, key="cpf", label_color=navy, max_width=640, value_size=31)
    c.field(
        x,
        354,
        "DATA DE NASCIMENTO",
        p.printed("birth_date"),
        key="birth_date",
        truth=p.truth("birth_date"),
        label_color=navy,
        max_width=300,
    )
    c.field(
        660,
        354,
        "VALIDADE",
        p.printed("expiry_date"),
        key="expiry_date",
        truth=p.truth("expiry_date"),
        label_color=navy,
        max_width=300,
    )
    _signature_block(c, 320, 930, 530, "ASSINATURA DO TITULAR")
    c.text(165, 480, "VALIDA EM TODO O", size=12, fill=navy, anchor="ma")
    c.text(165, 498, "TERRITORIO NACIONAL", size=12, fill=navy, anchor="ma")


def _mrz(c: Canvas, p: Person, y: float) -> None:
    c.rect((0, y, 1000, c.design_height), fill=tint((246, 247, 248), c.rng, 3))
    words = p.name.split()
    lines = mrz.td1(
        document_number=p.cpf.replace(".", "").replace("-", "")[:9],
        birth=p.birth_date,
        sex=p.sex,
        expiry=p.expiry_date,
        surname=" ".join(words[1:]),
        given_names=words[0],
        optional=p.cpf[-2:],
    )
    for i, line in enumerate(lines):
        c.value(45, y + 18 + i * 50, line, size=36, mono=True, bold=False, max_width=910)


def cin_back(c: Canvas, p: Person) -> None:
    navy = _label_color(c, CIN_NAVY)
    c.texture(8, shade(c.background, -12), waves=10)
    c.rect((0, 0, 1000, 56), fill=tint((190, 215, 240), c.rng, 8))
    c.text(40, 14, "CARTEIRA DE IDENTIDADE NACIONAL", size=22, bold=True, fill=navy, max_width=560)
    c.text(960, 18, "REPUBLICA FEDERATIVA DO BRASIL", size=15, bold=True, fill=navy, anchor="ra")
    _filiacao(c, p, 40, 78, color=navy, w=720)
    c.field(
        40,
        206,
        "NATURALIDADE",
        p.place_of_birth,
        key="place_of_birth",
        label_color=navy,
        max_width=380,
    )
    c.field(
        450,
        206,
        "ORGAO EXPEDIDOR",
        p.issuing_authority,
        key="issuing_authority",
        label_color=navy,
        max_width=310,
    )
    c.field(40, 280, "LOCAL DE EMISSAO", p.issue_city, key=None, label_color=navy, max_width=380)
    c.field(
        450,
        280,
        "DATA DE EMISSAO",
        p.printed("issue_date"),
        key="issue_date",
        truth=p.truth("issue_date"),
        label_color=navy,
        max_width=310,
    )
    c.qr_placeholder(790, 80, 170)
    _signature_block(c, 450, 900, 395, "ASSINATURA DO EMISSOR")
    _mrz(c, p, 440)
