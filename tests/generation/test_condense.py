"""The deterministic condensing rule: which messages are follow-ups, which turn they lean on, what is carried."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from core import llm
from core.text import is_code_or_name
from generation.condense import condense, is_followup, key_terms, question_standalone, subject_terms
from tests.conftest import ScriptedLLM

TEMP = "What is the operating temperature range of the AX-200?"
BUS = "How many sensors can be connected to the RS-485 bus?"


def test_a_standalone_question_passes_through_unchanged() -> None:
    for history in ([], [TEMP]):
        condensed = condense("What does error code E04 mean on the gateway display?", history)
        assert condensed.question == condensed.message and not condensed.rewritten and condensed.carried == ()


def test_first_message_is_never_rewritten_even_when_short() -> None:
    assert condense("And its weight?", []).question == "And its weight?"


def test_short_pronoun_led_and_elliptical_messages_are_follow_ups() -> None:
    assert is_followup("And E04?") and is_followup("How must it be terminated?")
    assert is_followup("What about firmware updates and their signatures on the device?")  # elliptical lead
    assert is_followup("What else was new in that firmware version?")  # a demonstrative
    assert not is_followup("Which port does MQTT over TLS use on the gateway?")
    assert not is_followup("")


def test_a_whole_question_about_a_code_it_names_stands_alone() -> None:
    price = "How much does the AX-200 cost?"
    for message in ("What does E03 mean?", "Where is X4?", "what's E05?"):
        assert not is_followup(message) and condense(message, [price]).question == message
    assert is_followup("E03?") and is_followup("What about E03?") and is_followup("What does it mean?")
    assert condense("And E04?", ["What does error code E03 mean?"]).question == "What does error code E04 mean?"


def test_a_pronoun_with_its_antecedent_in_the_message_makes_no_follow_up() -> None:
    assert not is_followup("When was the AX-200 firmware that fixed the alarm hysteresis bug released?")  # relative
    assert not is_followup("Did Lenin write that imperialism is the highest stage of capitalism?")  # a conjunction
    assert not is_followup("What does it mean when the ALM LED is red and blinking?")  # the subject follows
    assert not is_followup("How did France differ from Britain in managing its colonies?")  # named before "its"
    assert not is_followup("What does the RUN LED mean when it is solid red?")  # the subject before "mean"
    assert is_followup("what does it mean when it blinks?")
    assert is_followup("Once I've done that, which IP address do I open?")  # what was done is a turn before
    assert is_followup("does doing that also turn the ALM LED off?")
    assert is_followup("Which port does it use with TLS?")  # a name after the pronoun is no antecedent
    assert is_followup("What does it mean for the sensor wiring?") and is_followup("Is that version signed?")
    # "that" after a noun with only a verb after it is no relative pronoun: it stands for what was asked before
    assert is_followup("Our firewall guy needs to know which port that uses.")
    assert not is_followup("Our firewall guy needs to know which port that the AX-200 uses for NTP.")
    assert is_followup("is there a bundle with the gateway + that psu? purchasing needs an order code")  # "+": "and"


def test_follow_up_carries_the_previous_turns_noun_phrases_not_its_verbs() -> None:
    condensed = condense("How must it be terminated?", [BUS])
    assert condensed.question == "How must it be terminated? (sensors RS-485 bus)"
    assert condensed.rewritten and condensed.antecedent == 0


def test_pronoun_led_follow_up_carries_the_owner_not_the_asked_for_attribute() -> None:
    condensed = condense("And the storage temperature?", [TEMP])
    assert condensed.carried == ("AX-200",)
    assert condense(
        "What is its default value?", ["What is the permitted range of the sampling interval?"]
    ).carried == ("sampling", "interval")


def test_a_message_that_names_nothing_is_a_follow_up() -> None:
    assert is_followup("How long may the stubs be?") and is_followup("what happens if no dhcp server answers")
    assert is_followup("How many servers can I enter there?")  # the first word's capital names nothing
    assert condense("What wire size should I use?", ["How is the AX-200 powered?"]).carried == ("AX-200",)
    assert not is_followup("Which port does the REST API use?") and not is_followup("Which river runs through Fresno?")


def test_a_long_question_that_names_nothing_stands_alone() -> None:
    message = "What wire size should be used for the power supply of the gateway?"
    condensed = condense(message, ["Which terminal is the alarm relay connected to?"])
    assert condensed.question == message and condensed.carried == ()
    assert is_followup("What happens if the supply voltage is too low?")  # five content words: still a follow-up


def test_a_topic_switch_carries_nothing() -> None:
    for message in ("How much power does the AX-200 consume?", "In which time zone does the NTP client store time?"):
        condensed = condense(message, ["What does error code E04 mean?", BUS])
        assert condensed.question == message and condensed.carried == () and condensed.antecedent is None


def test_subject_terms_leave_verbs_behind() -> None:
    assert subject_terms("Which protocol does the gateway use on the RS-485 sensor bus?") == [
        "protocol",
        "gateway",
        "RS-485",
        "sensor",
        "bus",
    ]  # do-support: "use" ends the subject's run
    assert subject_terms("Is MQTT enabled by default?") == ["MQTT", "default"]  # a participle ending a run
    # the asker's verb is what they do: "install", "delay"; after "it" the verb is its own: "take"
    assert subject_terms("How do I install a firmware update?") == ["install", "firmware", "update"]
    assert subject_terms("Can I delay an alarm so spikes don't trip the relay?")[:2] == ["delay", "alarm"]
    assert subject_terms("How long does it take? (update firmware)") == ["update", "firmware"]
    assert subject_terms("What does the alarm hysteresis do?") == ["alarm", "hysteresis"]  # "do" is the verb
    assert subject_terms("Are the stored measurements deleted?") == ["stored", "measurements"]
    # "do a factory reset": "do" is the verb, not do-support; an adverb before "be" ends the subject, not a verb
    assert subject_terms("How do I do a factory reset on the AX-200?") == ["factory", "reset", "AX-200"]
    assert subject_terms("Will the AX-200's clock still be right?") == ["AX-200's", "clock"]
    # a yes/no question the run ends ends with its object, not its verb ("sell" is a verb: an object follows)
    assert subject_terms("Do the sensors need different Modbus addresses?")[-1] == "addresses"
    assert subject_terms("Does Nordlicht sell a matching power supply?") == ["Nordlicht", "matching", "power", "supply"]


def test_an_attribute_without_an_owner_is_carried() -> None:
    assert subject_terms("What is the maximum length?") == ["maximum", "length"]
    assert subject_terms("What is the maximum length of the RS-485 bus?") == ["RS-485", "bus"]
    assert subject_terms("When was the University of Chicago founded?") == ["University", "Chicago"]  # one name
    assert subject_terms("What's on terminal X4 of the AX-200?") == ["terminal", "X4", "AX-200"]  # a code: a thing
    # "out of": no owner follows ("REST API enabled out" was taken as the attribute of "the box", and left behind)
    assert subject_terms("Is the REST API enabled out of the box?") == ["REST", "API", "box"]


def test_a_name_is_carried_even_when_the_message_uses_the_word_plainly() -> None:
    condensed = condense(
        "How long must I hold it for a factory reset?", ["What does a short press on the RESET button do?"]
    )
    assert "RESET" in condensed.carried and "button" in condensed.carried
    assert "MQTT" not in condense("Which MQTT port does it use?", ["Is MQTT enabled by default?"]).carried


def test_third_turn_goes_back_to_the_turn_it_shares_words_with() -> None:
    condensed = condense("And the storage temperature?", [TEMP, BUS])
    assert condensed.antecedent == 0 and "AX-200" in condensed.carried and "RS-485" not in condensed.question


def test_no_shared_word_means_the_previous_turn() -> None:
    assert condense("And its weight?", [TEMP, BUS]).antecedent == 1


def test_a_chain_of_follow_ups_keeps_the_first_topic() -> None:
    condensed = condense("And with TLS?", [BUS, "Which baud rates does it support?"])
    assert "RS-485" in condensed.question


def test_key_terms_drop_stop_words_and_fillers_and_repeat_nothing() -> None:
    assert key_terms("What about the sensors, and the sensor bus? Tell me more.") == ["sensors", "bus"]


def test_contractions_are_their_first_word_with_or_without_the_apostrophe() -> None:
    assert key_terms("What's the default? whats the maximum, and doesn't it reset?") == ["default", "maximum", "reset"]
    assert condense("whats the fastest one", [BUS]).question == "whats the fastest one (sensors RS-485 bus)"
    storage = condense("And for storage?", ["What's the AX-200's weight?"])
    assert storage.question == "And for storage? (AX-200's weight)"
    assert is_followup("What's that?")
    assert key_terms("Why can't it start, and won't the relay switch?") == ["start", "relay", "switch"]


def test_white_space_is_normalised_and_the_rule_is_deterministic() -> None:
    first = condense("  And   E04? ", ["What does error code E03 mean?"])
    assert first == condense("And E04?", ["What does   error code E03 mean?"])
    assert first.message == "And E04?" and first.question == "What does error code E04 mean?" and first.antecedent == 0


def test_a_code_replaces_the_earlier_code_of_its_shape_and_finds_its_turn() -> None:
    earlier = ["What does error code E05 mean?", "Where is the update page?"]
    condensed = condense("And what does E06 mean?", earlier)
    assert condensed.antecedent == 0 and condensed.question == "What does error code E06 mean?"  # asked again
    assert condense("And how do I fix E06?", earlier).question == "And how do I fix E06? (error code)"
    assert condense("and 2.4.1?", ["When was firmware 2.3.0 released?"]).question == "When was firmware 2.4.1 released?"


def test_a_name_is_never_swapped_into_the_earlier_question() -> None:
    # "the LED" is no kind of "RESET" button: names are not asked again in each other's place.
    assert condense("and the LED?", ["How long must the RESET button be pressed?"]).question == (
        "and the LED? (RESET button)"
    )
    assert (
        condense("what about with TLS?", ["Which port does MQTT use?"]).question == "what about with TLS? (port MQTT)"
    )


def test_a_turn_named_by_its_place_and_the_measure_after_how_or_how_much_are_not_topics() -> None:
    assert condense("how do I fix the second one?", ["What does E01 mean?", "and E02?"]).question == (
        "how do I fix the second one? (E02)"
    )
    first = condense("and the first one in storage?", ["What is the operating temperature?", "And humidity?"])
    assert first.antecedent == 0 and "first" not in first.carried
    chained = condense("And if the power drops?", ["How do I update the firmware?", "How long does it take?"])
    assert chained.question == "And if the power drops? (update firmware)"  # not "long"
    assert key_terms("how heavy is the AX-200?") == ["AX-200"]
    weight = condense("what about its weight?", ["How much power does the AX-200 consume?"])
    assert weight.question == "what about its weight? (AX-200)"  # "how much power" asks the power of the AX-200


def test_a_plain_word_the_sources_do_not_hold_is_not_carried() -> None:
    told = "Nobody on the team remembers the admin password of one AX-200, so I held RESET for 10 s."
    message = "It's reachable again. What password does it take now?"
    assert condense(message, [told]).carried == ("Nobody", "team", "remembers", "AX-200", "held", "RESET", "10")
    # codes and names are carried all the same: one the sources lack tells the reader they cannot answer
    held = condense(message, [told], indexed=lambda word: word.lower() == "team")
    assert held.question == f"{message} (team AX-200 RESET 10)"
    assert not condense("and the max?", ["my boss wants it"], indexed=lambda word: False).rewritten
    # a number with a thousands separator is one word, not its last three digits
    assert condense("Is it rated for that?", ["The site is at 2,400 m."]).carried == ("site", "2,400")


def test_the_rule_carries_the_words_the_collections_in_scope_hold(pump_and_valve: tuple[int, int]) -> None:
    alpha, beta = pump_and_valve
    history = ["My boss asked about the relief valve."]
    assert question_standalone(message="at what pressure?", history=history).carried == ("relief", "valve")
    assert question_standalone(message="at what pressure?", history=history, collection_ids=[beta]).carried == (
        "relief",
        "valve",
    )
    # a word only a collection out of scope holds is not carried: the question shown tells nothing of it
    assert not question_standalone(message="at what pressure?", history=history, collection_ids=[alpha]).rewritten


def test_chat_in_capitals_is_not_a_name() -> None:
    condensed = condense("OK, and how do I get my settings back?", ["What does E06 mean?"])
    assert condensed.question == "OK, and how do I get my settings back? (E06)"
    assert not is_code_or_name("OK") and is_code_or_name("QoS")
    assert is_code_or_name("IRC-Netzwerk") and not is_code_or_name("Duplex-Einstellung")


def test_the_configured_condenser_rule_none_or_an_llm(foundry_config: Any, scripted_llm: ScriptedLLM) -> None:
    assert (
        question_standalone(message="And  E04?", history=["What does error code E03 mean?"]).question
        == "What does error code E04 mean?"
    )  # the default: the rule
    foundry_config(retrieval={"condense_model": "none"})
    assert not question_standalone(message="And E04?", history=["What does error code E03 mean?"]).rewritten
    foundry_config(retrieval={"condense_model": "scripted/condenser"})
    scripted_llm.reply = lambda messages: '"What does error code E04 mean?"\nIt asks about E04.'
    condensed = question_standalone(message="And E04?", history=["What does error code E03 mean?"])
    assert condensed.question == "What does error code E04 mean?" and condensed.message == "And E04?"
    prompt = scripted_llm.calls[0][-1]["content"]
    assert "- What does error code E03 mean?" in prompt and "Last message: And E04?" in prompt
    assert question_standalone(message="What is E04?", history=[]).question == "What is E04?"
    assert len(scripted_llm.calls) == 1  # no history: no model call


def test_a_failing_condenser_model_raises(foundry_config: Any, scripted_llm: ScriptedLLM) -> None:
    foundry_config(retrieval={"condense_model": "scripted/condenser"}, llm={"retries": 0})

    def broken(messages: list[dict[str, str]]) -> str:
        raise RuntimeError("model down")

    scripted_llm.reply = broken
    with pytest.raises(llm.LLMError):
        question_standalone(message="And E04?", history=["What does error code E03 mean?"])


def test_condense_model_must_be_rule_none_or_a_model(settings: Any) -> None:
    for good in ("rule", "none", "openai/gpt-4o"):
        assert settings.FOUNDRY.with_overrides(retrieval={"condense_model": good}).retrieval.condense_model == good
    with pytest.raises(ValidationError, match="condense_model"):
        settings.FOUNDRY.with_overrides(retrieval={"condense_model": "bogus"})


def test_a_follow_up_is_read_with_the_answer_of_the_turn_whose_topic_it_carries() -> None:
    answers = ["The operating temperature range is -20 to +60 °C. [S1]", "A maximum of 8 sensors. [S2]"]
    carried = condense("And how must it be terminated?", [TEMP, BUS])
    assert carried.carried and carried.follows(answers) == answers[carried.antecedent]
    # Asked again about another code, or standing alone, it follows no answer.
    again = condense("And E04?", ["What does error code E03 mean?"])
    assert again.rewritten and not again.carried and again.follows(["E03: supply voltage. [S1]"]) is None
    assert condense("What does error code E04 mean on the gateway display?", [TEMP]).follows(answers[:1]) is None


def test_the_earlier_turns_standalone_questions_are_read_back_as_answered() -> None:
    typed = ["What does error code E03 mean?", "And how do I fix it?"]
    made = condense(typed[1], typed[:1]).question
    # As logged, the earlier turns' questions are read back, not made again from what was typed.
    logged = condense("Is it dangerous?", typed, standalone=[typed[0], made])
    assert logged.question == condense("Is it dangerous?", typed).question
    other = condense("Is it dangerous?", typed, standalone=[typed[0], "And how do I fix it? (pump seal)"])
    assert "pump" in other.carried or "seal" in other.carried
    with pytest.raises(ValueError, match="1 standalone questions for 2 earlier turns"):
        condense("Is it dangerous?", typed, standalone=[typed[0]])


def test_dutch_and_german_follow_ups_are_read_with_their_own_word_classes() -> None:
    # Dutch: a lead ("En …") and a pronominal adverb ("daarvoor") lean on the turn before.
    dutch = condense("En hoe reset ik hem daarna?", ["Hoe sluit ik de sensor aan op de gateway?"])
    assert dutch.rewritten and "sensor" in dutch.carried and "gateway" in dutch.carried
    assert condense("Welke kabel is daarvoor nodig?", ["Hoe sluit ik de sensor aan?"]).carried == ("sensor",)
    # German: every noun is capitalised, so a subject's terms are its nouns, and a capital tells no name.
    german = condense("Welches Kabel braucht man dafür?", ["Wie schließe ich den Sensor an das Gateway an?"])
    assert german.carried == ("Sensor", "Gateway")
    assert condense("Und wie lange dauert das?", ["Wie aktualisiere ich die Firmware?"]).carried == ("Firmware",)
    # A German question naming its own nouns, with no word leaning back, stands alone.
    alone = condense("Wie viele Sensoren passen an den Bus?", ["Wie aktualisiere ich die Firmware?"])
    assert not alone.rewritten


def test_every_language_has_the_same_word_classes() -> None:
    import json

    from generation.condense.words import DATA, words

    files = sorted(DATA.glob("*.json"))
    assert {f.stem for f in files} >= {"en", "nl", "de"}
    keys = [set(json.loads(f.read_text())) for f in files]
    assert all(k == keys[0] for k in keys)
    assert all(words(f.stem).code == f.stem for f in files)
    assert words("xx").code == "en"  # a language without a file is read as the default
