"""Layouts of the A4 documents: an invoice (nota fiscal) and a letter.

They exist so the classifier sees non-ID pages and so extraction can be tested
on free text; the person's name and CPF appear on both.
"""

from __future__ import annotations

import random
from datetime import date

from synth.draw import Canvas, shade, tint
from synth.fields import (
    REFERENCE_DATE,
    SURNAMES,
    Person,
    format_brl,
    format_date,
    random_date,
    random_first_name,
)

GREY_LABEL = (70, 70, 78)
BAND_COLORS = ((28, 46, 88), (52, 56, 64), (16, 92, 96), (104, 30, 40), (30, 80, 40))

COMPANY_KINDS = (
    "COMERCIAL", "DISTRIBUIDORA", "PAPELARIA", "MERCADO", "FARMACIA", "AUTO PECAS",
    "INFORMATICA", "MATERIAIS DE CONSTRUCAO", "SERVICOS TECNICOS",
)  # fmt: skip
COMPANY_SUFFIXES = ("LTDA", "ME", "EIRELI", "S.A.")
STREETS = (
    "RUA DAS FLORES", "RUA SETE DE SETEMBRO", "AV. XV DE NOVEMBRO", "RUA BARAO DO RIO BRANCO",
    "AV. SANTOS DUMONT", "RUA TIRADENTES", "AV. DOM PEDRO II", "RUA JOSE BONIFACIO",
)  # fmt: skip
# (description, min price, max price) in cents
ITEMS = (
    ("CABO USB 2M", 1_500, 4_900), ("PAPEL A4 500 FOLHAS", 2_200, 3_900),
    ("CARTUCHO DE TINTA PRETO", 5_900, 14_900), ("MOUSE OPTICO", 2_900, 8_900),
    ("TECLADO ABNT2", 4_900, 19_900), ("SERVICO DE MANUTENCAO", 8_000, 45_000),
    ("CIMENTO 50KG", 2_800, 4_200), ("TINTA ACRILICA 18L", 19_000, 42_000),
    ("DIPIRONA 500MG", 500, 1_500), ("FILTRO DE OLEO", 2_500, 6_000),
    ("PASTILHA DE FREIO", 8_000, 22_000), ("CANETA ESFEROGRAFICA AZUL", 150, 450),
    ("CADERNO 200 FOLHAS", 1_800, 3_500), ("INSTALACAO ELETRICA", 15_000, 60_000),
    ("ARROZ 5KG", 2_200, 3_400), ("CAFE 500G", 1_400, 2_600),
)  # fmt: skip

LABELS_PT = {
    "number": "No",
    "series": "SERIE",
    "date": "DATA DE EMISSAO",
    "to": "DESTINATARIO",
    "name": "NOME",
    "cpf": "CPF",
    "desc": "DESCRICAO",
    "qty": "QTD",
    "unit": "VALOR UNIT.",
    "amount": "VALOR TOTAL",
    "total": "VALOR TOTAL DA NOTA",
    "key": "CHAVE DE ACESSO",
}
LABELS_EN = {
    "number": "No",
    "series": "SERIES",
    "date": "DATE",
    "to": "BILL TO",
    "name": "NAME",
    "cpf": "CPF",
    "desc": "DESCRIPTION",
    "qty": "QTY",
    "unit": "UNIT PRICE",
    "amount": "AMOUNT",
    "total": "TOTAL",
    "key": "ACCESS KEY",
}


def random_cnpj(rng: random.Random) -> str:
    """A CNPJ (company registry number) with valid check digits."""
    base = [rng.randrange(10) for _ in range(8)] + [0, 0, 0, 1]
    for weights in ((5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2), (6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2)):
        r = sum(d * w for d, w in zip(base, weights, strict=True)) % 11
        base.append(0 if r < 2 else 11 - r)
    d = "".join(map(str, base))
    return f"{d[:2]}.{d[2:5]}.{d[5:8]}/{d[8:12]}-{d[12:]}"


def _company(rng: random.Random) -> str:
    surname = rng.choice(SURNAMES).split()[-1]
    return f"{rng.choice(COMPANY_KINDS)} {surname} {rng.choice(COMPANY_SUFFIXES)}"


def _document_date(rng: random.Random) -> date:
    return random_date(rng, date(2023, 1, 1), REFERENCE_DATE)


