"""Hypothesis strategies for SPARQL-PGMR text: valid intermediate queries, mutations of them, noise.

Shared by tests/test_query_fuzz.py (~10k inputs per CI run) and bench/parser_fuzz.py (>= 100k).
"""

from __future__ import annotations

from hypothesis import strategies as st

PATTERNS = [
    "wd:{e} wdt:{r} ?x",
    "?x wdt:{r} wd:{e}",
    "wd:{e} p:{r} ?s . ?s ps:{r} ?x",
    "?s pq:{r} ?v FILTER(?v > 3)",
    "?x rdfs:label ?l FILTER(lang(?l) = 'en')",
]
LABELS = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="[]\n\r"),
        min_size=1,
        max_size=20,
    )
    .map(lambda s: " ".join(s.split()))
    .filter(bool)
)


@st.composite
def valid_queries(draw: st.DrawFn) -> str:
    n_triples = draw(st.integers(1, 3))
    entities: list[str] = []
    relations: list[str] = []
    parts = []
    for _ in range(n_triples):
        pattern = draw(st.sampled_from(PATTERNS))
        e = f"entity{draw(st.integers(0, 3))}"
        r = f"relation{draw(st.integers(0, 3))}"
        if "{e}" in pattern and e not in entities:
            entities.append(e)
        if "{r}" in pattern and r not in relations:
            relations.append(r)
        parts.append(pattern.format(e=e, r=r))
    form = draw(
        st.sampled_from(
            [
                "SELECT DISTINCT ?x WHERE {{ {} }}",
                "ASK {{ {} }}",
                "SELECT (COUNT(?x) AS ?c) WHERE {{ {} }}",
                "SELECT ?x WHERE {{ {} }} LIMIT 5",
            ]
        )
    )
    body = form.format(" . ".join(parts))
    lines = [body]
    for name in entities:
        lines.append(f"{name} = [ENT] {draw(LABELS)} [/ENT] {draw(st.one_of(st.just(''), LABELS))}".rstrip())
    for name in relations:
        lines.append(f"{name} = [REL] {draw(LABELS)} [/REL] {draw(st.one_of(st.just(''), LABELS))}".rstrip())
    return "\n".join(lines)


NOISE = st.sampled_from(
    [
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "\n",
        "=",
        ":",
        "'",
        '"',
        "<",
        ">",
        "#",
        "?",
        "[ENT]",
        "[/ENT]",
        "[REL]",
        "[/REL]",
        "wd:",
        "wd:Q42",
        "wdt:entity0",
        "entity0 = ",
        "relation9",
        " . ",
        "\x00",
        "SELECT",
        "\\",
    ]
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(valid_queries())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "swap_lines", "dup_line", "truncate", "replace"]))
        pos = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:pos] + draw(st.one_of(NOISE, st.text(max_size=3))) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 5)) :]
        elif op == "truncate":
            text = text[:pos]
        elif op == "replace" and text:
            text = text[:pos] + draw(NOISE) + text[pos + 1 :]
        else:
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "swap_lines":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(j, lines[i])
            text = "\n".join(lines)
    return text
