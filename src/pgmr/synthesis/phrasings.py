"""How people ask for one property of one thing: question patterns per property, and for any property.

A pattern is a format string over `{e}` (the entity's label as the question names it) and `{p}` (a label or
alias of the property). Forward patterns ask for the value (`wd:E wdt:P ?answer`); reverse ones ask for the
things that have the value (`?answer wdt:P wd:E`). (No counts: pgmr.synthesis.plain_questions says why.)

The per-property lists are the phrasings of the properties people ask about most (QALD's and LC-QuAD's most
frequent one-hop relations); every other property gets the generic patterns, with the question word chosen from
its datatype and description. Nothing here names an ID that a question is about: IDs come from the facts.
"""

from __future__ import annotations

# property -> (forward, reverse) patterns
PROPERTY_PATTERNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "P26": (
        ("Who is {e} married to?", "Who was {e}'s spouse?", "Who is the wife of {e}?",
         "Who is the husband of {e}?", "Whom did {e} marry?", "Who was {e} married to?"),
        ("Who was married to {e}?", "Who is the spouse of {e}?"),
    ),
    "P569": (
        ("When was {e} born?", "What is the birth date of {e}?", "When is {e}'s birthday?",
         "In what year was {e} born?", "What is {e}'s date of birth?"),
        ("Who was born on {e}?",),
    ),
    "P570": (
        ("When did {e} die?", "What is the date of death of {e}?", "In which year did {e} die?",
         "When did {e} pass away?"),
        (),
    ),
    "P19": (
        ("Where was {e} born?", "In which city was {e} born?", "What is the birthplace of {e}?",
         "Where is {e} from?", "In what town was {e} born?"),
        ("Who was born in {e}?", "Which people were born in {e}?", "Who are famous people born in {e}?"),
    ),
    "P20": (
        ("Where did {e} die?", "In which city did {e} die?", "What is the place of death of {e}?"),
        ("Who died in {e}?", "Which people died in {e}?"),
    ),
    "P36": (
        ("What is the capital of {e}?", "Which city is the capital of {e}?", "What's the capital city of {e}?"),
        ("Which country has {e} as its capital?", "{e} is the capital of which country?"),
    ),
    "P1376": (("What is {e} the capital of?", "Of which country is {e} the capital?"), ()),
    "P1082": (
        ("How many people live in {e}?", "What is the population of {e}?", "How many inhabitants does {e} have?",
         "How large is the population of {e}?"),
        (),
    ),
    "P112": (
        ("Who founded {e}?", "Who is the founder of {e}?", "Who were the founders of {e}?",
         "By whom was {e} founded?"),
        ("What did {e} found?", "Which companies were founded by {e}?", "Which organizations did {e} found?"),
    ),
    "P57": (
        ("Who directed {e}?", "Who is the director of {e}?", "Who was the director of {e}?"),
        ("Which movies did {e} direct?", "What films were directed by {e}?", "Give me all films directed by {e}."),
    ),
    "P50": (
        ("Who wrote {e}?", "Who is the author of {e}?", "Who's the author of {e}?", "By whom was {e} written?"),
        ("Which books did {e} write?", "What did {e} write?", "Give me all books written by {e}."),
    ),
    "P58": (("Who wrote the screenplay for {e}?", "Who is the screenwriter of {e}?"), ()),
    "P86": (("Who composed {e}?", "Who wrote the music for {e}?", "Who is the composer of {e}?"),
            ("What did {e} compose?",)),
    "P170": (("Who created {e}?", "Who is the creator of {e}?", "Who painted {e}?", "Who made {e}?"),
             ("What did {e} create?", "Which works were created by {e}?")),
    "P161": (("Who starred in {e}?", "Who played in {e}?", "Which actors appear in {e}?", "Who acted in {e}?"),
             ("In which movies did {e} play?", "Which films did {e} star in?", "What movies has {e} acted in?")),
    "P175": (("Who performed {e}?", "Who sang {e}?", "Which band recorded {e}?"),
             ("Which songs did {e} perform?",)),
    "P162": (("Who produced {e}?", "Who is the producer of {e}?"), ("Which films did {e} produce?",)),
    "P17": (
        ("In which country is {e}?", "Which country is {e} in?", "In what country is {e} located?",
         "Where is {e}?"),
        ("What is located in {e}?",),
    ),
    "P131": (("Where is {e} located?", "In which region is {e}?", "In which state is {e} located?"),
             ("What is located in {e}?", "Which places lie in {e}?")),
    "P30": (("On which continent is {e}?", "Which continent is {e} on?", "On what continent is {e} located?"),
            ("Which countries are in {e}?",)),
    "P38": (("What is the currency of {e}?", "Which currency is used in {e}?", "What currency does {e} use?"),
            ("Which countries use {e}?", "Where is {e} used?")),
    "P37": (("What is the official language of {e}?", "What language is spoken in {e}?",
             "Which languages are official in {e}?"),
            ("In which countries is {e} an official language?", "Where is {e} spoken?")),
    "P6": (("Who is the mayor of {e}?", "Who is the head of government of {e}?", "Who is the prime minister of {e}?",
            "Who governs {e}?"),
           ("Which city is governed by {e}?",)),
    "P35": (("Who is the head of state of {e}?", "Who is the president of {e}?", "Who is the king of {e}?"), ()),
    "P22": (("Who is the father of {e}?", "Who was {e}'s father?", "Who is {e}'s dad?"),
            ("Who are the children of {e}?",)),
    "P25": (("Who is the mother of {e}?", "Who was {e}'s mother?", "Who is {e}'s mom?"),
            ("Who are the children of {e}?",)),
    "P40": (("Who are the children of {e}?", "Who is the son of {e}?", "Who is the daughter of {e}?",
             "What are the names of {e}'s children?"),
            ()),
    "P3373": (("Who are the siblings of {e}?", "Who is {e}'s brother?", "Who is the sister of {e}?"), ()),
    "P106": (("What is the profession of {e}?", "What does {e} do for a living?", "What was {e}'s job?",
              "What is {e}'s occupation?"),
             ("Who works as a {e}?", "Which people are {e}s?")),
    "P27": (("What is the nationality of {e}?", "Which country is {e} a citizen of?", "Where is {e} a citizen?"),
            ("Which people are citizens of {e}?",)),
    "P571": (("When was {e} founded?", "When was {e} established?", "In which year was {e} founded?",
              "When was {e} built?"),
             ()),
    "P577": (("When was {e} released?", "When was {e} published?", "In which year did {e} come out?"), ()),
    "P2048": (("How tall is {e}?", "What is the height of {e}?"), ()),
    "P2044": (("How high is {e}?", "What is the elevation of {e}?", "How high above sea level is {e}?"), ()),
    "P2046": (("How big is {e}?", "What is the area of {e}?", "How large is {e}?"), ()),
    "P69": (("Where did {e} study?", "Which university did {e} attend?", "Where was {e} educated?"),
            ("Who studied at {e}?", "Which famous people attended {e}?")),
    "P108": (("Who does {e} work for?", "Who is the employer of {e}?", "Where did {e} work?"),
             ("Who works for {e}?", "Who worked at {e}?")),
    "P159": (("Where is {e} headquartered?", "Where is the headquarters of {e}?", "In which city is {e} based?"),
             ("Which companies are headquartered in {e}?",)),
    "P138": (("What is {e} named after?", "Who is {e} named after?", "After whom is {e} named?"),
             ("What is named after {e}?", "Which things are named after {e}?")),
    "P166": (("What awards did {e} receive?", "Which prizes did {e} win?", "What awards has {e} won?"),
             ("Who received the {e}?", "Who won the {e}?")),
    "P176": (("Who makes {e}?", "Who manufactures {e}?", "Which company produces {e}?"),
             ("What does {e} produce?", "Which products are made by {e}?")),
    "P127": (("Who owns {e}?", "Who is the owner of {e}?", "To whom does {e} belong?"),
             ("What does {e} own?", "Which companies are owned by {e}?")),
    "P169": (("Who is the CEO of {e}?", "Who is the chief executive of {e}?", "Who runs {e}?"),
             ("Which company is led by {e}?",)),
    "P47": (("Which countries border {e}?", "What borders {e}?", "Which countries share a border with {e}?"), ()),
    "P421": (("What time zone is {e} in?", "In which time zone is {e}?", "What is the time zone of {e}?"), ()),
    "P136": (("What genre is {e}?", "What is the genre of {e}?", "What kind of music does {e} play?"),
             ("Which bands play {e}?", "What are some {e} films?")),
    "P54": (("Which teams did {e} play for?", "For which club does {e} play?", "What team does {e} play for?"),
            ("Who plays for {e}?", "Which players played for {e}?")),
    "P102": (("Which party does {e} belong to?", "What party is {e} a member of?"),
             ("Who is a member of the {e}?",)),
    "P140": (("What is the religion of {e}?", "Which religion did {e} follow?"), ()),
    "P800": (("What is {e} famous for?", "What are the notable works of {e}?", "What is {e} known for?"), ()),
    "P39": (("What positions did {e} hold?", "What office did {e} hold?"), ("Who held the office of {e}?",)),
    "P1412": (("Which languages does {e} speak?", "What languages did {e} speak?"), ("Who speaks {e}?",)),
    "P495": (("Where does {e} come from?", "What is the country of origin of {e}?"), ()),
    "P364": (("What is the original language of {e}?", "In which language was {e} made?"), ()),
    "P641": (("What sport does {e} play?", "Which sport is {e} associated with?"), ("Who plays {e}?",)),
    "P1050": (("What illness did {e} have?", "What disease did {e} suffer from?"), ("Who suffered from {e}?",)),
    "P101": (("What is the field of work of {e}?", "In which field did {e} work?"), ("Who works in {e}?",)),
    "P413": (("What position does {e} play?", "Which position did {e} play?"), ()),
    "P118": (("In which league does {e} play?", "Which league is {e} in?"), ("Which teams play in the {e}?",)),
    "P1441": (("In which work does {e} appear?", "Which book is {e} from?"), ("Which characters appear in {e}?",)),
}