def invoice(c: Canvas, p: Person) -> None:
    rng = c.rng
    english = rng.random() < 0.25
    labels = LABELS_EN if english else LABELS_PT
    title = "INVOICE" if english else rng.choice(("NOTA FISCAL", "NOTA FISCAL ELETRONICA"))
    c.texture(4, None)

    band = tint(rng.choice(BAND_COLORS), rng, 8)
    white = (255, 255, 255)
    c.rect((0, 0, 1000, 120), fill=band)
    c.text(40, 32, title, size=44, bold=True, fill=white, max_width=560)
    n = f"{rng.randrange(1, 1_000_000_000):09d}"
    number = f"{n[:3]}.{n[3:6]}.{n[6:]}"
    c.text(960, 30, f"{labels['number']} {number}", size=26, bold=True, fill=white, anchor="ra")
    c.show("invoice_number", number)
    c.text(960, 72, f"{labels['series']} {rng.randint(1, 3)}", size=18, fill=white, anchor="ra")

    city, uf = rng.choice(("SAO PAULO - SP", "CURITIBA - PR", "RECIFE - PE", p.issue_city)).split(
        " - "
    )
    c.text(40, 150, _company(rng), size=28, bold=True, max_width=620)
    c.text(40, 192, f"CNPJ: {random_cnpj(rng)}", size=19, fill=GREY_LABEL)
    street = f"{rng.choice(STREETS)}, {rng.randint(10, 3000)} - {city} - {uf}"
    c.text(40, 222, street, size=19, fill=GREY_LABEL, max_width=620)
    issued = _document_date(rng)
    c.field(
        700,
        150,
        labels["date"],
        format_date(issued),
        key="issue_date",
        truth=issued.isoformat(),
        label_color=GREY_LABEL,
        max_width=260,
    )

    c.rect((40, 280, 960, 410), outline=(150, 150, 155), line=1.5)
    c.text(56, 290, labels["to"], size=15, bold=True, fill=GREY_LABEL)
    c.field(56, 325, labels["name"], p.name, key="name", label_color=GREY_LABEL, max_width=600)
    c.field(690, 325, labels["cpf"], p.cpf, key="cpf", label_color=GREY_LABEL, max_width=255)

    total = _items_table(c, labels, 450)
    c.show("total_amount", f"{total // 100}.{total % 100:02d}")

    c.text(40, 1250, labels["key"], size=15, bold=True, fill=GREY_LABEL)
    key = "".join(str(rng.randrange(10)) for _ in range(44))
    c.text(
        40,
        1274,
        " ".join(key[i : i + 4] for i in range(0, 44, 4)),
        size=19,
        mono=True,
        max_width=920,
    )
    c.hline(40, 960, 1330, (160, 160, 165))
    c.text(
        500,
        1345,
        "DOCUMENTO EMITIDO POR ME OU EPP OPTANTE PELO SIMPLES NACIONAL",
        size=13,
        fill=GREY_LABEL,
        anchor="ma",
    )


def _items_table(c: Canvas, labels: dict[str, str], y: float) -> int:
    """Draw the items table and the total box; returns the total in cents."""
    rng = c.rng
    header = shade((236, 236, 240), rng.randint(-6, 4))
    c.rect((40, y, 960, y + 42), fill=header)
    cols = (
        (56, labels["desc"], "la"),
        (640, labels["qty"], "ra"),
        (800, labels["unit"], "ra"),
        (945, labels["amount"], "ra"),
    )
    for x, text, anchor in cols:
        c.text(x, y + 11, text, size=16, bold=True, fill=GREY_LABEL, anchor=anchor)
    total = 0
    row_y = y + 56
    for desc, lo, hi in rng.sample(ITEMS, rng.randint(2, 8)):
        qty = 1 if desc.startswith(("SERVICO", "INSTALACAO")) else rng.randint(1, 12)
        unit = rng.randint(lo, hi)
        amount = qty * unit
        total += amount
        c.text(56, row_y, desc, size=19, max_width=480)
        c.text(640, row_y, str(qty), size=19, anchor="ra")
        c.text(800, row_y, format_brl(unit), size=19, anchor="ra")
        c.text(945, row_y, format_brl(amount), size=19, anchor="ra")
        c.hline(40, 960, row_y + 32, (200, 200, 205), 1)
        row_y += 44
    box_y = row_y + 30
    c.rect((560, box_y, 960, box_y + 90), outline=(120, 120, 125), line=2)
    c.text(576, box_y + 10, labels["total"], size=16, bold=True, fill=GREY_LABEL)
    c.text(
        945, box_y + 40, f"R$ {format_brl(total)}", size=32, bold=True, anchor="ra", max_width=360
    )
    return total


