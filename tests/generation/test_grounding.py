from __future__ import annotations

import pytest

from core.llm import Completion
from core.grounding import (
    REFUSAL,
    citation_ids,
    ground,
    number_contexts,
    numbers_supported,
    reply_text,
    split_sentences,
    unfinished_cut,
)

PASSAGES = {
    "S1": "The gateway accepts a main input of 12 to 24 V DC through terminal X1.",
    "S2": "Up to 8 sensors can be connected to the RS-485 bus.",
}


def sim(value: float = 0.6):
    return lambda sentence, window: value


def test_split_sentences_keeps_trailing_citations() -> None:
    out = split_sentences("The input is 12 to 24 V DC. [S1] Up to 8 sensors fit [S2]. Version 2.4.1 is current.")
    assert [(s.text, s.cited) for s in out] == [
        ("The input is 12 to 24 V DC.", ["S1"]),
        ("Up to 8 sensors fit.", ["S2"]),
        ("Version 2.4.1 is current.", []),
    ]


def test_citation_id_forms() -> None:
    assert citation_ids("a [S1, S3] b [2] (S4) S5") == ["S1", "S3", "S2", "S4", "S5"]


def test_supported_sentence_keeps_its_citation() -> None:
    g = ground("The gateway accepts 12 to 24 V DC [S1].", PASSAGES, similarity=sim(), min_support=0.45)
    assert g.text == "The gateway accepts 12 to 24 V DC. [S1]"
    assert g.coverage == 1.0 and g.cited_ids == ["S1"]


def test_phantom_and_off_by_one_ids_are_rejected_and_reattributed() -> None:
    g = ground(
        "Up to 8 sensors can be connected to the bus [S3]. Terminal X1 takes 12 to 24 V DC [S0].",
        PASSAGES,
        similarity=sim(),
        min_support=0.45,
    )
    assert set(g.invalid_citations) == {"S3", "S0"}
    assert g.cited_ids == ["S2", "S1"]
    assert "[S3]" not in g.text and "[S0]" not in g.text


def test_changed_number_is_unsupported_and_removed() -> None:
    g = ground(
        "Up to 16 sensors can be connected to the RS-485 bus [S2]. The input is 12 to 24 V DC [S1].",
        PASSAGES,
        similarity=sim(0.9),
        min_support=0.45,
    )
    assert "16" not in g.text and g.coverage == 0.5
    assert g.text == "The input is 12 to 24 V DC. [S1]"


def test_unrelated_sentence_removed() -> None:
    g = ground("Paris is the capital of France [S1].", PASSAGES, similarity=sim(0.05), min_support=0.45)
    assert g.text == "" and g.coverage == 0.0


def test_model_refusal_is_recognised() -> None:
    g = ground(REFUSAL, PASSAGES, similarity=sim(), min_support=0.45)
    assert g.refused and g.coverage is None


def test_repeated_sentences_collapse() -> None:
    text = "Up to 8 sensors can be connected [S2]. Up to 8 sensors can be connected [S2]."
    g = ground(text, PASSAGES, similarity=sim(), min_support=0.45)
    assert g.text.count("Up to 8") == 1


def test_number_must_appear_near_the_matching_words() -> None:
    passage = (
        "Up to 8 sensors can be connected to the RS-485 bus. The bus is terminated with 120 Ohm. "
        "Cable length is at most 10 m per segment."
    )
    g = ground("The RS-485 bus takes 10 sensors [S1].", {"S1": passage}, similarity=sim(0.8), min_support=0.45)
    assert g.text == "" and g.coverage == 0.0


def test_on_topic_sentence_with_foreign_words_is_removed() -> None:
    passage = "Hold the RESET button for 10 s until all LEDs blink to restore factory settings."
    g = ground("Restart the router and unplug the modem [S1].", {"S1": passage}, similarity=sim(0.9), min_support=0.45)
    assert g.text == ""


def test_number_in_the_window_that_counts_something_else_does_not_support() -> None:
    # Two list items in one window: "10" is there, but it counts Mbit/s, not sensors.
    passage = (
        "- RS-485 sensor bus (Modbus RTU master) for up to 8 sensors, galvanically isolated (1.5 kV)\n"
        "- 10/100 Mbit/s Ethernet with Modbus TCP, MQTT (with TLS) and HTTPS REST API"
    )
    wrong = ground(
        "The RS-485 bus supports up to 10 sensors [S1].", {"S1": passage}, similarity=sim(0.8), min_support=0.45
    )
    assert wrong.text == "" and wrong.coverage == 0.0
    right = ground(
        "The RS-485 bus supports up to 8 sensors [S1].", {"S1": passage}, similarity=sim(0.8), min_support=0.45
    )
    assert right.text == "The RS-485 bus supports up to 8 sensors. [S1]"
    ethernet = ground(
        "The Ethernet port runs at 10/100 Mbit/s [S1].", {"S1": passage}, similarity=sim(0.8), min_support=0.45
    )
    assert ethernet.coverage == 1.0


def test_number_contexts_and_a_bare_number() -> None:
    assert number_contexts("Input: 12 to 24 V DC.") == {"12": [{"input", "v", "dc"}], "24": [{"input", "v", "dc"}]}
    assert numbers_supported("It is 8.", "Up to 8 sensors fit.")  # nothing beside the number: present is enough
    assert not numbers_supported("It is 9.", "Up to 8 sensors fit.")


@pytest.mark.parametrize(
    "text,kept",
    [
        ("# Bus\n\nUp to 8 sensors [S1]. The default serial settings of", "# Bus\n\nUp to 8 sensors [S1]."),
        ("# Bus\nThe default serial settings of", "# Bus"),
        ("- one [S2]\n- tw", "- one [S2]"),
        ('A (see [S1]). B is "x." C', 'A (see [S1]). B is "x."'),
        ("The voltage is 1.5", ""),  # a decimal point ends no sentence
        ("A is B [S1]. The voltage is 1.5 V", "A is B [S1]."),
        ("Done? Yes! [S1] [S2]\n", "Done? Yes! [S1] [S2]"),
    ],
)
def test_unfinished_cut_keeps_up_to_the_last_finished_sentence(text: str, kept: str) -> None:
    assert unfinished_cut(text) == kept


def test_reply_text_cuts_only_a_reply_the_token_limit_ended() -> None:
    def reply(tokens: int) -> Completion:
        return Completion(text="A is B [S1]. The default", model="m", prompt_tokens=1, completion_tokens=tokens, cost=0)

    assert reply_text(reply(64), 64) == "A is B [S1]."
    assert reply_text(reply(63), 64) == "A is B [S1]. The default"  # the model stopped: grounding alone decides


def test_markers_after_the_last_sentence_of_a_line_stay_with_it() -> None:
    cited = [(s.text, s.cited) for s in split_sentences("Up to 8 sensors. [S1]\nA is B. C is D. [S2] [S1]")]
    assert cited == [("Up to 8 sensors.", ["S1"]), ("A is B.", []), ("C is D.", ["S2", "S1"])]
