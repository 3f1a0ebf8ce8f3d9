"""Words cut at a change of style are joined where the text layer holds them whole."""

from __future__ import annotations

from reading.styled_words import join_styled_words


def test_a_superscript_and_the_comma_after_it_stay_on_their_word() -> None:
    words = {"Jeffrey", "G.", "Shaffer1.,", "Donald", "S.", "Grant2.,"}
    md = "Jeffrey G. Shaffer<sup>1.</sup> , Donald S. Grant<sup>2.</sup> ,"
    assert join_styled_words(md, words) == (
        "Jeffrey G. Shaffer<sup>1.</sup>, Donald S. Grant<sup>2.</sup>,"
    )


def test_brackets_and_stops_round_a_styled_word_are_joined() -> None:
    words = {"Function", "Usage", "(WRKFCNUSG)", "the", "security", "policy."}
    md = "Function Usage ( **WRKFCNUSG** )\n\nthe _security policy_ ."
    assert join_styled_words(md, words) == (
        "Function Usage (**WRKFCNUSG**)\n\nthe _security policy_."
    )


def test_spaces_the_page_had_are_kept() -> None:
    # "Boldtext" is no word of the page; plain words are never joined, even when their
    # join is one ("in to" and "into"), since only a style change cuts a word.
    words = {"Bold", "text", "in", "to", "into"}
    md = "**Bold** text went in to it"
    assert join_styled_words(md, words) == md
    assert join_styled_words("", words) == ""
    assert join_styled_words("a  **b** c", {"ab"}) == "a  **b** c"


def test_form_blanks_and_lone_marks_stay_apart() -> None:
    # A blank has no text of its own: "Name:" and "Name:________" are not one word.
    words = {"Name:", "Date:", "Name:________", "word", "alone", "23"}
    for md in ("Name: ________ Date: ________", "word _ alone", "2 ** 3", "  - **x** y"):
        assert join_styled_words(md, words) == md
