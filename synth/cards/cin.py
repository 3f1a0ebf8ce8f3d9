"""The CIN (the national identity card), front and back: the flag in its band, the
machine-readable zone on the back."""

from __future__ import annotations

from synth import mrz
from synth.cards.marks import filiacao, label_color, signature_block
from synth.draw import Canvas, shade, tint
from synth.fields import Person

CIN_NAVY = (22, 42, 92)


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
    navy = label_color(c, CIN_NAVY)
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
    signature_block(c, 320, 930, 530, "ASSINATURA DO TITULAR")
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
    navy = label_color(c, CIN_NAVY)
    c.texture(8, shade(c.background, -12), waves=10)
    c.rect((0, 0, 1000, 56), fill=tint((190, 215, 240), c.rng, 8))
    c.text(40, 14, "CARTEIRA DE IDENTIDADE NACIONAL", size=22, bold=True, fill=navy, max_width=560)
    c.text(960, 18, "REPUBLICA FEDERATIVA DO BRASIL", size=15, bold=True, fill=navy, anchor="ra")
    filiacao(c, p, 40, 78, color=navy, w=720)
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
    signature_block(c, 450, 900, 395, "ASSINATURA DO EMISSOR")
    _mrz(c, p, 440)
