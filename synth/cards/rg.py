"""The RG (Registro Geral), front and back, in its state's green."""

from __future__ import annotations

from synth.cards.marks import filiacao, label_color, signature_block
from synth.draw import Canvas, shade
from synth.fields import STATES, Person

RG_GREEN = (28, 84, 48)


def rg_front(c: Canvas, p: Person) -> None:
    green = label_color(c, RG_GREEN)
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
    signature_block(c, 360, 950, 560, "ASSINATURA DO TITULAR")
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
    green = label_color(c, RG_GREEN)
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
    filiacao(c, p, 40, 182, color=green, w=920)
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
    signature_block(c, 300, 700, 560, "ASSINATURA DO DIRETOR")
    c.text(40, 625, "LEI No 7.116 DE 29/08/83", size=13, fill=green)
    c.text(960, 625, f"{p.issue_city}", size=13, fill=green, anchor="ra")
