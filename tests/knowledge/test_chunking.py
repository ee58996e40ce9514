"""Articles split along their headings and paragraphs, a few hundred tokens a chunk, the
heading path kept as context."""

from __future__ import annotations

from knowledge.chunking import MAX_WORDS, chunk_text


def test_each_section_is_its_own_chunk_with_its_heading_path():
    text = "Intro line.\n\n# Refunds\n\nWe refund in 5 days.\n\n## Cards\n\nCards take longer.\n\n# Other\n\nMore."
    chunks = chunk_text(text, title="Help")
    assert [(c.heading, c.text) for c in chunks] == [
        ("", "Intro line."),
        ("Refunds", "We refund in 5 days."),
        ("Refunds › Cards", "Cards take longer."),
        ("Other", "More."),
    ]


def test_a_first_heading_repeating_the_title_is_not_repeated_in_the_path():
    chunks = chunk_text("# Shipping costs\n\nFree over 50.\n\n## Express\n\n12.95.", title="Shipping costs")
    assert [c.heading for c in chunks] == ["", "Express"]


def test_paragraphs_are_packed_up_to_the_limit_and_never_beyond():
    paragraph = " ".join(["word"] * 60)
    chunks = chunk_text("\n\n".join([paragraph] * 5))
    assert [c.n_words for c in chunks] == [120, 120, 60]
    assert all("\n\n" in c.text for c in chunks[:2])  # two paragraphs each, kept apart


def test_a_paragraph_longer_than_a_chunk_is_split_at_sentence_ends():
    sentence = " ".join(["w"] * 49) + " end."
    chunks = chunk_text(" ".join([sentence] * 7))  # 350 words in one paragraph
    assert all(c.n_words <= MAX_WORDS for c in chunks)
    assert all(c.text.endswith("end.") for c in chunks)
    assert sum(c.n_words for c in chunks) == 350


def test_a_sentence_longer_than_a_chunk_is_cut_at_the_limit():
    chunks = chunk_text(" ".join(["w"] * (MAX_WORDS * 2 + 5)))
    assert [c.n_words for c in chunks] == [MAX_WORDS, MAX_WORDS, 5]


def test_a_fenced_code_block_stays_whole_and_its_hashes_are_not_headings():
    text = "Run this:\n\n```\n# not a heading\n\nstill code\n```\n\nAfter."
    chunks = chunk_text(text)
    assert len(chunks) == 1
    assert "# not a heading\n\nstill code" in chunks[0].text
    assert chunks[0].heading == ""


def test_hashtags_are_text_not_headings():
    assert [c.heading for c in chunk_text("#sale today\n\n# Real\n\nBody")] == ["", "Real"]
