"""The CPU tier's "asks for a person" pattern set (inference.text.handover)."""

import pytest

from inference.text.handover import OFF, BadPattern, asks_for_person, parse


@pytest.mark.parametrize("text", ["Can I talk to a human?", "I want to speak with a real person",
                                  "connect me to customer service", "Je voudrais parler à un conseiller",
                                  "live agent please"])
def test_the_built_in_set_hears_a_request_for_a_person(text):
    assert asks_for_person(text, "")


@pytest.mark.parametrize("text", ["How do I reset my router?", "Is a person allowed two accounts?",
                                  "Where is my order?"])
def test_ordinary_questions_stay_with_the_assistant(text):
    assert not asks_for_person(text, "")


def test_a_tenants_own_patterns_replace_the_built_in_set_and_dash_turns_it_off():
    assert asks_for_person("Ich möchte einen Mitarbeiter", r"\bmitarbeiter\b")
    assert not asks_for_person("talk to a human", r"\bmitarbeiter\b")
    assert not asks_for_person("talk to a human", OFF)


def test_a_bad_pattern_is_refused_by_line():
    with pytest.raises(BadPattern, match="Line 2"):
        parse("ok\n(unclosed")
    assert not asks_for_person("anything (unclosed", "(unclosed")  # never fails a request
