"""GBNF grammars (llama.cpp's format) for what a chat model may write in each mode.

The skeleton grammar is a practical subset of SPARQL 1.1 queries: SELECT (DISTINCT/REDUCED, projections with
`(expr AS ?v)`, aggregates) and ASK; WHERE groups with triples, property paths, FILTER, OPTIONAL, UNION,
MINUS, BIND, VALUES, sub-selects; GROUP BY, HAVING, ORDER BY, LIMIT and OFFSET; the SPARQL 1.1 builtin
functions. Keywords are case-insensitive, as in SPARQL. It covers the converted LC-QuAD 2.0 and QALD-10
targets (see docs/llm-backend.md for the measured coverage); what it leaves out (PREFIX declarations, full
IRIs, SERVICE, CONSTRUCT/DESCRIBE, blank-node property lists) is rare in those benchmarks.

In the PGMR flavour the only Wikidata terms are placeholders (`wd:entityN`, `wdt:relationN`, `p:`, `ps:`,
`pq:` ... `:relationN`) and no IRI can be written at all, so a constrained model cannot write a real ID.
The grammar is context-free: it cannot make the mapping block name exactly the skeleton's placeholders, so
`pgmr.query.parse` stays the gate; `mapping_grammar` builds the exact block for known placeholders (the second
step of two-step decoding in `ChatGenerator`).

Whitespace is at most one space between tokens and the skeleton is one line, as in the converted targets:
that keeps a small model from spending its tokens on indentation. Variables (32 characters), strings (100),
digit runs (40), labels (LABEL_WORDS words) and descriptions (DESCRIPTION_WORDS) are capped well above what the
benchmarks hold, so that a model stuck repeating itself reaches the end of the token instead of its budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pgmr.generators.base import PGMR_MODES, check_mode
from pgmr.kg.ids import ID_PREFIXES, OTHER_PREFIXES
from pgmr.query.model import PLACEHOLDER_RE, TAGS

# "graph": placeholders of a user's graph (pgmr.generators.chat.schema_prompt): only `wd:entityN` and
# `wdt:relationN` (a graph has no statement nodes, so no p:/ps:/pq:), and only RDF's own vocabulary besides.
IdStyle = Literal["placeholders", "wikidata", "graph"]
ID_STYLES: tuple[IdStyle, ...] = ("placeholders", "wikidata", "graph")

_KEYWORDS = [
    "select",
    "distinct",
    "reduced",
    "where",
    "ask",
    "as",
    "filter",
    "optional",
    "union",
    "minus",
    "bind",
    "values",
    "undef",
    "group",
    "by",
    "having",
    "order",
    "asc",
    "desc",
    "limit",
    "offset",
    "not",
    "in",
    "exists",
    "true",
    "false",
    "separator",
]
_AGGREGATES = ("count", "sum", "min", "max", "avg", "sample")
# SPARQL 1.1 builtins taking a parenthesized argument list (EXISTS/NOT EXISTS and aggregates apart).
_FUNCTIONS = [
    "str",
    "lang",
    "langmatches",
    "datatype",
    "bound",
    "iri",
    "uri",
    "bnode",
    "rand",
    "abs",
    "ceil",
    "floor",
    "round",
    "concat",
    "strlen",
    "ucase",
    "lcase",
    "encode_for_uri",
    "contains",
    "strstarts",
    "strends",
    "strbefore",
    "strafter",
    "year",
    "month",
    "day",
    "hours",
    "minutes",
    "seconds",
    "timezone",
    "tz",
    "now",
    "uuid",
    "struuid",
    "md5",
    "sha1",
    "sha256",
    "sha384",
    "sha512",
    "coalesce",
    "if",
    "strlang",
    "strdt",
    "sameterm",
    "isiri",
    "isuri",
    "isblank",
    "isliteral",
    "isnumeric",
    "regex",
    "substr",
    "replace",
]


# The non-Wikidata-ID names a query may use: what Wikidata queries use in practice (every one in the converted
# LC-QuAD 2.0 and QALD-10 targets among them). A closed list keeps a small model from inventing `wds:model`.
OTHER_NAMES: dict[str, tuple[str, ...]] = {
    "rdf": ("type",),
    "rdfs": ("label", "comment", "subClassOf"),
    "skos": ("altLabel", "prefLabel"),
    "schema": ("description", "name", "about", "inLanguage", "isPartOf", "dateModified"),
    "owl": ("sameAs",),
    "xsd": ("integer", "decimal", "double", "float", "string", "boolean", "dateTime", "date", "gYear"),
    "wikibase": (
        "directClaim", "claim", "statementProperty", "statementValue", "qualifier", "qualifierValue",
        "propertyType", "quantityAmount", "quantityUnit", "timeValue", "timePrecision", "geoLatitude",
        "geoLongitude", "sitelinks", "statements", "identifiers", "lemma", "lexicalCategory", "rank",
        "BestRank", "PreferredRank", "NormalRank", "DeprecatedRank",
    ),
    "geo": ("wktLiteral",),
    "dct": ("language",),
    "prov": ("wasDerivedFrom",),
}  # fmt: skip
# What a query over any graph may name besides its placeholders: RDF's and RDFS's vocabulary and the datatypes.
GRAPH_OTHER_NAMES: dict[str, tuple[str, ...]] = {
    "rdf": ("type",),
    "rdfs": ("label", "comment", "subClassOf"),
    "xsd": OTHER_NAMES["xsd"],
}
assert set(OTHER_NAMES) <= set(OTHER_PREFIXES) and set(GRAPH_OTHER_NAMES) <= set(OTHER_PREFIXES)


def _gbnf_literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _caseless(word: str) -> str:
    """`select` -> `[sS] [eE] [lL] [eE] [cC] [tT]`: SPARQL keywords ignore case; GBNF literals do not."""
    parts = []
    for ch in word:
        parts.append(f"[{ch.lower()}{ch.upper()}]" if ch.isalpha() else _gbnf_literal(ch))
    return " ".join(parts)


def _rule_name(word: str) -> str:
    return "kw-" + word.replace("_", "-")


def _alternatives(names: Sequence[str]) -> str:
    # Longest first, so that a reader sees STRSTARTS before STR; llama.cpp tries all alternatives anyway.
    return " | ".join(_gbnf_literal(n) for n in sorted(names, key=lambda n: (-len(n), n)))


def _term_rules(ids: IdStyle) -> list[str]:
    id_prefixes = sorted(ID_PREFIXES)
    relation_prefixes = _alternatives(id_prefixes)
    if ids == "graph":
        # One digit: ten classes, instances or properties of each kind in one query is plenty for a graph's
        # questions, and a small model that starts enumerating placeholders stops at the tenth.
        return ['entity-term ::= "wd:entity" ph-num', 'relation-term ::= "wdt:relation" ph-num',
                "ph-num ::= [0-9]"]  # fmt: skip
    if ids == "placeholders":
        return [
            'entity-term ::= "wd:entity" ph-num',
            f'relation-term ::= ({relation_prefixes}) ":relation" ph-num',
            # Up to two digits: more placeholders than that is a model running away, not a query.
            'ph-num ::= "0" | [1-9] [0-9]?',
        ]
    return [
        'entity-term ::= "wd:" [QL] [1-9] [0-9]*',
        f'relation-term ::= ({relation_prefixes}) ":P" [1-9] [0-9]*',
    ]


_SKELETON_RULES = r"""
query ::= select-query | ask-query
select-query ::= select-clause ws where-clause solution-modifiers
select-clause ::= kw-select (sp (kw-distinct | kw-reduced))? ws projection
projection ::= "*" | proj-item (ws proj-item)*
proj-item ::= var | "(" ws expression ws kw-as sp var ws ")"
ask-query ::= kw-ask ws where-clause solution-modifiers
where-clause ::= (kw-where ws)? group
solution-modifiers ::= group-clause? having-clause? order-clause? limit-offset?
group-clause ::= ws kw-group sp kw-by ws group-cond (ws group-cond)*
group-cond ::= var | builtin-call | "(" ws expression (sp kw-as sp var)? ws ")"
having-clause ::= ws kw-having ws constraint (ws constraint)*
order-clause ::= ws kw-order sp kw-by ws order-cond (ws order-cond)*
order-cond ::= (kw-asc | kw-desc) ws bracketted | constraint | var
limit-offset ::= ws (limit-clause (ws offset-clause)? | offset-clause (ws limit-clause)?)
limit-clause ::= kw-limit sp integer
offset-clause ::= kw-offset sp integer

