"""The extractive reader: scoring order, quoting, thresholds, unit line spans (scripted embeddings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core import llm
from core.markup import markdown_html
from generation import reader
from generation.reader import choosing
from generation.reader import codes
from generation.reader import scoring
from generation.reader import words
from core.config import FoundryConfig
from core.units import passage_units
from generation.reader import Passage
from generation.reader.weights import weights_for

# The scripted model "m" scores with the default embedding model's weights, a word only the heading path or title
# holds counting as one held, so that ``Quote.lexical`` reads as the share of the question's words held.
W = replace(weights_for(FoundryConfig().embedding.model), under=1.0)

MANUAL = (
    "The sensor bus is RS-485.\nA maximum of 8 sensors can be connected to the bus.\nThe cable shield connects to SH."
)
DATASHEET = "The housing is IP20.\nIt weighs 210 g."


@pytest.fixture(autouse=True)
def scripted_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoring, "weights_for", lambda model: W)


@pytest.fixture
def embed(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[float]]:
    """Vectors by text; an unknown text gets a vector orthogonal to every question."""
    table: dict[str, list[float]] = {}

    def fake(texts: list[str], *, model: str, batch_size: int = 64, kind: str = "passage") -> list[list[float]]:
        return [table.get(t, [0.0, 0.0, 1.0]) for t in texts]

    monkeypatch.setattr(llm, "embed", fake)
    return table


def passages() -> list[Passage]:
    return [
        Passage("S1", MANUAL, 40, 42, rank=1, source="manual.md"),
        Passage("S2", DATASHEET, 7, 8, page_start=2, page_end=2, rank=2, source="datasheet.pdf"),
    ]


def test_best_unit_is_quoted_verbatim_with_its_own_lines(embed: dict) -> None:
    q = "How many sensors can be connected?"
    embed.update({q: [1.0, 0.0, 0.0], "A maximum of 8 sensors can be connected to the bus.": [0.9, 0.1, 0.0]})
    reading = reader.read(q, passages(), embedding_model="m", max_units=3)
    assert reading.quotes[0].unit.text == "A maximum of 8 sensors can be connected to the bus."
    assert reading.quotes[0].lines == (41, 41)
    assert reading.text.startswith("A maximum of 8 sensors can be connected to the bus. [S1]")


def test_table_rows_are_scored_and_shown_under_their_header_row(embed: dict) -> None:
    """A row is read with its header row (which names its columns) and shown under it as a Markdown table, a blank
    line apart from the sentence before it; each row keeps its own line and citation."""
    q = "What is the power consumption?"
    header = "Parameter | Min. | Max. | Unit"
    rows = ["Power consumption, busy | - | 4.0 | W", "Power consumption, idle | - | 1.0 | W"]
    text = "\n".join(["The power consumption is measured at 24 V.", header, *rows])
    embed.update(
        {
            q: [1.0, 0.0, 0.0],
            f"{header}\n{rows[0]}": [0.95, 0.05, 0.0],
            f"{header}\n{rows[1]}": [0.9, 0.1, 0.0],
            "The power consumption is measured at 24 V.": [0.85, 0.15, 0.0],
        }
    )
    reading = reader.read(q, [Passage("S1", text, 10, 13, page_start=2, page_end=2)], embedding_model="m", max_units=3)
    assert [quote.unit.kind for quote in reading.quotes] == ["sentence", "row", "row"]
    assert [quote.lines for quote in reading.quotes] == [(10, 10), (12, 12), (13, 13)]
    assert reading.text.splitlines() == [
        "The power consumption is measured at 24 V. [S1]",
        "",
        header,
        "--- | --- | --- | ---",
        f"{rows[0]} [S1]",
        f"{rows[1]} [S1]",
    ]


def test_lexical_overlap_breaks_a_cosine_tie(embed: dict) -> None:
    q = "What is the housing rated?"
    embed.update({q: [1.0, 0.0, 0.0], "The housing is IP20.": [0.5, 0.5, 0.0], "It weighs 210 g.": [0.5, 0.5, 0.0]})
    scored = reader.units_score(q, passages(), embedding_model="m")
    assert scored[0].unit.text == "The housing is IP20." and scored[0].lexical == 0.5
    assert scored[0].score > scored[1].score


def test_words_carried_into_a_follow_up_count_as_one_topic_word(embed: dict) -> None:
    typed = "What is it made of?"
    question = f"{typed} (AX-200 housing size)"
    text = "The housing is made of polycarbonate."
    embed.update({question: [1.0, 0.0, 0.0], text: [0.5, 0.5, 0.0]})
    found = [Passage("S1", text, 1, 1)]
    as_follow_up = reader.units_score(question, found, embedding_model="m", typed=typed)[0]
    assert as_follow_up.lexical == 1.0  # "made", and the topic: "housing"
    assert reader.units_score(question, found, embedding_model="m")[0].lexical == pytest.approx(2 / 4)
    embed.update({typed: [0.0, 1.0, 0.0], text: [0.1, 0.9, 0.0]})  # closer to what was typed
    assert reader.units_score(question, found, embedding_model="m", typed=typed)[0].cosine == 0.9
    elsewhere = reader.units_score(
        question, [Passage("S1", "It is made to order.", 1, 1)], embedding_model="m", typed=typed
    )
    assert elsewhere[0].lexical == pytest.approx(1 / 2)  # the topic held nowhere


def test_what_a_follow_up_states_before_it_asks_counts_with_the_carried_words(embed: dict) -> None:
    typed = "We keep spares in a warehouse. What's the range?"
    question = f"{typed} (AX-200)"
    found = [Passage("S1", "Store spare devices in the original packaging at -40 to +85 °C.", 1, 1)]
    # Asked: "range"; "keep", "spares", "warehouse" (said, not asked) and "AX-200" (carried): one word, held by "spare".
    assert reader.units_score(question, found, embedding_model="m", typed=typed)[0].lexical == pytest.approx(1 / 2)
    one = "What's the range for the spares we keep in a warehouse?"  # asked in one sentence, every word is asked
    held = reader.units_score(f"{one} (AX-200)", found, embedding_model="m", typed=one)[0].lexical
    assert held == pytest.approx(1 / 5)
    # a question asked inside a statement: what comes before its question word is said, not asked
    inside = "The warehouse manager needs to know what range applies to spares."
    held = reader.units_score(f"{inside} (AX-200)", found, embedding_model="m", typed=inside)[0].lexical
    assert held == pytest.approx(1 / 4)  # "range", "applies", "spares" asked, with the rest and "AX-200" one word


def test_a_unit_about_another_code_does_not_hold_a_follow_ups_topic(embed: dict) -> None:
    typed = "how do I fix it?"
    question = f"{typed} (error code E05)"
    e05 = "**E05 – Firmware image rejected.** The file is damaged. Download the image again."
    e06 = "**E06 – Configuration memory checksum error.** It is damaged. Restore the configuration from a backup."
    scored = {
        q.unit.text: q.lexical
        for q in reader.units_score(
            question, [Passage("S1", f"{e05}\n\n{e06}", 1, 3)], embedding_model="m", typed=typed
        )
    }
    # Both sentences after the run-in headings say nothing of fixing; only E05's holds the topic ("error" is E06's).
    assert scored["Download the image again."] == pytest.approx(1 / 2)
    assert scored["Restore the configuration from a backup."] == 0.0
    # a code of another series is no other code: the AX-200 in a title is no other RS-485
    cable = [Passage("S1", "Use shielded twisted-pair cable.", 1, 1, under="AX-200 Manual > Wiring")]
    held = reader.units_score("what impedance? (cable RS-485)", cable, embedding_model="m", typed="what impedance?")
    assert held[0].lexical == pytest.approx(1 / 2)  # "impedance" not held; the topic held by "cable"


def test_a_code_typed_without_hyphens_is_read_as_the_passages_write_it(embed: dict) -> None:
    found = [Passage("S1", "Connect the AX-200 to the RS-485 bus. DIP switch S1-2 sets the bias.", 1, 1)]
    assert codes._as_written(["is the ax200 ok on rs485?"], found) == ["is the AX-200 ok on RS-485?"]
    assert codes._as_written(["what does s12 do?"], found) == ["what does s12 do?"]  # too short to tell
    embed["which bus does the AX-200 use?"] = [1.0, 0.0, 0.0]
    typed = reader.read("which bus does the ax200 use?", found, embedding_model="m", max_units=1)
    assert typed.best == reader.read("which bus does the AX-200 use?", found, embedding_model="m", max_units=1).best


def test_a_negations_contraction_is_no_word_a_unit_must_hold(embed: dict) -> None:
    found = [Passage("S1", "The gateway falls back to its static address if no DHCP server answers.", 1, 1)]
    lexical = {
        q: reader.units_score(q, found, embedding_model="m")[0].lexical
        for q in ("what if the dhcp server doesnt answer", "what if the dhcp server doesn't answer")
    }
    assert set(lexical.values()) == {1.0}, lexical  # "dhcp", "server", "answer"


def test_a_measure_asked_by_its_adjective_or_verb_is_held_by_its_noun_and_its_noun_by_its_verb(embed: dict) -> None:
    found = [Passage("S1", "Weight 210 g", 1, 1, under="AX-200 Datasheet")]
    for question in ("How much does the AX-200 weigh?", "How heavy is the AX-200?"):
        held = reader.units_score(question, found, embedding_model="m")[0].lexical
        assert held == 1.0, question
    assert reader.units_score("How long is the cable?", found, embedding_model="m")[0].lexical == 0.0
    weighs = [Passage("S1", "The housing weighs 210 g.", 1, 1)]  # and the noun by its verb
    assert reader.units_score("What is the weight of the housing?", weighs, embedding_model="m")[0].lexical == 1.0
    field = [Passage("S1", "interfaces[0].max_bus_length_m: 1000", 1, 1)]
    assert reader.units_score("maximum bus length?", field, embedding_model="m")[0].lexical == 1.0
    limit = [Passage("S1", "environmental.storage_temperature_c.min: -40", 1, 1)]  # a range by its limits
    assert reader.units_score("storage temperature range?", limit, embedding_model="m")[0].lexical == 1.0
    waits = [Passage("S1", "DHCP: off\nThe gateway falls back if no DHCP server answers within 60 s.", 1, 2)]
    held = {q.unit.text: q.lexical for q in reader.units_score("How long does DHCP wait?", waits, embedding_model="m")}
    assert held == {"DHCP: off": pytest.approx(1 / 3), waits[0].text.splitlines()[1]: pytest.approx(2 / 3)}  # a time
    material = [Passage("S1", "Housing material Polycarbonate, UL94 V-0", 1, 1)]  # what it is made of
    assert reader.units_score("What is the housing made of?", material, embedding_model="m")[0].lexical == 1.0


def test_a_list_item_reads_as_well_as_its_best_sentence(embed: dict) -> None:
    q = "maximum bus length"
    item = "- The maximum bus length is 1,000 m. At higher baud rates it is reduced."
    embed.update({q: [1.0, 0.0, 0.0], "The maximum bus length is 1,000 m.": [0.9, 0.1, 0.0]})
    quote = reader.units_score(q, [Passage("S1", item, 1, 1)], embedding_model="m")[0]
    assert quote.unit.text == item and quote.cosine == pytest.approx(0.9)  # the item itself embeds far off


def test_codes_and_names_no_passage_mentions() -> None:
    found = [Passage("S1", "The AX-200 polls sensors over RS-485; E03 is a supply fault.", 1, 1, under="Manual > Bus")]
    assert reader.unmentioned("What is the MTBF of the AX200 and its QoS on rs485, and E03, E07?", found) == [
        "MTBF",
        "QoS",
        "E07",
    ]
    assert reader.unmentioned("Can firmware 2.1.3 switch 230 V on the Bus?", found) == []  # numbers and words
    assert reader.unmentioned("Known bug of the 2.1.x and 2.X firmware?", found) == []  # a series of versions


def test_words_meet_by_their_stems() -> None:
    assert reader.stems("The housing weighs 210 g; stored spares") == reader.stems("house weigh store spare")


def test_a_version_is_a_word_the_answer_must_hold(embed: dict) -> None:
    assert reader.stems("Fixed in 2.4.1. At 10.8 V, AX-200 sensor 3") == {"fix", "2.4.1", "10.8", "ax-200", "sensor"}
    q = "When was firmware 2.4.1 released?"
    older, newer = "Version 2.4.0 - released 2026-05-12", "Version 2.4.1 - released 2026-06-09"
    embed.update({q: [1.0, 0.0, 0.0], older: [0.9, 0.44, 0.0], newer: [0.9, 0.44, 0.0]})  # alike to the model
    found = [Passage("S1", older, 9, 9, rank=1), Passage("S2", newer, 6, 6, rank=2)]
    assert reader.read(q, found, embedding_model="m", max_units=1).text == f"{newer} [S2]"


def test_the_passages_opening_with_a_version_the_question_names_are_read_first() -> None:
    asked = reader.versions("When was 2.4.1 released, and what changed below 10.8 V?")
    assert asked == {"2.4.1", "10.8"}
    notes = "Version 2.4.1 - released 2026-06-09\nMaintenance release. Supply below 10.8 V: E03."
    assert reader.version_order(asked, "Release notes", notes) == 1  # 10.8 is not in its first line
    assert reader.version_order({"2.4.1"}, "Release notes", notes) == 0
    assert reader.version_order({"2.4.1"}, "Release notes > Version 2.4.1", "Fixed: the BUS LED.") == 0
    assert reader.version_order({"2.4.1"}, "Release notes", "Version 2.4.0\nKnown issue (fixed in 2.4.1).") == 1
    assert reader.version_order({"2.4.1"}, "Release notes", "Version 2.4.0 - released 2026-05-12") == 2
    assert reader.version_order(set(), "Release notes", "anything") == 0


def test_how_much_what_about_and_what_does_a_code_mean_ask_with_no_word_the_answer_must_hold(
    embed: dict,
) -> None:
    found = [Passage("S1", "The housing weighs 210 g.", 1, 1)]
    for q in ("How much does the housing weigh?", "how many housings weigh", "How often is the housing weighed?"):
        assert reader.units_score(q, found, embedding_model="m")[0].lexical == 1.0, q
    assert reader.units_score("How much is the housing?", found, embedding_model="m")[0].lexical == 1.0
    for q in ("What about the housing?", "how about the housing"):  # the lead asks of the housing, names no word
        assert reader.units_score(q, found, embedding_model="m")[0].lexical == 1.0, q
    assert reader.units_score("What does the housing cost?", found, embedding_model="m")[0].lexical == 0.5
    code = [Passage("S1", "**E03 – Supply voltage out of range.** Check the supply.", 1, 1)]
    for q in ("What does E03 mean?", "what is meant by E03"):  # the verb asks what E03 is, which the answer says
        assert reader.units_score(q, code, embedding_model="m")[0].lexical == 1.0, q
    assert reader.units_score("What is the mean E03 duration?", code, embedding_model="m")[0].lexical < 1.0
    loss = [Passage("S1", "The loss cost France its colonies.", 1, 1)]  # no code or name is meant: "mean" asks
    assert reader.units_score("What did the loss mean to France?", loss, embedding_model="m")[0].lexical == 2 / 3


def test_a_unit_that_tells_nothing_the_question_does_not_is_never_quoted(embed: dict) -> None:
    specs = "model: AX-200\nfirmware_version: 2.4.1\nweight_g: 210"
    units = {
        q.unit.text
        for q in reader.units_score("How much does the AX-200 cost?", [Passage("S1", specs, 1, 3)], embedding_model="m")
    }
    assert units == {"firmware_version: 2.4.1", "weight_g: 210"}  # "model: AX-200" only names what is asked about
    asked_again = reader.units_score(
        "When was firmware 2.4.1 released?", [Passage("S1", specs, 1, 3)], embedding_model="m"
    )
    assert {q.unit.text for q in asked_again} == {"model: AX-200", "weight_g: 210"}
    fcc = [Passage("S1", "certifications[2]: FCC Part 15, Class A", 1, 1)]  # "A" answers, though no word
    assert reader.units_score("Which FCC Part 15 class does it have?", fcc, embedding_model="m")


def test_a_word_only_the_heading_or_title_holds_counts_for_the_unit(embed: dict) -> None:
    q = "What does the AX-200 housing weigh?"
    text = "The housing weighs 210 g."
    embed.update({q: [1.0, 0.0, 0.0], text: [0.5, 0.5, 0.0], "Packed, it is 300 g.": [0.5, 0.5, 0.0]})
    scored = reader.units_score(
        q,
        [Passage("S1", "Packed, it is 300 g.", 1, 1), Passage("S2", text, 1, 1, rank=2, under="AX-200 Manual")],
        embedding_model="m",
    )
    assert scored[0].unit.text == text and scored[0].lexical == 1.0
    bare = reader.units_score(q, [Passage("S2", text, 1, 1)], embedding_model="m")
    assert bare[0].lexical == pytest.approx(2 / 3)


def test_a_line_that_is_only_a_heading_of_its_passage_is_never_quoted(embed: dict) -> None:
    # A PDF's text keeps its headings ("2.1 Power"): it names what follows and answers nothing.
    q = "How much power does it consume?"
    text = "2.1 Power\nPower consumption (gateway only) 2.5 W typical, 4.0 W max."
    embed.update({q: [1.0, 0.0, 0.0], "2.1 Power": [1.0, 0.0, 0.0], text.splitlines()[1]: [0.6, 0.8, 0.0]})
    found = [Passage("S1", text, 10, 11, under="Datasheet > 2 Electrical characteristics > 2.1 Power")]
    reading = reader.read(q, found, embedding_model="m", max_units=3)
    assert [quote.unit.text for quote in reading.quotes] == [text.splitlines()[1]]
    assert [q.unit.text for q in reader.units_score(q, [Passage("S1", text, 10, 11)], embedding_model="m")][0] == (
        "2.1 Power"  # no heading path: a line like any other
    )


def test_only_units_near_the_best_are_added_and_grouped_per_passage_in_source_order(embed: dict) -> None:
    q = "zzz"  # no word in common: cosine decides
    embed.update(
        {
            q: [1.0, 0.0, 0.0],
            "The cable shield connects to SH.": [0.8, 0.0, 0.6],
            "The sensor bus is RS-485.": [0.78, 0.0, 0.62],
            "The housing is IP20.": [0.3, 0.0, 0.95],
        }
    )
    reading = reader.read(q, passages(), embedding_model="m", max_units=3)
    assert [x.unit.text for x in reading.quotes] == ["The sensor bus is RS-485.", "The cable shield connects to SH."]
    assert reading.text == "The sensor bus is RS-485. [S1] The cable shield connects to SH. [S1]"


def test_a_unit_further_down_is_quoted_for_a_question_word_the_better_ones_lack(embed: dict) -> None:
    q = "What happens when the measurement buffer is full?"
    named = "Measurements are written to the internal buffer."
    answers = "When the buffer is full, the oldest values are overwritten."
    unrelated = "Measurements in the buffer are kept at a restart."
    text = f"{named}\n{answers}\n{unrelated}"
    # Cosines 0.9 / 0.7 / 0.7: the answer and the unrelated unit trail the best by more than NEAR_BEST; of the
    # two, only the answer holds a word ("full") the best unit lacks.
    embed.update({q: [1.0, 0.0, 0.0], named: [0.9, 0.44, 0.0], answers: [0.7, 0.71, 0.0], unrelated: [0.7, 0.71, 0.0]})
    scored = reader.units_score(q, [Passage("S1", text, 1, 3)], embedding_model="m")
    assert scored[0].unit.text == named and scored[0].score - 0.25 < scored[1].score < scored[0].score - 0.12
    reading = reader.read(q, [Passage("S1", text, 1, 3)], embedding_model="m", max_units=3)
    assert [x.unit.text for x in reading.quotes] == [named, answers]


def test_a_question_asking_a_value_quotes_the_best_unit_further_down_that_states_one(embed: dict) -> None:
    q = "and the delay, what range can I set? (alarm)"
    named = "For every channel you can set a threshold, a hysteresis and an alarm delay."
    value = "You can set the delay from 0 s to 600 s, default 0 s."
    then = "You can set the delay to start after 3 polls."
    bare = "You can set the delay to restart it."
    text = f"{named}\n{value}\n{then}\n{bare}"
    # The further units, lacking "alarm" (a quarter of this question's words, a third of the next one's), trail the
    # best by more than NEAR_BEST and within COVER_MARGIN for both, and hold no question word it lacks; ``value`` is the
    # best of those stating a value, ``bare`` states none.
    trails = 0.185 - 7 * W.lexical / 24  # midway: (0.12 - lexical / 4 + 0.25 - lexical / 3) / 2

    def at(cosine: float) -> list[float]:
        return [cosine, (1 - cosine**2) ** 0.5, 0.0]

    embed.update({q: [1.0, 0.0, 0.0], named: at(0.8), value: at(0.8 - trails), then: at(0.795 - trails)})
    embed[bare] = at(0.71 - trails)
    found = [Passage("S1", text, 1, 4)]
    reading = reader.read(q, found, embedding_model="m", max_units=3)
    scores = {x.unit.text: x.score for x in reading.scored}
    assert scores[named] - choosing.COVER_MARGIN < scores[then] < scores[value] < scores[named] - choosing.NEAR_BEST
    assert [x.unit.text for x in reading.quotes] == [named, value]  # once a value is stated, no further one
    assert reading.best == scores[named]  # the threshold still reads the best unit
    # "what can it switch?" asks a capacity: a value too
    embed["what can it switch? (alarm delay)"] = [1.0, 0.0, 0.0]
    capacity = reader.read("what can it switch? (alarm delay)", found, embedding_model="m", max_units=3)
    assert [x.unit.text for x in capacity.quotes] == [named, value]
    # A question asking no value quotes the best unit alone.
    embed["Which settings does an alarm delay have?"] = [1.0, 0.0, 0.0]
    plain = reader.read("Which settings does an alarm delay have?", found, embedding_model="m", max_units=3)
    assert [x.unit.text for x in plain.quotes] == [named]


def test_a_labelled_value_is_quoted_as_the_sentence_stating_it_when_one_scores_near(embed: dict) -> None:
    q = "How long can the bus be?"
    field = "interfaces[0].max_bus_length_m_at_9600_baud: 1000"
    prose = "The maximum bus length is 1,000 m at 9600 baud."
    other = "Up to 1,000 readings are kept."  # the number, but none of the key's words
    embed.update({q: [1.0, 0.0, 0.0], "interfaces 0 max bus length m at 9600 baud: 1000": [0.2, 0.98, 0.0]})
    near = 0.125 + W.lexical  # ``other`` holds no question word: it embeds closer than the prose by about as much
    embed.update({prose: [0.05, 0.999, 0.0], other: [near, (1 - near**2) ** 0.5, 0.0]})
    found = [Passage("S1", field, 1, 1, rank=1, source="specs.json"), Passage("S2", f"{other}\n{prose}", 5, 6, rank=2)]
    reading = reader.read(q, found, embedding_model="m", max_units=1)
    scores = {x.unit.text: x.score for x in reading.scored}
    assert scores[field] - choosing.COVER_MARGIN < scores[prose] < scores[other] < scores[field]
    assert [x.unit.text for x in reading.quotes] == [prose] and reading.best == scores[field]
    embed[prose] = [-0.1, 0.995, 0.0]  # too far below: the value is quoted as it is labelled
    assert [x.unit.text for x in reader.read(q, found, embedding_model="m", max_units=1).quotes] == [field]


def test_a_follow_up_asking_for_the_other_one_never_quotes_the_answer_before_it_again(embed: dict) -> None:
    typed, question = "and the other switch?", "and the other switch? (DIP switch S1-1)"
    quoted = ("DIP switch S1-1 switches the bus termination.",)
    bias = "DIP switch S1-2 switches the fail-safe bias."
    embed.update({typed: [1.0, 0.0, 0.0], question: [1.0, 0.0, 0.0], quoted[0]: [0.95, 0.31, 0.0]})
    embed[bias] = [0.8, 0.6, 0.0]
    found = [Passage("S1", f"{quoted[0]}\n{bias}", 1, 2)]
    reading = reader.read(question, found, embedding_model="m", max_units=1, typed=typed, quoted=quoted)
    assert reading.text == f"{bias} [S1]"
    # Asked without "other", the sentence quoted before is still the best answer.
    that, again = "and that switch?", "and that switch? (DIP switch S1-1)"
    embed.update({that: [1.0, 0.0, 0.0], again: [1.0, 0.0, 0.0]})
    reading = reader.read(again, found, embedding_model="m", max_units=1, typed=that, quoted=quoted)
    assert reading.text == f"{quoted[0]} [S1]"


def test_the_label_line_over_a_quote_is_quoted_when_it_names_what_the_question_asks_and_the_quotes_do_not(
    embed: dict,
) -> None:
    text = "Version 2.4.1 - released 2026-06-09\nMaintenance release. Fixed: the BUS LED stayed amber."
    fixed = "Fixed: the BUS LED stayed amber."
    which = "Which version fixed the BUS LED staying amber?"
    was = "Was the BUS LED staying amber fixed?"
    embed.update({which: [1.0, 0.0, 0.0], was: [1.0, 0.0, 0.0], fixed: [0.9, 0.44, 0.0]})
    found = [Passage("S1", text, 7, 8, source="release-notes.txt")]
    reading = reader.read(which, found, embedding_model="m", max_units=1)
    # The label scores far below the sentence (it shares no vector with the question); it is quoted for "version".
    assert reading.scored[0].unit.text == fixed and reading.scored[0].score - reading.scored[1].score > 0.25
    assert reading.text == f"Version 2.4.1 - released 2026-06-09 [S1] {fixed} [S1]"
    assert [q.lines for q in reading.quotes] == [(7, 7), (8, 8)]
    assert reader.read(was, found, embedding_model="m", max_units=1).text == f"{fixed} [S1]"
    # A word the document's title holds is named by the label too: the label says which bug fix.
    bugfix = "Which bugfix fixed the BUS LED staying amber?"
    embed[bugfix] = [1.0, 0.0, 0.0]
    titled = [Passage("S1", text, 7, 8, source="release-notes.txt", under="Bugfix Release Notes")]
    assert reader.read(bugfix, found, embedding_model="m", max_units=1).text == f"{fixed} [S1]"
    assert reader.read(bugfix, titled, embedding_model="m", max_units=1).text.startswith("Version 2.4.1")
    # Another quote naming "version" does not say which version fixed it: the label still stands over its sentence.
    note = "Note: firmware versions 2.4.0 and earlier may keep the BUS LED amber."
    embed[note] = [0.9, 0.44, 0.0]
    both = reader.read(which, [*found, Passage("S2", note, 3, 3, source="manual.md")], embedding_model="m", max_units=2)
    assert both.text == f"Version 2.4.1 - released 2026-06-09 [S1] {fixed} [S1]\n{note} [S2]"


def test_a_question_asking_which_version_quotes_the_label_numbering_it_over_a_quote_naming_none(embed: dict) -> None:
    banks = "New: firmware is kept in two memory banks; an interrupted update falls back to the previous version."
    text = f"Version 2.2.0 - released 2026-01-27\n{banks}"
    found = [Passage("S1", text, 15, 16, source="release-notes.txt")]
    which = "Which firmware version introduced that behaviour? (power update)"
    embed.update({which: [1.0, 0.0, 0.0], banks: [0.9, 0.44, 0.0]})
    # the quote holds "firmware" and "version" itself, yet names no version: the label's number tells which
    assert reader.read(which, found, embedding_model="m", max_units=1).text.startswith("Version 2.2.0 - released")
    numbered = f"New in 2.2.0: {banks[5:]}"
    embed[numbered] = [0.9, 0.44, 0.0]
    found = [Passage("S1", f"Version 2.2.0 - released 2026-01-27\n{numbered}", 15, 16, source="release-notes.txt")]
    assert reader.read(which, found, embedding_model="m", max_units=1).text == f"{numbered} [S1]"
    plain = "What happens when an update is interrupted? (power update)"  # asks no version
    embed[plain] = [1.0, 0.0, 0.0]
    found = [Passage("S1", text, 15, 16, source="release-notes.txt")]
    assert reader.read(plain, found, embedding_model="m", max_units=1).text == f"{banks} [S1]"


def test_quoted_list_items_are_a_list_apart_from_the_sentences_around_them(embed: dict) -> None:
    q = "anything"
    text = "The LEDs show the state.\n\n- **NET** green: link up.\n- **NET** off: no link.\n\nRUN blinks at start."
    embed[q] = [0.0, 0.0, 1.0]  # every unit scores the same
    reading = reader.read(q, [Passage("S1", text, 1, 6)], embedding_model="m", max_units=4)
    assert reading.text == (
        "The LEDs show the state. [S1]\n\n- **NET** green: link up. [S1]\n- **NET** off: no link. [S1]\n\n"
        "RUN blinks at start. [S1]"
    )
    html = markdown_html(reading.text, line_breaks=True)  # as the ask page renders it
    assert html.count("<li>") == 2 and "RUN blinks" not in html.split("</ul>")[0]


def test_max_units_caps_the_quotes(embed: dict) -> None:
    q = "anything"
    embed[q] = [0.0, 0.0, 1.0]  # every unit scores the same
    assert len(reader.read(q, passages(), embedding_model="m", max_units=2).quotes) == 2


def test_excluded_units_are_never_quoted_again(embed: dict) -> None:
    q = "How many sensors can be connected?"
    best = "A maximum of 8 sensors can be connected to the bus."
    embed.update({q: [1.0, 0.0, 0.0], best: [1.0, 0.0, 0.0]})
    reading = reader.read(q, passages(), embedding_model="m", max_units=1, exclude={best.lower()})
    assert reading.quotes and reading.quotes[0].unit.text != best


def test_a_chunk_whose_lines_do_not_map_cites_its_whole_span(embed: dict) -> None:
    q = "weight"
    embed.update({q: [1.0, 0.0, 0.0], "It weighs 210 g.": [1.0, 0.0, 0.0]})
    across_pages = Passage("S1", DATASHEET, 30, 2, page_start=1, page_end=2)
    spread = Passage("S2", DATASHEET, 7, 12)  # two lines of text over six source lines
    for passage in (across_pages, spread):
        quote = reader.read(q, [passage], embedding_model="m", max_units=1).quotes[0]
        assert quote.lines == (passage.line_start, passage.line_end)


def test_no_units_means_no_quotes(embed: dict) -> None:
    reading = reader.read("q", [Passage("S1", "## Heading only", 1, 1)], embedding_model="m", max_units=3)
    assert reading.quotes == [] and reading.best == 0.0 and reading.text == ""


def test_quoted_text_is_the_unit_with_line_breaks_made_spaces(embed: dict) -> None:
    q = "buffer"
    text = "Readings are stored\nin an internal buffer of the gateway."
    embed.update({q: [1.0, 0.0, 0.0]})
    quote = reader.read(q, [Passage("S1", text, 1, 2)], embedding_model="m", max_units=1).quotes[0]
    assert quote.quoted == "Readings are stored in an internal buffer of the gateway." and quote.lines == (1, 2)


def test_a_bare_label_is_never_quoted_alone(embed: dict) -> None:
    q = "wiring rules"
    embed.update({q: [1.0, 0.0, 0.0], "Wiring rules:": [1.0, 0.0, 0.0]})
    text = "Wiring rules:\n\n- Use shielded twisted-pair cable."
    reading = reader.read(q, [Passage("S1", text, 1, 3)], embedding_model="m", max_units=3)
    # the label heads its list: read with the item, quoted above it as it names what the item lacks
    assert [x.unit.text for x in reading.quotes] == ["Wiring rules:", "- Use shielded twisted-pair cable."]
    assert [x.unit.text for x in reading.scored] == ["- Use shielded twisted-pair cable."]
    alone = reader.read(
        q, [Passage("S1", "Wiring rules:\n\nThe bus is a line.", 1, 3)], embedding_model="m", max_units=3
    )
    assert [x.unit.text for x in alone.quotes] == ["The bus is a line."]


def test_a_label_standing_as_a_paragraph_of_its_own_is_never_read_one_opening_a_paragraph_is(embed: dict) -> None:
    q = "What is the shortcut for italic text?"
    text = (
        "Press Ctrl+I to make the selected text italic.\n\nRelated topics\n\nShortcut keys for italic text\n\n"
        "Version 2.4.1 - released 2026-06-09\nMaintenance release."
    )
    reading = reader.read(q, [Passage("S1", text, 1, 8)], embedding_model="m", max_units=5)
    read = [x.unit.text for x in reading.scored]
    assert "Related topics" not in read and "Shortcut keys for italic text" not in read  # headings, links: names
    assert "Version 2.4.1 - released 2026-06-09" in read  # a number, and it opens its paragraph
    assert reading.quotes[0].unit.text == "Press Ctrl+I to make the selected text italic."


def test_a_sentence_standing_alone_above_a_procedure_introduces_it_and_comes_with_its_steps(embed: dict) -> None:
    q = "How can a frame stay on screen but not be printed?"
    intro = "Any frame can be set to a mode which shows it on screen but hides it from printing."
    steps = [
        "1. Select the frame.",
        "2. Choose Format - Frame - Options.",
        "3. Clear the Print check box and click OK.",
    ]
    embed.update({q: [1.0, 0.0, 0.0], intro: [1.0, 0.0, 0.0]})
    reading = reader.read(q, [Passage("S1", "\n\n".join([intro, *steps]), 1, 7)], embedding_model="m", max_units=1)
    assert [x.unit.text for x in reading.quotes] == [intro, *steps]
    assert intro not in [x.unit.text for x in reading.scored]  # read with each step, not alone
    shared = f"Frames hold text. {intro}"  # the paragraph's last sentence introduces nothing on its own
    units = passage_units("\n\n".join([shared, *steps]))
    assert [u.context for u in units if u.kind == "item"] == ["", "", ""]
    bullets = passage_units("\n\n".join([intro, "- Frames can be linked."]))  # a list of facts, no procedure
    assert bullets[1].context == ""


def test_a_heading_line_above_a_list_is_read_with_its_items_and_quoted_above_them(embed: dict) -> None:
    q = "Mit welcher Tastenkombination formatiere ich Text kursiv?"
    text = (
        "So formatieren Sie Text fett\n\n1. Wählen Sie den Text aus.\n\n2. Drücken Sie Strg+Umschalt+F.\n\n"
        "So formatieren Sie Text kursiv\n\n1. Wählen Sie den zu formatierenden Text aus.\n\n2. Drücken Sie Strg+K."
    )
    reading = reader.read(q, [Passage("S1", text, 1, 15)], embedding_model="m", max_units=3)
    assert "So formatieren Sie Text kursiv" not in [x.unit.text for x in reading.scored]
    assert reading.scored[0].unit.context == "So formatieren Sie Text kursiv"
    assert [x.unit.text for x in reading.quotes] == [
        "So formatieren Sie Text kursiv",
        "1. Wählen Sie den zu formatierenden Text aus.",
        "2. Drücken Sie Strg+K.",
    ]


def test_the_sentences_an_earlier_answer_quoted_are_read_as_the_page_or_v1_showed_them() -> None:
    page = "Measurements are written to the internal buffer. [S2]\n- interfaces[0].name: RS-485 sensor bus [S3]"
    v1 = "Measurements are written to the internal buffer. [1]\n\nSources:\n[1] manual.md, The housing weighs 210 g."
    buffer = "Measurements are written to the internal buffer."
    assert reader.quoted_sentences(page) == (buffer, "interfaces[0].name: RS-485 sensor bus")
    assert reader.quoted_sentences(v1) == (buffer,)  # the source list is not a quote
    assert reader.quoted_sentences(f"{buffer} [S1] Ok. [S2] {buffer} [S3]") == (buffer,)  # 3 words or more, once
    table = "Parameter | Min. | Max.\n--- | --- | ---\nPower consumption | - | 4.0 [S1]"
    assert reader.quoted_sentences(table) == ("Power consumption | - | 4.0",)  # the row, not its header


def test_a_follow_up_reads_the_passage_the_turn_it_follows_was_answered_from_first(embed: dict) -> None:
    typed = "And the weight?"
    question = f"{typed} (AX-200 housing)"
    found = [Passage("S1", "The housing weighs 210 g.", 1, 1), Passage("S2", "The gateway weighs 300 g.", 1, 1)]
    for text in ("The housing weighs 210 g.", "The gateway weighs 300 g."):
        embed[text] = [0.5, 0.5, 0.0]
    embed[question] = [1.0, 0.0, 0.0]
    plain = {q.passage.label: q.score for q in reader.units_score(question, found, embedding_model="m", typed=typed)}
    reading = reader.read(question, found, embedding_model="m", max_units=3, typed=typed, near=frozenset({"S1"}))
    scored = {q.passage.label: q.score for q in reading.scored}
    assert scored["S1"] == pytest.approx(plain["S1"] + W.follow) and scored["S2"] == plain["S2"]
    assert reading.audit()["followed"] == ["S1"]
    # A question that stands alone (nothing typed apart from it) is read as it is.
    alone = reader.read(question, found, embedding_model="m", max_units=3, near=frozenset({"S1"}))
    as_is = {q.passage.label: q.score for q in reader.units_score(question, found, embedding_model="m")}
    assert {q.passage.label: q.score for q in alone.scored} == as_is
    assert alone.audit()["followed"] == []


def test_a_follow_up_is_read_as_going_on_from_the_answer_before_it(embed: dict) -> None:
    typed, question = "and once that's full?", "and once that's full? (measurements)"
    quoted = ("Measurements are stored in an internal buffer.",)
    full = "When the buffer is full, the oldest values are overwritten."
    sent = "Buffered values are sent when the network is back."
    embed.update(
        {
            typed: [1.0, 0.0, 0.0],
            question: [1.0, 0.0, 0.0],
            f"{quoted[0]} {typed}": [0.0, 1.0, 0.0],  # the message after the answer it goes on from: the buffer
            full: [0.1, 0.995, 0.0],
            sent: [0.5, 0.0, 0.866],
            quoted[0]: [0.0, 1.0, 0.0],
        }
    )
    found = [Passage("S1", f"{quoted[0]}\n{full}\n{sent}", 1, 3)]
    reading = reader.read(question, found, embedding_model="m", max_units=1, typed=typed, quoted=quoted)
    assert reading.text == f"{full} [S1]"
    by_text = {q.unit.text: q for q in reading.scored}
    assert by_text[full].cosine == pytest.approx(0.995 - W.continues)
    assert by_text[quoted[0]].cosine == 0.0  # the answer's own quote is no answer to what follows it
    assert by_text[sent].cosine == pytest.approx(0.5)
    # Without the answer before it, the message alone reads closest to the other sentence.
    assert reader.read(question, found, embedding_model="m", max_units=1, typed=typed).text == f"{sent} [S1]"


def test_the_meaning_of_a_code_is_read_where_the_code_is_defined(embed: dict) -> None:
    q = "What does E04 mean?"
    note = "Fixed: E04 was reported falsely after a link change."
    entry = "**E04 – Network error.** The Ethernet link is down."
    embed.update({q: [1.0, 0.0, 0.0], note: [0.6, 0.8, 0.0], entry: [0.5, 0.866, 0.0]})  # the note embeds closer
    found = [Passage("S1", note, 13, 13, source="release-notes.txt"), Passage("S2", entry, 177, 177, rank=2)]
    reading = reader.read(q, found, embedding_model="m", max_units=3)
    assert [quote.unit.text for quote in reading.quotes] == [entry]
    assert reading.quotes[0].score == pytest.approx(0.5 + W.lexical + W.defines)
    for text in ("E04: network error", "- `E04` = network error", "E04 means a network error", "| E04 | Network |"):
        assert codes._defines(text, "E04"), text
    for text in ("E045 – another code", "Fixed: E04 – network", "E04 was reported falsely"):
        assert not codes._defines(text, "E04"), text
    assert words._meant_codes("What is meant by MTBF?") == ["MTBF"]
    assert words._meant_codes("How do I fix E04?") == [] and words._meant_codes("What did the loss mean?") == []


def test_what_to_do_is_read_in_an_instruction(embed: dict) -> None:
    typed = "how do I fix it?"
    question = f"{typed} (error E03)"
    note = "Fixed: E04 was reported falsely after a restart."  # "fix" meets "Fixed", and it embeds closer
    remedy = "Check the power supply and the cable cross-section."
    closer = 0.5 + W.instructs / 2  # the note embeds closer by less than an instruction weighs
    embed.update({question: [1.0, 0.0, 0.0], note: [closer, (1 - closer**2) ** 0.5, 0.0], remedy: [0.5, 0.866, 0.0]})
    found = [
        Passage("S1", note, 13, 13, source="release-notes.txt"),
        Passage("S2", remedy, 175, 175, rank=2, under="Manual > Error codes > E03"),
    ]
    reading = reader.read(question, found, embedding_model="m", max_units=1, typed=typed)
    assert [quote.unit.text for quote in reading.quotes] == [remedy]
    assert reading.quotes[0].score == pytest.approx(0.5 + W.lexical / 2 + W.instructs)
    fact = "was it fixed?"  # no instruction asked: no bonus
    embed[f"{fact} (error E03)"] = [1.0, 0.0, 0.0]
    assert (
        reader.read(f"{fact} (error E03)", found, embedding_model="m", max_units=1, typed=fact).quotes[0].unit.text
        == note
    )
    for text in (
        "Give every sensor a unique address.",
        "To get the settings back, restore the configuration from the backup.",
        "- **RUN** red: fault. Restart the gateway; then reinstall it.",
    ):
        assert scoring._instructs(passage_units(text)[0]), text
    for text in (
        "The gateway starts with factory defaults.",
        "In the web interface, open the page.",
        "Fixed: E04.",
        "Then the gateway restarts.",
        "Values in the buffer are sent.",
    ):
        assert not scoring._instructs(passage_units(text)[0]), text
    for typed in ("what should i do about it", "How can we get the settings back?", "how to reset it"):
        assert words.current().asks_what_to_do.search(typed), typed
    assert not words.current().asks_what_to_do.search("How does the relay work?")


def test_words_of_chat_are_no_words_the_answer_must_hold(embed: dict) -> None:
    typed = "whats the longest one I can set it to, exactly?"
    question = f"{typed} (alarm delay)"
    text = "The alarm delay can be set from 0 s to 600 s."
    embed.update({question: [1.0, 0.0, 0.0], text: [0.5, 0.5, 0.0]})
    assert words._asked_words(typed) == {"longest", "set"}
    scored = reader.units_score(question, [Passage("S1", text, 1, 1)], embedding_model="m", typed=typed)
    assert scored[0].lexical == pytest.approx(2 / 3)  # "set" and the topic, not "longest"


def test_a_count_is_answered_only_by_a_unit_that_states_one(embed: dict) -> None:
    q = "How many sensors can be connected to the RS-485 bus?"
    label = "RS-485 sensor bus (X2: A, B, COM, SH)"  # closest in words, and its digits are names
    count = "A maximum of 8 sensors can be connected to the bus."
    embed.update({q: [1.0, 0.0, 0.0], label: [0.9, 0.436, 0.0], count: [0.7, 0.714, 0.0]})
    found = [Passage("S1", f"{label}\n{count}\nThe bus is two-wire.", 1, 3)]
    assert [quote.unit.text for quote in reader.units_score(q, found, embedding_model="m")] == [count]
    embed["Which terminal is the sensor bus on?"] = [1.0, 0.0, 0.0]  # no count asked: the label answers
    assert reader.units_score("Which terminal is the sensor bus on?", found, embedding_model="m")[0].unit.text == label
    assert words._counts("Both relays switch.") and words._counts("up to eight sensors")
    assert not words._counts("two-wire, half-duplex, on X2")


def test_a_question_is_read_in_its_own_language() -> None:
    from generation.reader import reading, stems

    with reading("Welche Einstellungen speichert das Gerät?") as code:
        assert code == "de"
        assert stems("die Einstellung") == stems("den Einstellungen") == {"einstell"}
    with reading("Welke aansluitingen heeft de behuizing?") as code:
        assert code == "nl"
        assert stems("de aansluiting") == stems("aansluitingen") == {"aansluit"}
    with reading("Which settings does the device store?") as code:
        assert code == "en"
        assert stems("the stored settings") == {"store", "set"}


def test_every_language_has_the_reader_s_word_classes_with_the_keys_of_english() -> None:
    import json

    from core import language

    keys = set(json.loads((words.DATA / "en.json").read_text(encoding="utf-8")))
    for code in language.SUPPORTED:
        assert set(json.loads((words.DATA / f"{code}.json").read_text(encoding="utf-8"))) == keys, code
        assert words.words(code).code == code  # every pattern compiles, every word is stemmed


@pytest.mark.parametrize(
    ("question", "count", "to_do", "meant", "asked"),
    [
        ("Hoeveel sensoren passen op de bus?", True, False, [], {"sensoor", "pas", "bus"}),
        ("Hoe stel ik het alarm in?", False, True, [], {"stel", "alarm"}),
        ("Wat betekent E03?", False, False, ["E03"], {"e03"}),
        ("Wie viele Sensoren passen an den Bus?", True, False, [], {"sensor", "pass", "bus"}),
        ("Wie kann ich den Alarm einstellen?", False, True, [], {"alarm", "einstell"}),
        ("Was bedeutet E03 eigentlich?", False, False, ["E03"], {"e03"}),
    ],
)
def test_dutch_and_german_questions_are_read_by_their_own_phrasings(question, count, to_do, meant, asked) -> None:
    """A count, an instruction and a meaning asked in Dutch and German, and the words left that an answer holds."""
    with reader.reading(question):
        read = words.current()
        assert (read.asks_count.search(question) is not None) == count
        assert (read.asks_what_to_do.search(question) is not None) == to_do
        assert words._meant_codes(question) == meant
        assert words._asked_words(question) == asked


def test_dutch_and_german_instructions_counts_and_measures_are_recognised() -> None:
    from core import language

    with reader.reading("Hoe zwaar is het apparaat en hoe lang duurt het opstarten?"):
        assert scoring._instructs(passage_units("Klik op de knop Opslaan.")[0])
        assert scoring._instructs(passage_units("Om het nummer bij te werken, kies de opdracht Velden.")[0])
        assert not scoring._instructs(passage_units("De knop staat op de werkbalk.")[0])
        assert words._counts("Er passen acht sensoren op.") and not words._counts("Een sensor past.")
        assert words._holds(reader.stems("Gewicht: 210 g"), language.analyzer("nl").stem("zwaar"))
        assert words._lasting("binnen 60 seconden") == {"lang"}
    with reader.reading("Wie schwer ist das Gerät und wie lange dauert der Start?"):
        assert scoring._instructs(passage_units("Klicken Sie auf die Schaltfläche Speichern.")[0])
        assert scoring._instructs(passage_units("Um die Nummer zu aktualisieren, drücken Sie F9.")[0])
        assert not scoring._instructs(passage_units("Wenn Sie das Dokument speichern, bleibt es offen.")[0])
        assert words._counts("Es passen fünf Sensoren an den Bus.") and not words._counts("Ein Sensor passt.")
        assert words._holds(reader.stems("Gewicht: 210 g"), language.analyzer("de").stem("schwer"))
        assert words._lasting("nach 72 Stunden") == {"lang"}
        assert codes._defines("E04 bedeutet Netzwerkfehler.", "E04")


def test_in_dutch_and_german_a_word_is_held_by_a_compound_of_it_and_a_compound_by_its_parts() -> None:
    question = "Wie aktualisiere ich die Nummern der Beschriftungen?"
    with reader.reading(question):
        unit = reader.stems("Um die Beschriftungsnummer nach dem Verschieben zu aktualisieren, drücken Sie F9.")
        assert all(words._holds(unit, w) for w in words._asked_words(question))  # Nummer, Beschriftung: its parts
        (compound,) = reader.stems("Tastenkombination")
        assert words._holds(reader.stems("Die Kombination der Tasten Strg und F7."), compound)
        assert not words._holds(reader.stems("Die Kombination zweier Farben."), compound)
        assert not words._holds(reader.stems("Der Standard gilt."), reader.stems("Stand").pop())  # no part of 4
    with reader.reading("Waar staat het paginanummer?"):
        (compound,) = reader.stems("paginanummer")
        assert words._holds(reader.stems("Het nummer van de pagina staat onderaan."), compound)
    with reader.reading("Where is the page number?"):  # English writes compounds apart: no parts are looked for
        assert not words._holds(reader.stems("The pagenumber field."), reader.stems("page").pop())


def test_a_code_joined_to_a_word_by_a_hyphen_is_mentioned_where_the_code_is() -> None:
    passage = Passage("S1", "Up to 8 sensors can be connected to the RS-485 bus.", 1, 1)
    assert reader.unmentioned("Hoeveel sensoren kunnen op de RS-485-bus worden aangesloten?", [passage]) == []
    assert reader.unmentioned("Wie viele Sensoren passen an den RS-485-Bus?", [passage]) == []
    assert reader.unmentioned("Wie schließe ich den USB-Anschluss an?", [passage]) == ["USB-Anschluss"]
    assert reader.unmentioned("Is RS-422 supported?", [passage]) == ["RS-422"]


def test_a_quoted_row_cites_its_own_row_by_the_passage_s_line_map() -> None:
    from core.units import Unit

    text = "Model | Flow\nP1 | 4\n\nP2 | 6\n\nP3 | 9"
    line_map: list[list[int] | None] = [None, [2, 2], None, [3, 3], None, [5, 5]]
    row = next(u for u in passage_units(text) if u.text == "P3 | 9")
    assert row.kind == "row" and row.context == "Model | Flow"
    mapped = Passage("S1", text, 2, 5, line_map=line_map)
    assert reader.Quote(mapped, row, 1.0, 1.0, 1.0).lines == (5, 5)
    # Without a map (a chunk ingested before maps were kept) the row is cited as the whole passage.
    assert reader.Quote(Passage("S1", text, 2, 5), row, 1.0, 1.0, 1.0).lines == (2, 5)
    # A unit over lines that stand for no row (the header alone) falls back to the passage's span too.
    header = Unit("Model | Flow", "row", 0, 12, 0, 0)
    assert reader.Quote(mapped, header, 1.0, 1.0, 1.0).lines == (2, 5)


PROCEDURE = (
    "To mount the unit:\n"
    "1. Hook the upper edge onto the rail.\n"
    "2. Press the lower edge until the latch clicks.\n"
    "3. Tighten the locking screw.\n"
    "- Keep the vents free.\n"
    "The unit weighs 210 g."
)


def test_a_step_of_a_numbered_procedure_is_quoted_with_every_step_in_source_order(embed: dict) -> None:
    """The best unit is step 2; steps 1 and 3 come with it, with the source's own numbers and lines, beyond
    max_units, under the list's heading (it names "mount", which the steps lack); the bullet and the sentence after
    the list do not."""
    q = "How is the unit mounted on the rail?"
    embed.update(
        {q: [1.0, 0.0, 0.0], "To mount the unit:\n2. Press the lower edge until the latch clicks.": [0.9, 0.1, 0.0]}
    )
    reading = reader.read(q, [Passage("S1", PROCEDURE, 10, 15, source="manual.md")], embedding_model="m", max_units=1)
    assert [q.unit.text for q in reading.quotes] == [
        "To mount the unit:",
        "1. Hook the upper edge onto the rail.",
        "2. Press the lower edge until the latch clicks.",
        "3. Tighten the locking screw.",
    ]
    assert [q.lines for q in reading.quotes] == [(10, 10), (11, 11), (12, 12), (13, 13)]
    lines = ["To mount the unit: [S1]", "", "1. Hook the upper edge onto the rail. [S1]"]  # Markdown: a list apart
    assert reading.text.splitlines()[:3] == lines


def test_a_procedure_cut_by_a_chunk_boundary_is_quoted_whole_in_source_order(embed: dict) -> None:
    """The best unit is step 3, in the chunk that goes on with the list under its heading repeated (the chunker's
    ``continued_head``); steps 1 and 2 come from the chunk before it, which ranks lower, and the heading is quoted
    once, where it first stands. A chunk of the same source whose list does not go on is not joined."""
    q = "How is the unit mounted?"
    head = "To mount the unit:"
    before = f"{head}\n\n1. Hook the upper edge onto the rail.\n\n2. Press the lower edge until it clicks."
    after = f"{head}\n\n3. Release the latch with a screwdriver.\n\n4. Tighten the locking screw."
    embed.update({q: [1.0, 0.0, 0.0], f"{head}\n3. Release the latch with a screwdriver.": [0.9, 0.1, 0.0]})
    read = [
        Passage(
            "S1", after, 20, 24, source="manual.md", ordinal=5, line_map=[[10, 10], None, [14, 14], None, [16, 16]]
        ),
        Passage(
            "S2", before, 10, 13, source="manual.md", ordinal=4, line_map=[[10, 10], None, [11, 11], None, [13, 13]]
        ),
    ]
    reading = reader.read(q, read, embedding_model="m", max_units=1)
    assert [(q.passage.label, q.unit.text) for q in reading.quotes] == [
        ("S2", head),
        ("S2", "1. Hook the upper edge onto the rail."),
        ("S2", "2. Press the lower edge until it clicks."),
        ("S1", "3. Release the latch with a screwdriver."),
        ("S1", "4. Tighten the locking screw."),
    ]
    assert [q.lines for q in reading.quotes] == [(10, 10), (11, 11), (13, 13), (14, 14), (16, 16)]
    other = Passage(
        "S2", f"{head}\n\n1. Unpack the unit.\n\n4. Not the step before.", 1, 5, source="manual.md", ordinal=4
    )
    reading = reader.read(q, [read[0], other], embedding_model="m", max_units=1)
    assert {q.passage.label for q in reading.quotes} == {"S1"}


def test_numbered_run_stops_at_a_bullet_a_sentence_or_a_gap() -> None:
    from core.units import numbered_run

    units = passage_units(PROCEDURE)
    kinds = [(u.kind, u.text[:2]) for u in units]
    step = next(i for i, (kind, lead) in enumerate(kinds) if lead == "2.")
    assert [units[i].text[:2] for i in numbered_run(units, step)] == ["1.", "2.", "3."]
    bullet = next(i for i, (_, lead) in enumerate(kinds) if lead == "- ")
    assert numbered_run(units, bullet) == [] and numbered_run(units, 0) == []
    apart = passage_units("1. First step.\n\n1. Another list.")
    assert numbered_run(apart, 0) == [0] and numbered_run(apart, 1) == [1]


def test_an_answers_quotes_are_read_back_from_its_stored_audit() -> None:
    extractive = {
        "quoted": [
            {"text": "- Up to eight sensors per bus."},
            {"text": "Ok."},
            {"text": "Up to eight sensors per bus."},
        ]
    }
    assert reader.stored_quotes(extractive) == ("Up to eight sensors per bus.",)  # bullet, short ones, repeats
    written = {
        "sentences": [
            {"text": "The bus takes eight sensors [S1].", "supported_by": "S1"},
            {"text": "It is very fast indeed.", "supported_by": None},  # withheld by the grounding check
        ]
    }
    assert reader.stored_quotes(written) == ("The bus takes eight sensors.",)
    assert reader.stored_quotes({}) == ()