ORGANIZATIONS = ("BANCO", "COOPERATIVA DE CREDITO", "SEGURADORA", "CONSTRUTORA", "ADMINISTRADORA")
SUBJECTS = (
    "Atualizacao cadastral",
    "Solicitacao de documentos",
    "Confirmacao de proposta",
    "Aviso de vencimento",
    "Comunicado importante",
)
SENTENCES = (
    "Informamos que o seu cadastro foi atualizado com sucesso em nossos sistemas.",
    "Solicitamos copia legivel do documento de identidade e do comprovante de residencia.",
    "Caso as informacoes estejam corretas, nenhuma providencia adicional e necessaria.",
    "O prazo para regularizacao e de trinta dias a contar do recebimento desta carta.",
    "Em caso de duvidas, entre em contato com a nossa central de atendimento.",
    "Os documentos podem ser entregues em qualquer agencia ou enviados pelo aplicativo.",
    "Agradecemos a confianca e permanecemos a disposicao para quaisquer esclarecimentos.",
    "A analise da proposta sera concluida apos o recebimento da documentacao completa.",
    "Ressaltamos que a manutencao dos dados atualizados e obrigatoria por lei.",
    "O contrato permanece vigente nas condicoes originalmente pactuadas.",
    "Pedimos atencao aos prazos indicados para evitar a suspensao do servico.",
    "As condicoes completas estao disponiveis em nosso site e nas agencias.",
)
ROLES = (
    "Gerente de Relacionamento",
    "Coordenadora de Cadastro",
    "Departamento Juridico",
    "Atendimento ao Cliente",
)


def _place_case(s: str) -> str:
    """'FEIRA DE SANTANA' -> 'Feira de Santana' (particles stay lower case)."""
    particles = {"DA", "DAS", "DE", "DO", "DOS", "E"}
    return " ".join(w.lower() if w in particles else w.capitalize() for w in s.split())


def letter(c: Canvas, p: Person) -> None:
    rng = c.rng
    c.texture(3, None)
    accent = tint(rng.choice(BAND_COLORS), rng, 8)
    surname = rng.choice(SURNAMES).split()[-1]
    org = f"{rng.choice(ORGANIZATIONS)} {surname} {rng.choice(COMPANY_SUFFIXES)}"
    c.text(80, 70, org, size=30, bold=True, fill=accent, max_width=840)
    c.hline(80, 920, 120, accent, 3)
    city, uf = p.issue_city.split(" - ")
    street = (
        f"{rng.choice(STREETS)}, {rng.randint(10, 3000)} - {city} - {uf} - CNPJ {random_cnpj(rng)}"
    )
    c.text(80, 132, street, size=14, fill=GREY_LABEL, max_width=840)

    issued = _document_date(rng)
    c.text(920, 200, f"{_place_case(city)}, {format_date(issued)}", size=20, anchor="ra")
    c.show("issue_date", issued.isoformat())

    c.text(80, 270, "A(O) SR(A).", size=20)
    c.text(80, 300, p.name, size=22, bold=True, max_width=840)
    c.show("name", p.name)
    c.text(80, 334, f"CPF: {p.cpf}", size=20)
    c.show("cpf", p.cpf)

    c.text(80, 400, f"Assunto: {rng.choice(SUBJECTS)}", size=20, bold=True, max_width=840)
    c.text(80, 450, "Prezado(a) Senhor(a),", size=20)
    font = c.font(20)
    y = 500.0
    n_paragraphs = rng.randint(3, 4)
    pool = rng.sample(SENTENCES, 3 * n_paragraphs)  # no sentence repeats within a letter
    for k in range(n_paragraphs):
        sentences = pool[3 * k : 3 * k + rng.randint(2, 3)]
        if k == 0:
            sentences.insert(
                0, f"Referimo-nos ao cadastro do(a) titular inscrito(a) no CPF {p.cpf}."
            )
        for line in c.wrap(" ".join(sentences), font, 840):
            c.text(80, y, line, size=20)
            y += 30
        y += 18
    c.text(80, y + 20, "Atenciosamente,", size=20)
    c.signature(100, 100 + rng.uniform(200, 300), y + 100, 40)
    sender = f"{random_first_name(rng, rng.choice('MF'))} {rng.choice(SURNAMES)}"
    c.hline(80, 460, y + 130, (90, 90, 90))
    c.text(80, y + 140, _place_case(sender), size=19, max_width=380)
    c.text(80, y + 168, rng.choice(ROLES), size=17, fill=GREY_LABEL, max_width=380)
    c.text(500, 1370, "Pagina 1 de 1", size=14, fill=GREY_LABEL, anchor="ma")