group ::= "{" ws (group-body ws)? "}"
group-body ::= sub-select | gp
sub-select ::= select-clause ws where-clause solution-modifiers
gp ::= triples gp-after-triples? | non-triples gp-after-non-triples?
gp-after-triples ::= ws "." (ws gp)? | ws non-triples gp-after-non-triples?
gp-after-non-triples ::= ws "." (ws gp)? | ws gp

triples ::= subject sp property-list | blank-node-list (ws property-list)?
property-list ::= verb sp object-list (ws ";" (ws verb sp object-list)?)*
object-list ::= object (ws "," ws object)*
subject ::= var | entity-term | relation-term | other-pname | blank-node
object ::= var | entity-term | relation-term | other-pname | blank-node | blank-node-list | literal | number | boolean
blank-node ::= "_:" [a-zA-Z0-9_]+ | "[" ws "]"
blank-node-list ::= "[" ws property-list ws "]"
verb ::= path | var
path ::= path-seq (ws "|" ws path-seq)*
path-seq ::= path-elt (ws "/" ws path-elt)*
path-elt ::= "^"? path-primary path-mod?
path-mod ::= ws [*+] | "?"
path-primary ::= relation-term | other-pname | "a" | "(" ws path ws ")"

non-triples ::= filter | optional | minus | union | bind | values
filter ::= kw-filter ws constraint
constraint ::= bracketted | builtin-call | function-call
bracketted ::= "(" ws expression ws ")"
optional ::= kw-optional ws group
minus ::= kw-minus ws group
union ::= group (ws kw-union ws group)*
bind ::= kw-bind ws "(" ws expression ws kw-as sp var ws ")"
values ::= kw-values ws (var ws "{" ws (data-value (sp data-value)* ws)? "}" | "(" ws (var (ws var)* ws)? ")" ws "{" ws (data-row (ws data-row)* ws)? "}")
data-row ::= "(" ws (data-value (sp data-value)* ws)? ")"
data-value ::= entity-term | relation-term | other-pname | literal | number | boolean | kw-undef