# Generic patterns by question word; `{p}` is the property's label or one of its aliases.
FORWARD_GENERIC: dict[str, tuple[str, ...]] = {
    "What": ("What is the {p} of {e}?", "What's the {p} of {e}?", "What is {e}'s {p}?", "Tell me the {p} of {e}.",
             "What are the {p} of {e}?", "Give me the {p} of {e}.", "{p} of {e}?", "Name the {p} of {e}."),
    "Who": ("Who is the {p} of {e}?", "Who was the {p} of {e}?", "Who is {e}'s {p}?", "Who are the {p} of {e}?",
            "Tell me the {p} of {e}.", "Name the {p} of {e}."),
    "When": ("When is the {p} of {e}?", "What is the {p} of {e}?", "What was {e}'s {p}?",
             "Tell me the {p} of {e}."),
    "Where": ("Where is the {p} of {e}?", "What is the {p} of {e}?", "What is {e}'s {p}?"),
    "How much": ("What is the {p} of {e}?", "How much is the {p} of {e}?", "What is {e}'s {p}?",
                 "Tell me the {p} of {e}."),
}
# Aliases that are a verb and "by" ("founded by", "written by") ask with the verb: "Who founded X?".
BY_VERB_FORWARD = ("Who {v} {e}?", "By whom was {e} {v}?", "{e} was {v} by whom?", "Who {v} {e}")
BY_VERB_REVERSE = ("What was {v} by {e}?", "Which things were {v} by {e}?", "Give me everything {v} by {e}.")
REVERSE_GENERIC = ("What has the {p} {e}?", "Which items have {e} as {p}?", "What has {e} as its {p}?",
                   "Give me everything with the {p} {e}.", "Which things have the {p} {e}?")

_WHO_WORDS = ("person", "people", "human", "spouse", "parent", "child", "sibling", "founder", "director",
              "author", "creator", "composer", "performer", "producer", "head of", "officer", "chairperson",
              "actor", "writer", "player", "member", "student", "teacher", "architect", "designer", "partner")
_WHERE_WORDS = ("place", "location", "located", "headquarters", "site")


def question_word(label: str, description: str | None, datatype: str | None) -> str:
    """The question word a property's value calls for: When (dates), How much (quantities), Who (people),
    Where (places), else What."""
    text = f"{label} {description or ''}".lower()
    if datatype == "time":
        return "When"
    if datatype == "quantity":
        return "How much"
    if any(word in label.lower() for word in _WHERE_WORDS):
        return "Where"
    if any(word in text for word in _WHO_WORDS):
        return "Who"
    return "What"


def by_verb(alias: str) -> str | None:
    """'founded by' -> 'founded'; None unless the alias is one past participle followed by 'by'."""
    words = alias.split()
    if len(words) == 2 and words[1] == "by" and words[0].endswith("ed") and words[0].isalpha():
        return words[0]
    return None
