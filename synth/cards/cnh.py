"""The CNH (the driving licence), front and back, with its green bands."""

from __future__ import annotations

from synth.cards.marks import WHITE, filiacao, label_color, signature_block
from synth.draw import Canvas, shade, tint
from synth.fields import STATES, Person

CNH_GREEN = (34, 108, 62)
CNH_LABEL = (30, 88, 50)


def _cnh_band(c: Canvas, y0: float, y1: float) -> tuple[int, int, int]:
    band = tint(CNH_GREEN, c.rng, 10)
    c.rect((0, y0, 1000, y1), fill=band)
    return band


def cnh_front(c: Canvas, p: Person) -> None:
    label = label_color(c, CNH_LABEL)
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
    filiacao(c, p, x, 342, color=label, w=w)
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
    signature_block(c, 40, 560, 610, "ASSINATURA DO PORTADOR")
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
    label = label_color(c, CNH_LABEL)
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
    signature_block(c, 300, 800, 560, "ASSINATURA DO EMISSOR")
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