expression ::= and-expr (ws "||" ws and-expr)*
and-expr ::= relational (ws "&&" ws relational)*
relational ::= additive (ws rel-op ws additive | sp kw-not sp kw-in ws expr-list | sp kw-in ws expr-list)?
rel-op ::= "=" | "!=" | "<=" | ">=" | "<" | ">"
additive ::= multiplicative (ws [+-] ws multiplicative)*
multiplicative ::= unary (ws [*/] ws unary)*
unary ::= [!+-] ws primary | primary
primary ::= bracketted | builtin-call | function-call | var | literal | number | boolean | entity-term | relation-term | other-pname
expr-list ::= "(" ws (expression (ws "," ws expression)* ws)? ")"
builtin-call ::= aggregate | fn-name ws expr-list | kw-not sp kw-exists ws group | kw-exists ws group
aggregate ::= agg-name ws "(" ws (kw-distinct ws)? ("*" | expression) ws ")" | kw-group-concat ws "(" ws (kw-distinct ws)? expression (ws ";" ws kw-separator ws "=" ws string)? ws ")"
function-call ::= other-pname ws expr-list

var ::= [?$] [a-zA-Z0-9_]{1,32}
literal ::= string (ws lang-tag | ws "^^" ws other-pname)?
string ::= "'" ([^'\\\n\r] | "\\" [tbnrf"'\\]){0,100} "'" | "\"" ([^"\\\n\r] | "\\" [tbnrf"'\\]){0,100} "\""
lang-tag ::= "@" [a-zA-Z]+ ("-" [a-zA-Z0-9]+)*
integer ::= [0-9]{1,12}
number ::= [+-]? (digits ("." digits)? | "." digits) ([eE] [+-]? [0-9]{1,3})?
digits ::= [0-9]{1,40}
boolean ::= kw-true | kw-false
ws ::= " "?
sp ::= " "
"""

_MAPPING_RULES = r"""
mapping ::= mapping-line ("\n" mapping-line)* "\n"?
mapping-line ::= "entity" ph-num " = [ENT] " label " [/ENT]" description? | "relation" ph-num " = [REL] " label " [/REL]" description?
"""

# Words are runs of non-space characters; `[` may not open a `[/ENT]`-like marker. The caps (labels up to
# LABEL_WORDS words, descriptions up to DESCRIPTION_WORDS) end a small model's rambling at a line break.
LABEL_WORDS = 20
DESCRIPTION_WORDS = 12
_LABEL_RULES = f"""
label ::= text-word (" " text-word){{0,{LABEL_WORDS - 1}}}
description ::= (" " text-word){{1,{DESCRIPTION_WORDS}}}
text-word ::= text-char+
text-char ::= [^ \\n[] | "[" [^/ \\n]
"""


def _keyword_rules(ids: IdStyle = "placeholders") -> list[str]:
    words = [*_KEYWORDS, *_AGGREGATES, "group_concat"]
    rules = [f"{_rule_name(w)} ::= {_caseless(w)}" for w in words]
    rules.append("agg-name ::= " + " | ".join(_rule_name(w) for w in _AGGREGATES))
    rules.append(
        "fn-name ::= " + " | ".join(f"({_caseless(f)})" for f in sorted(_FUNCTIONS, key=lambda f: -len(f)))
    )
    other = GRAPH_OTHER_NAMES if ids == "graph" else OTHER_NAMES
    names = [f"{prefix}:{local}" for prefix, locals_ in other.items() for local in locals_]
    rules.append("other-pname ::= " + _alternatives(names))
    return rules


def skeleton_grammar(ids: IdStyle = "placeholders", *, newline: bool = False) -> str:
    """GBNF for one SPARQL query on one line. `newline`: allow one trailing newline (a stop sequence's cue)."""
    if ids not in ID_STYLES:
        raise ValueError(f"ids must be one of {', '.join(ID_STYLES)}, not {ids!r}")
    root = 'root ::= query "\\n"?' if newline else "root ::= query"
    return _join([root, _SKELETON_RULES, *_term_rules(ids), *_keyword_rules(ids)])


def pgmr_grammar(ids: IdStyle = "placeholders") -> str:
    """GBNF for SPARQL-PGMR: the skeleton line, then (when it uses placeholders) the mapping block.
    `ids="graph"`: the skeleton of a query over a user's graph."""
    if ids not in ("placeholders", "graph"):
        raise ValueError(f"SPARQL-PGMR has placeholders: ids must be 'placeholders' or 'graph', not {ids!r}")
    root = 'root ::= query ("\\n" mapping)?'
    return _join(
        [root, _SKELETON_RULES, _MAPPING_RULES, _LABEL_RULES, *_term_rules(ids), *_keyword_rules(ids)]
    )


def mapping_grammar(
    names: Sequence[str],
    *,
    relation_lines: Sequence[str] = (),
    class_lines: Sequence[str] = (),
    max_word_chars: int | None = None,
) -> str:
    """GBNF for exactly one mapping line per placeholder name, in the given order.

    `relation_lines`: when given, a relation's line must end in one of these `label [/REL] description` texts
    (a graph's properties, exactly as its memory holds them); `class_lines`: an entity's line may end in one of
    these `label [/ENT] description` texts, or name anything else (an instance) freely. `max_word_chars` caps
    each free word too: a small model can ramble on in one endless "word" (`This.is.the.employee,...`) that
    the word caps alone do not stop."""
    if not names:
        raise ValueError("mapping_grammar needs at least one placeholder name")
    lines = []
    for name in names:
        m = PLACEHOLDER_RE.match(name)
        if not m:
            raise ValueError(f"{name!r} is not a placeholder name (entityN or relationN)")
        tag = TAGS[m.group(1)]  # type: ignore[index]
        free = f"label {_gbnf_literal(f' [/{tag}]')} description?"
        if tag == "REL" and relation_lines:
            rest = "known-rel"
        elif tag == "ENT" and class_lines:
            rest = f"(known-ent | {free})"
        else:
            rest = free
        lines.append(f"{_gbnf_literal(f'{name} = [{tag}] ')} {rest}")
    label_rules = _LABEL_RULES
    if max_word_chars is not None:
        if max_word_chars < 1:
            raise ValueError("max_word_chars must be >= 1")
        label_rules = label_rules.replace(
            "text-word ::= text-char+", f"text-word ::= text-char{{1,{max_word_chars}}}"
        )
    rules = ["root ::= " + ' "\\n" '.join(lines) + ' "\\n"?', label_rules]
    if relation_lines:
        rules.append("known-rel ::= " + " | ".join(_gbnf_literal(t) for t in dict.fromkeys(relation_lines)))
    if class_lines:
        rules.append("known-ent ::= " + " | ".join(_gbnf_literal(t) for t in dict.fromkeys(class_lines)))
    return _join(rules)


def grammar_for_mode(mode: str) -> str:
    """The whole-answer grammar of a generator mode: SPARQL-PGMR, or SPARQL with Wikidata IDs."""
    return pgmr_grammar() if check_mode(mode) in PGMR_MODES else skeleton_grammar("wikidata")


def _join(parts: Sequence[str]) -> str:
    text = "\n".join(p.strip("\n") for p in parts) + "\n"
    return re.sub(r"\n{2,}", "\n", text)
